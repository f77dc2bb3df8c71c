"""bench-switch's timed figures of one program (bench.switch): CPU per packet, the zero-loss
and saturation rates and each path's latency, per repetition and as figures beside the
baseline's; and the spec its measures share."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench import runner, stats
from bench.lab import Program, Shape, running
from bench.rate import cpu_per_packet, latencies, zero_loss_rate
from bench.traffic import (
    path_packets,
    pcap_for,
    traffic,
)


def timed_once(t: runner.Trial, name: str) -> dict[str, Any]:
    """One program's timed figures: CPU per packet, the zero-loss and saturation rates,
    each path's latency (median and p99 over the rounds)."""
    shape = Shape(flows=t.args.flows)
    direct = name == "baseline"
    pcap = pcap_for(shape, direct, t.workdir)
    with running(Program(name, shape), t.binary, t.workdir) as pid:
        cpu = cpu_per_packet(pid, pcap)
        rates = zero_loss_rate(pcap)
        lat = latencies(path_packets(shape, direct), t.args.latency_rounds)
    return {
        "cpu": cpu,
        "rates": rates,
        "latency": {
            path: [statistics.median(v), stats.percentile(v, 99)] for path, v in lat.items()
        },
    }


def timed_figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    shape = Shape(flows=args.flows)
    programs: dict[str, Any] = {}
    zl = {n: [r["rates"][0] for r in v] for n, v in values.items()}
    busiest = {n: [r["cpu"][0] for r in v] for n, v in values.items()}
    for name, v in values.items():
        lat: dict[str, list[float]] = {}
        for r in v:
            for path, (median, p99) in r["latency"].items():
                lat.setdefault(path, []).append(median)
                lat.setdefault(path + "_p99", []).append(p99)
        programs[name] = {
            "zero_loss_pps": stats.summary(zl[name]),
            "saturation_pps": stats.summary([r["rates"][1] for r in v]),
            "busiest_thread_us_per_packet": stats.summary(busiest[name]),
            "all_threads_us_per_packet": stats.summary([r["cpu"][1] for r in v]),
            "latency_us": {k: stats.summary(x) for k, x in lat.items()},
            "packets_per_replay": len(traffic(shape, name == "baseline")),
        }
    base = programs["baseline"]["zero_loss_pps"]["median"]
    for name in args.algorithms:
        p = programs[name]
        p["zero_loss_vs_baseline"] = p["zero_loss_pps"]["median"] / base if base else 0.0
        # Side by side within each repetition.
        p["zero_loss_vs_baseline_per_rep"] = stats.per_rep(zl[name], zl["baseline"])
        p["cpu_capacity_vs_baseline_per_rep"] = stats.per_rep(busiest["baseline"], busiest[name])
    return {"programs": programs}


TIMED = runner.part(
    "bench-switch", lambda a: ["baseline", *a.algorithms], timed_once, timed_figures
)
