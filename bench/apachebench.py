"""`make bench-ab`: ApacheBench through the VIP for every algorithm and request count, plus the
same load through a plain forwarding program on the same BMv2 binary (the baseline), as
Usman et al. measured: one point per case, count and concurrency (--reps for more), the
points in a shuffled order (bench.runner), each in a fresh Mininet lab (bench.ab_run).

Writes results/: raw ab text, runs.csv / runs.json, meta.json (provenance, the versions and
each invocation), summary.md, PNG plots."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import provenance, runner
from bench.ab_report import plots, summary
from bench.ab_run import CASES, Case, Run, one_run

PAPER_COUNTS = [20000, 40000, 60000, 80000, 100000]
QUICK_COUNTS = [300, 600]


def points(args: argparse.Namespace) -> dict[str, tuple[Case, int, int]]:
    """The runs by name: every case at every request count and concurrency."""
    counts = args.counts or (QUICK_COUNTS if args.quick else PAPER_COUNTS)
    chosen = [c for c in CASES if c.name in args.cases]
    return {
        f"{c.name} -n {n} -c {k}": (c, n, k)
        for c in chosen
        for n in counts
        for k in args.concurrency
    }


def measure(t: runner.Trial, name: str) -> dict[str, Any]:
    (t.args.out / "raw").mkdir(parents=True, exist_ok=True)
    run = one_run(*points(t.args)[name], t.args.out / "raw")
    runner.progress(
        f"{name}: {run.rps:.1f} req/s, mean {run.mean_ms:.2f} ms, failed {run.failed}, "
        f"served {run.served}, jain {run.jain:.4f}"
    )
    return asdict(run)


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    return {"runs": [r for name in points(args) for r in values[name]]}


def write(args: argparse.Namespace, result: dict[str, Any]) -> int:
    """runs.json and runs.csv (with --append, after the runs already there), summary.md and
    the plots; meta.json keeps every invocation. 1 if a switch's count of
    connections differs from the servers' logs."""
    out: Path = args.out
    ((build,),) = (result.pop("builds").values(),)
    earlier = args.append and (out / "runs.json").exists()
    runs = [Run(**r) for r in json.loads((out / "runs.json").read_text())] if earlier else []
    runs += [Run(**r) for r in build["runs"]]
    runner.write_csv(out / "runs.csv", [asdict(r) for r in runs])
    (out / "runs.json").write_text(json.dumps([asdict(r) for r in runs], indent=1))
    invocation = {"counts": sorted({n for _, n, _ in points(args).values()})}
    invocation |= {"concurrency": args.concurrency, "cases": args.cases}
    before = json.loads((out / "meta.json").read_text()) if earlier else {}
    result["invocations"] = before.get("invocations", []) + [invocation]
    (out / "summary.md").write_text(summary(runs))
    plots(runs, out)
    mismatches = [r for r in runs if not r.agree]
    print(f"{len(runs)} runs, {len(mismatches)} counter/log mismatches", file=sys.stderr)
    return 1 if mismatches else 0


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"counts {QUICK_COUNTS}")
    p.add_argument("--counts", type=int, nargs="*", default=None)
    p.add_argument("--concurrency", type=int, nargs="*", default=[1, 10])
    p.add_argument("--cases", nargs="*", default=[c.name for c in CASES])
    p.add_argument("--append", action="store_true", help="add to the runs already in OUT/runs.json")


SPEC = runner.Spec(
    prog="bench-ab",
    doc=__doc__ or "",
    subdir="",
    filename="meta.json",
    reps=1,
    tools=("ab", "mn"),
    options=options,
    # Into results/ only with the paper's counts, every case and concurrency.
    committed=("quick", "counts", "concurrency", "cases"),
    variants=lambda a: list(points(a)),
    measure=measure,
    figures=figures,
    head=lambda a: {"ab": provenance.version_line(["ab", "-V"]) or "missing"},
    lab=contextlib.nullcontext,  # each run starts a Mininet lab of its own
    check=lambda a: "--build: the lab runs $P4LB_SIMPLE_SWITCH or PATH's" if a.build else None,
    write=write,
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
