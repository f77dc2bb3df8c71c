"""Collision digests from the data plane -> the conn_table entries that pin those flows.
Pure: the digest layout and the entry's names come from the P4Info schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from p4lb.entries import Entry

if TYPE_CHECKING:
    from p4lb.p4info import Schema

CONN_DIGEST = "conn_digest_t"
CONN_TABLE = "conn_table"
CONN_ACTION = "use_backend"


@dataclass(frozen=True)
class ConnDigests:
    """How a conn_digest_t becomes a conn_table entry: the digest's member names (P4
    declaration order), and the table's match fields and the action's parameters, which
    the digest carries under the same names."""

    fields: tuple[str, ...]
    match: tuple[str, ...]
    params: tuple[str, ...]

    @classmethod
    def of(cls, schema: Schema) -> ConnDigests:
        return cls(
            schema.digest_fields(CONN_DIGEST),
            tuple(f.name for f in schema.table(CONN_TABLE).fields),
            tuple(p.name for p in schema.action(CONN_ACTION).params),
        )

    def values(self, member: Any) -> dict[str, int]:
        """One digest list member (a P4Data struct) as named integers."""
        numbers = [int.from_bytes(x.bitstring, "big") for x in member.struct.members]
        return dict(zip(self.fields, numbers, strict=True))

    def entry(self, values: dict[str, int]) -> Entry:
        """The conn_table entry pinning the digested flow."""
        return Entry(
            CONN_TABLE,
            tuple((name, values[name]) for name in self.match),
            CONN_ACTION,
            tuple((name, values[name]) for name in self.params),
        )
