"""The metric families of a sample, in Prometheus' naming (units in the names, `_total` for
counters, labels switch/vip/backend/reason/direction), for a custom collector: counters are
the switch's lifetime counts, shares and Jain's indexes what `p4lb stats --json` shows (each
VIP since its last runtime change, the tier's per balancer), weights and health the config's
and `p4lb run`'s. The controller's own metrics (reconcile time, write errors, digests,
mastership) are prometheus_client objects the control loops update."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from p4lb.service.metrics.sampler import Sample, Sampler
from p4lb.stats.fairness import shares

SWITCH = ("switch",)
BACKEND = ("switch", "vip", "backend")
VIP = ("switch", "vip")
# Replies (from_backend) are counted on reverse_nat_table, requests (to_backend) on
# backend_table: packets and bytes as the switch saw them (Ethernet frames).
DIRECTIONS = (("to_backend", "packets", "bytes"), ("from_backend", "reply_packets", "reply_bytes"))
# Reconciles read and recompute the whole intent: milliseconds to seconds on BMv2.
RECONCILE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ControllerMetrics:
    """What the control loops count about themselves, per switch (a tier's balancer name,
    or "switch")."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.registry = r
        self.reconcile_seconds = Histogram(
            "p4lb_reconcile_duration_seconds",
            "Time to bring a switch to the intent: read, compute, write the differences",
            SWITCH,
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.write_errors = Counter(
            "p4lb_write_errors",
            "P4Runtime writes the switch refused or that failed (reconciles and digest entries)",
            SWITCH,
            registry=r,
        )
        self.digests = Counter(
            "p4lb_digests",
            "Digest entries handled (collision: a flow pinned; conn_event: a tier's shared "
            "connection opened or closed)",
            (*SWITCH, "kind"),
            registry=r,
        )
        self.primary = Gauge(
            "p4lb_primary",
            "1 while this controller is primary on the switch and holds it in the intent",
            SWITCH,
            registry=r,
        )


def families(sample: Sample, drop_reasons: Iterable[str]) -> Iterator[Metric]:
    """Every metric of `sample`; `drop_reasons`: the program's reasons (each exported, at 0
    until a packet is dropped for it, so rate() works from the first scrape)."""
    reasons = sorted(drop_reasons)
    up = GaugeMetricFamily(
        "p4lb_switch_up",
        "1 when the switch's counters could be read for this scrape",
        labels=SWITCH,
    )
    conns = CounterMetricFamily(
        "p4lb_backend_connections",
        "New connections (flows for UDP) the switch sent to the backend",
        labels=BACKEND,
    )
    packets = CounterMetricFamily(
        "p4lb_backend_packets",
        "Packets to the backend (to_backend) and its replies (from_backend)",
        labels=(*BACKEND, "direction"),
    )
    nbytes = CounterMetricFamily(
        "p4lb_backend_bytes",
        "Bytes (Ethernet frames) to the backend and of its replies",
        labels=(*BACKEND, "direction"),
    )
    active = GaugeMetricFamily(
        "p4lb_backend_active_connections",
        "TCP connections open now: handshakes completed minus FIN/RST or reclaimed slots",
        labels=BACKEND,
    )
    share = GaugeMetricFamily(
        "p4lb_backend_share_ratio",
        "The backend's share of the VIP's new connections since the VIP's last runtime change",
        labels=BACKEND,
    )
    jain = GaugeMetricFamily(
        "p4lb_vip_jain_index",
        "Jain's fairness index of the serving backends' connections since the last change",
        labels=VIP,
    )
    wjain = GaugeMetricFamily(
        "p4lb_vip_weighted_jain_index",
        "Jain's index of connections per unit of weight since the last change (1: as weighted)",
        labels=VIP,
    )
    window = GaugeMetricFamily(
        "p4lb_vip_window_start_timestamp_seconds",
        "When the window of the shares and Jain's indexes began (the VIP's last runtime change)",
        labels=VIP,
    )
    collisions = CounterMetricFamily(
        "p4lb_vip_collisions",
        "New flows whose connection-state bucket was full (pinned by the controller)",
        labels=VIP,
    )
    vip_drops = CounterMetricFamily(
        "p4lb_vip_drops",
        "Packets to the VIP the switch dropped, by reason",
        labels=(*VIP, "reason"),
    )
    drops = CounterMetricFamily(
        "p4lb_drops",
        "Packets the switch dropped that were tied to no VIP, by reason",
        labels=(*SWITCH, "reason"),
    )
    for s in sample.switches:
        up.add_metric([s.name], 0 if s.lifetime is None else 1)
        if s.lifetime is None or s.shown is None:
            continue
        for life, seen in zip(s.lifetime.vips, s.shown.vips, strict=True):
            at = [s.name, life.name]
            for b, w in zip(life.backends, seen.backends, strict=True):
                where = [*at, b.name]
                conns.add_metric(where, b.connections)
                for direction, p, n in DIRECTIONS:
                    packets.add_metric([*where, direction], getattr(b, p))
                    nbytes.add_metric([*where, direction], getattr(b, n))
                active.add_metric(where, b.active)
                share.add_metric(where, w.share)
            jain.add_metric(at, seen.jain)
            wjain.add_metric(at, seen.weighted_jain)
            if seen.since is not None:
                window.add_metric(at, seen.since)
            collisions.add_metric(at, life.collisions)
            for r in reasons:
                vip_drops.add_metric([*at, r], life.drops.get(r, 0))
        for r in reasons:
            drops.add_metric([s.name, r], s.lifetime.drops.get(r, 0))
    yield from (up, conns, packets, nbytes, active, share, jain, wjain, window, collisions)
    yield from (vip_drops, drops)
    yield from _intent(sample)


def _intent(sample: Sample) -> Iterator[Metric]:
    """What the config and `p4lb run` say, the same for every switch: the VIPs, the weights
    configured and programmed, the wanted shares, health."""
    info = GaugeMetricFamily(
        "p4lb_vip_info",
        "A VIP of the config (always 1): its address, port, protocol and algorithm",
        labels=("vip", "address", "port", "protocol", "algorithm"),
    )
    weight = GaugeMetricFamily(
        "p4lb_backend_weight", "The backend's weight in the config", labels=("vip", "backend")
    )
    effective = GaugeMetricFamily(
        "p4lb_backend_effective_weight",
        "The weight programmed on the switch: the config's, 0 while health checks have it DOWN",
        labels=("vip", "backend"),
    )
    wanted = GaugeMetricFamily(
        "p4lb_backend_wanted_share_ratio",
        "The backend's configured weight over the VIP's total",
        labels=("vip", "backend"),
    )
    up = GaugeMetricFamily(
        "p4lb_backend_up",
        "Health checks: 1 UP, 0 DOWN (only backends of checked VIPs, while p4lb run publishes)",
        labels=("vip", "backend"),
    )
    health = _health(sample)
    for v in sample.config.vips:
        info.add_metric([v.name, v.address, str(v.port), v.protocol, v.algorithm], 1)
        ws = shares([b.weight for b in v.backends])
        for b, ws_b in zip(v.backends, ws, strict=True):
            weight.add_metric([v.name, b.name], b.weight)
            effective.add_metric([v.name, b.name], sample.effective.get((v.name, b.name), b.weight))
            wanted.add_metric([v.name, b.name], ws_b)
            state = health.get((v.name, b.name))
            if state is not None:
                up.add_metric([v.name, b.name], 1 if state == "up" else 0)
    yield from (info, weight, effective, wanted, up)


def _health(sample: Sample) -> dict[tuple[str, str], str]:
    """(VIP, backend) -> "up"/"down" as the stats show it, stale entries left out."""
    seen = next((s.shown for s in sample.switches if s.shown is not None), None)
    out: dict[tuple[str, str], str] = {}
    for v in seen.vips if seen is not None else ():
        for b in v.backends:
            h = b.health
            if h is not None and not h.get("stale") and h.get("state") in ("up", "down"):
                out[(v.name, b.name)] = str(h["state"])
    return out


class StatsCollector(Collector):
    """A custom collector: each scrape reads the switches (through the sampler) and turns
    what it read into metric families."""

    def __init__(self, sampler: Sampler, drop_reasons: Iterable[str]) -> None:
        self.sampler = sampler
        self.drop_reasons = tuple(drop_reasons)

    def collect(self) -> Iterator[Metric]:
        yield from families(self.sampler.read(), self.drop_reasons)
