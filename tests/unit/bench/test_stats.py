"""bench.stats: the raw values kept beside the summary, and the stated test for 'differs'."""

from __future__ import annotations

import math

import pytest

from bench import stats


def test_summary_keeps_every_value_in_order() -> None:
    s = stats.summary([3, 1, 2])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)
    assert s["values"] == [3.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        stats.summary([])


def test_differs_by_non_overlapping_ranges_with_five_repetitions() -> None:
    a = [10, 11, 12, 11, 10]
    assert stats.differs(a, [13, 14, 15, 13, 14])["differs"] == "yes"
    assert stats.differs(a, [12, 14, 15, 13, 14])["differs"] == "no"  # 12 touches a's max
    assert stats.differs(a, [20, 21, 22])["differs"] == "too few repetitions"
    assert stats.differs(a, [20, 20, 20, 20, 20])["median_ratio"] == pytest.approx(11 / 20)


def test_the_percentile_is_the_nearest_rank() -> None:
    xs = [float(x) for x in range(100, 0, -1)]  # 1..100 in reverse: q * n whole at q = 99
    assert stats.percentile(xs, 99) == 99.0  # the 99th smallest, not one rank above
    assert stats.percentile(xs, 99.5) == 100.0  # ceil(99.5) = 100th
    assert (stats.percentile(xs, 0), stats.percentile(xs, 100)) == (1.0, 100.0)
    assert stats.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0  # a value, not interpolated
    assert stats.percentile([5.0], 99) == 5.0 and math.isnan(stats.percentile([], 50))


def test_a_ratio_per_repetition_pairs_the_repetitions_and_skips_a_zero_denominator() -> None:
    r = stats.per_rep([2.0, 9.0, 4.0, 5.0], [1.0, 0.0, 8.0, 2.0])
    assert r["values"] == [2.0, 0.5, 2.5]
    assert r["median"] == 2.0
    with pytest.raises(ValueError):
        stats.per_rep([1.0], [1.0, 2.0])
