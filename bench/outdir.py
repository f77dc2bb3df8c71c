"""Where a bench writes: into results/ only for the committed profile or when asked (--out,
P4LB_RESULTS_DIR), else into the scratch tree build/results-quick/, so quick or partial runs
never overwrite the committed figures."""

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
    if any(getattr(args, k) != ap.get_default(k) for k in keys):
        return False
    reps, default = getattr(args, reps_key, None) if reps_key else None, ap.get_default(reps_key)
    return reps is None or default is None or reps >= default


def results_root(committed: bool, env: dict[str, str] | None = None) -> Path:
    """P4LB_RESULTS_DIR when set, else results/ (committed profile) or the scratch tree."""
    if explicit := (env if env is not None else os.environ).get("P4LB_RESULTS_DIR", ""):
        return ROOT / explicit  # an absolute path stays as it is
    return RESULTS if committed else SCRATCH


def destination(
    sub: str, committed: bool, out: Path | None = None, env: dict[str, str] | None = None
) -> Path:
    """`out` when given (an explicit request), else `sub` under results_root()."""
    return out if out is not None else results_root(committed, env) / sub


def is_scratch(path: Path) -> bool:
    return not path.resolve().is_relative_to(RESULTS.resolve())


def said(path: Path) -> str:
    """The line a bench prints at the end: where its output went and what that means."""
    if is_scratch(path):
        return (
            f"output in {path} (not results/: a quick or partial run; the committed figures "
            "are untouched; RESULTS_DIR=results or --out to write there)"
        )
    return f"output in {path} (the committed figures: review and commit them)"
