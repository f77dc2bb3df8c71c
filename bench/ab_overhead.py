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
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import outdir, profiles, provenance
from bench.apachebench import Case, one_run
from bench.runner import (
    add_common,
    builds_to_measure,
    machine,
    order_seed,
    progress,
    start_run,
)
from bench.stats import summary

OUT = Path(__file__).resolve().parents[1] / "results" / "switch" / "ab.json"
CASES = {
    "baseline": Case("baseline", "baseline", [1, 1, 1]),
    "iphash": Case("iphash", "iphash", [1, 1, 1]),
    "wrr": Case("wrr", "wrr", [1, 1, 1]),
    "leastconn": Case("leastconn", "leastconn", [1, 1, 1]),
}


def measure(binary: str, args: argparse.Namespace, raw: Path) -> dict[str, Any]:
    os.environ["P4LB_SIMPLE_SWITCH"] = binary  # topology.bmv2 starts this one
    names = ["baseline", *args.algorithms]
    rps: dict[str, list[float]] = {n: [] for n in names}
    failed: dict[str, int] = dict.fromkeys(names, 0)
    orders = provenance.interleaved(names, args.reps, args.order_seed, binary)
    for rep, order in enumerate(orders):
        for name in order:
            progress(f"ab {Path(binary).parent} rep {rep + 1}/{args.reps} {name}")
            run = one_run(CASES[name], args.n, args.c, raw)
            if run.complete + run.failed < args.n:
                raise RuntimeError(f"ab {name}: {run.complete} of {args.n} requests completed")
            rps[name].append(run.rps)
            failed[name] += run.failed + run.non_2xx
    out: dict[str, Any] = {"binary": binary, "order": orders, "programs": {}}
    for name in names:
        out["programs"][name] = {"rps": summary(rps[name]), "failed": failed[name]}
        if name != "baseline":
            out["programs"][name]["vs_baseline_per_rep"] = summary(
                [r / b for r, b in zip(rps[name], rps["baseline"], strict=True) if b]
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-ab-overhead", description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    # A run of 5,000 requests lasts under two seconds on the speed build, and its ratio to
    # the baseline varied 0.65-0.99 between repetitions; 30,000 in 5 repetitions hold
    # each median to a few percent.
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-n", type=int, default=30_000, help="requests per ab run")
    ap.add_argument("-c", type=int, default=10, help="ab concurrency")
    ap.add_argument("--algorithms", nargs="+", default=["iphash", "wrr", "leastconn"])
    add_common(ap)
    ap.add_argument("--out", type=Path, default=None, help=f"default: {OUT} or the scratch tree")
    profiles.add_argument(ap)
    args = ap.parse_args(profiles.expand("bench-ab-overhead", argv))
    committed = outdir.is_committed_profile(ap, args, ["n", "c", "algorithms"])
    args.out = outdir.destination("switch/ab.json", committed, args.out)
    unknown = [a for a in args.algorithms if a not in CASES]
    if unknown:
        raise SystemExit(f"bench-ab-overhead: unknown algorithm {unknown[0]!r}")
    builds = builds_to_measure("bench-ab-overhead", args.build, ["ab", "mn"])
    if builds is None:
        return 2
    order_seed(args)
    run = start_run("bench-ab-overhead", builds, argv)
    if run is None:
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    raw = Path(tempfile.mkdtemp(prefix="p4lb-ab-overhead-"))
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "method": __doc__,
        "reps": args.reps,
        "n": args.n,
        "c": args.c,
        "builds": {},
    }
    for build, binary in builds.items():
        result["builds"][build] = measure(binary, args, raw)
        args.out.write_text(json.dumps(result, indent=2) + "\n")  # what is done so far
    shutil.rmtree(raw, ignore_errors=True)  # ab's own files; a failed run keeps them
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    result["provenance"] = run.finish(
        args.reps,
        order="each build's `order`: the variants of each repetition, in the order they ran",
        order_seed=args.order_seed,
    )
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    ratios = {
        b: {
            n: p["vs_baseline_per_rep"]["median"]
            for n, p in r["programs"].items()
            if n != "baseline"
        }
        for b, r in result["builds"].items()
    }
    progress(f"wrote {args.out}: median ratios {ratios}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
