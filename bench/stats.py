"""Repetitions turned into figures: the median with min and max, the raw values kept, the
test that says whether two variants differ, and the percentiles the benches report. Pure
functions.

Three percentile definitions are in use, each kept so the committed figures keep their
meaning; each has its own name and a figure names the one it uses:
  - percentile_nearest_rank: the smallest value with at least q % of the values at or below
    it (the experiments' latency percentiles, read from ab's and k6's per-request data);
  - percentile_interpolated: linear interpolation between the two closest ranks (numpy's
    default; the queueing experiment's VoIP delay);
  - percentile_index: the sorted values' element at index floor(q * n), one rank above the
    nearest rank when q * n is whole (bench-switch's latency p99)."""

from __future__ import annotations

import math
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


def per_rep(num: Sequence[float], den: Sequence[float]) -> dict[str, Any]:
    """summary() of num[i] / den[i], repetition by repetition (a zero denominator left out):
    a ratio of two variants measured side by side."""
    return summary([n / d for n, d in zip(num, den, strict=True) if d])


def percentile_nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile (q in 0..100) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def percentile_interpolated(values: Sequence[float], q: float) -> float:
    """The q-quantile (q in 0..1) by linear interpolation; nan for no values."""
    if not values:
        return math.nan
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def percentile_index(values: Sequence[float], q: float) -> float:
    """The sorted values' element at index floor(q * n) (q in 0..1), the last for q = 1."""
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


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
