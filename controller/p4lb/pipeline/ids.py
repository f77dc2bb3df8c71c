"""Service and backend ids: which id each VIP and backend has on the switch, recovered from
the entries it holds and kept stable across changes. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from p4lb.intent.model import Config, Vip
from p4lb.pipeline.entries import PROTOCOL_CODES, Entry, ip

K = TypeVar("K")
VipKey = tuple[int, int, int]  # (address, protocol code, port)
BackendKey = tuple[VipKey, int, int]  # (vip, backend address, backend port)
# The tables a service's and a backend's id are recovered from, one per address family.
VIP_TABLES = ("vip_table", "vip6_table")
REVERSE_NAT_TABLES = ("reverse_nat_table", "reverse_nat6_table")


@dataclass(frozen=True)
class Ids:
    """Service and backend ids. Stable: an id never moves while its VIP/backend lives,
    because connection state in the data plane stores backend ids."""

    services: dict[VipKey, int] = field(default_factory=dict)
    backends: dict[BackendKey, int] = field(default_factory=dict)


def vip_key(v: Vip) -> VipKey:
    return (ip(v.address), PROTOCOL_CODES[v.protocol], v.port)


def backend_key(v: Vip, address: str, port: int) -> BackendKey:
    return (vip_key(v), ip(address), port)


def ids_on_switch(current: Iterable[Entry]) -> Ids:
    """Recover the id assignment from what the switch holds."""
    services: dict[VipKey, int] = {}
    backends: dict[BackendKey, int] = {}
    for e in current:
        if e.table in VIP_TABLES:
            k = (e.exact("addr"), e.exact("protocol"), e.exact("port"))
            services[k] = e.p("service_id")
        elif e.table in REVERSE_NAT_TABLES:
            proto = e.exact("protocol")
            vk = (e.p("vip_addr"), proto, e.p("vip_port"))
            bk = (vk, e.exact("addr"), e.exact("port"))
            backends[bk] = e.p("backend_id")
    return Ids(services, backends)


def assign_ids(cfg: Config, existing: Ids) -> Ids:
    """Keep every id the switch already uses for a VIP/backend still in the config; give
    new ones the lowest free id (0 is reserved in both spaces)."""
    services = _keep_or_allocate([vip_key(v) for v in cfg.vips], existing.services)
    backends = _keep_or_allocate(
        [backend_key(v, b.address, b.port) for v in cfg.vips for b in v.backends],
        existing.backends,
    )
    return Ids(services, backends)


def _keep_or_allocate(wanted: list[K], existing: dict[K, int]) -> dict[K, int]:
    """Ids for `wanted` keys: the existing ones kept, the lowest free ids (from 1) given."""
    ids = {k: existing[k] for k in wanted if k in existing}
    used = set(ids.values())
    candidate = 1
    for k in wanted:
        if k not in ids:
            while candidate in used:
                candidate += 1
            ids[k] = candidate
            used.add(candidate)
    return ids
