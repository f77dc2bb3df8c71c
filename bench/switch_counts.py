"""bench-switch's counts of work (bench.switch): instructions per packet under callgrind per
program and per path (by difference), and the tables, conditions and primitives of one
traced packet per path."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench import runner, stats
from bench.instructions import INSTR_PPS, instructions_once, traced_counts
from bench.lab import Program, Shape, running, rx_total, settled_rx
from bench.rate import latencies
from bench.runner import progress
from bench.traffic import (
    PATH_EXTRA,
    PATH_STEPS,
    is_udp,
    path_packets,
    pcap_for,
    traffic,
)


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


# Instructions per packet, per program: a count, not a time, so the same binary, program
# and packets give the same figure whatever else the machine does.
INSTRUCTIONS = runner.part(
    "bench-switch instructions",
    lambda a: ["baseline", *a.algorithms],
    instructions_of,
    instruction_figures,
)
PATHS = runner.part(
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
