"""Runs the experiment matrix on real BMv2 and keeps every run's raw output.

For each capacity scenario one Mininet network (3 clients with many source addresses, 3
servers with that scenario's capacities, BMv2, `p4lb apply`); in it, for each variant (every
algorithm of the compiled program, by name), each load and each repetition, one run whose
files go to results/experiments/raw/<experiment>/<scenario>/<variant>/<load>/r<k>/:
the load generator's own output (ab text, -g/-e files; k6 summary JSON and per-request
CSV) and run.json (requests per server counted at the servers, connections counted by the
servers' kernels (SYNs that completed) and by the switch, switch drop counters, TCP
retransmissions, the switch's packet rate and CPU, the machine's load). Once every run of
the plan is recorded, raw/ becomes one archive, raw.tar.xz (bench.rawstore).

The plan is bench.experiments.matrix, a run bench.experiments.measure, the networks
bench.experiments.networks, meta.json bench.experiments.meta.
`python -m bench.experiments.report` turns these files into tables and plots."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench import outdir, profiles, rawstore, runner
from bench.experiments import load as loadgen
from bench.experiments import meta as record
from bench.experiments.matrix import fmt_s, jobs, pending, plan_text
from bench.experiments.networks import run_jobs
from bench.experiments.plan import PROFILES, Profile
from p4lb.pipeline.p4info import compiled_limits
from topology.bmv2 import switch_binary
from topology.net import ROOT

OUT = ROOT / "results" / "experiments"
EXPERIMENTS = ["ab", "clients", "k6"]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.experiments.run")
    p.add_argument("--profile", choices=profiles.NAMES, default=profiles.DEFAULT)
    p.add_argument("--only", nargs="*", default=EXPERIMENTS, help="experiments")
    p.add_argument("--scenarios", nargs="*", default=None, help="limit to these scenarios")
    p.add_argument("--variants", nargs="*", default=None, help="limit to these variants")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default: the profile's)")
    p.add_argument("--out", default=None, help=f"default: {OUT} (full profile) or scratch")
    runner.add_common(p)
    p.add_argument("--keep", action="store_true", help="keep raw runs of earlier invocations")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (its order seed; finished runs kept and skipped): "
        "the full profile in parts, each stopped with Ctrl-C (a begun run is discarded)",
    )
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--plan", action="store_true", help="print the runs and how long they take")
    return p.parse_args(argv)


def is_committed(a: argparse.Namespace, profile: Profile) -> bool:
    """Whether the run is the committed one (results/experiments): the full profile, every
    experiment, scenario and variant, at least its repetitions."""
    partial = bool(a.scenarios or a.variants or set(a.only) != set(EXPERIMENTS))
    return profile.name == "full" and not partial and (a.reps or profile.reps) >= profile.reps


def main(argv: list[str] | None = None) -> int:
    a = arguments(argv)
    profile, parts = PROFILES[a.profile], (a.scenarios, a.variants)
    if a.plan:
        algs = compiled_limits().algorithms  # every algorithm of the program (its P4Info)
        print(plan_text(profile, jobs(profile, algs, True, set(a.only), 0, *parts)))
        return 0
    if os.geteuid() != 0:
        print("bench.experiments: needs root (Mininet and BMv2 on veths)", file=sys.stderr)
        return 2
    committed = is_committed(a, profile)
    if a.reps:
        profile = dataclasses.replace(profile, reps=a.reps)
    root = outdir.destination("experiments", committed, Path(a.out) if a.out else None)
    facts = record.versions() | {"profile": profile.name}
    try:
        seed = record.order_seed(root, facts, a.resume, a.order_seed)
    except ValueError as e:
        print(f"bench.experiments: {e}", file=sys.stderr)
        return 2
    run = runner.start_run("bench-experiments", {"standard": switch_binary()}, argv)
    if run is None:
        return 2
    k6 = loadgen.k6_binary()
    if k6 is None and "k6" in a.only:
        print(
            "k6 is not installed: the k6 load shapes (Sudiatmika et al.'s) are skipped "
            "(go install go.k6.io/k6@v1.8.1 puts it in ~/go/bin)",
            flush=True,
        )
    algs = compiled_limits().algorithms
    todo = jobs(profile, algs, k6 is not None, set(a.only), seed, *parts)
    keep = a.keep or a.resume
    try:
        record.fresh_root(root, keep)
    except rawstore.RawError as e:
        print(f"bench.experiments: {e}", file=sys.stderr)
        return 2
    meta = record.opening(facts, algs, sys.argv[1:] if argv is None else argv, todo, seed)
    if keep and (earlier := rawstore.read_meta(root)):
        meta = record.chained(meta, earlier)
    if a.resume:
        before = len(todo)
        todo = pending(todo, root)
        print(f"resuming {root}: {before - len(todo)} of {before} runs done already", flush=True)
    # Written now as well, so a run stopped any way leaves its order seed for --resume and
    # its facts (the load sampled while it runs comes with run.finish at the end).
    meta["provenance"] = run.facts | {"load": {}, "repetitions": profile.reps}
    rawstore.write_meta(root, meta)
    print(f"{len(todo)} runs ({profile.name} profile, algorithms {', '.join(algs)})", flush=True)
    started = time.monotonic()
    failures: list[str] = []
    # Ctrl-C (or SIGTERM) stops the run under way, which is discarded; the finished ones
    # are kept, the meta says so and --resume continues with the next.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        run_jobs(todo, profile, root, k6, meta, failures)
    except KeyboardInterrupt:
        meta["interrupted"] = True
        print("interrupted: finished runs are kept; --resume continues", flush=True)
    meta |= {
        "finished": record.now(),
        "loadavg_at_end": list(os.getloadavg()),
        "elapsed_s": time.monotonic() - started,
        "failures": failures,
    }
    meta["provenance"] = run.finish(profile.reps, order="meta.json's `order`", order_seed=seed)
    rawstore.write_meta(root, meta)
    print(outdir.said(root))
    return finish(a, root, todo, meta, time.monotonic() - started)


def finish(
    a: argparse.Namespace, root: Path, todo: list[Any], meta: dict[str, Any], s: float
) -> int:
    """The last lines, the archive of a complete run's raw files and the report; the exit
    code (130 interrupted, 1 a run failed)."""
    left = pending(todo, root)
    print(f"done: {len(todo) - len(left)} runs, {len(meta['failures'])} failed, {fmt_s(s)}")
    if not left and not meta.get("interrupted") and (root / "raw").is_dir():
        # complete: one archive, not a file per run (--resume unpacks it again)
        rec = rawstore.pack(root)
        print(f"raw files: {rec['files']} -> {root / rawstore.ARCHIVE} ({rec['bytes']:,} bytes)")
    if not a.no_report:
        from bench.experiments import report

        report.main(["--out", str(root)])
    return 130 if meta.get("interrupted") else 1 if meta["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
