"""Hash lookup tables the data plane indexes by a packet hash modulo the table size.

* `maglev_table`: weighted Maglev consistent hashing (Eisenbud et al., NSDI 2016, Pseudocode
  1; weights as in Katran's MaglevV2: backend i takes weight_i turns for every max-weight
  turns, interleaved). The data plane takes the flow's hash (the connection state's
  signature, p4lb.models.hashing.signature) modulo the table size and reads the backend
  from the entry. Removing or adding one of N backends moves about 1/N of the flows, where
  hash-mod-N moves about (N-1)/N.
* `candidate_sets`: the candidates of each slot for the least-* algorithms (leastconn,
  leasttime, leastpkt): every active backend (exact), or d weighted draws (power of d
  choices; `candidate_pairs` is d = 2).
* `weighted_buckets`: Fathurrohim and Basuki's PCC weighted buckets (nginx `ip_hash` with
  weights) for `srchash`: each backend gets buckets in proportion to its weight,
  interleaved; the data plane indexes them by hash(source address) modulo the table size.

Both are pure and deterministic: the same (names, weights) give the same table on every
machine and after every restart. Maglev's permutations come from hashlib digests of the
backend's *name* (Python's hash() is salted per process): for a table of M entries,

    offset = blake2b(name, digest_size=8, key=b"p4lb-maglev-offset") mod M
    skip   = blake2b(name, digest_size=8, key=b"p4lb-maglev-skip") mod (M - 1) + 1

(UTF-8 name, digests read big-endian), and turns are taken in name order, so the order
backends are listed in the config changes nothing but the index numbering.
Entries are indices into the sequence passed in, as `schedules.smooth_wrr` returns them.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import random
from collections.abc import Sequence
from functools import reduce
from math import gcd

from p4lb.pipeline.schedules import smooth_wrr

# Maglev needs M prime (so every skip in 1..M-1 walks all M entries) and M >= 100 * N: with at
# least 100 entries per backend the table gives every backend its weight's share of the hash
# space within 1 % (Maglev §3.4, §5.3). The ladder holds the largest prime below each power of
# two from 2^8, so a size never wastes more than half its entries and an index fits in
# ceil(log2 M) bits; a VIP's size changes only when its backend count crosses a rung.
MAGLEV_TABLE_SIZES = (251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521)
# 65521 is the largest prime below 2^16: a table index fits in a bit<16> field and a whole
# table fits in a 65536-entry P4 table (65537 = 2^16 + 1, Katran's default, would need a 17th
# bit and one entry more than such a table holds). It keeps >= 100 entries per backend up to
# 655 backends per VIP; above that the table stays at this size and the share error grows to
# about N / M.
MAGLEV_MAX_TABLE_SIZE = MAGLEV_TABLE_SIZES[-1]
MAGLEV_ENTRIES_PER_BACKEND = 100

# Keys of the two hashes; changing them re-maps every flow, so they are fixed forever.
_OFFSET_KEY = b"p4lb-maglev-offset"
_SKIP_KEY = b"p4lb-maglev-skip"

NO_BACKEND = -1


def maglev_table_size(backends: int) -> int:
    """The smallest ladder size with at least 100 entries per backend (capped at the max).

    Pass the number of backends *configured* for the VIP, drained or failed ones included, so
    a weight change or a health event never changes the size (a new size re-maps every flow).
    """
    if backends < 0:
        raise ValueError("backends must be >= 0")
    want = max(1, backends) * MAGLEV_ENTRIES_PER_BACKEND
    i = bisect.bisect_left(MAGLEV_TABLE_SIZES, want)
    return MAGLEV_TABLE_SIZES[min(i, len(MAGLEV_TABLE_SIZES) - 1)]


def _digest(key: bytes, name: str) -> int:
    # blake2b keyed with different keys gives two independent 64-bit hashes of the name.
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8, key=key).digest(), "big")


def permutation(name: str, size: int) -> tuple[int, int]:
    """(offset, skip) of a backend's preference list: entry j is (offset + j*skip) mod size."""
    if size < 2:
        raise ValueError("size must be >= 2")
    return _digest(_OFFSET_KEY, name) % size, _digest(_SKIP_KEY, name) % (size - 1) + 1


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    f = 2
    while f * f <= n:
        if n % f == 0:
            return False
        f += 1
    return True


