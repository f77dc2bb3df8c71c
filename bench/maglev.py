"""The Maglev and srchash figures of `python -m bench.algorithms`: each backend's share of
the table and of random flows against its weight, and the flows moved when one of N backends
is removed or added (hash mod N, plain Maglev at three sizes, and what p4lb writes), from the
controller's own tables (p4lb.pipeline.maglev) and hashes (p4lb.models.hashing)."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from p4lb.models.hashing import Flow, signature, source_slot
from p4lb.pipeline import maglev as tables
from p4lb.pipeline.maglev import MAGLEV_MAX_TABLE_SIZE, changed_fraction, maglev_table_size

FLOWS = 100_000
SEED = 2016  # Maglev's year; any fixed value does
VIP, SERVICE_ID = "10.0.0.100", 1  # the first VIP and its service id, as the controller numbers
HASH = (
    "maglev: p4lb.models.hashing.signature (lb.p4's flow signature); "
    "srchash: CRC32 of the source address"
)
DISRUPTION_N = (3, 8, 16, 64)
REMOVALS = 8  # removals measured per N: evenly spaced backends (all of them when N <= this)
REFERENCE_SIZE = 262139  # not deployable (16-bit index): how the excess shrinks as M grows
SIZES = {"maglev_max": MAGLEV_MAX_TABLE_SIZE, "maglev_reference": REFERENCE_SIZE}
GOAL = 1.05  # moved <= 1.05 x ideal


def flows(n: int, seed: int) -> tuple[list[int], list[str]]:
    """Maglev's keys (lb.p4's flow signature) and srchash's (the source address) of n random
    TCP flows to the VIP's port 80: source address uniform over 32 bits, port 1024..65535."""
    rng = random.Random(seed)
    keys, sources = [], []
    for _ in range(n):
        src, sport = str(ipaddress.IPv4Address(rng.getrandbits(32))), rng.randrange(1024, 65536)
        keys.append(signature(Flow(src, VIP, 6, sport, 80, SERVICE_ID)))
        sources.append(src)
    return keys, sources


def names(n: int) -> list[str]:
    return [f"b{i:02d}" for i in range(n)]


def shares(table: Sequence[int], picks: Sequence[int], n: int) -> tuple[list[float], list[float]]:
    """(share of the table's entries, share of `picks`, entry indexes) of each of n backends."""
    entries, hits = Counter(table), Counter(table[i] for i in picks)
    return [entries[i] / len(table) for i in range(n)], [hits[i] / len(picks) for i in range(n)]


def share_rows(weights: dict[str, tuple[int, ...]], keys: list[int], sources: list[str]) -> Any:
    """Per weight vector: the table size, and the share of each backend in each table."""
    rows = []
    for label, w in weights.items():
        n, size, want = len(w), maglev_table_size(len(w)), [x / sum(w) for x in w]
        mt, mf = shares(tables.maglev_table(names(n), w, size), [k % size for k in keys], n)
        bt, bf = shares(
            tables.weighted_buckets(w, size), [source_slot(s, size) for s in sources], n
        )
        got = {"maglev_table": mt, "maglev_flows": mf, "srchash_table": bt, "srchash_flows": bf}
        err = {k: max(abs(a - b) for a, b in zip(v, want, strict=True)) for k, v in got.items()}
        row = {"weights": label, "vector": list(w), "table_size": size, "weight_share": want}
        row |= {"maglev_table_share": mt, "maglev_flow_share": mf}
        rows.append(
            row | {"srchash_table_share": bt, "srchash_flow_share": bf, "max_abs_error": err}
        )
    return rows


def removed(n: int) -> list[int]:
    """The backends removed in turn from n: all up to REMOVALS, else REMOVALS evenly spaced."""
    if n <= REMOVALS:
        return [*range(n)]
    return [round(k * (n - 1) / (REMOVALS - 1)) for k in range(REMOVALS)]


def table(pool: list[str], size: int, previous: list[str] | None = None) -> list[str]:
    """The backend of each entry of the Maglev table of the equal-weight `pool`; written from
    the table in use, as p4lb writes it (maglev_update), when `previous` is given."""
    one = [1] * len(pool)
    if previous:
        return [pool[i] for i in tables.maglev_update(previous, pool, one, size)]
    return [pool[i] for i in tables.maglev_table(pool, one, size)]


def disruption(keys: list[int]) -> list[dict[str, Any]]:
    """Fraction of flows (and of Maglev's hash space) whose backend changes when one of N
    equal-weight backends is removed (mean and max over removed(N)) or one added."""

    def picks(entries: Sequence[str]) -> list[str]:  # each flow's backend: its key mod the size
        return [entries[k % len(entries)] for k in keys]

    def moved(before: list[str], afters: list[list[str]], added: list[str]) -> dict[str, Any]:
        rem, add = [changed_fraction(before, a) for a in afters], changed_fraction(before, added)
        return {"remove_mean": fmean(rem), "remove_max": max(rem), "add": add}

    def vs_ideal(d: dict[str, Any], n: int) -> dict[str, Any]:
        return d | {"remove_vs_ideal": d["remove_mean"] * n, "add_vs_ideal": d["add"] * (n + 1)}

    rows = []
    for n in DISRUPTION_N:
        pool, ladder = names(n), maglev_table_size(n)
        grown, rests = [*pool, "new"], [[*pool[:g], *pool[g + 1 :]] for g in removed(n)]
        row: dict[str, Any] = {"n": n, "removed_backends": len(rests), "ideal_remove": 1 / n}
        # hash mod N: the pool is re-indexed, so nearly every flow lands elsewhere.
        modulo = moved(picks(pool), [*map(picks, rests)], picks(grown))
        row |= {"ideal_add": 1 / (n + 1), "modulo": modulo}
        for tag, size in ({"maglev_ladder": ladder} | SIZES).items():
            before, added = table(pool, size), table(grown, size)
            afters = [table(r, size) for r in rests]
            s = moved(before, afters, added)
            f = moved(picks(before), [*map(picks, afters)], picks(added))
            d = {"table_size": size, "remove_mean": s["remove_mean"], "remove_max": s["remove_max"]}
            d |= {"remove_flows_mean": f["remove_mean"], "add": s["add"], "add_flows": f["add"]}
            row[tag] = vs_ideal(d, n)
        # What p4lb writes: the next table from the one in use, at the ladder size (which a
        # removal keeps and this addition does not outgrow).
        before = table(pool, ladder)
        update = moved(
            before, [table(r, ladder, before) for r in rests], table(grown, ladder, before)
        )
        row["p4lb_update"] = vs_ideal({"table_size": ladder} | update, n)
        rows.append(row)
    return rows
