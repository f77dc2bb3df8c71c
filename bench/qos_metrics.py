"""The queueing experiment's pure parts: where its flows go (place_flows), what one run
saw (measures: RFC 3550 interarrival jitter, loss ...), the runs' medians and the
ETSI TIPHON TR 101 329 grades (its percentiles are bench.stats.percentile,
Jain's index p4lb.stats.fairness.jain).

TIPHON thresholds as commonly cited (the standard's QoS classes, as the Indonesian network
literature Maulana et al. come from tabulates them; their paper prints only the grades):
    delay        < 150 ms Very Good | 150-300 Good | 300-450 Fair | > 450 Poor
    jitter       0 ms Very Good | 0-75 Good | 75-125 Fair | 125-225 (and above) Poor
    packet loss  0-2 % Very Good | 3-14 % Good | 15-24 % Fair | >= 25 % Poor
"0 ms" jitter is read as below 1 ms (the paper's tools report whole milliseconds); loss
between the listed bands (2-3 %, 14-15 %) takes the better grade."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Sequence
from typing import Any

from bench.stats import percentile
from p4lb.models.hashing import qos_flow_bucket
from p4lb.stats.fairness import jain

GRADES = ("Very Good", "Good", "Fair", "Poor")
TCP_PORT, VOIP_PORT = 5001, 5002  # the bulk flows' and the VoIP flow's server ports
# Source ports for the placed flows: below Linux's ephemeral range (32768-60999), and never
# one twice in a process (a closed connection's port stays in TIME_WAIT for 60 s). A
# narrower range would not do: the CRC-16 is linear, and the ports of 20000-31999 reach
# only 56 of the 64 buckets.
SPORTS = range(1024, 32768)
_spent: set[int] = set()


def jitter_rfc3550(transit_ms: Sequence[float]) -> float:
    """RFC 3550 6.4.1 interarrival jitter after the last packet: J += (|D| - J) / 16, D the
    difference of consecutive packets' transit times (arrival order)."""
    j = 0.0
    for prev, cur in zip(transit_ms, transit_ms[1:], strict=False):
        j += (abs(cur - prev) - j) / 16
    return j


def loss(sent: int, received: int) -> float:
    """Fraction of `sent` that did not arrive (0 when nothing was sent)."""
    return max(0, sent - received) / sent if sent else 0.0


def grade_delay(ms: float) -> str:
    return GRADES[0 if ms < 150 else 1 if ms < 300 else 2 if ms < 450 else 3]


def grade_jitter(ms: float) -> str:
    return GRADES[0 if ms < 1 else 1 if ms < 75 else 2 if ms < 125 else 3]


def grade_loss(fraction: float) -> str:
    pct = fraction * 100
    return GRADES[0 if pct < 3 else 1 if pct < 15 else 2 if pct < 25 else 3]


def place_flows(
    rng: random.Random, bulk_srcs: list[str], voip_src: str, dst: str, voip_with: int | None = None
) -> dict[str, Any]:
    """Fresh source ports for the bulk flows (one per address in `bulk_srcs`, toward
    TCP_PORT) and the VoIP flow (toward VOIP_PORT) that give every flow a flow bucket of
    its own in the bottleneck's queue, or, with `voip_with=i`, put the VoIP flow in bulk
    flow i's bucket. Bounded: a few thousand draws; 5 flows in 64 buckets need a handful."""
    for _ in range(5000):
        ports = rng.sample(SPORTS, len(bulk_srcs) + 1)
        if _spent.intersection(ports):
            continue
        bulk = [
            qos_flow_bucket(a, dst, 6, p, TCP_PORT)
            for a, p in zip(bulk_srcs, ports[:-1], strict=True)
        ]
        voip = qos_flow_bucket(voip_src, dst, 17, ports[-1], VOIP_PORT)
        apart = len(set(bulk)) == len(bulk)
        if apart and (voip == bulk[voip_with] if voip_with is not None else voip not in bulk):
            _spent.update(ports)
            return {
                "bulk_ports": ports[:-1],
                "voip_port": ports[-1],
                "bulk_buckets": bulk,
                "voip_bucket": voip,
            }
    raise RuntimeError("bench-qos: no placement of the flows found in 5,000 draws")


def measures(
    sink: dict[str, Any], voip: list[list[float]], ping_out: str, sent: int, pings: int
) -> dict[str, Any]:
    """What the hosts saw in one run: the sink's bytes per bulk flow over its window (as
    Mbit/s per flow and per host, with Jain's index), the VoIP receiver's (sequence,
    one-way delay ms) pairs of the `sent`, and ping's output of `pings` echoes."""
    hosts: dict[str, float] = {}
    flows = {}
    for peer, nbytes in sink["bytes"].items():
        flows[peer] = nbytes * 8 / sink["window_s"] / 1e6
        hosts[peer.split(":")[0]] = hosts.get(peer.split(":")[0], 0.0) + flows[peer]
    delays = [d for _, d in sorted(voip, key=lambda x: x[0])]
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping_out)]
    return {
        "flows_mbps": flows,
        "hosts_mbps": hosts,
        "goodput_mbps": sum(flows.values()),
        "jain_flows": jain(list(flows.values())),
        "jain_hosts": jain(list(hosts.values())),
        "voip_p50_ms": percentile(delays, 50),
        "voip_p95_ms": percentile(delays, 95),
        "voip_mean_ms": statistics.fmean(delays) if delays else float("nan"),
        "voip_jitter_ms": jitter_rfc3550([d for _, d in voip]),
        "voip_loss": loss(sent, len({s for s, _ in voip})),
        "ping_mean_ms": statistics.fmean(rtts) if rtts else float("nan"),
        "ping_loss": loss(pings, len(rtts)),
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant (in the runs' order): median, min and max of each scalar measure over
    its runs, and grades."""
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    out: dict[str, dict[str, Any]] = {}
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        s: dict[str, Any] = {"reps": len(mine)}
        for k in keys:
            vals = [r[k] for r in mine]
            s[k] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        s["grade_delay"] = grade_delay(s["voip_p95_ms"]["median"])
        s["grade_jitter"] = grade_jitter(s["voip_jitter_ms"]["median"])
        s["grade_loss"] = grade_loss(s["voip_loss"]["median"])
        s["grade_ping"] = grade_delay(s["ping_mean_ms"]["median"])
        out[variant] = s
    return out
