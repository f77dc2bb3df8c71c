"""Checks that span a whole config: duplicates, totals, capacities of the compiled tables,
route conflicts. Field-level checks happen while parsing (p4lb.config)."""

from __future__ import annotations

from p4lb.config import Config, ConfigError, Limits
from p4lb.entries import slot_count


def validate(cfg: Config, limits: Limits) -> None:
    """Check everything that spans keys: duplicates, totals, capacities, route conflicts."""
    src = cfg.source
    names: set[str] = set()
    for h in cfg.hosts:
        if h.name in names:
            raise ConfigError(f"{src}: host {h.name!r}: duplicate host name")
        names.add(h.name)

    seen_vips: dict[tuple[str, str, int], str] = {}
    seen_backends: dict[tuple[str, str, int], str] = {}
    routes: dict[str, tuple[str, int, str]] = {}
    for h in cfg.hosts:
        routes[h.address] = (h.mac, h.switch_port, f"host {h.name!r}")
    total_backends = 0
    total_slots = 0
    max_slots = 0
    total_pool = 0
    max_pool = 0
    vip_addresses = {v.address for v in cfg.vips}
    for v in cfg.vips:
        where = f"vip.{v.name}"
        if v.key in seen_vips:
            raise ConfigError(
                f"{src}: {where}: duplicate VIP {v.address}:{v.port}/{v.protocol} "
                f"(also vip.{seen_vips[v.key]})"
            )
        seen_vips[v.key] = v.name
        if v.address in routes:
            raise ConfigError(f"{src}: {where}.address: {v.address} is also a host address")
        if not v.backends:
            raise ConfigError(f"{src}: {where}: no backends")
        bnames: set[str] = set()
        baddrs: set[tuple[str, int]] = set()
        for b in v.backends:
            bwhere = f"{where}.backend {b.name!r}"
            if b.name in bnames:
                raise ConfigError(f"{src}: {bwhere}: duplicate backend name")
            bnames.add(b.name)
            if (b.address, b.port) in baddrs:
                raise ConfigError(f"{src}: {bwhere}: duplicate backend {b.address}:{b.port}")
            baddrs.add((b.address, b.port))
            if b.address in vip_addresses:
                raise ConfigError(f"{src}: {bwhere}: {b.address} is a VIP address")
            bkey = (b.address, v.protocol, b.port)
            if bkey in seen_backends and seen_backends[bkey] != v.name:
                raise ConfigError(
                    f"{src}: {bwhere}: {b.address}:{b.port}/{v.protocol} already serves "
                    f"vip.{seen_backends[bkey]} (replies could not be mapped back to one VIP)"
                )
            seen_backends[bkey] = v.name
            route = (b.mac, b.switch_port)
            if b.address in routes and routes[b.address][:2] != route:
                raise ConfigError(
                    f"{src}: {bwhere}: {b.address} has a different mac/switch_port "
                    f"in {routes[b.address][2]}"
                )
            routes.setdefault(b.address, (b.mac, b.switch_port, bwhere))
        if sum(b.weight for b in v.backends) == 0:
            raise ConfigError(
                f"{src}: {where}: total weight is 0 (at least one backend needs a weight above 0)"
            )
        slots = slot_count(v)
        if slots > limits.max_slots_per_vip:
            raise ConfigError(
                f"{src}: {where}: {v.algorithm} needs {slots} slots, more than "
                f"{limits.max_slots_per_vip}; use smaller or more even weights"
            )
        total_backends += len(v.backends)
        total_slots += slots
        max_slots = max(max_slots, slots)
        active = sum(1 for b in v.backends if b.active)
        total_pool += active
        max_pool = max(max_pool, active)

    if len(cfg.vips) > limits.max_services - 1:
        raise ConfigError(
            f"{src}: vip: {len(cfg.vips)} VIPs, the switch holds at most {limits.max_services - 1}"
        )
    if total_backends > limits.max_backends - 1:
        raise ConfigError(
            f"{src}: vip: {total_backends} backends in all, the switch holds at "
            f"most {limits.max_backends - 1}"
        )
    # One VIP at a time changes version, so the tables need room for all slots plus one
    # more copy of the largest VIP.
    if total_slots + max_slots > limits.wrr_table_size:
        raise ConfigError(
            f"{src}: vip: the weights need {total_slots} WRR slots (+{max_slots} "
            f"to change one VIP), the switch holds {limits.wrr_table_size}"
        )
    if total_pool + max_pool > limits.pool_table_size:
        raise ConfigError(
            f"{src}: vip: {total_pool} pool members (+{max_pool} to change one "
            f"VIP), the switch holds {limits.pool_table_size}"
        )
    if len(routes) > limits.route_table_size:
        raise ConfigError(
            f"{src}: {len(routes)} routes, the switch holds {limits.route_table_size}"
        )
