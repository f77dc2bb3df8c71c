"""The ordered plan of writes that takes the switch from what it holds to what it should hold,
never showing a half-applied change: creations bottom-up, the VIP entry's single flip, then
removals top-down. Pure."""

from __future__ import annotations

from p4lb.pipeline.entries import MULTICAST, OWNED_TABLES, Entry, Update

# Write order. Each stage is one batch; a later stage is sent only after the earlier one
# succeeded. Things are created bottom-up (routes and backends before the pools that name
# them, pools before the VIP entry that flips to them) and removed top-down.
_ROUTES = (
    "ipv4_route_table",
    "ipv6_route_table",
    "backend_table",
    "backend_port_table",
    "reverse_nat_table",
    "reverse_nat6_table",
    MULTICAST,
)
_QOS = ("qos_egress_table", "qos_port_table")  # a port's entry names its discipline's
_POOLS = ("pool_table", "slot_table", "cookie_table")
_VIPS = (
    "vip_table",
    "vip6_table",
    "vip_address_table",
    "vip6_address_table",
    "vip_source_table",
    "vip6_source_table",
    "conn_share_table",
)
_CREATE_STAGES = (_ROUTES, _QOS, _POOLS, _VIPS)
_DELETE_STAGES = (_VIPS, _POOLS, _ROUTES, _QOS[::-1])


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
