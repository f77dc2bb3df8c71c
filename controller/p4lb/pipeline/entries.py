"""What the switch holds, as plain values: a table entry (`Entry`), a write (`Update`), the
tables the controller owns, and the encodings of addresses the entries use. Pure."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

MatchValue = int | tuple[int, int]  # exact value, or (value, prefix_len) for LPM
Params = tuple[tuple[str, int], ...]
Slot = tuple[str, Params]  # a pool or slot table entry's action and parameters

PROTOCOL_CODES = {"tcp": 6, "udp": 17}
PROTOCOL_NAMES = {v: k for k, v in PROTOCOL_CODES.items()}
FLOOD_GROUP = 1

# Tables the reconcile loop owns; conn_table and conn6_table belong to the digest handler.
OWNED_TABLES = (
    "ipv4_route_table",
    "ipv6_route_table",
    "backend_table",
    "backend_port_table",
    "reverse_nat_table",
    "pool_table",
    "slot_table",
    "vip_table",
    "vip6_table",
    "vip_address_table",
    "vip6_address_table",
    "vip_source_table",
    "vip6_source_table",
    "reverse_nat6_table",
    "conn_share_table",
    "cookie_table",
    "qos_port_table",
    "qos_egress_table",
)
# Algorithms whose choice the same tables reproduce on any balancer: a tier shares no state
# for them. The others (round robin, the least-* ones) share each connection's backend.
HASHING_ALGORITHMS = ("iphash", "srchash", "maglev")
MULTICAST = "multicast_group"  # pseudo-table for the packet replication engine
SHARE_TABLE = "conn_share_table"  # a tier's stateful VIPs: their new connections reported
COOKIE_TABLE = "cookie_table"  # a tier's stateful VIPs: the backend a client's cookie names


@dataclass(frozen=True, order=True)
class Entry:
    table: str
    match: tuple[tuple[str, MatchValue], ...]
    action: str
    params: tuple[tuple[str, int], ...] = ()

    @property
    def key(self) -> tuple[str, tuple[tuple[str, MatchValue], ...]]:
        return (self.table, self.match)

    def m(self, name: str) -> MatchValue:
        return dict(self.match)[name]

    def exact(self, name: str) -> int:
        value = dict(self.match)[name]
        if isinstance(value, tuple):
            raise TypeError(f"{self.table}.{name} is an LPM field")
        return value

    def p(self, name: str) -> int:
        return dict(self.params)[name]


@dataclass(frozen=True)
class Update:
    op: str  # INSERT | MODIFY | DELETE
    entry: Entry


@functools.lru_cache(maxsize=65536)
def ip(addr: str) -> int:
    # Cached: a large config names the same addresses in several tables, on every apply.
    return int(ipaddress.ip_address(addr))


def l4_checksum_delta(old_addr: str, old_port: int, new_addr: str, new_port: int) -> int:
    """What a TCP/UDP checksum gains when a packet's IPv6 address (in the pseudo-header)
    and port go from old to new: the ones'-complement sum of the old 16-bit words'
    complements and the new words (RFC 1624), which the switch adds to the checksum
    (nat.p4's L4_CHECKSUM_ADD). Within 16 bits, never 0 (0xffff is the same zero)."""
    old = (int(ipaddress.ip_address(old_addr)) << 16) | old_port
    new = (int(ipaddress.ip_address(new_addr)) << 16) | new_port
    total = 0
    for i in range(9):  # 128 + 16 bits
        total += (~old >> (16 * i)) & 0xFFFF
        total += (new >> (16 * i)) & 0xFFFF
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total or 0xFFFF


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)
