"""bench.outdir: a quick or partial run goes to the scratch tree, the committed profile or
an explicit request to results/."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import outdir


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--flows", type=int, default=1000)
    return ap


def test_fewer_repetitions_or_other_arguments_are_not_the_committed_profile() -> None:
    ap = parser()
    assert outdir.is_committed_profile(ap, ap.parse_args([]), ["flows"])
    assert outdir.is_committed_profile(ap, ap.parse_args(["--reps", "7"]), ["flows"])
    assert not outdir.is_committed_profile(ap, ap.parse_args(["--reps", "1"]), ["flows"])
    assert not outdir.is_committed_profile(ap, ap.parse_args(["--flows", "300"]), ["flows"])


def test_quick_goes_to_scratch_committed_to_results_explicit_wins() -> None:
    assert outdir.destination("switch", False, env={}) == outdir.SCRATCH / "switch"
    assert outdir.destination("switch", True, env={}) == outdir.RESULTS / "switch"
    env = {"P4LB_RESULTS_DIR": "results"}
    assert outdir.destination("switch", False, env=env) == outdir.ROOT / "results" / "switch"
    env = {"P4LB_RESULTS_DIR": "/tmp/x"}
    assert outdir.destination("switch/ab.json", True, env=env) == Path("/tmp/x/switch/ab.json")
    assert outdir.destination("switch", False, Path("/o"), env={}) == Path("/o")


def test_the_closing_line_says_whether_the_committed_figures_were_touched() -> None:
    assert "untouched" in outdir.said(outdir.SCRATCH / "switch")
    assert outdir.is_scratch(Path("/tmp/elsewhere"))
    assert not outdir.is_scratch(outdir.RESULTS / "switch" / "switch.json")
    assert "commit them" in outdir.said(outdir.RESULTS / "switch")


def test_a_short_qos_run_leaves_the_committed_qos_figures_alone(monkeypatch) -> None:
    from bench import qos

    monkeypatch.delenv("P4LB_RESULTS_DIR", raising=False)
    assert qos.parse_args([]).out == outdir.RESULTS / "qos"
    assert qos.parse_args(["--reps", "1"]).out == outdir.SCRATCH / "qos"
    assert qos.parse_args(["--duration", "10"]).out == outdir.SCRATCH / "qos"
    assert qos.parse_args(["--variants", "codel"]).out == outdir.SCRATCH / "qos"
    assert qos.parse_args(["--reps", "1", "--out", "/tmp/q"]).out == Path("/tmp/q")
