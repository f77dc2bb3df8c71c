"""Counters read from the switch -> per-backend shares, Jain's index, drops. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from p4lb.config import Config
from p4lb.entries import Ids, backend_key, vip_key
from p4lb.fairness import jain, shares, weighted_jain

DROP_REASONS = {
    1: "malformed",
    2: "bad_checksum",
    3: "ttl_expired",
    4: "vip_port_unknown",
    5: "no_route",
    6: "no_backend",
    7: "fragment",
    8: "unsupported",
}
NUM_DROP_REASONS = 16


@dataclass
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


@dataclass
class VipStats:
    name: str
    address: str
    port: int
    protocol: str
    algorithm: str
    backends: list[BackendStats]
    jain: float
    weighted_jain: float
    collisions: int
    drops: dict[str, int] = field(default_factory=dict)


@dataclass
class Stats:
    vips: list[VipStats]
    drops: dict[str, int]  # not tied to a VIP

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


Counter = dict[int, tuple[int, int]]  # index -> (packets, bytes)


def _drops(counter: Counter, sid: int) -> dict[str, int]:
    out = {}
    for code, name in DROP_REASONS.items():
        packets = counter.get(sid * NUM_DROP_REASONS + code, (0, 0))[0]
        if packets:
            out[name] = packets
    return out


def compute(cfg: Config, ids: Ids, counters: dict[str, Counter]) -> Stats:
    """Aggregate raw counter cells (by name) for the VIPs and backends of `cfg`."""
    conns = counters.get("backend_conns", {})
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
                )
            )
        counts = [r.connections for r in rows]
        weights = [r.weight for r in rows]
        for r, s, w in zip(rows, shares(counts), shares(weights), strict=True):
            r.share, r.wanted_share = s, w
        active = [r.connections for r in rows if r.weight > 0]
        vips.append(
            VipStats(
                name=v.name,
                address=v.address,
                port=v.port,
                protocol=v.protocol,
                algorithm=v.algorithm,
                backends=rows,
                jain=jain(active),
                weighted_jain=weighted_jain(counts, weights),
                collisions=coll.get(sid, (0, 0))[0] if sid else 0,
                drops=_drops(drops, sid) if sid else {},
            )
        )
    return Stats(vips=vips, drops=_drops(drops, 0))


def render(stats: Stats) -> str:
    """A table for people."""
    lines = []
    for v in stats.vips:
        lines.append(
            f"VIP {v.name} {v.address}:{v.port}/{v.protocol} algorithm={v.algorithm} "
            f"jain={v.jain:.4f} weighted_jain={v.weighted_jain:.4f} "
            f"collisions={v.collisions}"
        )
        lines.append(
            f"  {'backend':<12} {'address':<21} {'weight':>6} {'conns':>8} "
            f"{'share':>7} {'wanted':>7} {'packets':>9} {'bytes':>11}"
        )
        for r in v.backends:
            lines.append(
                f"  {r.name:<12} {r.address + ':' + str(r.port):<21} {r.weight:>6} "
                f"{r.connections:>8} {r.share:>7.2%} {r.wanted_share:>7.2%} "
                f"{r.packets:>9} {r.bytes:>11}"
            )
        if v.drops:
            lines.append("  drops: " + ", ".join(f"{k}={n}" for k, n in v.drops.items()))
    lines.append(
        "drops (no VIP): " + (", ".join(f"{k}={n}" for k, n in stats.drops.items()) or "none")
    )
    return "\n".join(lines)
