"""The benches' two profiles, defined once.

full is the committed profile: every bench at its defaults, written into results/. quick is a
smoke run, one short repetition of each bench, written into the scratch tree
(build/results-quick/). Every bench takes `--profile quick|full`; quick stands for that
bench's arguments below, placed before the command line's own (an argument given after it
wins). `make bench-* QUICK=1` and `make results` (PROFILE=quick) pass it; the experiment
suite (bench.experiments.plan) keeps its matrix per profile under the same names."""

from __future__ import annotations

import argparse
import shlex

NAMES = ("quick", "full")
DEFAULT = "quick"  # make results' default: never the committed figures unless asked

# Each bench's quick profile, by its program name (its make target's).
QUICK = {
    "bench-switch": "--reps 1 --flows 300 --latency-rounds 50 --live 1000 --vips 1 --backends 3",
    "bench-ab": "--quick",
    "bench-ab-overhead": "--reps 1 -n 500",
    "bench-floor": "--reps 1 --no-timed",
    "bench-flood": "--reps 1 --syns 5000",
    "bench-controller": "--vips 10 --trials 5 --reps 1",
    "bench-tier": "--reps 1 --seconds 3 --overload-seconds 10",
    "bench-cookie": "--reps 1 --flows 20",
    "bench-choices": "--reps 1 --flows 20",
    "bench-restore-peer": "--reps 1",
    "bench-qos": "--reps 1 --duration 10 --label quick",
    "bench-peers": "--reps 1",
    "bench-cost": "--flows 50",
    "bench-dsr": "--reps 1 --requests-small 300 --requests-large 60 --peak-concurrency 20",
}


def arguments(bench: str, profile: str) -> list[str]:
    """The arguments `profile` stands for in `bench` (none for full: the defaults)."""
    if profile not in NAMES:
        raise ValueError(f"profile {profile!r}: want one of {', '.join(NAMES)}")
    return shlex.split(QUICK[bench]) if profile == "quick" else []


def add_argument(ap: argparse.ArgumentParser) -> None:
    """--profile, as every bench takes it (expand() has already put its arguments in)."""
    ap.add_argument(
        "--profile",
        choices=NAMES,
        default="full",
        help="quick: one short repetition into the scratch tree; full (default): the "
        "committed profile",
    )


def expand(bench: str, argv: list[str] | None) -> list[str]:
    """`argv` (the command line's when None) with the arguments of the profile it names
    put first, so that what the command line says besides wins."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    profile = "full"
    for i, a in enumerate(args):
        if a == "--profile" and i + 1 < len(args):
            profile = args[i + 1]
        elif a.startswith("--profile="):
            profile = a.partition("=")[2]
    if profile not in NAMES:
        raise SystemExit(f"{bench}: --profile {profile!r}: want one of {', '.join(NAMES)}")
    return arguments(bench, profile) + args
