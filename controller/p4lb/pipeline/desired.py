"""Config (intent) -> every table entry the switch should hold, given what it holds now
(which decides ids and the version each VIP's pools are written under). Pure."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from p4lb.intent.model import Backend, Config, Vip, address_bits
from p4lb.pipeline import qos
from p4lb.pipeline.entries import (
    COOKIE_TABLE,
    FLOOD_GROUP,
    HASHING_ALGORITHMS,
    MULTICAST,
    PROTOCOL_CODES,
    SHARE_TABLE,
    Entry,
    Slot,
    ip,
    l4_checksum_delta,
    mac,
)
from p4lb.pipeline.ids import VIP_TABLES, Ids, assign_ids, backend_key, ids_on_switch, vip_key
from p4lb.pipeline.p4info import schema
from p4lb.pipeline.slots import member_slot, pool_members, wrr_slots

# A host's route by its address's IP version: the table and the action that forwards.
ROUTES = {4: ("ipv4_route_table", "forward"), 6: ("ipv6_route_table", "forward_ipv6")}
# What stands for a VIP's address, by its width: the table answering for it (ARP, or
# neighbour discovery) and its action, the table refusing it as a client's source and its
# action, and the route refusing what no VIP on it serves.
VIP_ADDRESS_ENTRIES = {
    32: (
        ("vip_address_table", "vip_address"),
        ("vip_source_table", "vip_source"),
        ("ipv4_route_table", "refuse_vip_packet"),
    ),
    128: (
        ("vip6_address_table", "vip6_address"),
        ("vip6_source_table", "vip6_source"),
        ("ipv6_route_table", "refuse_vip6_packet"),
    ),
}


def _pool_entries(table: str, sid: int, version: int, slots: list[Slot]) -> list[Entry]:
    index = "index" if table == "pool_table" else "slot"
    return [
        Entry(table, (("service_id", sid), ("version", version), (index, i)), action, params)
        for i, (action, params) in enumerate(slots)
    ]


def route_entry(address: str, prefix_len: int, port: int, src_mac: str, dst_mac: str) -> Entry:
    """The route to address/prefix_len (IPv4 or IPv6) out of `port`, from `src_mac` (the
    switch's) to `dst_mac`."""
    net = ipaddress.ip_network(f"{address}/{prefix_len}", strict=False)
    table, action = ROUTES[net.version]
    params = (("port", port), ("src_mac", mac(src_mac)), ("dst_mac", mac(dst_mac)))
    return Entry(table, (("dst_addr", (int(net.network_address), prefix_len)),), action, params)


def static_entries(cfg: Config, ids: Ids) -> list[Entry]:
    """Everything but the versioned pool/slot tables and the VIP flip entries."""
    out: list[Entry] = []
    sw_mac = mac(cfg.switch.mac)
    routes: dict[tuple[str, object], Entry] = {}
    for h in cfg.hosts:
        route = route_entry(h.address, h.prefix_len, h.switch_port, cfg.switch.mac, h.mac)
        routes[route.key] = route
    for v in cfg.vips:
        shared = is_shared(cfg, v)
        sid = ids.services[vip_key(v)]
        for b in v.backends:
            bid = ids.backends[backend_key(v, b.address, b.port)]
            route = route_entry(
                b.address, address_bits(b.address), b.switch_port, cfg.switch.mac, b.mac
            )
            routes.setdefault(route.key, route)
            out.append(backend_entry(v, b, bid, sw_mac))
            out.append(
                Entry(
                    "backend_port_table",
                    (("backend_id", bid),),
                    "set_backend_port",
                    (("switch_port", b.switch_port),),
                )
            )
            out.append(reverse_nat_entry(v, b, sid, bid, shared))
            if shared and v.mode == "nat":
                # The backend's replies carry its id as their cookie; a client's echo of
                # it finds the backend on any balancer.
                out.append(
                    Entry(
                        COOKIE_TABLE,
                        (("service_id", sid), ("cookie", bid)),
                        "use_cookie",
                        (("backend_id", bid),),
                    )
                )
    out.extend(routes.values())
    addresses: dict[tuple[int, int], int] = {}
    for v in cfg.vips:
        addresses.setdefault((ip(v.address), address_bits(v.address)), mac(v.mac))
    for (addr, bits), vmac in addresses.items():
        (answers, answer), (sources, martian), (routes_table, refuse) = VIP_ADDRESS_ENTRIES[bits]
        out.append(Entry(answers, (("addr", addr),), answer, (("vip_mac", vmac),)))
        # No client sends from a VIP's address: a new flow from one is dropped as martian.
        out.append(Entry(sources, (("addr", addr),), martian, ()))
        # The VIP's address on a port no VIP serves (or a fragment) is refused, counted.
        out.append(Entry(routes_table, (("dst_addr", (addr, bits)),), refuse, ()))
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
    out += qos.entries(cfg)
    return out


def backend_entry(v: Vip, b: Backend, bid: int, sw_mac: int) -> Entry:
    """Where a backend's packets go: NAT rewrites their destination to the backend's
    address and port; DSR only the frame, toward the backend's MAC (the destination stays
    the VIP, which the backend holds itself). The reverse NAT entry both keep is what a
    restarted controller recovers the backend's id from (p4lb.pipeline.ids); a DSR
    backend's replies come from the VIP and never match it."""
    macs = (("src_mac", sw_mac), ("dst_mac", mac(b.mac)))
    if v.mode == "dsr":
        return Entry("backend_table", (("backend_id", bid),), "set_backend_dsr", macs)
    if address_bits(v.address) == 128:
        delta = l4_checksum_delta(v.address, v.port, b.address, b.port)
        return Entry(
            "backend_table",
            (("backend_id", bid),),
            "set_backend_ipv6",
            (("addr", ip(b.address)), ("port", b.port), *macs, ("csum_delta", delta)),
        )
    return Entry(
        "backend_table",
        (("backend_id", bid),),
        "set_backend",
        (("addr", ip(b.address)), ("port", b.port), *macs),
    )


def reverse_nat_entry(v: Vip, b: Backend, sid: int, bid: int, shared: bool) -> Entry:
    """A backend's replies: their source becomes the VIP (an IPv6 one's checksum following
    by the constant the rewrite adds, and the cookie's change, which the data plane adds);
    timed when the VIP balances on response time; stamped with the backend's cookie when a
    tier shares the VIP's connections (NAT: a DSR backend's replies never cross the
    switch)."""
    ids: tuple[tuple[str, int], ...] = (
        ("vip_addr", ip(v.address)),
        ("vip_port", v.port),
        ("service_id", sid),
        ("backend_id", bid),
    )
    if address_bits(b.address) == 128:
        table, action = "reverse_nat6_table", "set_vip6_source"
        ids += (("csum_delta", l4_checksum_delta(b.address, b.port, v.address, v.port)),)
    else:
        table, action = "reverse_nat_table", "set_vip_source"
    return Entry(
        table,
        (("addr", ip(b.address)), ("protocol", PROTOCOL_CODES[v.protocol]), ("port", b.port)),
        action,
        (
            *ids,
            ("track_time", int(v.algorithm == "leasttime")),
            ("cookie", int(shared and v.mode == "nat")),
        ),
    )


def is_shared(cfg: Config, v: Vip) -> bool:
    """The VIP's connections are shared by a tier of balancers: its algorithm keeps
    state (the hashes agree on every balancer without)."""
    return cfg.shared and v.algorithm not in HASHING_ALGORITHMS


def vip_entry(
    v: Vip,
    sid: int,
    version: int,
    pool_size: int,
    slot_count: int,
    algorithm_code: int,
    shared: bool = False,
) -> Entry:
    key = (("addr", ip(v.address)), ("protocol", PROTOCOL_CODES[v.protocol]), ("port", v.port))
    common = (
        ("service_id", sid),
        ("algorithm", algorithm_code),
        ("version", version),
        ("pool_size", pool_size),
        ("slot_count", slot_count),
    )
    table, action = (
        ("vip6_table", "set_vip6") if address_bits(v.address) == 128 else ("vip_table", "set_vip")
    )
    return Entry(table, key, action, (*common, ("shared", int(shared))))


def _members_by_pool(current: Iterable[Entry]) -> dict[tuple[str, int, int], list[Slot]]:
    """The slots (action and parameters) of every (pool or slot table, service, version)
    on the switch, in index order; a pool with a hole in its indexes maps to [] (it
    matches nothing)."""
    found: dict[tuple[str, int, int], dict[int, Slot]] = {}
    for e in current:
        if e.table in ("pool_table", "slot_table"):
            index = e.exact("index" if e.table == "pool_table" else "slot")
            key = (e.table, e.exact("service_id"), e.exact("version"))
            found.setdefault(key, {})[index] = (e.action, e.params)
    return {
        k: [m[i] for i in range(len(m))] if set(m) == set(range(len(m))) else []
        for k, m in found.items()
    }


def maglev_tables(entries: Iterable[Entry], maglev_code: int | None) -> dict[int, list[Slot]]:
    """The Maglev table in use of each Maglev VIP in `entries` (its slot table at the
    version its vip_table entry names), by service id."""
    entries = list(entries)
    members = _members_by_pool(entries)
    return {
        e.p("service_id"): members.get(("slot_table", e.p("service_id"), e.p("version")), [])
        for e in entries
        if e.table in VIP_TABLES and maglev_code is not None and e.p("algorithm") == maglev_code
    }


def desired_entries(
    cfg: Config,
    current: list[Entry],
    algorithm_codes: Mapping[str, int] | None = None,
    ids: Ids | None = None,
    maglev_in_use: Mapping[int, list[Slot]] | None = None,
) -> tuple[Ids, list[Entry]]:
    """Every entry the switch should hold for `cfg`, given what it holds now (which decides
    ids and which version each VIP's pools are written under). Algorithm codes are the P4
    program's (`Schema.algorithms`, the default). `ids`: the tier's, which every balancer
    shares (a copied connection names its backend by id); else the switch's own, kept.
    `maglev_in_use`: the tier's Maglev tables (by service id), which a Maglev VIP's next
    table continues instead of this switch's own: every balancer of a tier must hold the
    same table, and one that restarted or joined holds none (from scratch, its table
    would differ from the others' wherever their history changed theirs)."""
    if algorithm_codes is None:
        algorithm_codes = schema().algorithms()
    if ids is None:
        ids = assign_ids(cfg, ids_on_switch(current))
    live_by_key = {
        (e.m("addr"), e.m("protocol"), e.m("port")): e for e in current if e.table in VIP_TABLES
    }
    members = _members_by_pool(current)
    out = static_entries(cfg, ids)
    for v in cfg.vips:
        key = vip_key(v)
        sid = ids.services[key]
        pool = [member_slot(bid) for bid in pool_members(v, ids)]
        old = live_by_key.get(key)
        in_use: list[Slot] = []
        # Still Maglev: the next table changes the one in use as little as it can.
        still_maglev = v.algorithm == "maglev" and old is not None and old.p("service_id") == sid
        if v.algorithm == "maglev" and maglev_in_use is not None and sid in maglev_in_use:
            in_use = maglev_in_use[sid]
        elif still_maglev and old and old.p("algorithm") == algorithm_codes.get("maglev"):
            in_use = members.get(("slot_table", sid, old.p("version")), [])
        slots = wrr_slots(v, ids, in_use)
        version = 0
        if old is not None and old.p("service_id") == sid:
            cv = old.p("version")
            same = (
                members.get(("pool_table", sid, cv), []) == pool
                and members.get(("slot_table", sid, cv), []) == slots
            )
            version = cv if same else 1 - cv
        out += _pool_entries("pool_table", sid, version, pool)
        out += _pool_entries("slot_table", sid, version, slots)
        code = algorithm_codes[v.algorithm]
        shared = is_shared(cfg, v)
        out.append(vip_entry(v, sid, version, len(pool), len(slots), code, shared))
        if shared:
            out.append(Entry(SHARE_TABLE, (("service_id", sid),), "share_connection", ()))
    return ids, out
