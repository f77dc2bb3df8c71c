"""Counters read from the switch -> per-backend shares, Jain's index, drops. Pure.

Counters on the switch count from the switch's start, but weights change at run time: the
lifetime shares of a VIP whose weights just changed say little about the weights it runs
now. So a runtime change stores a *baseline* (the VIP's counts at that moment, in a small
state file beside the config), and `p4lb stats` shows the counts since the baseline unless
asked for lifetime totals."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from p4lb.config import Config
from p4lb.entries import Ids, backend_key, vip_key
from p4lb.fairness import jain, shares, weighted_jain


@dataclass(frozen=True)
class BackendStats:
    name: str
    address: str
    port: int
    weight: int
    connections: int
    packets: int
    bytes: int
    reply_packets: int
    reply_bytes: int
    share: float = 0.0
    wanted_share: float = 0.0
    connections_per_s: float | None = None
    # Open now: handshakes completed minus closes (a gauge: never windowed).
    active: int = 0
    # What `p4lb run`'s health checks say (the state file's entry, with "stale" when it
    # stopped publishing); None: not checked.
    health: dict[str, Any] | None = None


@dataclass(frozen=True)
class VipStats:
    name: str
    address: str
    port: int
    protocol: str
    algorithm: str
    backends: tuple[BackendStats, ...]
    jain: float
    weighted_jain: float
    collisions: int
    drops: dict[str, int] = field(default_factory=dict)
    since: float | None = None  # counts since this time (a baseline); None: lifetime


@dataclass(frozen=True)
class Stats:
    vips: tuple[VipStats, ...]
    drops: dict[str, int]  # not tied to a VIP

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def vip(self, name: str) -> VipStats:
        return next(v for v in self.vips if v.name == name)


Counter = dict[int, tuple[int, int]]  # index -> (packets, bytes)


@dataclass(frozen=True)
class DropLayout:
    """How the `drops` counter is indexed: drops[service * stride + reason code]."""

    reasons: Mapping[int, str]
    stride: int


def _drops(counter: Counter, sid: int, layout: DropLayout) -> dict[str, int]:
    out = {}
    for code, name in layout.reasons.items():
        packets = counter.get(sid * layout.stride + code, (0, 0))[0]
        if packets:
            out[name] = packets
    return out


def _fair(v: VipStats, rows: list[BackendStats]) -> VipStats:
    """`v` with `rows`, their shares and Jain's indexes recomputed."""
    counts = [r.connections for r in rows]
    weights = [r.weight for r in rows]
    rows = [
        replace(r, share=s, wanted_share=w)
        for r, s, w in zip(rows, shares(counts), shares(weights), strict=True)
    ]
    return replace(
        v,
        backends=tuple(rows),
        jain=jain([r.connections for r in rows if r.weight > 0]),
        weighted_jain=weighted_jain(counts, weights),
    )


def _active(established: Counter, closes: Counter, bid: int) -> int:
    if not bid:
        return 0
    return max(0, established.get(bid, (0, 0))[0] - closes.get(bid, (0, 0))[0])


def compute(cfg: Config, ids: Ids, counters: dict[str, Counter], layout: DropLayout) -> Stats:
    """Lifetime totals of the raw counter cells (by name) for the VIPs and backends of `cfg`."""
    conns = counters.get("backend_conns", {})
    established = counters.get("backend_established", {})
    closes = counters.get("backend_closes", {})
    tx = counters.get("backend_tx", {})
    rx = counters.get("backend_rx", {})
    drops = counters.get("drops", {})
    coll = counters.get("collisions", {})
    vips = []
    for v in cfg.vips:
        sid = ids.services.get(vip_key(v), 0)
        rows = []
        for b in v.backends:
            bid = ids.backends.get(backend_key(v, b.address, b.port), 0)
            rows.append(
                BackendStats(
                    name=b.name,
                    address=b.address,
                    port=b.port,
                    weight=b.weight,
                    connections=conns.get(bid, (0, 0))[0] if bid else 0,
                    packets=tx.get(bid, (0, 0))[0] if bid else 0,
                    bytes=tx.get(bid, (0, 0))[1] if bid else 0,
                    reply_packets=rx.get(bid, (0, 0))[0] if bid else 0,
                    reply_bytes=rx.get(bid, (0, 0))[1] if bid else 0,
                    active=_active(established, closes, bid),
                )
            )
        base = VipStats(
            name=v.name,
            address=v.address,
            port=v.port,
            protocol=v.protocol,
            algorithm=v.algorithm,
            backends=(),
            jain=1.0,
            weighted_jain=1.0,
            collisions=coll.get(sid, (0, 0))[0] if sid else 0,
            drops=_drops(drops, sid, layout) if sid else {},
        )
        vips.append(_fair(base, rows))
    return Stats(vips=tuple(vips), drops=_drops(drops, 0, layout))


