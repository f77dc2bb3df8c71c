"""bench.runner: every variant once per repetition in the recorded order, the figures from
the values measured, and a stopped run resumed without measuring again what it kept."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bench import provenance, runner


class Stop(Exception):
    pass


def spec(measured: list[tuple[str, str]], stop_after: int | None = None) -> runner.Spec:
    def measure(t: runner.Trial, name: str) -> list[float]:
        if stop_after is not None and len(measured) == stop_after:
            raise Stop
        measured.append((t.build, name))
        return [float(len(name)), float(len(measured))]

    def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
        return {name: [v[0] for v in vs] for name, vs in values.items()}

    return runner.Spec(
        prog="bench-choices",
        doc="a test bench\n",
        subdir="algorithms",
        filename="t.json",
        reps=3,
        tools=(),
        options=lambda ap: ap.add_argument("--flows", type=int, default=7),
        committed=("flows",),
        variants=lambda args: ["a", "bb", "ccc"],
        measure=measure,
        figures=figures,
        head=lambda args: {"flows": args.flows},
        lab=contextlib.nullcontext,
    )


@pytest.fixture
def no_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.os, "geteuid", lambda: 0)
    run = provenance.Run("t", [], {"bench": "t"}, 1.0)
    monkeypatch.setattr(runner, "start_run", lambda *a: run)


def test_each_repetition_runs_every_variant_once_in_the_recorded_order(
    tmp_path: Path, no_machine: None
) -> None:
    measured: list[tuple[str, str]] = []
    argv = ["--build", f"x={tmp_path}", "--order-seed", "4", "--out", str(tmp_path)]
    assert runner.main(spec(measured), argv) == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    orders = doc["order"]["x"]
    assert [sorted(o) for o in orders] == [["a", "bb", "ccc"]] * 3
    assert [n for _, n in measured] == [n for o in orders for n in o]
    assert orders == provenance.interleaved(["a", "bb", "ccc"], 3, 4, "x")
    assert doc["builds"]["x"] == {"a": [1.0] * 3, "bb": [2.0] * 3, "ccc": [3.0] * 3}
    assert (doc["flows"], doc["reps"], doc["provenance"]["order_seed"]) == (7, 3, 4)
    assert not (tmp_path / "t.json.partial").exists()


def test_a_stopped_run_resumes_where_it_stopped(tmp_path: Path, no_machine: None) -> None:
    argv = ["--build", f"x={tmp_path}", "--order-seed", "9", "--out", str(tmp_path)]
    first: list[tuple[str, str]] = []
    with pytest.raises(Stop):
        runner.main(spec(first, stop_after=4), argv)
    assert len(first) == 4 and (tmp_path / "t.json.partial").exists()
    rest: list[tuple[str, str]] = []
    # Another seed on the command line: the stopped run's is taken over.
    again = [*argv[:2], "--order-seed", "1", *argv[4:], "--resume"]
    assert runner.main(spec(rest), again) == 0
    assert len(rest) == 9 - 4
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["provenance"]["order_seed"] == 9
    kept = [v for vs in doc["builds"]["x"].values() for v in vs]
    assert len(kept) == 9
    # Other arguments than the stopped run's: nothing is kept.
    with pytest.raises(Stop):
        runner.main(spec([], stop_after=2), argv)
    fresh: list[tuple[str, str]] = []
    assert runner.main(spec(fresh), [*argv, "--flows", "8", "--resume"]) == 0
    assert len(fresh) == 9


def test_a_csv_keeps_the_columns_asked_for_in_their_order(tmp_path: Path) -> None:
    rows = [{"a": 1, "b": "x", "c": [1]}, {"a": 2, "b": "y", "c": [2]}]
    runner.write_csv(tmp_path / "all.csv", rows)
    runner.write_csv(tmp_path / "some.csv", rows, ["b", "a"])
    assert (tmp_path / "all.csv").read_text().splitlines() == ["a,b,c", "1,x,[1]", "2,y,[2]"]
    assert (tmp_path / "some.csv").read_text().splitlines() == ["b,a", "x,1", "y,2"]


def test_a_bench_without_a_quick_profile_takes_no_profile_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("P4LB_RESULTS_DIR", raising=False)

    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--n", type=int, default=3)

    args = runner.command_line("bench-none", "doc", "sub", [], options, ["n"])
    assert not hasattr(args, "profile")
    assert args.out == runner.outdir.RESULTS / "sub"
    assert runner.command_line("bench-none", "d", "sub", ["--n", "1"], options, ["n"]).out == (
        runner.outdir.SCRATCH / "sub"
    )
    with pytest.raises(SystemExit):
        runner.command_line("bench-none", "doc", "sub", ["--profile", "quick"], options, ["n"])


def test_each_measurement_knows_its_repetition(tmp_path: Path, no_machine: None) -> None:
    seen: list[tuple[int, str]] = []
    base = spec([])

    def measure(t: runner.Trial, name: str) -> list[int]:
        seen.append((t.rep, name))
        return [t.rep]

    argv = ["--build", f"x={tmp_path}", "--order-seed", "2", "--out", str(tmp_path)]
    assert runner.main(dataclasses.replace(base, measure=measure), argv) == 0
    orders = json.loads((tmp_path / "t.json").read_text())["order"]["x"]
    assert seen == [(rep, n) for rep, order in enumerate(orders) for n in order]


def test_a_bench_of_another_subject_measures_it_and_takes_no_build(
    tmp_path: Path, no_machine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    binaries: list[str] = []

    def measure(t: runner.Trial, name: str) -> list[int]:
        binaries.append(t.binary)
        return [1]

    subject = dataclasses.replace(
        spec([]), measure=measure, subject=lambda: {"haproxy": "/usr/sbin/haproxy"}
    )
    assert runner.main(subject, ["--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    assert list(doc["builds"]) == ["haproxy"] and set(binaries) == {"/usr/sbin/haproxy"}
    assert len(binaries) == 9
    with pytest.raises(SystemExit):
        runner.main(subject, ["--build", f"x={tmp_path}", "--out", str(tmp_path)])
    lacking = dataclasses.replace(subject, tools=("no-such-tool-p4lb",))
    assert runner.main(lacking, ["--out", str(tmp_path)]) == 2
    assert "bench-choices: needs no-such-tool-p4lb" in capsys.readouterr().err
