from __future__ import annotations

import ipaddress
import random
import zlib
from collections import Counter

import pytest

from p4lb.pipeline.maglev import weighted_buckets

CASES = [[1, 1, 1], [1, 2, 2], [1, 1, 4], [1, 2, 3], [3, 0, 2], [1000, 1], [1]]


def test_without_a_size_it_is_seed_000s_pcc_buckets() -> None:
    # PCC with denominator 5 for 1:2:2: one bucket, two, two.
    buckets = weighted_buckets([1, 2, 2])
    assert len(buckets) == 5
    assert Counter(buckets) == {0: 1, 1: 2, 2: 2}
    assert weighted_buckets([2, 4, 4]) == buckets


@pytest.mark.parametrize("weights", CASES)
@pytest.mark.parametrize("size", [5, 64, 251, 1021])
def test_each_backend_gets_buckets_within_one_of_its_share(weights: list[int], size: int) -> None:
    buckets = weighted_buckets(weights, size)
    assert len(buckets) == size
    counts = Counter(buckets)
    total = sum(weights)
    for i, w in enumerate(weights):
        assert abs(counts.get(i, 0) - size * w / total) < 1
    assert all(weights[b] > 0 for b in buckets)


@pytest.mark.parametrize("weights", CASES)
def test_buckets_are_interleaved_not_runs(weights: list[int]) -> None:
    """After any prefix of k buckets, backend i has within 1 of k * its share (smooth)."""
    size = 251
    buckets = weighted_buckets(weights, size)
    counts = Counter(buckets)
    seen: Counter[int] = Counter()
    for k, b in enumerate(buckets, start=1):
        seen[b] += 1
        for i in counts:
            assert abs(seen[i] - k * counts[i] / size) < 1


def test_exact_multiple_of_the_weights_repeats_the_pcc_cycle() -> None:
    assert weighted_buckets([1, 2, 2], 15) == weighted_buckets([1, 2, 2]) * 3


def test_source_hash_over_many_clients_follows_the_weights() -> None:
    weights, size = [1, 2, 2], 1021
    buckets = weighted_buckets(weights, size)
    rng = random.Random(12)
    hits: Counter[int] = Counter()
    n = 50_000
    for _ in range(n):
        src = ipaddress.IPv4Address(rng.getrandbits(32)).packed
        hits[buckets[zlib.crc32(src) % size]] += 1
    for i, w in enumerate(weights):
        assert abs(hits[i] / n - w / sum(weights)) < 0.01


def test_nothing_to_serve_and_bad_input() -> None:
    assert weighted_buckets([0, 0], 8) == ()
    assert weighted_buckets([]) == ()
    with pytest.raises(ValueError):
        weighted_buckets([1, -1])
    with pytest.raises(ValueError):
        weighted_buckets([1, 1], 0)
