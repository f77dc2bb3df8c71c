"""`make results` runs its steps in order with P4LB_RESULTS_DIR set, and stops at the first
that fails, saying where the output so far is (steps replaced by small Python commands)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import results


def test_steps_run_in_order_and_the_first_failure_stops_the_rest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"

    def step(name: str, code: int) -> results.Step:
        body = (
            f"import os; open({str(log)!r}, 'a').write("
            f"{name!r} + ' ' + os.environ['P4LB_RESULTS_DIR'] + '\\n'); raise SystemExit({code})"
        )
        return results.Step(name, [sys.executable, "-c", body], switch=False)

    steps = [step("first", 0), step("second", 3), step("third", 0)]
    monkeypatch.setattr(results, "plan", lambda *a: steps)
    assert results.main(["--results-dir", str(tmp_path / "out")]) == 1
    assert log.read_text().splitlines() == [
        f"first {tmp_path / 'out'}",
        f"second {tmp_path / 'out'}",
    ]
    assert "second failed (exit 3)" in capsys.readouterr().err


def test_dry_run_prints_the_plan_and_runs_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    steps = [results.Step("x", [sys.executable, "-c", f"open({str(ran)!r}, 'w')"], False)]
    monkeypatch.setattr(results, "plan", lambda *a: steps)
    assert results.main(["--dry-run"]) == 0
    assert not ran.exists() and "1. x:" in capsys.readouterr().out


def test_a_step_whose_tools_are_missing_is_skipped_and_the_run_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    steps = [
        results.Step(
            "tier",
            [sys.executable, "-c", "raise SystemExit(9)"],
            False,
            needs=("/nonexistent/bgpd",),
        ),
        results.Step("x", [sys.executable, "-c", f"open({str(ran)!r}, 'w')"], False),
    ]
    monkeypatch.setattr(results, "plan", lambda *a: steps)
    assert results.main(["--results-dir", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert ran.exists()  # the rest ran
    assert "tier: skipped (missing /nonexistent/bgpd)" in out
    assert "incomplete: tier (missing /nonexistent/bgpd)" in err


def test_from_resumes_at_a_step_and_a_wrong_name_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"

    def step(name: str) -> results.Step:
        body = f"open({str(log)!r}, 'a').write({name!r} + '\\n')"
        return results.Step(name, [sys.executable, "-c", body], False)

    monkeypatch.setattr(results, "plan", lambda *a: [step("a"), step("b"), step("c")])
    assert results.main(["--results-dir", str(tmp_path), "--from", "b"]) == 0
    assert log.read_text().splitlines() == ["b", "c"]
    assert "incomplete" not in capsys.readouterr().err  # earlier steps were done before
    assert results.main(["--results-dir", str(tmp_path), "--from", "z"]) == 2
    assert "FROM='z': no such step (a, b, c)" in capsys.readouterr().err
