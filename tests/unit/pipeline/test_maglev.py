from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from p4lb.pipeline.maglev import (
    MAGLEV_ENTRIES_PER_BACKEND,
    MAGLEV_MAX_TABLE_SIZE,
    MAGLEV_TABLE_SIZES,
    NO_BACKEND,
    changed_fraction,
    maglev_table,
    maglev_table_size,
    maglev_update,
    permutation,
)

WEIGHTS = [
    [1, 1, 1],
    [1] * 8,
    [1, 2, 3],
    [1, 1, 4],
    [1, 2, 2],
    [1000, 1],
    [5, 0, 5],
]


def names(n: int) -> list[str]:
    return [f"h{i + 2}" for i in range(n)]


def by_name(ns: list[str], ws: list[int], size: int) -> list[str]:
    return [ns[i] for i in maglev_table(ns, ws, size)]


def test_ladder_is_primes_and_the_max_fits_sixteen_bits() -> None:
    for m in MAGLEV_TABLE_SIZES:
        assert all(m % f for f in range(2, int(m**0.5) + 1)), m
    assert list(MAGLEV_TABLE_SIZES) == sorted(MAGLEV_TABLE_SIZES)
    assert MAGLEV_MAX_TABLE_SIZE < 2**16


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 8, 16, 64, 100, 655])
def test_size_is_the_smallest_rung_with_100_entries_per_backend(n: int) -> None:
    m = maglev_table_size(n)
    assert m >= MAGLEV_ENTRIES_PER_BACKEND * n
    smaller = [s for s in MAGLEV_TABLE_SIZES if s < m]
    assert all(s < MAGLEV_ENTRIES_PER_BACKEND * n for s in smaller)


def test_size_is_capped_beyond_the_ladder() -> None:
    assert maglev_table_size(656) == MAGLEV_MAX_TABLE_SIZE
    assert maglev_table_size(5000) == MAGLEV_MAX_TABLE_SIZE


def test_permutation_walks_every_entry() -> None:
    m = 509
    for name in names(20):
        offset, skip = permutation(name, m)
        assert 0 <= offset < m and 1 <= skip < m
        assert len({(offset + j * skip) % m for j in range(m)}) == m


def test_offset_and_skip_are_not_the_same_hash() -> None:
    pairs = [permutation(n, 65521) for n in names(50)]
    assert sum(o == s for o, s in pairs) < 2


@pytest.mark.parametrize("weights", WEIGHTS)
def test_every_entry_is_a_backend_with_weight(weights: list[int]) -> None:
    ns = names(len(weights))
    table = maglev_table(ns, weights)
    assert len(table) == maglev_table_size(len(weights))
    assert NO_BACKEND not in table
    assert set(table) <= {i for i, w in enumerate(weights) if w > 0}
    # A backend is missing only when its share is under one entry (1000:1 over 251).
    m, total = len(table), sum(weights)
    assert {i for i, w in enumerate(weights) if m * w >= total} <= set(table)


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("size", [None, 4093, MAGLEV_MAX_TABLE_SIZE])
def test_each_backend_holds_within_one_entry_of_its_weight_share(
    weights: list[int], size: int | None
) -> None:
    ns = names(len(weights))
    table = maglev_table(ns, weights, size)
    counts = Counter(table)
    m, total = len(table), sum(weights)
    for i, w in enumerate(weights):
        assert abs(counts.get(i, 0) - m * w / total) <= 1, (i, counts)
        # ... so the share is within 1 % of the weight share (absolute).
        assert abs(counts.get(i, 0) / m - w / total) < 0.01


def test_many_backends_stay_balanced_at_the_ladder_size() -> None:
    n = 200
    table = maglev_table(names(n), [1] * n)
    counts = Counter(table)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_table_does_not_depend_on_config_order() -> None:
    ns, ws = names(8), [1, 2, 3, 1, 1, 4, 2, 5]
    base = by_name(ns, ws, 1021)
    rng = random.Random(7)
    for _ in range(5):
        order = list(range(8))
        rng.shuffle(order)
        assert by_name([ns[i] for i in order], [ws[i] for i in order], 1021) == base


