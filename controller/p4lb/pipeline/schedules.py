"""Schedules the data plane follows: the smooth weighted round-robin slot sequence."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from math import gcd


def smooth_wrr(weights: Sequence[int]) -> list[int]:
    """One WRR cycle as backend indices, interleaved the way nginx's smooth WRR does it.

    Weights are divided by their greatest common divisor first, so 2:2:4 gives the same
    4-slot cycle as 1:1:2. Over one cycle backend i appears exactly weights[i]/g times, and
    no backend gets a run longer than its share requires. Weight 0 (drained) never appears.
    """
    if any(w < 0 for w in weights):
        raise ValueError("weights must be >= 0")
    active = [w for w in weights if w > 0]
    if not active:
        return []
    g = reduce(gcd, active)
    reduced = [w // g for w in weights]
    total = sum(reduced)
    current = [0] * len(reduced)
    cycle: list[int] = []
    for _ in range(total):
        for i, w in enumerate(reduced):
            current[i] += w
        best = max(range(len(reduced)), key=lambda i: (current[i], -i))
        current[best] -= total
        cycle.append(best)
    return cycle
