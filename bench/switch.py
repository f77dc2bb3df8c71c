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
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import lab, outdir, runner, stats
from bench.instructions import INSTR_PPS, instructions_once, traced_counts
from bench.lab import Program, Shape, running, rx_total, settled_rx, veths
from bench.rate import LOSS_TOLERANCE, cpu_per_packet, latencies, replay, trial, zero_loss_rate
from bench.runner import builds_to_measure, order_seed, progress, start_run
from bench.traffic import (
    PATH_EXTRA,
    PATH_STEPS,
    is_udp,
    path_packets,
    pcap_for,
    preload_packets,
    traffic,
    write_pcap,
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
            path: [statistics.median(v), stats.percentile_index(v, 0.99)] for path, v in lat.items()
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


def instructions_of(t: runner.Trial, name: str) -> tuple[float, float]:
    pcap = pcap_for(Shape(flows=t.args.instr_flows), name == "baseline", t.workdir)
    return instructions_once(name, t.binary, t.args, t.workdir, pcap)


def instruction_figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    busiest = {n: [b for b, _ in v] for n, v in values.items()}
    programs: dict[str, Any] = {
        name: {
            "busiest_thread_per_packet": stats.summary(busiest[name]),
            "all_threads_per_packet": stats.summary([a for _, a in v]),
        }
        for name, v in values.items()
    }
    for name in args.algorithms:
        programs[name]["capacity_vs_baseline_per_rep"] = stats.per_rep(
            busiest["baseline"], busiest[name]
        )
    return {"pps": INSTR_PPS, "flows": args.instr_flows, "programs": programs}


def path_costs_of(t: runner.Trial, name: str) -> list[list[float]]:
    """Instructions one more packet of each path costs (all threads, and the busiest): the
    mix, and the mix with PATH_EXTRA more copies of that path's packet per TCP connection;
    the difference over the copies."""
    shape = Shape(flows=t.args.path_flows)
    direct = name == "baseline"
    extra = PATH_EXTRA * sum(not is_udp(i, shape) for i in range(shape.flows))
    totals: dict[str, tuple[float, float]] = {}
    for kind, step in {"mix": None, **PATH_STEPS}.items():
        progress(f"{t.build} path instructions {name} {kind}")
        pcap = pcap_for(shape, direct, t.workdir, step)
        n = len(traffic(shape, direct, step))
        b, a = instructions_once(name, t.binary, t.args, t.workdir, pcap)
        totals[kind] = (a * n, b * n)
    mix_all, mix_busiest = totals["mix"]
    return [
        [(totals[k][0] - mix_all) / extra, (totals[k][1] - mix_busiest) / extra] for k in PATH_STEPS
    ]


def path_figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    programs = {
        name: {
            kind: {
                "all_threads": stats.summary([rep[i][0] for rep in v]),
                "busiest_thread": stats.summary([rep[i][1] for rep in v]),
            }
            for i, kind in enumerate(PATH_STEPS)
        }
        for name, v in values.items()
    }
    return {"flows": args.path_flows, "extra_per_connection": PATH_EXTRA, "programs": programs}


def spec(prog: str, variants: Any, measure: runner.Measure, figures: Any) -> runner.Spec:
    """The interleaved repetitions of one of this bench's measures (its command line is
    main's own: it adds figures to an earlier run's file)."""
    return runner.Spec(
        prog=prog,
        doc=__doc__ or "",
        subdir="switch",
        filename="switch.json",
        reps=5,
        tools=(),
        options=lambda ap: None,
        committed=(),
        variants=variants,
        measure=measure,
        figures=figures,
        order_in_build=True,
    )


TIMED = spec("bench-switch", lambda a: ["baseline", *a.algorithms], timed_once, timed_figures)
# Instructions per packet, per program: a count, not a time, so the same binary, program
# and packets give the same figure whatever else the machine does.
INSTRUCTIONS = spec(
    "bench-switch instructions",
    lambda a: ["baseline", *a.algorithms],
    instructions_of,
    instruction_figures,
)
PATHS = spec(
    "bench-switch paths",
    lambda a: ["baseline", *(getattr(a, "path_algorithms", None) or a.algorithms)],
    path_costs_of,
    path_figures,
)


def counted(spec: runner.Spec, trial: runner.Trial, tag: str) -> dict[str, Any]:
    """`spec`'s figures of one build over --instr-reps repetitions (orders salted by
    `tag`), without the binary its timed figures already name."""
    salt = f"{trial.build}/{tag}"
    res = runner.measure_build(spec, trial, reps=trial.args.instr_reps, salt=salt)
    del res["binary"]
    return res


def measure_trace(binary: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One packet per path through a logging switch; counts per packet."""
    shape = Shape()
    out: dict[str, Any] = {}
    for name in ["baseline", *args.algorithms]:
        direct = name == "baseline"
        log = workdir / f"trace-{name}.log"
        if log.exists():
            log.unlink()
        packets = path_packets(shape, direct)
        with running(Program(name, shape), binary, workdir, log):
            latencies(packets, 1)
            settled_rx(rx_total())
        # BMv2 names its log file NAME.txt.
        counts = traced_counts(log if log.exists() else log.with_name(log.name + ".txt"))
        ids = sorted(counts)[-len(packets) :]
        out[name] = {path: counts[i] for (path, _), i in zip(packets, ids, strict=False)}
    return out


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


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument(
        "--algorithms", nargs="+", default=None, help="default: every algorithm in the P4Info"
    )
    ap.add_argument("--latency-rounds", type=int, default=200)
    ap.add_argument("--live", type=int, nargs="*", default=[1000, 10_000, 60_000])
    ap.add_argument("--vips", type=int, nargs="*", default=[1, 100, 250])
    ap.add_argument("--backends", type=int, nargs="*", default=[3, 64, 256])
    ap.add_argument("--preload-pps", type=int, default=1500)
    ap.add_argument("--no-growth", action="store_true")
    ap.add_argument("--growth-builds", nargs="*", default=[], help="builds to grow (all)")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument(
        "--instructions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="instructions per packet under callgrind (default: when valgrind is installed)",
    )
    ap.add_argument("--instr-flows", type=int, default=100)
    ap.add_argument("--instr-reps", type=int, default=None, help="default: --reps")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--only-instructions", action="store_true", help="skip the timed figures")
    only.add_argument(
        "--only-growth",
        action="store_true",
        help="only the growth figures, added to the last full run's (in --out)",
    )
    ap.add_argument(
        "--path-instructions",
        action="store_true",
        help="also each path's instructions per packet, by difference (with --instructions)",
    )
    ap.add_argument("--path-flows", type=int, default=50)
    ap.add_argument("--path-algorithms", nargs="*", default=None, help="default: --algorithms")
    ap.add_argument("--path-builds", nargs="*", default=None, help="builds to measure (all)")
    runner.add_common(ap)


COMMITTED = ["flows", "latency_rounds", "live", "vips", "backends", "instr_flows", "instr_reps"]
COMMITTED += ["algorithms", "no_growth", "no_trace", "only_instructions", "only_growth"]


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
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result: dict[str, Any] = {
        "when": when,
        "machine": runner.machine(),
        "method": __doc__,
        "loss_tolerance": LOSS_TOLERANCE,
        "reps": args.reps,
        "order_seed": args.order_seed,
        "builds": {},
    }
    out = args.out / "switch.json"
    adding = "instructions" if args.only_instructions else "growth" if args.only_growth else ""
    if args.only_growth and not out.exists():
        print(f"bench-switch: --only-growth: no {out} to add to", file=sys.stderr)
        return 2
    if adding and out.exists():  # added to the figures of the last full run
        result = {**json.loads(out.read_text()), f"{adding}_when": when}

    def save() -> None:  # what is done so far
        out.write_text(json.dumps(result, indent=2) + "\n")

    def grows(build: str) -> bool:
        return not args.growth_builds or build in args.growth_builds

    with veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-switch-") as tmp:
        workdir = Path(tmp)  # traffic, configs, callgrind dumps: removed at the end
        for build, binary in builds.items():
            trial = runner.Trial(build, binary, args, workdir)
            growth = args.only_growth or not (args.no_growth or args.only_instructions)
            if args.only_growth and not grows(build):
                continue
            if adding:
                entry = result["builds"].setdefault(build, {"binary": binary, "programs": {}})
            else:
                entry = result["builds"][build] = runner.measure_build(TIMED, trial)
            if args.instructions and not args.only_growth:
                entry["instructions"] = counted(INSTRUCTIONS, trial, "i")
                if args.path_instructions and build in (args.path_builds or [build]):
                    entry["path_instructions"] = counted(PATHS, trial, "p")
            if growth and grows(build):
                save()
                entry["growth"] = measure_growth(binary, args, workdir)
            save()
        if not (args.no_trace or adding):
            first = next(iter(builds.values()))
            result["trace"] = {"binary": first, "counts": measure_trace(first, args, workdir)}
    if not adding:  # else the full run's stays
        result["machine"]["loadavg_at_end"] = os.getloadavg()
    result[f"provenance_{adding}".rstrip("_")] = run.finish(
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
