from __future__ import annotations

from collections import Counter

import pytest

from p4lb.pipeline.schedules import smooth_wrr

CASES = [
    [1, 1, 1],
    [1, 2, 2],
    [5, 1, 1],
    [3, 7, 0, 2],
    [1000, 999],
    [4, 4, 8],
    [1],
    [0, 3],
]


@pytest.mark.parametrize("weights", CASES)
def test_each_cycle_gives_every_backend_exactly_its_reduced_weight(weights: list[int]) -> None:
    cycle = smooth_wrr(weights)
    counts = Counter(cycle)
    total = len(cycle)
    for i, w in enumerate(weights):
        assert counts.get(i, 0) * sum(weights) == w * total


@pytest.mark.parametrize("weights", CASES)
def test_every_prefix_stays_within_one_of_the_ideal_share(weights: list[int]) -> None:
    """Smooth WRR interleaves: after k slots backend i has within 1 of k*w_i/W."""
    cycle = smooth_wrr(weights)
    total_w = sum(weights)
    seen: Counter[int] = Counter()
    for k, b in enumerate(cycle, start=1):
        seen[b] += 1
        for i, w in enumerate(weights):
            assert abs(seen[i] - k * w / total_w) < 1


def test_weights_are_reduced_by_their_gcd() -> None:
    assert smooth_wrr([2, 2, 4]) == smooth_wrr([1, 1, 2])
    assert len(smooth_wrr([10, 20, 20])) == 5


def test_equal_weights_are_plain_round_robin() -> None:
    assert smooth_wrr([1, 1, 1]) == [0, 1, 2]


def test_drained_backends_never_appear_and_all_drained_is_empty() -> None:
    assert 1 not in smooth_wrr([3, 0, 2])
    assert smooth_wrr([0, 0]) == []


def test_negative_weight_is_rejected() -> None:
    with pytest.raises(ValueError):
        smooth_wrr([1, -1])
