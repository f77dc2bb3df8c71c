"""bench-dsr's figures: DSR over NAT is taken per repetition (a pair measured side by
side), not as a ratio of medians, for the single switch and for the tier (both modes in
one tier); the peak rate is the highest of a run with no request failed, searched while
the rate grows."""

from __future__ import annotations

import argparse
from typing import Any

from bench import dsr, dsr_run
from topology import ab


def run(cpu: float, rps: float, peak: float | None = None) -> dict[str, float]:
    return {
        "cpu_ms_per_request": cpu,
        "busiest_ms_per_request": cpu / 2,
        "rps": rps,
        "failed": 0.0,
        "peak_rps": rps if peak is None else peak,
        "peak_concurrency": 10.0,
        "requests": 10.0,
    }


def tier(nat: dict[str, float], dsr_: dict[str, float]) -> dict[str, float]:
    return {f"nat {k}": v for k, v in nat.items()} | {f"dsr {k}": v for k, v in dsr_.items()}


def test_dsr_over_nat_is_paired_by_repetition() -> None:
    values = {
        "nat 1KB": [run(1.0, 100), run(4.0, 50)],
        "dsr 1KB": [run(0.5, 200), run(1.0, 200)],
        "nat 100KB": [run(10.0, 10), run(10.0, 10)],
        "dsr 100KB": [run(1.0, 80, 100), run(2.0, 60, 90)],
        "tier 1KB": [tier(run(2.0, 100), run(1.0, 150)), tier(run(4.0, 50), run(1.0, 100))],
        "tier 100KB": [tier(run(8.0, 10), run(2.0, 40)), tier(run(8.0, 10), run(4.0, 30))],
    }
    out = dsr.figures(argparse.Namespace(), values)
    assert out["dsr/nat 1KB"]["cpu_ms_per_request"]["values"] == [0.5, 0.25]
    # The ratio of the medians would be 0.75 / 2.5 = 0.3; the paired median is 0.375.
    assert out["dsr/nat 1KB"]["cpu_ms_per_request"]["median"] == 0.375
    assert out["dsr/nat 100KB"]["rps"]["values"] == [8.0, 6.0]
    assert out["dsr/nat 100KB"]["peak_rps"]["values"] == [10.0, 9.0]
    assert out["nat 1KB"]["cpu_ms_per_request"]["median"] == 2.5
    assert out["tier dsr/nat 1KB"]["cpu_ms_per_request"]["values"] == [0.5, 0.25]
    assert out["tier dsr/nat 100KB"]["peak_rps"]["values"] == [4.0, 3.0]
    assert dsr.variants(argparse.Namespace()) == [
        "nat 1KB",
        "nat 100KB",
        "dsr 1KB",
        "dsr 100KB",
        "tier 1KB",
        "tier 100KB",
    ]


def result(rps: float, failed: int = 0) -> ab.AbResult:
    return ab.AbResult(100, failed, 0, rps, 1.0, 1.0, 1.0, 1.0, 1.0, "")


def search(first: ab.AbResult, rates: dict[int, ab.AbResult]) -> tuple[dict[str, float], list[int]]:
    asked: list[int] = []

    def at(c: int) -> ab.AbResult:
        asked.append(c)
        return rates[c]

    return dsr_run.peak(first, 10, 80, at), asked


def test_the_peak_stops_where_the_rate_stops_growing() -> None:
    got, asked = search(result(100), {20: result(180), 40: result(185), 80: result(500)})
    assert got == {"peak_rps": 185.0, "peak_concurrency": 40.0}
    assert asked == [20, 40]  # 185 is not 5 % above 180: no run at 80


def test_the_peak_is_of_a_run_with_no_request_failed() -> None:
    rates: dict[int, Any] = {20: result(300, failed=1)}
    got, asked = search(result(100), rates)
    assert got == {"peak_rps": 100.0, "peak_concurrency": 10.0}
    assert asked == [20]
    got, _ = search(result(100, failed=2), {20: result(150), 40: result(140)})
    assert got == {"peak_rps": 150.0, "peak_concurrency": 20.0}


def test_the_search_is_bounded_by_the_peak_concurrency() -> None:
    got, asked = search(result(100), {20: result(200), 40: result(400), 80: result(800)})
    assert asked == [20, 40, 80]
    assert got == {"peak_rps": 800.0, "peak_concurrency": 80.0}
