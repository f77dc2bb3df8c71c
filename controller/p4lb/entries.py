"""Config (intent) -> the table entries the switch should hold, and the ordered plan of
writes that takes the switch from what it holds to that, never showing a half-applied
change. Pure: no sockets; entries are plain values."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from p4lb.config import Config, Vip
from p4lb.maglev import (
    MAGLEV_TABLE_SIZES,
    candidate_pairs,
    maglev_table_size,
    maglev_update,
    weighted_buckets,
)
from p4lb.schedules import smooth_wrr

MatchValue = int | tuple[int, int]  # exact value, or (value, prefix_len) for LPM
Params = tuple[tuple[str, int], ...]
Slot = tuple[str, Params]  # a pool or slot table entry's action and parameters

# Power of two choices over per-backend load the data plane keeps: each slot of the VIP's
# slot table holds two candidates (set_candidates), the less loaded wins.
LEAST_ALGORITHMS = ("leastconn", "leasttime", "leastpkt")
# Algorithms whose slot table is sized by the backends configured (not by the weights).
SIZED_BY_BACKENDS = ("maglev", "srchash", *LEAST_ALGORITHMS)

PROTOCOL_CODES = {"tcp": 6, "udp": 17}
PROTOCOL_NAMES = {v: k for k, v in PROTOCOL_CODES.items()}
FLOOD_GROUP = 1

# Tables the reconcile loop owns; conn_table belongs to the digest handler.
OWNED_TABLES = (
    "ipv4_route_table",
    "backend_table",
    "backend_port_table",
    "reverse_nat_table",
    "pool_table",
    "wrr_table",
    "vip_table",
    "vip_address_table",
    "vip_source_table",
)
MULTICAST = "multicast_group"  # pseudo-table for the packet replication engine


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


K = TypeVar("K")
VipKey = tuple[int, int, int]  # (address, protocol code, port)
BackendKey = tuple[VipKey, int, int]  # (vip, backend address, backend port)


@dataclass(frozen=True)
class Ids:
    """Service and backend ids. Stable: an id never moves while its VIP/backend lives,
    because connection state in the data plane stores backend ids."""

    services: dict[VipKey, int] = field(default_factory=dict)
    backends: dict[BackendKey, int] = field(default_factory=dict)


@functools.lru_cache(maxsize=65536)
def ip(addr: str) -> int:
    # Cached: a large config names the same addresses in several tables, on every apply.
    return int(ipaddress.IPv4Address(addr))


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def vip_key(v: Vip) -> VipKey:
    return (ip(v.address), PROTOCOL_CODES[v.protocol], v.port)


def backend_key(v: Vip, address: str, port: int) -> BackendKey:
    return (vip_key(v), ip(address), port)


def ids_on_switch(current: Iterable[Entry]) -> Ids:
    """Recover the id assignment from what the switch holds."""
    services: dict[VipKey, int] = {}
    backends: dict[BackendKey, int] = {}
    for e in current:
        if e.table == "vip_table":
            k = (e.exact("addr"), e.exact("protocol"), e.exact("port"))
            services[k] = e.p("service_id")
        elif e.table == "reverse_nat_table":
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


def pool_members(v: Vip, ids: Ids) -> list[int]:
    """Backend ids IP hash chooses among: the active (weight > 0) backends, config order."""
    return [ids.backends[backend_key(v, b.address, b.port)] for b in v.backends if b.active]


def slot_count(v: Vip) -> int:
    """Slots the VIP's slot table needs for its algorithm."""
    if v.algorithm in SIZED_BY_BACKENDS:
        return maglev_table_size(len(v.backends))
    return len(smooth_wrr([b.weight for b in v.backends]))


def wrr_slots(v: Vip, ids: Ids, previous: Sequence[Slot] = ()) -> list[Slot]:
    """The action of each slot of the VIP's slot table, filled for its algorithm: one
    smooth-WRR cycle of the weights (wrr, and iphash, which does not read it), a weighted
    Maglev lookup table (maglev), weighted source buckets (srchash), or pairs of weighted
    candidates (leastconn, leasttime, leastpkt). All but wrr size their table by the
    configured backends, drained ones included, so a weight change never changes the size
    (which would re-map every flow). `previous`: the Maglev table in use, which a change
    of backends or weights alters in as few entries as it can (`maglev_update`)."""
    weights = [b.weight for b in v.backends]
    bids = [ids.backends[backend_key(v, b.address, b.port)] for b in v.backends]
    if v.algorithm in LEAST_ALGORITHMS:
        return [
            (
                "set_candidates",
                (
                    ("first", bids[a]),
                    ("first_weight", weights[a]),
                    ("second", bids[b]),
                    ("second_weight", weights[b]),
                ),
            )
            for a, b in candidate_pairs(weights, slot_count(v))
        ]
    if v.algorithm == "maglev":
        name_of = {bid: b.name for bid, b in zip(bids, v.backends, strict=True)}
        owners = [name_of.get(dict(params).get("backend_id", 0)) for _, params in previous]
        # A table still big enough keeps its size when backends leave: a new size re-maps
        # every flow. Growing past a rung does re-map (the next prime up the ladder).
        size = slot_count(v)
        if len(previous) in MAGLEV_TABLE_SIZES and len(previous) > size:
            size = len(previous)
        order: Sequence[int] = maglev_update(owners, [b.name for b in v.backends], weights, size)
    elif v.algorithm == "srchash":
        order = weighted_buckets(weights, slot_count(v))
    else:
        order = smooth_wrr(weights)
    return [_member(bids[i]) for i in order]