def _check(names: Sequence[str], weights: Sequence[int]) -> None:
    if len(names) != len(weights):
        raise ValueError("names and weights differ in length")
    if len(set(names)) != len(names):
        raise ValueError("backend names must be unique")
    if any(w < 0 for w in weights):
        raise ValueError("weights must be >= 0")


def maglev_table(
    names: Sequence[str], weights: Sequence[int], size: int | None = None
) -> tuple[int, ...]:
    """The Maglev lookup table: `size` entries, each the index of a backend with weight > 0.

    `size` defaults to `maglev_table_size(len(names))` and must be prime. Every entry is
    filled; backend i holds within one entry of size * w_i / sum(w). No backend with weight >
    0: an empty tuple (the VIP has nothing to send to).
    """
    _check(names, weights)
    m = maglev_table_size(len(names)) if size is None else size
    if not _is_prime(m):
        raise ValueError(f"Maglev table size {m} is not prime")
    # Turn order by name, not by position, so the table does not depend on config order.
    active = sorted((names[i], i, w) for i, w in enumerate(weights) if w > 0)
    if not active:
        return ()
    g = reduce(gcd, (w for _, _, w in active))
    perms = [permutation(name, m) for name, _, _ in active]
    nxt = [0] * len(active)
    entry = [NO_BACKEND] * m
    # Weighted turns (the equivalent of Katran's cumulative weights, without its O(N) scan
    # per turn): backend k's t-th turn (t = 1, 2, ...) falls at time t / w_k; ties go in name
    # order. Over any stretch each backend takes turns in proportion to its weight, and
    # every turn fills exactly one empty entry, so the shares follow the weights.
    turns = [(1 / (w // g), k) for k, (_, _, w) in enumerate(active)]
    heapq.heapify(turns)
    taken = [0] * len(active)
    filled = 0
    while filled < m:
        _, k = heapq.heappop(turns)
        offset, skip = perms[k]
        c = (offset + nxt[k] * skip) % m
        while entry[c] != NO_BACKEND:  # bounded: the preference list visits all m entries
            nxt[k] += 1
            c = (offset + nxt[k] * skip) % m
        entry[c] = active[k][1]
        nxt[k] += 1
        filled += 1
        taken[k] += 1
        heapq.heappush(turns, ((taken[k] + 1) / (active[k][2] // g), k))
    return tuple(entry)


def apportion(weights: Sequence[int], size: int) -> list[int]:
    """Entries per backend: `size` split by weight, by largest remainder (ties to the lower
    index), so each count is within one of size * w_i / sum(w)."""
    total = sum(weights)
    counts = [size * w // total for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(size * weights[i] % total), i))
    for i in order[: size - sum(counts)]:
        counts[i] += 1
    return counts


def maglev_update(
    previous: Sequence[str | None],
    names: Sequence[str],
    weights: Sequence[int],
    size: int | None = None,
) -> tuple[int, ...]:
    """The Maglev table for (names, weights), changed from `previous` (the backend name of
    each entry of the table in use) in as few entries as the change allows.

    Plain Maglev moves more than the ideal 1/N when one of N backends leaves (the survivors'
    turns shift; 1.16x at N = 8 and 1.94x at N = 64 with 100 entries per backend). Here
    each backend keeps the entry count the fresh table gives it (within one of its weight
    share), every entry of the previous table whose backend is still under its count
    stays, and only the rest are handed out: an entry goes to the backend the fresh Maglev
    table names there if it is still short, else to the backend furthest below its count.
    So a removal moves exactly the removed backend's entries, an addition only the entries
    the new backend needs, and a weight change only the entries that change hands; removing
    a backend just added restores the table it joined. Surplus entries are
    given up where the previous owner disagrees with the fresh table first, so the table
    drifts back toward plain Maglev. Without a usable previous table (none, another size,
    no backend in common): the fresh Maglev table."""
    fresh = maglev_table(names, weights, size)
    m = len(fresh)
    live = {name: i for i, name in enumerate(names) if weights[i] > 0}
    if not fresh or len(previous) != m or not any(p in live for p in previous):
        return fresh
    # Each backend's count is the fresh table's (within one entry of its weight share).
    room = {name: 0 for name in names}
    for i in fresh:
        room[names[i]] += 1
    entry: list[int] = [NO_BACKEND] * m
    # Keep what the fresh table agrees with first, then the rest, up to each count.
    for agree in (True, False):
        for c, owner in enumerate(previous):
            if owner is None or owner not in live or entry[c] != NO_BACKEND:
                continue
            if room[owner] > 0 and (fresh[c] == live[owner]) == agree:
                entry[c] = live[owner]
                room[owner] -= 1
    for c in range(m):
        if entry[c] != NO_BACKEND:
            continue
        want = names[fresh[c]]
        if room[want] == 0:
            want = max(live, key=lambda n: (room[n], -live[n]))
        entry[c] = live[want]
        room[want] -= 1
    return tuple(entry)


def weighted_buckets(weights: Sequence[int], size: int | None = None) -> tuple[int, ...]:
    """Hash buckets for `srchash`: `size` entries, backend i in about size * w_i / sum(w).

    Without `size`, the table is one cycle of the weights divided by their gcd — Fathurrohim
    and Basuki's PCC exactly (1:2:2 gives 5 buckets: one, two and two). With `size`, counts
    are apportioned by largest remainder (ties to the lower index), so each count is within
    one of its exact share. Either way the buckets are interleaved like smooth WRR, not in
    runs. Weight 0 gets no bucket; no positive weight gives an empty tuple.
    """
    if any(w < 0 for w in weights):
        raise ValueError("weights must be >= 0")
    total = sum(weights)
    if total == 0:
        return ()
    if size is None:
        return tuple(smooth_wrr(weights))
    if size < 1:
        raise ValueError("size must be >= 1")
    counts = apportion(weights, size)
    # smooth_wrr over the counts reduces them by their gcd; repeat that cycle to fill size.
    cycle = smooth_wrr(counts)
    return tuple(cycle * (size // len(cycle)))


def candidate_pairs(weights: Sequence[int], size: int) -> list[tuple[int, int]]:
    """Two candidate backend indexes per slot (power of two choices): `candidate_sets` with
    d = 2, as pairs."""
    return [(s[0], s[-1]) for s in candidate_sets(weights, size, 2)]


def candidate_sets(weights: Sequence[int], size: int, d: int) -> list[tuple[int, ...]]:
    """The candidate backend indexes of each of `size` slots for the least-* algorithms.

    When d reaches the number of backends with weight > 0, every slot holds all of them
    (an exact choice), slot k rotated by k so that among equally loaded backends the flow's
    hash decides, not the config order. Otherwise slot k holds d distinct draws: its
    weighted bucket, then the next buckets at a fixed pseudo-random walk of the bucket
    table naming backends not yet drawn, so each backend is proposed in proportion to its
    weight and every pair meets. With one backend, a slot holds it once. Deterministic:
    the same weights give the same table."""
    if d < 1:
        raise ValueError("d must be >= 1")
    active = [i for i, w in enumerate(weights) if w > 0]
    if not active:
        return []
    if d >= len(active):
        return [
            tuple(active[(k + j) % len(active)] for j in range(len(active))) for k in range(size)
        ]
    buckets = weighted_buckets(weights, size)
    n = len(buckets)
    order = list(range(n))
    random.Random(n).shuffle(order)
    sets = []
    for i in range(n):
        drawn = [buckets[i]]
        for step in range(n):
            b = buckets[order[(i + step) % n]]
            if b not in drawn:
                drawn.append(b)
                if len(drawn) == d:
                    break
        sets.append(tuple(drawn))
    return sets


def changed_fraction(before: Sequence[object], after: Sequence[object]) -> float:
    """Fraction of equally sized tables' entries that differ (the hash space that moved)."""
    if len(before) != len(after):
        raise ValueError("tables differ in size")
    if not before:
        return 0.0
    return sum(a != b for a, b in zip(before, after, strict=True)) / len(before)
