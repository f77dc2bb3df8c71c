"""The queueing experiment's measures, pure: RFC 3550 interarrival jitter, loss, and the
ETSI TIPHON TR 101 329 grades (its percentiles are bench.stats.percentile_interpolated,
Jain's index p4lb.stats.fairness.jain).

TIPHON thresholds as commonly cited (the standard's QoS classes, as the Indonesian network
literature Maulana et al. come from tabulates them; their paper prints only the grades):
    delay        < 150 ms Very Good | 150-300 Good | 300-450 Fair | > 450 Poor
    jitter       0 ms Very Good | 0-75 Good | 75-125 Fair | 125-225 (and above) Poor
    packet loss  0-2 % Very Good | 3-14 % Good | 15-24 % Fair | >= 25 % Poor
"0 ms" jitter is read as below 1 ms (the paper's tools report whole milliseconds); loss
between the listed bands (2-3 %, 14-15 %) takes the better grade."""

from __future__ import annotations

from collections.abc import Sequence

GRADES = ("Very Good", "Good", "Fair", "Poor")


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


def grade_delay(ms: float) -> str:
    return GRADES[0 if ms < 150 else 1 if ms < 300 else 2 if ms < 450 else 3]


def grade_jitter(ms: float) -> str:
    return GRADES[0 if ms < 1 else 1 if ms < 75 else 2 if ms < 125 else 3]


def grade_loss(fraction: float) -> str:
    pct = fraction * 100
    return GRADES[0 if pct < 3 else 1 if pct < 15 else 2 if pct < 25 else 3]
