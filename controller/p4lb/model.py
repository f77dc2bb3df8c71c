"""A reference model of the pipeline's hashing, bit for bit with BMv2's v1model hash()
over the same field lists: which state slot a flow uses, its signature, and the pool
member IP hash picks. Tests use it to predict what the switch must do."""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass

CONN_STATE_SIZE = 65536


def _crc16_arc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16 = _crc16_arc_table()


def crc16(data: bytes) -> int:
    """BMv2's crc16: CRC-16/ARC (poly 0x8005 reflected, init 0, no final xor)."""
    crc = 0
    for b in data:
        crc = (crc >> 8) ^ _CRC16[(crc ^ b) & 0xFF]
    return crc


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


def state_index(flow: Flow) -> int:
    return crc32(flow.packed()) % CONN_STATE_SIZE


def signature(flow: Flow) -> int:
    sig = (crc16(flow.packed()) << 16) | (crc32(flow.reversed_packed()) & 0xFFFF)
    return sig or 1


def iphash_member(flow: Flow, pool_size: int) -> int:
    """Index into the VIP's pool that IP hash (and the collision fallback) picks."""
    return crc16(flow.packed()) % pool_size
