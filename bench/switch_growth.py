"""bench-switch's growth figures (bench.switch): the balancer's saturation rate as the
switch holds more live connections, VIPs and backends per VIP."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench import lab, stats
from bench.lab import Program, Shape, running, rx_total, settled_rx
from bench.rate import LOSS_TOLERANCE, replay, trial
from bench.runner import progress
from bench.traffic import (
    pcap_for,
    preload_packets,
    write_pcap,
)


def collisions(stats_json: Any) -> int:
    """The sum of every `collisions` counter in `p4lb stats --json`'s output."""
    if isinstance(stats_json, dict):
        return sum(
            v if k == "collisions" and isinstance(v, int) else collisions(v)
            for k, v in stats_json.items()
        )
    if isinstance(stats_json, list):
        return sum(map(collisions, stats_json))
    return 0


def measure_growth(binary: str, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    """The LB's (WRR) saturation rate on the standard traffic as the switch holds more
    live connections (preloaded, established), VIPs and backends per VIP; with live
    connections also the collisions counted while preloading them."""
    rows = []
    points = [("live", n, Shape()) for n in args.live]
    points += [("vips", n, Shape(vips=n)) for n in args.vips]
    points += [("backends", n, Shape(backends=n)) for n in args.backends]
    for kind, n, shape in points:
        pcap = pcap_for(shape, False, workdir)
        preload = None
        if kind == "live":
            preload = workdir / f"preload-{n}.pcap"
            if not preload.exists():
                write_pcap(preload_packets(n, shape), preload)
        sat, coll = [], []
        for rep in range(args.reps):
            progress(f"growth {kind}={n} rep {rep + 1}/{args.reps}")
            with running(Program("wrr", shape), binary, workdir):
                if preload is not None:
                    # Slowly enough that the switch loses nothing: every SYN is stored.
                    start = rx_total()
                    sent, _ = replay(preload, args.preload_pps)
                    coll.append(collisions(lab.p4lb_stats(workdir)))
                    if settled_rx(start) < sent * (1 - LOSS_TOLERANCE):
                        progress(f"  preload lost packets at {args.preload_pps} pps")
                sat.append(trial(pcap, None)[1])
        row: dict[str, Any] = {"dimension": kind, "value": n, "saturation_pps": stats.summary(sat)}
        if coll:
            row["collisions"] = stats.summary([float(c) for c in coll])
            row["collision_rate"] = statistics.median(coll) / n
        rows.append(row)
    return rows
