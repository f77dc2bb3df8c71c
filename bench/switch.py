"""`make bench-switch`: the switch alone, lb.p4 against plain forwarding (baseline.p4) on the
same BMv2 binary, side by side in one run.

Traffic is built once with scapy: realistic TCP connections (SYN, SYN-ACK, ACK, request,
two response segments, ACK, FIN both ways, last ACK — ten packets) from many client
addresses and source ports, and UDP request/response pairs, interleaved 50 connections at
a time. The baseline gets the same packets addressed straight to the servers. Every packet
is injected on port 1 (replies too: the switch does not look at the ingress port of a
routed packet) with tcpreplay, and what comes out of every port is counted from the
kernel's veth counters.

Figures, per BMv2 build (P4LB_SIMPLE_SWITCH or --build NAME=PATH) and program:
  - zero-loss packet rate: the highest tcpreplay rate (binary search) at which every
    packet comes out (a loss of at most LOSS_TOLERANCE of the packets is counted as none,
    for the odd packet the kernel drops under load; a rate fails only if a second replay
    at it loses too);
  - per-packet latency p50/p99 through the idle switch, one packet in flight, per path;
  - tables, conditions and primitives per packet on each path, from a traced run (the
    standard build, which has logging macros);
  - CPU per packet: the CPU time BMv2's busiest thread (its single ingress thread, for
    every program here) spends per packet while the trace is replayed at CPU_PPS, well
    below every program's zero-loss rate; read from /proc/PID/task/*/stat. Steadier
    than the loss threshold, and the busiest thread is what bounds the zero-loss rate,
    so baseline us / program us is the program's capacity relative to the baseline;
  - instructions per packet (busiest thread, all threads) with the switch under
    valgrind's callgrind, counting only while a short replay runs: a count, not a time,
    so a ratio to the baseline that the machine's noise does not move (when valgrind is
    installed; it leaves out cache misses, the kernel and waits, so it complements the
    CPU time rather than replacing it);
  - the LB's saturation rate as live connections, VIPs and backends per VIP grow.
Each figure is the median of --reps repetitions with min and max. Programs take turns
within each repetition (baseline, then each algorithm, then the next repetition), so a
drift of the machine's speed falls on all of them alike, and each ratio to the baseline
is also given per repetition.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import outdir, runner
from bench.lab import veths
from bench.rate import LOSS_TOLERANCE
from bench.runner import builds_to_measure, order_seed, progress, start_run
from bench.switch_counts import INSTRUCTIONS, PATHS, counted, measure_trace
from bench.switch_growth import measure_growth
from bench.switch_timed import TIMED


def options(ap: argparse.ArgumentParser) -> None:
    for name, default in (("flows", 1000), ("latency-rounds", 200), ("preload-pps", 1500)):
        ap.add_argument(f"--{name}", type=int, default=default)
    for name, sizes in (("live", [1000, 10_000, 60_000]), ("vips", [1, 100, 250])):
        ap.add_argument(f"--{name}", type=int, nargs="*", default=sizes)
    ap.add_argument("--backends", type=int, nargs="*", default=[3, 64, 256])
    ap.add_argument("--algorithms", nargs="+", help="default: every algorithm in the P4Info")
    ap.add_argument("--no-growth", action="store_true")
    ap.add_argument("--growth-builds", nargs="*", default=[], help="builds to grow (all)")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument(
        "--instructions",
        action=argparse.BooleanOptionalAction,
        help="instructions per packet under callgrind (default: when valgrind is installed)",
    )
    ap.add_argument("--instr-flows", type=int, default=100)
    ap.add_argument("--instr-reps", type=int, help="default: --reps")
    ap.add_argument(
        "--path-instructions",
        action="store_true",
        help="also each path's instructions per packet, by difference (with --instructions)",
    )
    ap.add_argument("--path-flows", type=int, default=50)
    ap.add_argument("--path-algorithms", nargs="*", help="default: --algorithms")
    ap.add_argument("--path-builds", nargs="*", help="builds to measure (all)")
    runner.add_common(ap)


COMMITTED = ["flows", "latency_rounds", "live", "vips", "backends", "instr_flows", "instr_reps"]
COMMITTED += ["algorithms", "no_growth", "no_trace"]


def main(argv: list[str] | None = None) -> int:
    # Five repetitions: programs are compared, and bench.stats' "differs" needs five a side.
    args = runner.command_line(
        "bench-switch", __doc__, "switch", argv, options, COMMITTED, reps=5, builds=True
    )
    if args.instructions is None:
        args.instructions = bool(shutil.which("valgrind") and shutil.which("callgrind_control"))
    if args.instr_reps is None:
        args.instr_reps = args.reps
    if args.algorithms is None:
        from p4lb.pipeline.p4info import schema

        codes = schema().algorithms()
        args.algorithms = sorted(codes, key=codes.__getitem__)
    builds = builds_to_measure("bench-switch", args.build, ["tcpreplay", "simple_switch_CLI"])
    if builds is None:
        return 2
    order_seed(args)
    run = start_run("bench-switch", builds, argv)
    if run is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": runner.machine(),
        "method": __doc__,
        "loss_tolerance": LOSS_TOLERANCE,
        "reps": args.reps,
        "order_seed": args.order_seed,
        "builds": {},
    }
    out = args.out / "switch.json"

    def save() -> None:  # what is done so far
        out.write_text(json.dumps(result, indent=2) + "\n")

    with veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-switch-") as tmp:
        workdir = Path(tmp)  # traffic, configs, callgrind dumps: removed at the end
        for build, binary in builds.items():
            trial = runner.Trial(build, binary, args, workdir)
            entry = result["builds"][build] = runner.measure_build(TIMED, trial)
            if args.instructions:
                entry["instructions"] = counted(INSTRUCTIONS, trial, "i")
                if args.path_instructions and build in (args.path_builds or [build]):
                    entry["path_instructions"] = counted(PATHS, trial, "p")
            if not args.no_growth and build in (args.growth_builds or [build]):
                save()
                entry["growth"] = measure_growth(binary, args, workdir)
            save()
        if not args.no_trace:
            first = next(iter(builds.values()))
            result["trace"] = {"binary": first, "counts": measure_trace(first, args, workdir)}
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    result["provenance"] = run.finish(
        {"timed": args.reps, "instructions": args.instr_reps},
        order="each build's `order` (and its instructions' and paths'): the programs of each "
        "repetition, in the order they ran",
        order_seed=args.order_seed,
    )
    save()
    progress(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
