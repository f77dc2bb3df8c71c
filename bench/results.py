"""`make results`: every figure of results/ rebuilt on this tree, in order, then the tables,
plots and README regions generated from the files written.

    python -m bench.results [--profile quick|full] [--results-dir DIR] [--build NAME=PATH ...]
                            [--dry-run]

quick (the default) is a smoke profile written into the scratch tree build/results-quick/;
full is the committed profile, written into results/. A step whose tools or peer program
(PEER_P4) are missing is skipped, named, and the run says it is incomplete. Run as root,
alone on the machine, e.g. `flock /tmp/p4lb-bmv2.lock make results`."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import outdir, profiles, runner

SPEED = ("speed", "fast")  # the speed build's names (results/ has used both)


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    switch: bool = True  # starts BMv2 (needs root and a quiet machine)
    needs: tuple[str, ...] = ()  # executables (or absolute paths) it cannot run without
    skip: str = ""  # why it cannot run at all (said, not run)


TIER_TOOLS = ("/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "gobgpd", "gobgp", "vtysh", "nft")
CALLGRIND = ("valgrind", "callgrind_control", "callgrind_annotate", "tcpreplay")


def plan(
    profile: str, results_dir: Path, builds: dict[str, str], python: str, peer: str | None = None
) -> list[Step]:
    """The commands `make results` runs, in order, for `profile`: measurements first, then
    the generators that read only their files. `peer`: the course balancer's P4 source for
    the cost comparison (without it those steps are skipped)."""
    if profile not in profiles.NAMES:
        raise ValueError(f"profile {profile!r}: want one of {', '.join(profiles.NAMES)}")
    b = [a for name, path in builds.items() for a in ("--build", f"{name}={path}")]

    def bench(name: str, module: str, prog: str, *args: str, **kw: Any) -> Step:
        argv = [python, "-m", module, *args, *profiles.arguments(prog, profile)]
        return Step(name, argv, **kw)

    def generator(name: str, *args: str) -> Step:  # reads the files written, starts no switch
        return Step(name, [python, *args], switch=False)

    experiments = str(results_dir / "experiments")

    # Each path's cost, as committed: the speed build, three algorithms (not all: hours more).
    paths = ["--path-instructions", "--path-builds", *[n for n in builds if n in SPEED]]
    paths += ["--path-algorithms", "iphash", "wrr", "leastconn"]
    steps = [
        Step(
            "experiments",
            [python, "-m", "bench.experiments.run", "--profile", profile, "--no-report"],
        ),
        bench("switch", "bench.switch", "bench-switch", *b, *(paths if profile == "full" else [])),
        bench("ab", "bench.ab_overhead", "bench-ab-overhead", *b),
        bench("floor", "bench.floor", "bench-floor", *b),
    ]
    steps.append(bench("flood", "bench.flood", "bench-flood", *b))
    no_peer = "" if peer else "no PEER_P4 given (the course balancer's l4_loadbalancer.p4)"
    peer_args = ["--peer", peer] if peer else []
    qos_out = ["--out", str(results_dir / "qos")]
    steps += [
        bench("controller", "bench.controller", "bench-controller"),
        bench("tier", "bench.tier", "bench-tier", needs=TIER_TOOLS),
        bench("cookie", "bench.cookie", "bench-cookie", *b, needs=CALLGRIND[:2]),
        bench("choices", "bench.choices", "bench-choices", *b, needs=CALLGRIND[:2]),
        bench("restore peer", "bench.restore_peer", "bench-restore-peer", needs=("haproxy",)),
        bench("qos", "bench.qos", "bench-qos", *qos_out),
        bench("peers", "bench.peers", "bench-peers", *b, *peer_args, needs=CALLGRIND, skip=no_peer),
        bench(
            "cost breakdown",
            "bench.peers",
            "bench-cost",
            "--breakdown",
            *b,
            *peer_args,
            needs=CALLGRIND,
            skip=no_peer,
        ),
        generator("algorithms", "-m", "bench.algorithms"),
        generator("switch tables", "-m", "bench.report", "--dir", str(results_dir / "switch")),
        generator("experiments tables", "-m", "bench.experiments.report", "--out", experiments),
        generator("README regions", "-m", "bench.readme_figures", "--results", str(results_dir)),
    ]
    return steps


SPEED_PREFIXES = ("/opt/p4lb/bmv2-speed", "/usr/local/bmv2-speed", "/usr/local/bmv2-fast")


def default_builds(env: dict[str, str] | None = None) -> dict[str, str]:
    """The standard simple_switch_grpc on PATH and the speed build, as the Makefile finds them."""
    env = env if env is not None else dict(os.environ)
    out = {}
    if std := shutil.which("simple_switch_grpc", path=env.get("PATH")):
        out["standard"] = std
    prefixes = filter(None, [env.get("P4LB_SPEED_PREFIX", ""), *SPEED_PREFIXES])
    cands = (Path(prefix) / "bin" / "simple_switch_grpc" for prefix in prefixes)
    if speed := next((c for c in cands if c.is_file()), None):
        out["speed"] = str(speed)
    return out


def default_dir(profile: str, explicit: str | None) -> Path:
    """--results-dir (relative to the repository), else results/ (full) or scratch (quick)."""
    return outdir.results_root(profile == "full", {"P4LB_RESULTS_DIR": explicit or ""})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make results", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=profiles.DEFAULT, help="quick (default) or full")
    ap.add_argument("--results-dir", default=None, help="default: scratch (quick), results/ (full)")
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--peer", default=os.environ.get("PEER_P4") or None, help="PEER_P4")
    ap.add_argument("--from", dest="start", default=None, help="resume at this step's name")
    ap.add_argument("--dry-run", action="store_true", help="print the plan only")
    a = ap.parse_args(argv)
    if a.profile not in profiles.NAMES:
        print(f"make results: PROFILE={a.profile!r}: want quick or full", file=sys.stderr)
        return 2
    builds = runner.parse_builds("make results", a.build) or default_builds()
    root = default_dir(a.profile, a.results_dir)
    if a.peer and not Path(a.peer).is_file():
        print(f"make results: PEER_P4={a.peer}: no such file", file=sys.stderr)
        return 2
    steps = plan(a.profile, root, builds, sys.executable, a.peer)
    names = [s.name for s in steps]
    if a.start is not None:
        if a.start not in names:
            print(
                f"make results: FROM={a.start!r}: no such step ({', '.join(names)})",
                file=sys.stderr,
            )
            return 2
        steps = [
            replace(s, skip="before FROM (done earlier)") for s in steps[: names.index(a.start)]
        ] + steps[names.index(a.start) :]
    for s in steps:
        if not s.skip and (lacking := runner.missing(s.needs)):
            steps[steps.index(s)] = replace(s, skip="missing " + ", ".join(lacking))
    env = os.environ | {"P4LB_RESULTS_DIR": str(root)}
    print(f"make results ({a.profile}): {len(steps)} steps into {root}")
    for i, s in enumerate(steps, 1):
        said = f"skipped: {s.skip}" if s.skip else f"P4LB_RESULTS_DIR={root} {shlex.join(s.argv)}"
        print(f"  {i:2}. {s.name}: {said}")
    if a.dry_run:
        return 0
    if os.geteuid() != 0 and any(s.switch for s in steps):
        print("make results: the benches start BMv2 and Mininet: run as root", file=sys.stderr)
        return 2
    started = time.monotonic()
    for i, s in enumerate(steps, 1):
        if s.skip:
            print(f"[{i}/{len(steps)}] {s.name}: skipped ({s.skip})", flush=True)
            continue
        t0 = time.monotonic()
        print(f"[{i}/{len(steps)}] {s.name}", flush=True)
        r = subprocess.run(s.argv, cwd=outdir.ROOT, env=env)
        print(f"[{i}/{len(steps)}] {s.name}: exit {r.returncode}, {time.monotonic() - t0:.0f} s")
        if r.returncode != 0:
            print(
                f"make results: {s.name} failed (exit {r.returncode}); what it wrote so far "
                f"is in {root}",
                file=sys.stderr,
            )
            return 1
    print(f"make results: done in {(time.monotonic() - started) / 60:.0f} min; {outdir.said(root)}")
    skipped = [s for s in steps if s.skip and not s.skip.startswith("before FROM")]
    if skipped:
        print(
            "make results: incomplete: " + "; ".join(f"{s.name} ({s.skip})" for s in skipped),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
