"""Whether the compiled program can hold an intent: every VIP's algorithm is one the program
offers, and the slots, pool members, backends, services and routes fit its tables (the
`Limits` read from the P4Info). The intent's own checks run first (p4lb.intent)."""

from __future__ import annotations

import os

from p4lb.intent.model import Config, ConfigError, address_bits
from p4lb.intent.reader import load as load_intent
from p4lb.pipeline.p4info import Limits, compiled_limits
from p4lb.pipeline.slots import slot_count


def check(cfg: Config, limits: Limits) -> Config:
    """`cfg` itself when the program described by `limits` can hold it; else ConfigError,
    one line naming the file and the key."""
    src = cfg.source
    total_backends = total_slots = max_slots = total_pool = max_pool = 0
    for v in cfg.vips:
        where = f"vip.{v.name}"
        if v.algorithm not in limits.algorithms:
            raise ConfigError(
                f"{src}: {where}.algorithm: unknown algorithm {v.algorithm!r} "
                f"(known: {', '.join(limits.algorithms)})"
            )
        if v.choices > limits.max_candidates:
            raise ConfigError(
                f"{src}: {where}.choices: {v.choices} candidates, a slot of the switch holds "
                f'at most {limits.max_candidates} (or "all": every backend, up to that many)'
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
    # A route per host, per backend and per VIP address (the one refusing what no VIP on
    # it serves), each in its family's table.
    routes = (
        {h.address for h in cfg.hosts}
        | {b.address for v in cfg.vips for b in v.backends}
        | {v.address for v in cfg.vips}
    )
    ipv6 = {a for a in routes if address_bits(a) == 128}
    for n, room, family in (
        (len(routes) - len(ipv6), limits.route_table_size, "IPv4"),
        (len(ipv6), limits.ipv6_route_table_size, "IPv6"),
    ):
        if n > room:
            raise ConfigError(f"{src}: {n} {family} routes, the switch holds {room}")
    if cfg.qos is not None and len(cfg.qos.ports) > limits.qos_ports:
        raise ConfigError(
            f"{src}: qos.port: {len(cfg.qos.ports)} ports with a discipline, the switch "
            f"holds at most {limits.qos_ports}"
        )
    return cfg


def load(path: str | os.PathLike[str], limits: Limits | None = None) -> Config:
    """The config file at `path`, valid as an intent and within the compiled program
    (`limits`, by default the committed P4Info's): what every command works from."""
    return check(load_intent(path), limits or compiled_limits())