def _member(bid: int) -> Slot:
    return ("set_member", (("backend_id", bid),))


def _pool_entries(table: str, sid: int, version: int, slots: list[Slot]) -> list[Entry]:
    index = "index" if table == "pool_table" else "slot"
    return [
        Entry(table, (("service_id", sid), ("version", version), (index, i)), action, params)
        for i, (action, params) in enumerate(slots)
    ]


def static_entries(cfg: Config, ids: Ids) -> list[Entry]:
    """Everything but the versioned pool/slot tables and the VIP flip entries."""
    out: list[Entry] = []
    sw_mac = mac(cfg.switch.mac)
    routes: dict[tuple[int, int], Entry] = {}
    for h in cfg.hosts:
        net = ipaddress.IPv4Network(f"{h.address}/{h.prefix_len}", strict=False)
        routes[(int(net.network_address), h.prefix_len)] = Entry(
            "ipv4_route_table",
            (("dst_addr", (int(net.network_address), h.prefix_len)),),
            "forward",
            (("port", h.switch_port), ("src_mac", sw_mac), ("dst_mac", mac(h.mac))),
        )
    for v in cfg.vips:
        proto = PROTOCOL_CODES[v.protocol]
        for b in v.backends:
            bid = ids.backends[backend_key(v, b.address, b.port)]
            routes.setdefault(
                (ip(b.address), 32),
                Entry(
                    "ipv4_route_table",
                    (("dst_addr", (ip(b.address), 32)),),
                    "forward",
                    (("port", b.switch_port), ("src_mac", sw_mac), ("dst_mac", mac(b.mac))),
                ),
            )
            out.append(
                Entry(
                    "backend_table",
                    (("backend_id", bid),),
                    "set_backend",
                    (
                        ("addr", ip(b.address)),
                        ("port", b.port),
                        ("src_mac", sw_mac),
                        ("dst_mac", mac(b.mac)),
                    ),
                )
            )
            out.append(
                Entry(
                    "backend_port_table",
                    (("backend_id", bid),),
                    "set_backend_port",
                    (("switch_port", b.switch_port),),
                )
            )
            out.append(
                Entry(
                    "reverse_nat_table",
                    (("addr", ip(b.address)), ("protocol", proto), ("port", b.port)),
                    "set_vip_source",
                    (
                        ("vip_addr", ip(v.address)),
                        ("vip_port", v.port),
                        ("service_id", ids.services[vip_key(v)]),
                        ("backend_id", bid),
                        ("track_time", int(v.algorithm == "leasttime")),
                    ),
                )
            )
    out.extend(routes.values())
    addresses: dict[int, int] = {}
    for v in cfg.vips:
        addresses.setdefault(ip(v.address), mac(v.mac))
    for addr, vmac in addresses.items():
        out.append(
            Entry("vip_address_table", (("addr", addr),), "vip_address", (("vip_mac", vmac),))
        )
        # No client sends from a VIP's address: a new flow from one is dropped as martian.
        out.append(Entry("vip_source_table", (("addr", addr),), "vip_source", ()))
        # The VIP's address on a port no VIP serves (or a fragment) is refused, counted.
        out.append(Entry("ipv4_route_table", (("dst_addr", (addr, 32)),), "refuse_vip_packet", ()))
    ports = cfg.switch.ports or sorted(
        {h.switch_port for h in cfg.hosts} | {b.switch_port for v in cfg.vips for b in v.backends}
    )
    out.append(
        Entry(
            MULTICAST,
            (("group_id", FLOOD_GROUP),),
            "replicate",
            tuple((f"port{p}", p) for p in ports),
        )
    )
    return out


