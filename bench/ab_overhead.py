"""`make bench-switch`, end to end: ApacheBench requests/s through the VIP against the same
load sent straight to one server through plain forwarding (baseline.p4), per BMv2 build,
on the same binary, side by side in one run.

The Mininet lab of `make bench-ab` (one client, three servers, unshaped links), `ab -n N
-c C` per run. Programs take turns within each repetition (baseline, then each
algorithm), so a drift of the machine's speed falls on all of them alike, and each ratio
to the baseline is taken within its repetition. Writes results/switch/ab.json;
`python -m bench.report` turns it into a table."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench import runner
from bench.ab_run import Case, one_run
from bench.stats import summary

CASES = {
    "baseline": Case("baseline", "baseline", [1, 1, 1]),
    "iphash": Case("iphash", "iphash", [1, 1, 1]),
    "wrr": Case("wrr", "wrr", [1, 1, 1]),
    "leastconn": Case("leastconn", "leastconn", [1, 1, 1]),
}


def ab_run(t: runner.Trial, name: str) -> tuple[float, int]:
    """(requests/s, failed and non-2xx requests) of one ab run through `name`."""
    os.environ["P4LB_SIMPLE_SWITCH"] = t.binary  # topology.bmv2 starts this one
    run = one_run(CASES[name], t.args.n, t.args.c, t.workdir)
    if run.complete + run.failed < t.args.n:
        raise RuntimeError(f"ab {name}: {run.complete} of {t.args.n} requests completed")
    return run.rps, run.failed + run.non_2xx


def figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    rps = {name: [r for r, _ in v] for name, v in values.items()}
    programs: dict[str, Any] = {}
    for name, v in values.items():
        programs[name] = {"rps": summary(rps[name]), "failed": sum(f for _, f in v)}
        if name != "baseline":
            programs[name]["vs_baseline_per_rep"] = summary(
                [r / b for r, b in zip(rps[name], rps["baseline"], strict=True) if b]
            )
    return {"programs": programs}


def options(ap: argparse.ArgumentParser) -> None:
    # A run of 5,000 requests lasts under two seconds on the speed build, and its ratio to
    # the baseline varied 0.65-0.99 between repetitions; 30,000 in 5 repetitions hold
    # each median to a few percent.
    ap.add_argument("-n", type=int, default=30_000, help="requests per ab run")
    ap.add_argument("-c", type=int, default=10, help="ab concurrency")
    algorithms = [c for c in CASES if c != "baseline"]
    ap.add_argument("--algorithms", nargs="+", choices=algorithms, default=algorithms)


SPEC = runner.Spec(
    prog="bench-ab-overhead",
    doc=__doc__,
    subdir="switch",
    filename="ab.json",
    reps=5,
    tools=("ab", "mn"),
    options=options,
    committed=("n", "c", "algorithms"),
    variants=lambda args: ["baseline", *args.algorithms],
    measure=ab_run,
    figures=figures,
    head=lambda args: {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": runner.machine(),
        "n": args.n,
        "c": args.c,
    },
    lab=contextlib.nullcontext,  # each run starts the Mininet lab of bench-ab
    order_in_build=True,
)


def measure(binary: str, args: argparse.Namespace, raw: Path) -> dict[str, Any]:
    """One build's figures (bench.runner.measure_build); ab's files go to `raw`."""
    return runner.measure_build(SPEC, runner.Trial(binary, binary, args, raw))


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
