"""A reference model of the pipeline's hashing, bit for bit with BMv2's v1model hash()
over the same field lists: which state bucket a flow uses, its signature, and the pool
member IP hash picks; and of how flows fill the 4-way buckets. Tests use it to predict
what the switch must do; the collision figures in results/ come from it."""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass

# The data plane's connection state (p4src/include/defines.p4: CONN_BUCKETS, CONN_WAYS,
# CONN_SLOT_BITS).
CONN_BUCKETS = 131072
CONN_WAYS = 4
CONN_SLOT_BITS = 75


def crc32(data: bytes) -> int:
    """BMv2's crc32: the usual CRC-32 (as zlib)."""
    return zlib.crc32(data) & 0xFFFFFFFF


@dataclass(frozen=True)
class Flow:
    src: str
    dst: str
    protocol: int
    sport: int
    dport: int

    def packed(self) -> bytes:
        """{src_addr, dst_addr, protocol, src_port, dst_port} as hash() sees them."""
        return (
            ipaddress.IPv4Address(self.src).packed
            + ipaddress.IPv4Address(self.dst).packed
            + bytes([self.protocol])
            + self.sport.to_bytes(2, "big")
            + self.dport.to_bytes(2, "big")
        )

    def reversed_packed(self) -> bytes:
        return (
            self.dport.to_bytes(2, "big")
            + self.sport.to_bytes(2, "big")
            + bytes([self.protocol])
            + ipaddress.IPv4Address(self.dst).packed
            + ipaddress.IPv4Address(self.src).packed
        )


def bucket_index(flow: Flow) -> int:
    """The state bucket: the low 17 bits of the 5-tuple's CRC32."""
    return crc32(flow.packed()) % CONN_BUCKETS


def signature(flow: Flow) -> int:
    """The 32-bit signature a slot stores: the 5-tuple's CRC32 xor the source port."""
    return crc32(flow.packed()) ^ flow.sport


def full_bucket_rate(
    flows: list[Flow], buckets: int = CONN_BUCKETS, ways: int = CONN_WAYS
) -> float:
    """Fraction of `flows`, arriving one by one and all staying live, that find their
    bucket full (a collision: the flow is pinned by a conn_table entry instead)."""
    fill: dict[int, int] = {}
    full = 0
    for f in flows:
        i = crc32(f.packed()) % buckets
        if fill.get(i, 0) >= ways:
            full += 1
        else:
            fill[i] = fill.get(i, 0) + 1
    return full / len(flows) if flows else 0.0


def iphash_member(flow: Flow, pool_size: int) -> int:
    """Index into the VIP's pool that IP hash picks: the 5-tuple's CRC32 (the state
    lookup's) modulo the pool's size."""
    return crc32(flow.packed()) % pool_size
