"""bench-switch's zero-loss search (a loss must repeat) and the ab overhead's ratios (taken
within each repetition), with the switch and ab replaced by scripted results."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bench import ab_overhead, rate
from bench.ab_run import Run


def scripted_trial(monkeypatch: pytest.MonkeyPatch, limit: int, stray: set[int]) -> list[int]:
    """trial() loses everything above `limit` pps, and once (only the first replay) at each
    rate in `stray`; returns the list of rates replayed."""
    calls: list[int] = []

    def trial(pcap: Path, pps: int | None) -> tuple[float, float]:
        calls.append(pps or 0)
        if pps is None:
            return 0.0, 1000.0
        first_at_rate = calls.count(pps) == 1
        lost = pps > limit or (pps in stray and first_at_rate)
        return (0.5 if lost else 0.0), float(pps)

    monkeypatch.setattr(rate, "trial", trial)
    return calls


def test_one_stray_loss_does_not_end_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted_trial(monkeypatch, limit=20_000, stray={2000})
    zero_loss, _ = rate.zero_loss_rate(Path("x.pcap"))
    assert 16_000 <= zero_loss <= 20_000
    assert calls.count(2000) == 2  # replayed once more after its stray loss
    assert calls.count(1000) == 1  # a clean replay is not repeated


def test_a_repeated_loss_ends_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_trial(monkeypatch, limit=3000, stray=set())
    zero_loss, _ = rate.zero_loss_rate(Path("x.pcap"))
    assert 2000 <= zero_loss <= 3000


def fake_run(rps: float, complete: int = 100) -> Run:
    fields = {f.name: 0 for f in dataclasses.fields(Run)}
    fields.update(case="x", algorithm="x", weights="1:1:1", served="{}", connections="{}")
    fields.update(switch="{}", agree=True, rps=rps, complete=complete, n=100, concurrency=10)
    return Run(**fields)


def ab_args(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> argparse.Namespace:
    # measure() points the topology at the build's binary; undo that after the test.
    monkeypatch.setenv("P4LB_SIMPLE_SWITCH", "unused")
    return argparse.Namespace(reps=2, n=100, c=10, algorithms=["wrr"], order_seed=0, **kw)


def test_ab_ratios_pair_each_repetition_with_its_own_baseline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Repetition 1: baseline 1000, wrr 500; repetition 2: the machine is twice as fast.
    # Whatever the shuffled order within a repetition, each pairs with its own baseline.
    rps = {("baseline", 0): 1000, ("wrr", 0): 500, ("baseline", 1): 2000, ("wrr", 1): 1000}
    seen: list[str] = []

    def one_run(case: Any, n: int, c: int, raw: Path) -> Run:
        seen.append(case.name)
        return fake_run(rps[(case.name, (len(seen) - 1) // 2)])

    monkeypatch.setattr(ab_overhead, "one_run", one_run)
    out = ab_overhead.measure("/bin/switch", ab_args(monkeypatch), tmp_path)
    ratio = out["programs"]["wrr"]["vs_baseline_per_rep"]
    assert ratio["min"] == ratio["max"] == 0.5
    assert out["programs"]["baseline"]["rps"]["median"] == 1500
    assert out["programs"]["baseline"]["rps"]["values"] == [1000.0, 2000.0]
    assert [n for order in out["order"] for n in order] == seen


def test_ab_run_that_did_not_finish_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ab_overhead, "one_run", lambda case, n, c, raw: fake_run(900, 40))
    with pytest.raises(RuntimeError, match="40 of 100"):
        ab_overhead.measure("/bin/switch", ab_args(monkeypatch), tmp_path)