# ---------------------------------------------------------------- windows and rates

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
    return _fair(windowed, rows)


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


def _health_cell(r: BackendStats) -> str:
    if r.health is None:
        return "-"
    state = str(r.health.get("state", "?"))
    state = state.upper() if state == "down" else state
    return state + ("?" if r.health.get("stale") else "")


# ---------------------------------------------------------------- the state file


def state_path(config_path: str | os.PathLike[str]) -> Path:
    """The baselines live beside the config: `lb.toml` -> `lb.toml.state.json`."""
    p = Path(config_path)
    return p.with_name(p.name + ".state.json")


def load_baselines(config_path: str | os.PathLike[str]) -> dict[str, Any]:
    """VIP name -> baseline; {} when there is no (readable) state file."""
    try:
        data = json.loads(state_path(config_path).read_text())
    except (OSError, ValueError):
        return {}
    vips = data.get("vips", {}) if isinstance(data, dict) else {}
    return vips if isinstance(vips, dict) else {}


def save_baselines(config_path: str | os.PathLike[str], baselines: Mapping[str, Any]) -> None:
    """Replace the state file atomically (callers hold the config lock)."""
    target = state_path(config_path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps({"vips": dict(baselines)}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, target)


# ---------------------------------------------------------------- for people


def _when(v: VipStats) -> str:
    if v.since is None:
        return "lifetime"
    import time

    return "since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.since))


def _since(h: Mapping[str, Any]) -> str:
    at = h.get("since")
    if not isinstance(at, int | float):
        return ""
    import time

    return " since " + time.strftime("%H:%M:%S", time.localtime(at))


def render(stats: Stats) -> str:
    """A table for people."""
    lines = []
    for v in stats.vips:
        lines.append(
            f"VIP {v.name} {v.address}:{v.port}/{v.protocol} algorithm={v.algorithm} "
            f"jain={v.jain:.4f} weighted_jain={v.weighted_jain:.4f} "
            f"collisions={v.collisions} ({_when(v)})"
        )
        rates = any(r.connections_per_s is not None for r in v.backends)
        checked = any(r.health is not None for r in v.backends)
        lines.append(
            f"  {'backend':<12} {'address':<21} {'weight':>6} {'conns':>8} {'active':>7} "
            f"{'share':>7} {'wanted':>7} {'packets':>9} {'bytes':>11}"
            + (f" {'conns/s':>8}" if rates else "")
            + (f" {'health':<6}" if checked else "")
        )
        for r in v.backends:
            lines.append(
                f"  {r.name:<12} {r.address + ':' + str(r.port):<21} {r.weight:>6} "
                f"{r.connections:>8} {r.active:>7} {r.share:>7.2%} {r.wanted_share:>7.2%} "
                f"{r.packets:>9} {r.bytes:>11}"
                + (f" {r.connections_per_s or 0.0:>8.1f}" if rates else "")
                + (f" {_health_cell(r):<6}" if checked else "")
            )
        for r in v.backends:
            if r.health is not None and r.health.get("state") == "down":
                lines.append(f"  {r.name} is DOWN{_since(r.health)}: {r.health.get('reason', '')}")
        if any(r.health is not None and r.health.get("stale") for r in v.backends):
            lines.append("  health: stale (p4lb run is not publishing checks; '?')")
        if v.drops:
            lines.append("  drops: " + ", ".join(f"{k}={n}" for k, n in v.drops.items()))
    lines.append(
        "drops (no VIP): " + (", ".join(f"{k}={n}" for k, n in stats.drops.items()) or "none")
    )
    return "\n".join(lines)
