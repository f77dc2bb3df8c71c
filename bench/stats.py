"""Repetitions turned into figures: the median with min and max, the raw values kept, the
test that says whether two variants differ, and the percentiles the benches report (three
definitions, each kept so the committed figures keep their meaning)."""

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


def percentile_nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile (q in 0..100) by nearest rank (the experiments'); 0 for none."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def percentile_interpolated(values: Sequence[float], q: float) -> float:
    """The q-quantile (q in 0..1) by linear interpolation (numpy's; bench-qos'); nan for none."""
    if not values:
        return math.nan
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def percentile_index(values: Sequence[float], q: float) -> float:
    """The sorted values' element at index floor(q * n) (q in 0..1; bench-switch's p99)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


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
