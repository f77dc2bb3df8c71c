"""What the commands print for people: the stats table, and the writes a dry run would make."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from p4lb.intent import qos as qos_intent
from p4lb.intent.model import Config
from p4lb.pipeline.entries import Update
from p4lb.stats.counters import BackendStats, Stats, VipStats


def update_line(u: Update) -> str:
    """One write of a plan, as `apply --dry-run` lists it."""
    e = u.entry
    return f"{u.op} {e.table} {dict(e.match)} -> {e.action} {dict(e.params)}"


def _health_cell(r: BackendStats) -> str:
    if r.health is None:
        return "-"
    state = str(r.health.get("state", "?"))
    state = state.upper() if state == "down" else state
    return state + ("?" if r.health.get("stale") else "")


def _when(v: VipStats) -> str:
    if v.since is None:
        return "lifetime"
    return "since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.since))


def _since(h: Mapping[str, Any]) -> str:
    at = h.get("since")
    if not isinstance(at, int | float):
        return ""
    return " since " + time.strftime("%H:%M:%S", time.localtime(at))


def endpoint(address: str, port: int) -> str:
    """ADDRESS:PORT, an IPv6 address in brackets (RFC 3986) so its port stands apart."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def render_stats(stats: Stats) -> str:
    """`p4lb stats` as a table for people."""
    lines = []
    for v in stats.vips:
        lines.append(
            f"VIP {v.name} {endpoint(v.address, v.port)}/{v.protocol} algorithm={v.algorithm} "
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
                f"  {r.name:<12} {endpoint(r.address, r.port):<21} {r.weight:>6} "
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
    queueing = qos_drops(stats)
    if any(queueing.values()):
        lines.append("queueing drops: " + ", ".join(f"{k}={n}" for k, n in queueing.items()))
    return "\n".join(lines)


QOS_CAUSES = {"qos_tail": "tail", "qos_aqm": "aqm", "qos_meter": "meter"}


def qos_drops(stats: Stats) -> dict[str, int]:
    """The queueing disciplines' drops by cause (tail, AQM, meter), VIP traffic and routed
    traffic together."""
    out = dict.fromkeys(QOS_CAUSES.values(), 0)
    for drops in [stats.drops, *(v.drops for v in stats.vips)]:
        for reason, cause in QOS_CAUSES.items():
            out[cause] += drops.get(reason, 0)
    return out


def render_qos(cfg: Config, on_switch: Mapping[int, str], stats: Stats) -> str:
    """`p4lb qos show`: each port's discipline as configured and whether the switch holds
    it, then the drops by cause."""
    ports = cfg.qos.ports if cfg.qos else ()
    lines = [f"{'port':>4} {'discipline':<16} {'switch':<8} parameters"]
    for p in ports:
        params = " ".join(
            f"{k}={v}" for k, v in qos_intent.to_table(p).items() if k != "discipline"
        )
        lines.append(
            f"{p.port:>4} {p.discipline:<16} {on_switch.get(p.port, 'missing'):<8} {params}"
        )
    for port, state in sorted(on_switch.items()):
        if not any(p.port == port for p in ports):
            lines.append(
                f"{port:>4} {'?':<16} {state:<8} not in the config (p4lb apply removes it)"
            )
    if not ports and not on_switch:
        lines.append("   - no port has a queueing discipline")
    lines.append("queueing drops: " + ", ".join(f"{k}={n}" for k, n in qos_drops(stats).items()))
    return "\n".join(lines)
