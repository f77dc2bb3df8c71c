from __future__ import annotations

import pytest

from p4lb.stats.fairness import jain, shares, weighted_jain


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([10, 10, 10], 1.0),
        ([1, 0, 0], 1 / 3),
        ([1, 2, 3], 36 / 42),
        ([5, 5, 0, 0], 0.5),
        ([], 1.0),
        ([0, 0], 1.0),
    ],
)
def test_jain_on_known_vectors(values: list[float], expected: float) -> None:
    assert jain(values) == pytest.approx(expected)


def test_weighted_jain_is_one_when_load_follows_weights() -> None:
    assert weighted_jain([100, 200, 200], [1, 2, 2]) == pytest.approx(1.0)
    assert jain([100, 200, 200]) < 0.95


def test_weighted_jain_leaves_out_drained_backends() -> None:
    assert weighted_jain([50, 50, 7], [1, 1, 0]) == pytest.approx(1.0)


def test_shares() -> None:
    assert shares([1, 3]) == [0.25, 0.75]
    assert shares([0, 0]) == [0.0, 0.0]
