"""The queueing experiment's measures, pure: percentiles, RFC 3550 interarrival jitter,
loss, Jain's index, and the ETSI TIPHON TR 101 329 grades.

TIPHON thresholds as commonly cited (the standard's QoS classes, as the Indonesian network
literature seed 004 comes from tabulates them; seed 004 prints only the grades):
    delay        < 150 ms Very Good | 150-300 Good | 300-450 Fair | > 450 Poor
    jitter       0 ms Very Good | 0-75 Good | 75-125 Fair | 125-225 (and above) Poor
    packet loss  0-2 % Very Good | 3-14 % Good | 15-24 % Fair | >= 25 % Poor
"0 ms" jitter is read as below 1 ms (the seed's tools report whole milliseconds); loss
between the listed bands (2-3 %, 14-15 %) takes the better grade."""

from __future__ import annotations

import math
from collections.abc import Sequence

GRADES = ("Very Good", "Good", "Fair", "Poor")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; nan for no values."""
    if not values:
        return math.nan
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def jitter_rfc3550(transit_ms: Sequence[float]) -> float:
    """RFC 3550 6.4.1 interarrival jitter after the last packet: J += (|D| - J) / 16, D the
    difference of consecutive packets' transit times (arrival order)."""
    j = 0.0
    for prev, cur in zip(transit_ms, transit_ms[1:], strict=False):
        j += (abs(cur - prev) - j) / 16
    return j


def loss(sent: int, received: int) -> float:
    """Fraction of `sent` that did not arrive (0 when nothing was sent)."""
    return max(0, sent - received) / sent if sent else 0.0


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n sum x^2); 1 = equal, 1/n = one takes all."""
    squares = sum(x * x for x in values)
    return sum(values) ** 2 / (len(values) * squares) if squares else 1.0


def grade_delay(ms: float) -> str:
    return GRADES[0 if ms < 150 else 1 if ms < 300 else 2 if ms < 450 else 3]


def grade_jitter(ms: float) -> str:
    return GRADES[0 if ms < 1 else 1 if ms < 75 else 2 if ms < 125 else 3]


def grade_loss(fraction: float) -> str:
    pct = fraction * 100
    return GRADES[0 if pct < 3 else 1 if pct < 15 else 2 if pct < 25 else 3]
