"""How evenly load was spread: shares against weights and Jain's fairness index."""

from __future__ import annotations

from collections.abc import Sequence


def jain(values: Sequence[float]) -> float:
    """Jain's index (sum x)^2 / (n * sum x^2): 1.0 when all equal, 1/n when one takes all.

    An empty vector or all zeros counts as perfectly fair (nothing was unfair yet).
    """
    n = len(values)
    if n == 0:
        return 1.0
    square_sum = sum(x * x for x in values)
    if square_sum == 0:
        return 1.0
    return float(sum(values)) ** 2 / (n * square_sum)


def weighted_jain(values: Sequence[float], weights: Sequence[float]) -> float:
    """Jain's index of load per unit of weight; backends with weight 0 are left out."""
    if len(values) != len(weights):
        raise ValueError("values and weights differ in length")
    normalised = [x / w for x, w in zip(values, weights, strict=True) if w > 0]
    return jain(normalised)


def shares(values: Sequence[float]) -> list[float]:
    """Each value's fraction of the total (all 0 when the total is 0)."""
    total = float(sum(values))
    return [x / total if total else 0.0 for x in values]
