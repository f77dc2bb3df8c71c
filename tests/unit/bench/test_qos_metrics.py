"""The queueing experiment's measures: RFC 3550 jitter, percentiles, loss, Jain and the
TIPHON grade bands (as bench/qos_metrics.py cites them)."""

from __future__ import annotations

import math

import pytest

from bench import qos_metrics as m
from bench.stats import percentile
from p4lb.stats.fairness import jain


def test_jitter_follows_rfc3550s_running_estimate() -> None:
    assert m.jitter_rfc3550([20.0] * 50) == 0.0
    # Alternating transit 10, 26 ms: |D| = 16 each time; J converges toward 16 from below.
    j = m.jitter_rfc3550([10.0, 26.0] * 200)
    assert 15.9 < j <= 16.0
    # One step: J = |D| / 16.
    assert m.jitter_rfc3550([5.0, 21.0]) == pytest.approx(1.0)


def test_percentile_loss_and_jain() -> None:
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(101)), 95) == 95
    assert math.isnan(percentile([], 50))
    assert m.loss(100, 97) == pytest.approx(0.03) and m.loss(0, 0) == 0.0
    assert jain([3.0, 3.0]) == 1.0 and jain([1.0, 0.0]) == 0.5


@pytest.mark.parametrize(
    ("grade", "value", "expected"),
    [
        (m.grade_delay, 149.9, "Very Good"),
        (m.grade_delay, 150, "Good"),
        (m.grade_delay, 449, "Fair"),
        (m.grade_delay, 451, "Poor"),
        (m.grade_jitter, 0.4, "Very Good"),
        (m.grade_jitter, 74, "Good"),
        (m.grade_jitter, 100, "Fair"),
        (m.grade_jitter, 130, "Poor"),
        (m.grade_loss, 0.02, "Very Good"),
        (m.grade_loss, 0.08, "Good"),
        (m.grade_loss, 0.2, "Fair"),
        (m.grade_loss, 0.25, "Poor"),
    ],
)
def test_tiphon_bands(grade: object, value: float, expected: str) -> None:
    assert grade(value) == expected  # type: ignore[operator]
