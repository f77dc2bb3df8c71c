"""Repetitions turned into figures: the median with min and max, the raw values kept, the
test that says whether two variants differ, and the percentile every bench reports (one
definition: nearest rank)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

# Two variants from one distribution, n >= 5 repetitions each, have non-overlapping min-max
# ranges with probability 2 / C(2n, n) <= 0.8 %.
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


def per_rep(num: Sequence[float], den: Sequence[float]) -> dict[str, Any]:
    """summary() of num[i] / den[i], repetition by repetition (a zero denominator left out)."""
    return summary([n / d for n, d in zip(num, den, strict=True) if d])


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (q in 0..100) by nearest rank: the smallest value with at least
    q % of the values at or below it (the ceil(q n / 100)-th smallest); nan for none."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def ranges_overlap(a: Sequence[float], b: Sequence[float]) -> bool:
    return not (max(a) < min(b) or max(b) < min(a))


def differs(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Whether a and b differ by the stated test ("too few repetitions" below the minimum)."""
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