def paper_table(backends: list[str], m: int) -> list[str]:
    """The Maglev paper's lookup table for equally weighted backends, written out here on
    its own (Eisenbud et al., NSDI 2016, §3.4 and Pseudocode 1), with the permutation hashes
    p4lb.pipeline.maglev documents: backend i prefers entries offset_i + j * skip_i (mod M),
    and the backends take turns, in name order, each filling its next free preference."""

    def h(name: str, key: bytes) -> int:
        digest = hashlib.blake2b(name.encode(), digest_size=8, key=key).digest()
        return int.from_bytes(digest, "big")

    order = sorted(backends)
    offset = [h(n, b"p4lb-maglev-offset") % m for n in order]
    skip = [h(n, b"p4lb-maglev-skip") % (m - 1) + 1 for n in order]
    nxt = [0] * len(order)
    entry: list[str | None] = [None] * m
    filled = 0
    while True:
        for i, name in enumerate(order):
            c = (offset[i] + nxt[i] * skip[i]) % m
            while entry[c] is not None:
                nxt[i] += 1
                c = (offset[i] + nxt[i] * skip[i]) % m
            entry[c] = name
            nxt[i] += 1
            filled += 1
            if filled == m:
                return [str(e) for e in entry]


@pytest.mark.parametrize(("n", "m"), [(3, 251), (5, 509), (12, 1021)])
def test_equal_weights_give_the_papers_table(n: int, m: int) -> None:
    ns = names(n)
    assert by_name(ns, [1] * n, m) == paper_table(ns, m)


def test_table_is_the_same_in_every_process() -> None:
    """A different table after a restart would re-map flows: the permutations must not come
    from anything salted per process (Python's hash())."""
    code = (
        "import json; from p4lb.pipeline.maglev import maglev_table; "
        "print(json.dumps(maglev_table(['h2', 'h3', 'h4'], [1, 1, 1], 251)))"
    )
    want = [["h2", "h3", "h4"].index(n) for n in paper_table(["h2", "h3", "h4"], 251)]
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == want, f"PYTHONHASHSEED={seed}"


def test_weights_are_reduced_by_their_gcd() -> None:
    ns = names(3)
    assert maglev_table(ns, [2, 4, 6]) == maglev_table(ns, [1, 2, 3])


def test_nothing_to_serve_is_an_empty_table() -> None:
    assert maglev_table(["a", "b"], [0, 0]) == ()
    assert maglev_table([], []) == ()


@pytest.mark.parametrize(
    "ns,ws,size",
    [
        (["a", "b"], [1], None),
        (["a", "a"], [1, 1], None),
        (["a"], [-1], None),
        (["a"], [1], 1000),
    ],
)
def test_bad_input_is_rejected(ns: list[str], ws: list[int], size: int | None) -> None:
    with pytest.raises(ValueError):
        maglev_table(ns, ws, size)


