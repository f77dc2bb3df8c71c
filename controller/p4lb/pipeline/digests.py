"""Collision digests from the data plane -> the conn_table (IPv4) or conn6_table (IPv6)
entries that pin those flows. Pure: the digest layout and the entry's names come from the
P4Info schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from p4lb.pipeline.entries import Entry
from p4lb.pipeline.p4info import P4InfoError, Schema

CONN_DIGEST = "conn_digest_t"
CONN_TABLE = "conn_table"
CONN_ACTION = "use_backend"
CONN6_DIGEST = "conn6_digest_t"
CONN6_TABLE = "conn6_table"
CONN6_ACTION = "use_backend6"
# Each collision digest, the table its entry goes to and that entry's action (the pin).
COLLISION_DIGESTS = {
    CONN_DIGEST: (CONN_TABLE, CONN_ACTION),
    CONN6_DIGEST: (CONN6_TABLE, CONN6_ACTION),
}
PINS = frozenset(COLLISION_DIGESTS.values())


class DigestError(ValueError):
    """A digest list member that is not the one bit string its layout names."""


def packed(member: Any, width: int) -> int:
    """A digest list member's one bit string (a P4Data struct of one member) as an integer
    of at most `width` bits; DigestError otherwise."""
    members = list(member.struct.members) if member.HasField("struct") else []
    if len(members) != 1 or not members[0].HasField("bitstring"):
        raise DigestError(f"not a struct of one bit string ({len(members)} members)")
    value = int.from_bytes(members[0].bitstring, "big")
    if value >> width:
        raise DigestError(f"{value.bit_length()} bits, the layout has {width}")
    return value


@dataclass(frozen=True)
class ConnDigests:
    """How a collision digest becomes its table's entry. The digest is one bit string: the
    table's match fields then the action's parameters, concatenated in P4Info order (the
    data plane packs them so, since p4c gives every digest member a PHV field of its own).
    Names and widths come from the P4Info."""

    match: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, int], ...]
    table: str = CONN_TABLE
    action: str = CONN_ACTION

    @classmethod
    def of(cls, schema: Schema, digest: str = CONN_DIGEST) -> ConnDigests:
        table, action = COLLISION_DIGESTS[digest]
        match = tuple((f.name, f.bitwidth) for f in schema.table(table).fields)
        params = tuple((p.name, p.bitwidth) for p in schema.action(action).params)
        members = schema.digest_fields(digest)
        width = sum(w for _, w in match + params)
        if len(members) != 1 or members[0][1] != width:
            raise P4InfoError(
                f"{digest} must be one bit<{width}> member ({table}'s key and "
                f"{action}'s parameters), not {members}"
            )
        return cls(match, params, table, action)

    def values(self, member: Any) -> dict[str, int]:
        """One digest list member (a P4Data struct of one bit string) as named integers;
        DigestError if it is not that."""
        fields = self.match + self.params
        value = packed(member, sum(w for _, w in fields))
        out: dict[str, int] = {}
        for name, width in reversed(fields):
            out[name] = value & ((1 << width) - 1)
            value >>= width
        return out

    def entry(self, values: dict[str, int]) -> Entry:
        """The entry pinning the digested flow."""
        return Entry(
            self.table,
            tuple((name, values[name]) for name, _ in self.match),
            self.action,
            tuple((name, values[name]) for name, _ in self.params),
        )
