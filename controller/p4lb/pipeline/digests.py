"""Collision digests from the data plane -> the conn_table entries that pin those flows.
Pure: the digest layout and the entry's names come from the P4Info schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from p4lb.pipeline.entries import Entry
from p4lb.pipeline.p4info import P4InfoError, Schema

CONN_DIGEST = "conn_digest_t"
CONN_TABLE = "conn_table"
CONN_ACTION = "use_backend"


@dataclass(frozen=True)
class ConnDigests:
    """How a conn_digest_t becomes a conn_table entry. The digest is one bit string: the
    table's match fields then the action's parameters, concatenated in P4Info order (the
    data plane packs them so, since p4c gives every digest member a PHV field of its own).
    Names and widths come from the P4Info."""

    match: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, schema: Schema) -> ConnDigests:
        match = tuple((f.name, f.bitwidth) for f in schema.table(CONN_TABLE).fields)
        params = tuple((p.name, p.bitwidth) for p in schema.action(CONN_ACTION).params)
        members = schema.digest_fields(CONN_DIGEST)
        width = sum(w for _, w in match + params)
        if len(members) != 1 or members[0][1] != width:
            raise P4InfoError(
                f"{CONN_DIGEST} must be one bit<{width}> member ({CONN_TABLE}'s key and "
                f"{CONN_ACTION}'s parameters), not {members}"
            )
        return cls(match, params)

    def values(self, member: Any) -> dict[str, int]:
        """One digest list member (a P4Data struct of one bit string) as named integers."""
        (packed,) = (int.from_bytes(x.bitstring, "big") for x in member.struct.members)
        out: dict[str, int] = {}
        for name, width in reversed(self.match + self.params):
            out[name] = packed & ((1 << width) - 1)
            packed >>= width
        return out

    def entry(self, values: dict[str, int]) -> Entry:
        """The conn_table entry pinning the digested flow."""
        return Entry(
            CONN_TABLE,
            tuple((name, values[name]) for name, _ in self.match),
            CONN_ACTION,
            tuple((name, values[name]) for name, _ in self.params),
        )
