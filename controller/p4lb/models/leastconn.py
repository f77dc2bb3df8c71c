"""A model of weighted least-connections choices, to pick what the data plane implements.

Connections arrive as a Poisson stream (rate 1) and last an exponential time (mean =
`mean_active`, so about that many are open at once). Each new connection goes to a backend
chosen by one of these policies, all comparing the load *after* adding it, (count + 1) /
weight, as Envoy does (with count / weight every idle backend ties at 0 and weights would
not order them):

* `argmin`: exact weighted least connections over every backend (ties: lowest index) — what
  a data plane gets by walking a VIP's backends in one pass or in a recirculation loop.
* `p2c`: power of two choices, two candidates picked by two packet hashes uniformly over the
  backends; the less loaded wins (Mitzenmacher; Envoy's least_request).
* `p2c_weighted`: the same, but each candidate is read from the weighted bucket table
  (`maglev.weighted_buckets`), so heavy backends are proposed in proportion to their weight.
* `p2c_pairs`: what the data plane does: the slot table holds a pair per slot
  (`maglev.candidate_pairs`: two *different* backends, each drawn by weight), one hash
  picks the slot.
* `d3`, `d4`, `d8`: power of d choices as the data plane does it with `choices = d`
  (`maglev.candidate_sets`: d different backends per slot, each drawn by weight; the
  first least loaded wins).
* `exact`: the data plane's `choices = "all"`: every backend in each slot, rotated by the
  slot, so one hash breaks ties among the least loaded (argmin breaks them by index).
* `hash`: no load feedback, one weighted-bucket lookup (what `srchash`/`maglev` do), for
  scale.

Imbalance is sampled at every arrival after a warm-up: with x_i = count_i / w_i, the ratio
max x_i / (sum count / sum w) (1.0 = every backend exactly at its weight's share) and Jain's
index over x_i. Pure and deterministic: the same scenario and seed give the same numbers,
and every policy sees the same arrivals, durations and hashes.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass

from p4lb.pipeline.maglev import candidate_pairs, candidate_sets, weighted_buckets
from p4lb.stats.fairness import weighted_jain

POLICIES = ("argmin", "exact", "p2c", "p2c_weighted", "p2c_pairs", "d3", "d4", "d8", "hash")
SETS = {"exact": 0, "d3": 3, "d4": 4, "d8": 8}
# Buckets per backend in the weighted candidate table (the srchash table size rule).
BUCKETS_PER_BACKEND = 100
WARMUP_FRACTION = 0.1


@dataclass(frozen=True)
class Scenario:
    weights: tuple[int, ...]
    mean_active: float
    arrivals: int = 50_000
    seed: int = 1


@dataclass(frozen=True)
class Outcome:
    policy: str
    max_over_mean: float  # mean over samples of max_i x_i / (sum count / sum w)
    max_over_mean_p99: float
    jain: float  # mean over samples of Jain's index of x_i
    shares: tuple[float, ...]  # fraction of all connections each backend received


def lighter(counts: Sequence[int], weights: Sequence[int], a: int, b: int) -> int:
    """The candidate with the lower (count + 1) / weight; a on a tie. Exact integers."""
    return b if (counts[b] + 1) * weights[a] < (counts[a] + 1) * weights[b] else a


def argmin(counts: Sequence[int], weights: Sequence[int]) -> int:
    """Exact weighted least connections over every backend with weight > 0."""
    best = -1
    for i, w in enumerate(weights):
        if w > 0 and (best < 0 or lighter(counts, weights, best, i) == i):
            best = i
    if best < 0:
        raise ValueError("no backend has weight > 0")
    return best


def first_lightest(counts: Sequence[int], weights: Sequence[int], candidates: Sequence[int]) -> int:
    """The data plane's set_candidates: the first candidate with the lowest (count + 1) /
    weight (a later one must be strictly lighter to win)."""
    best = candidates[0]
    for c in candidates[1:]:
        best = lighter(counts, weights, best, c)
    return best


def simulate(scenario: Scenario, policy: str) -> Outcome:
    """Run one policy over the scenario's connection stream."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}")
    weights = list(scenario.weights)
    n = len(weights)
    if n == 0 or any(w <= 0 for w in weights):
        raise ValueError("weights must all be > 0")
    table = weighted_buckets(weights, BUCKETS_PER_BACKEND * n)
    pairs = candidate_pairs(weights, BUCKETS_PER_BACKEND * n)
    sets = (
        candidate_sets(weights, BUCKETS_PER_BACKEND * n, SETS[policy] or n)
        if policy in SETS
        else []
    )
    rng = random.Random(scenario.seed)
    counts = [0] * n
    assigned = [0] * n
    departures: list[tuple[float, int]] = []
    total_w = sum(weights)
    now = 0.0
    ratios: list[float] = []
    jains: list[float] = []
    warmup = int(scenario.arrivals * WARMUP_FRACTION)
    for k in range(scenario.arrivals):
        # Drawn in the same order for every policy, so all see the same stream.
        now += rng.expovariate(1.0)
        duration = rng.expovariate(1.0 / scenario.mean_active)
        h1, h2 = rng.getrandbits(32), rng.getrandbits(32)
        while departures and departures[0][0] <= now:
            counts[heapq.heappop(departures)[1]] -= 1
        if k >= warmup and sum(counts) > 0:
            level = sum(counts) / total_w
            ratios.append(max(c / w for c, w in zip(counts, weights, strict=True)) / level)
            jains.append(weighted_jain(counts, weights))
        if policy == "argmin":
            pick = argmin(counts, weights)
        elif policy == "p2c":
            pick = lighter(counts, weights, h1 % n, h2 % n)
        elif policy == "p2c_weighted":
            pick = lighter(counts, weights, table[h1 % len(table)], table[h2 % len(table)])
        elif policy == "p2c_pairs":
            pick = lighter(counts, weights, *pairs[h1 % len(pairs)])
        elif policy in SETS:
            pick = first_lightest(counts, weights, sets[h1 % len(sets)])
        else:
            pick = table[h1 % len(table)]
        counts[pick] += 1
        assigned[pick] += 1
        heapq.heappush(departures, (now + duration, pick))
    ratios.sort()
    total = sum(assigned)
    return Outcome(
        policy=policy,
        max_over_mean=sum(ratios) / len(ratios),
        max_over_mean_p99=ratios[min(len(ratios) - 1, int(0.99 * len(ratios)))],
        jain=sum(jains) / len(jains),
        shares=tuple(a / total for a in assigned),
    )
