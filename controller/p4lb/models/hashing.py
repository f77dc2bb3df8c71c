"""A reference model of the pipeline's hashing, bit for bit with BMv2's v1model hash()
over the same input: which state bucket a flow uses, its signature, and the pool
member IP hash picks; and of how flows fill the 4-way buckets. Tests use it to predict
what the switch must do; the collision figures in results/ come from it."""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass

# The data plane's connection state (p4src/include/size.p4: CONN_BUCKETS, CONN_WAYS,
# CONN_SLOT_BITS).
CONN_BUCKETS = 131072
CONN_WAYS = 4
CONN_SLOT_BITS = 75


def crc32(data: bytes) -> int:
    """BMv2's crc32: the usual CRC-32 (as zlib)."""
    return zlib.crc32(data) & 0xFFFFFFFF


@dataclass(frozen=True)
class Flow:
    """A client's flow to a VIP: the 5-tuple as the client sends it, and the VIP's
    service id (the controller's, set_vip's parameter)."""

    src: str
    dst: str
    protocol: int
    sport: int
    dport: int
    service_id: int

    def client_key(self) -> bytes:
        """{src_addr ++ src_port}, what hash() sees: the VIP (its address, protocol and
        port) stands for the rest of the 5-tuple."""
        return ipaddress.ip_address(self.src).packed + self.sport.to_bytes(2, "big")


def flow_hash(flow: Flow) -> int:
    """The state lookup's hash: the CRC32 of the client's address and port plus the
    service id (hash()'s base), in 32 bits."""
    return (crc32(flow.client_key()) + flow.service_id) & 0xFFFFFFFF


def bucket_index(flow: Flow) -> int:
    """The state bucket: the low 17 bits of the flow's hash."""
    return flow_hash(flow) % CONN_BUCKETS


def signature(flow: Flow) -> int:
    """The 32-bit signature a slot stores: the flow's hash xor the client's port."""
    return flow_hash(flow) ^ flow.sport


def full_bucket_rate(
    flows: list[Flow], buckets: int = CONN_BUCKETS, ways: int = CONN_WAYS
) -> float:
    """Fraction of `flows`, arriving one by one and all staying live, that find their
    bucket full (a collision: the flow is pinned by a conn_table entry instead)."""
    fill: dict[int, int] = {}
    full = 0
    for f in flows:
        i = flow_hash(f) % buckets
        if fill.get(i, 0) >= ways:
            full += 1
        else:
            fill[i] = fill.get(i, 0) + 1
    return full / len(flows) if flows else 0.0


def iphash_member(flow: Flow, pool_size: int) -> int:
    """Index into the VIP's pool that IP hash picks: the flow's signature (the state
    lookup's) modulo the pool's size."""
    return signature(flow) % pool_size


def source_slot(src: str, slot_count: int) -> int:
    """The slot source hash picks for a client (either family): the CRC32 of its whole
    address modulo the VIP's slot count, whatever its port."""
    return crc32(ipaddress.ip_address(src).packed) % slot_count


# The queueing disciplines' flow buckets per port (p4src/include/size.p4: QOS_BUCKETS).
QOS_BUCKETS = 64


def crc16(data: bytes) -> int:
    """BMv2's crc16: CRC-16/ARC (reflected polynomial 0x8005, initial value 0)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def qos_address(address: str) -> bytes:
    """An address as the queueing disciplines hash it: IPv4's 4 bytes, an IPv6 address's
    four 32-bit words XORed into 4."""
    a = ipaddress.ip_address(address)
    if a.version == 4:
        return a.packed
    words = int(a)
    folded = (words >> 96) ^ (words >> 64) ^ (words >> 32) ^ words
    return (folded & 0xFFFFFFFF).to_bytes(4, "big")


def qos_flow_bucket(src: str, dst: str, protocol: int, sport: int, dport: int) -> int:
    """The flow bucket a packet takes in its port's queue (of QOS_BUCKETS): the CRC-16 of
    {src ++ dst ++ protocol ++ src_port ++ dst_port} (the addresses as qos_address gives
    them), as the switch sees the packet on its way out (after any rewrite)."""
    key = (
        qos_address(src)
        + qos_address(dst)
        + bytes([protocol])
        + sport.to_bytes(2, "big")
        + dport.to_bytes(2, "big")
    )
    return crc16(key) % QOS_BUCKETS


def qos_host_bucket(address: str) -> int:
    """The host bucket (PCQ's class, CAKE's host share) of an address."""
    return crc16(qos_address(address)) % QOS_BUCKETS