@pytest.mark.parametrize("n", [3, 8, 16])
def test_removing_a_backend_moves_its_own_entries_and_few_others(n: int) -> None:
    ns, m = names(n), MAGLEV_MAX_TABLE_SIZE
    base = by_name(ns, [1] * n, m)
    for gone in (0, n // 2, n - 1):
        after = by_name(ns[:gone] + ns[gone + 1 :], [1] * (n - 1), m)
        # Every entry of the removed backend must move; entries of others mostly stay.
        assert all(a != ns[gone] for a in after)
        moved = changed_fraction(base, after)
        assert 1 / n - 1 / m <= moved <= 1.07 / n, (gone, moved)


@pytest.mark.parametrize("n", [3, 8, 16])
def test_adding_a_backend_takes_its_share_and_moves_few_others(n: int) -> None:
    ns, m = names(n), MAGLEV_MAX_TABLE_SIZE
    base = by_name(ns, [1] * n, m)
    after = by_name([*ns, "new"], [1] * (n + 1), m)
    moved = changed_fraction(base, after)
    assert 1 / (n + 1) - 1 / m <= moved <= 1.07 / (n + 1)


def test_maglev_moves_far_less_than_modulo() -> None:
    n, m = 8, maglev_table_size(8)
    ns = names(n)
    base = by_name(ns, [1] * n, m)
    after = by_name(ns[:-1], [1] * (n - 1), m)
    rng = random.Random(1)
    hashes = [rng.getrandbits(32) for _ in range(20000)]
    mod_moved = sum(ns[h % n] != ns[h % (n - 1)] for h in hashes) / len(hashes)
    assert changed_fraction(base, after) < 0.25 < 0.8 < mod_moved


def test_a_weight_change_moves_only_what_the_weights_require_plus_a_little() -> None:
    ns, m = names(4), MAGLEV_MAX_TABLE_SIZE
    base = by_name(ns, [1, 1, 1, 1], m)
    after = by_name(ns, [2, 1, 1, 1], m)
    # h2 goes from 1/4 to 2/5 of the space: at least 0.15 must move.
    assert 0.15 - 1 / m <= changed_fraction(base, after) <= 0.15 * 1.2


def test_changed_fraction_needs_equal_sizes() -> None:
    assert changed_fraction([1, 2], [1, 3]) == 0.5
    assert changed_fraction([], []) == 0.0
    with pytest.raises(ValueError):
        changed_fraction([1], [1, 2])


def pseudocode_1(ns: list[str], m: int) -> list[str]:
    """Maglev's Pseudocode 1 verbatim (equal weights; turns in the given order)."""
    perms = [permutation(n, m) for n in ns]
    nxt = [0] * len(ns)
    entry: list[str | None] = [None] * m
    filled = 0
    while True:
        for i, (offset, skip) in enumerate(perms):
            c = (offset + nxt[i] * skip) % m
            while entry[c] is not None:
                nxt[i] += 1
                c = (offset + nxt[i] * skip) % m
            entry[c] = ns[i]
            nxt[i] += 1
            filled += 1
            if filled == m:
                return [e for e in entry if e is not None]


@pytest.mark.parametrize("n,m", [(3, 509), (8, 1021), (13, 2039)])
def test_equal_weights_are_exactly_pseudocode_1_in_name_order(n: int, m: int) -> None:
    ns = sorted(names(n))
    assert by_name(ns, [1] * n, m) == pseudocode_1(ns, m)


def _named(ns: list[str], table: tuple[int, ...]) -> list[str | None]:
    return [ns[i] for i in table]


@pytest.mark.parametrize("n", [3, 8, 64])
def test_update_removing_one_backend_moves_only_its_entries(n: int) -> None:
    """The ideal disruption exactly: 1/N of the table (within one entry's rounding)."""
    ns = names(n)
    before = _named(ns, maglev_table(ns, [1] * n))
    gone = ns[n // 2]
    rest = [x for x in ns if x != gone]
    after = _named(rest, maglev_update(before, rest, [1] * (n - 1), len(before)))
    assert len(after) == len(before)
    moved = [c for c, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert all(before[c] == gone for c in moved)
    assert len(moved) == before.count(gone)
    counts = Counter(after)
    assert max(counts.values()) - min(counts.values()) <= 1


@pytest.mark.parametrize("n", [3, 8, 64])
def test_update_adding_a_backend_moves_only_what_it_takes_and_removing_it_restores(
    n: int,
) -> None:
    ns = names(n)
    size = maglev_table_size(n + 1)
    before = _named(ns, maglev_table(ns, [1] * n, size))
    grown = [*ns, "new"]
    after = _named(grown, maglev_update(before, grown, [1] * (n + 1), size))
    moved = sum(a != b for a, b in zip(before, after, strict=True))
    assert moved == after.count("new")
    assert abs(after.count("new") - size / (n + 1)) <= 1
    back = _named(ns, maglev_update(after, ns, [1] * n, size))
    assert back == before


def test_update_of_a_weight_moves_only_the_entries_that_change_hands() -> None:
    ns = names(3)
    before = _named(ns, maglev_table(ns, [1, 1, 1]))
    after = _named(ns, maglev_update(before, ns, [1, 1, 2]))
    size = len(before)
    moved = sum(a != b for a, b in zip(before, after, strict=True))
    assert moved == after.count("h4") - before.count("h4")
    for name, w in zip(ns, (1, 1, 2), strict=True):
        assert abs(after.count(name) - size * w / 4) <= 1


def test_update_without_a_usable_previous_table_is_plain_maglev() -> None:
    ns = names(3)
    fresh = maglev_table(ns, [1, 1, 1])
    assert maglev_update([], ns, [1, 1, 1]) == fresh
    assert maglev_update(["b0"] * 7, ns, [1, 1, 1]) == fresh  # another size
    assert maglev_update(["x"] * len(fresh), ns, [1, 1, 1]) == fresh  # nothing in common
