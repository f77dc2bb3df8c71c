"""Collision digests from the data plane -> the conn_table entries that pin those flows.
Pure: the digest layout comes from the P4Info (`Schema.digest_fields`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from p4lb.entries import Entry

CONN_DIGEST = "conn_digest_t"
CONN_TABLE = "conn_table"
CONN_ACTION = "use_backend"


def digest_fields(member: Any, names: Sequence[str]) -> dict[str, int]:
    """One digest list member (a P4Data struct, members in P4 declaration order) as named
    integers."""
    values = [int.from_bytes(x.bitstring, "big") for x in member.struct.members]
    return dict(zip(names, values, strict=True))


def conn_entry(fields: dict[str, int], match: Sequence[str], params: Sequence[str]) -> Entry:
    """The conn_table entry for a digested flow: its match fields and the action's params
    are named as in the P4Info and carried by the digest under the same names."""
    return Entry(
        CONN_TABLE,
        tuple((name, fields[name]) for name in match),
        CONN_ACTION,
        tuple((name, fields[name]) for name in params),
    )
