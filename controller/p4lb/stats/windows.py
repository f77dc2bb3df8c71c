"""Windows over lifetime counts. Counters on the switch count from the switch's start, but
weights change at run time: the lifetime shares of a VIP whose weights just changed say
little about the weights it runs now. So a runtime change stores a *baseline* (the VIP's
counts at that moment, p4lb.stats.baselines), and `p4lb stats` shows the counts since the
baseline unless asked for lifetime totals; watching, it adds connections per second. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from p4lb.stats.counters import BackendStats, Stats, VipStats, with_shares

_COUNTS = ("connections", "packets", "bytes", "reply_packets", "reply_bytes")


def _row_key(r: BackendStats) -> str:
    return f"{r.name}={r.address}:{r.port}"


def baseline_of(v: VipStats, at: float) -> dict[str, Any]:
    """What the state file keeps for a VIP at a runtime change (JSON-ready)."""
    return {
        "at": at,
        "backends": {_row_key(r): [getattr(r, k) for k in _COUNTS] for r in v.backends},
        "collisions": v.collisions,
        "drops": dict(v.drops),
    }


def since(v: VipStats, baseline: Mapping[str, Any]) -> VipStats:
    """`v` (lifetime) minus a baseline: the counts since that runtime change. A backend the
    baseline does not know counts from 0; if any count went down (the switch restarted and
    its counters were reset), the baseline is void and `v` is returned unchanged."""
    old = baseline.get("backends", {})
    rows = []
    for r in v.backends:
        before = old.get(_row_key(r), [0] * len(_COUNTS))
        now = [getattr(r, k) for k in _COUNTS]
        if any(n < b for n, b in zip(now, before, strict=True)):
            return v
        rows.append(replace(r, **{k: n - b for k, n, b in zip(_COUNTS, now, before, strict=True)}))
    collisions = v.collisions - int(baseline.get("collisions", 0))
    old_drops = baseline.get("drops", {})
    drops = {k: n - int(old_drops.get(k, 0)) for k, n in v.drops.items()}
    if collisions < 0 or any(n < 0 for n in drops.values()):
        return v
    windowed = replace(
        v,
        collisions=collisions,
        drops={k: n for k, n in drops.items() if n},
        since=float(baseline["at"]),
    )
    return with_shares(windowed, rows)


def with_rates(now: VipStats, before: VipStats, seconds: float) -> VipStats:
    """`now` with each backend's new connections per second since `before`."""
    prev = {_row_key(r): r.connections for r in before.backends}
    rows = tuple(
        replace(r, connections_per_s=max(0, r.connections - prev.get(_row_key(r), 0)) / seconds)
        for r in now.backends
    )
    return replace(now, backends=rows)


def with_health(st: Stats, doc: Mapping[str, Any], now: float) -> Stats:
    """`st` with each checked backend's health from `p4lb run`'s state file (decoded);
    every entry says whether the file is stale (nobody has published it lately)."""
    vips = doc.get("vips", {})
    stale_after = doc.get("stale_after")
    stale = not isinstance(stale_after, int | float) or now > stale_after
    out = []
    for v in st.vips:
        mine = vips.get(v.name, {}) if isinstance(vips, dict) else {}
        rows = tuple(
            replace(r, health=dict(mine[r.name]) | {"stale": stale})
            if isinstance(mine, dict) and isinstance(mine.get(r.name), dict)
            else r
            for r in v.backends
        )
        out.append(replace(v, backends=rows))
    return replace(st, vips=tuple(out))
