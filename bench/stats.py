"""Repetitions turned into figures: the median with min and max, the raw values kept, and
the test that says whether two variants differ (issue 33). Pure functions."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Any

# The stated test for "differs": the two variants' min-max ranges over their repetitions
# do not overlap. With n >= 5 repetitions each, two variants from one distribution have
# non-overlapping ranges with probability 2 / C(2n, n) <= 0.8 % (n = 5).
DIFFERS_TEST = "min-max ranges over the repetitions do not overlap"
MIN_REPS_TO_COMPARE = 5


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max, n, and every repetition's value in the order it was measured."""
    if not values:
        raise ValueError("summary of no values")
    vs = [float(v) for v in values]
    return {
        "median": statistics.median(vs),
        "min": min(vs),
        "max": max(vs),
        "n": len(vs),
        "values": vs,
    }


def ranges_overlap(a: Sequence[float], b: Sequence[float]) -> bool:
    return not (max(a) < min(b) or max(b) < min(a))


def differs(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Whether a and b differ by the stated test; with fewer than MIN_REPS_TO_COMPARE
    repetitions on either side the answer is "too few repetitions", never a yes."""
    if min(len(a), len(b)) < MIN_REPS_TO_COMPARE:
        verdict = "too few repetitions"
    else:
        verdict = "no" if ranges_overlap(a, b) else "yes"
    return {
        "differs": verdict,
        "test": DIFFERS_TEST,
        "n": [len(a), len(b)],
        "median_ratio": statistics.median(a) / statistics.median(b)
        if statistics.median(b)
        else None,
    }


def bootstrap_interval(
    a: Sequence[float], b: Sequence[float], rounds: int = 2000, level: float = 0.95, seed: int = 33
) -> tuple[float, float]:
    """A percentile bootstrap interval for median(a) - median(b), resampling each side
    with replacement (seeded: the same data give the same interval)."""
    rng = random.Random(seed)
    diffs = sorted(
        statistics.median(rng.choices(a, k=len(a))) - statistics.median(rng.choices(b, k=len(b)))
        for _ in range(rounds)
    )
    lo = diffs[int((1 - level) / 2 * rounds)]
    hi = diffs[min(rounds - 1, int((1 + level) / 2 * rounds))]
    return lo, hi
