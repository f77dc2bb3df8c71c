"""Counters read from the switch -> per-backend connections, packets, shares against weights,
Jain's index and drops by reason, for the VIPs and backends of a config. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from p4lb.intent.model import Config
from p4lb.pipeline.ids import Ids, backend_key, vip_key
from p4lb.stats.fairness import jain, shares, weighted_jain


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


def with_shares(v: VipStats, rows: list[BackendStats]) -> VipStats:
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
        vips.append(with_shares(base, rows))
    return Stats(vips=tuple(vips), drops=_drops(drops, 0, layout))


def tier_total(per: list[Stats]) -> Stats:
    """The tier's counts: each balancer's summed per VIP and backend (the VIPs and backends
    of the first), shares and Jain's indexes recomputed over the sums."""
    first = per[0]
    vips = []
    for v in first.vips:
        same = [st.vip(v.name) for st in per if any(x.name == v.name for x in st.vips)]
        rows = []
        for b in v.backends:
            cells = [next(x for x in sv.backends if x.name == b.name) for sv in same]
            rows.append(
                replace(
                    b,
                    connections=sum(c.connections for c in cells),
                    packets=sum(c.packets for c in cells),
                    bytes=sum(c.bytes for c in cells),
                    reply_packets=sum(c.reply_packets for c in cells),
                    reply_bytes=sum(c.reply_bytes for c in cells),
                    active=sum(c.active for c in cells),
                )
            )
        drops: dict[str, int] = {}
        for sv in same:
            for k, n in sv.drops.items():
                drops[k] = drops.get(k, 0) + n
        base = replace(v, collisions=sum(sv.collisions for sv in same), drops=drops)
        vips.append(with_shares(base, rows))
    drops = {}
    for st in per:
        for k, n in st.drops.items():
            drops[k] = drops.get(k, 0) + n
    return Stats(vips=tuple(vips), drops=drops)
