"""bench-dsr's figures: DSR over NAT is taken per repetition (a pair measured side by
side), not as a ratio of medians."""

from __future__ import annotations

import argparse

from bench import dsr


def run(cpu: float, rps: float) -> dict[str, float]:
    return {
        "cpu_ms_per_request": cpu,
        "busiest_ms_per_request": cpu / 2,
        "rps": rps,
        "failed": 0.0,
        "requests": 10.0,
    }


def test_dsr_over_nat_is_paired_by_repetition() -> None:
    values = {
        "nat 1KB": [run(1.0, 100), run(4.0, 50)],
        "dsr 1KB": [run(0.5, 200), run(1.0, 200)],
        "nat 100KB": [run(10.0, 10), run(10.0, 10)],
        "dsr 100KB": [run(1.0, 80), run(2.0, 60)],
    }
    out = dsr.figures(argparse.Namespace(), values)
    assert out["dsr/nat 1KB"]["cpu_ms_per_request"]["values"] == [0.5, 0.25]
    # The ratio of the medians would be 0.75 / 2.5 = 0.3; the paired median is 0.375.
    assert out["dsr/nat 1KB"]["cpu_ms_per_request"]["median"] == 0.375
    assert out["dsr/nat 100KB"]["rps"]["values"] == [8.0, 6.0]
    assert out["nat 1KB"]["cpu_ms_per_request"]["median"] == 2.5
    assert dsr.variants(argparse.Namespace()) == ["nat 1KB", "nat 100KB", "dsr 1KB", "dsr 100KB"]
