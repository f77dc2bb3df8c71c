"""Where a bench writes: quick or partial runs never overwrite the committed
figures in results/.

A run writes into results/ only when it measures the committed profile (every measurement
argument at its default, at least the default repetitions) or when it is asked to
explicitly: --out, or P4LB_RESULTS_DIR (the Makefile's RESULTS_DIR) naming results/.
Anything else goes to the scratch tree build/results-quick/, laid out like results/, and
the bench says where its output went."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
SCRATCH = ROOT / "build" / "results-quick"


def is_committed_profile(
    ap: argparse.ArgumentParser, args: argparse.Namespace, keys: list[str], reps_key: str = "reps"
) -> bool:
    """Whether `args` is the committed profile: each of `keys` at the parser's default and
    `reps_key` (if any) at least its default."""
    for k in keys:
        if getattr(args, k) != ap.get_default(k):
            return False
    if reps_key and getattr(args, reps_key, None) is not None:
        default = ap.get_default(reps_key)
        if default is not None and getattr(args, reps_key) < default:
            return False
    return True


def results_root(committed: bool, env: dict[str, str] | None = None) -> Path:
    """The tree to write into: P4LB_RESULTS_DIR when set, else results/ for the committed
    profile and the scratch tree for anything less."""
    explicit = (env if env is not None else os.environ).get("P4LB_RESULTS_DIR", "")
    if explicit:
        p = Path(explicit)
        return p if p.is_absolute() else ROOT / p
    return RESULTS if committed else SCRATCH


def destination(
    sub: str, committed: bool, out: Path | None = None, env: dict[str, str] | None = None
) -> Path:
    """`out` when given (an explicit request), else `sub` under results_root()."""
    if out is not None:
        return out
    return results_root(committed, env) / sub if sub else results_root(committed, env)


def is_scratch(path: Path) -> bool:
    try:
        path.resolve().relative_to(RESULTS.resolve())
    except ValueError:
        return True
    return False


def said(path: Path) -> str:
    """The line a bench prints at the end: where its output went and what that means."""
    if is_scratch(path):
        return (
            f"output in {path} (not results/: a quick or partial run; the committed figures "
            "are untouched; RESULTS_DIR=results or --out to write there)"
        )
    return f"output in {path} (the committed figures: review and commit them)"