def vip_entry(
    v: Vip, sid: int, version: int, pool_size: int, slot_count: int, algorithm_code: int
) -> Entry:
    return Entry(
        "vip_table",
        (("addr", ip(v.address)), ("protocol", PROTOCOL_CODES[v.protocol]), ("port", v.port)),
        "set_vip",
        (
            ("service_id", sid),
            ("algorithm", algorithm_code),
            ("version", version),
            ("pool_size", pool_size),
            ("slot_count", slot_count),
        ),
    )


def _members_by_pool(current: Iterable[Entry]) -> dict[tuple[str, int, int], list[Slot]]:
    """The slots (action and parameters) of every (pool or slot table, service, version)
    on the switch, in index order; a pool with a hole in its indexes maps to [] (it
    matches nothing)."""
    found: dict[tuple[str, int, int], dict[int, Slot]] = {}
    for e in current:
        if e.table in ("pool_table", "wrr_table"):
            index = e.exact("index" if e.table == "pool_table" else "slot")
            key = (e.table, e.exact("service_id"), e.exact("version"))
            found.setdefault(key, {})[index] = (e.action, e.params)
    return {
        k: [m[i] for i in range(len(m))] if set(m) == set(range(len(m))) else []
        for k, m in found.items()
    }


def desired_entries(
    cfg: Config, current: list[Entry], algorithm_codes: Mapping[str, int] | None = None
) -> tuple[Ids, list[Entry]]:
    """Every entry the switch should hold for `cfg`, given what it holds now (which decides
    ids and which version each VIP's pools are written under). Algorithm codes are the P4
    program's (`Schema.algorithms`, the default)."""
    if algorithm_codes is None:
        from p4lb.p4info import schema  # the codec imports this module

        algorithm_codes = schema().algorithms()
    ids = assign_ids(cfg, ids_on_switch(current))
    live_by_key = {
        (e.m("addr"), e.m("protocol"), e.m("port")): e for e in current if e.table == "vip_table"
    }
    members = _members_by_pool(current)
    out = static_entries(cfg, ids)
    for v in cfg.vips:
        key = vip_key(v)
        sid = ids.services[key]
        pool = [_member(bid) for bid in pool_members(v, ids)]
        old = live_by_key.get(key)
        in_use: list[Slot] = []
        # Still Maglev: the next table changes the one in use as little as it can.
        still_maglev = v.algorithm == "maglev" and old is not None and old.p("service_id") == sid
        if still_maglev and old and old.p("algorithm") == algorithm_codes.get("maglev"):
            in_use = members.get(("wrr_table", sid, old.p("version")), [])
        slots = wrr_slots(v, ids, in_use)
        version = 0
        if old is not None and old.p("service_id") == sid:
            cv = old.p("version")
            same = (
                members.get(("pool_table", sid, cv), []) == pool
                and members.get(("wrr_table", sid, cv), []) == slots
            )
            version = cv if same else 1 - cv
        out += _pool_entries("pool_table", sid, version, pool)
        out += _pool_entries("wrr_table", sid, version, slots)
        code = algorithm_codes[v.algorithm]
        out.append(vip_entry(v, sid, version, len(pool), len(slots), code))
    return ids, out


# Write order. Each stage is one batch; a later stage is sent only after the earlier one
# succeeded. Things are created bottom-up (routes and backends before the pools that name
# them, pools before the VIP entry that flips to them) and removed top-down.
_CREATE_STAGES = (
    ("ipv4_route_table", "backend_table", "backend_port_table", "reverse_nat_table", MULTICAST),
    ("pool_table", "wrr_table"),
    ("vip_table", "vip_address_table", "vip_source_table"),
)
_DELETE_STAGES = (
    ("vip_table", "vip_address_table", "vip_source_table"),
    ("pool_table", "wrr_table"),
    ("ipv4_route_table", "backend_table", "backend_port_table", "reverse_nat_table", MULTICAST),
)


def plan(desired: list[Entry], current: list[Entry]) -> list[list[Update]]:
    """Ordered batches of writes taking `current` to `desired`; empty when they agree."""
    want = {e.key: e for e in desired}
    have = {e.key: e for e in current if e.table in OWNED_TABLES or e.table == MULTICAST}
    batches: list[list[Update]] = []
    for tables in _CREATE_STAGES:
        batch = []
        for k, e in sorted(want.items()):
            if e.table not in tables:
                continue
            if k not in have:
                batch.append(Update("INSERT", e))
            elif have[k] != e:
                batch.append(Update("MODIFY", e))
        if batch:
            batches.append(batch)
    for tables in _DELETE_STAGES:
        batch = [
            Update("DELETE", e)
            for k, e in sorted(have.items())
            if e.table in tables and k not in want
        ]
        if batch:
            batches.append(batch)
    return batches
