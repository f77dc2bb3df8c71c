"""The runs grouped into points (one variant's repetitions in one scenario under one load),
in the tables' order, and the template filters that print them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, NamedTuple

from bench import templates

Run = dict[str, Any]  # one run's figures (bench.experiments.metrics)
Spread = tuple[float, float, float]  # median, min, max


class Key(NamedTuple):
    """Which point: experiment, servers' scenario, variant, load."""

    exp: str
    sc: str
    n: str
    ld: str


Groups = dict[Key, list[Run]]

SHAPES = ["average", "stress", "breakpoint"]  # k6's load shapes in the tables' order

# Usman et al.'s Table 4 (throughput, kbit/s) and Table 5 / TIPHON (delay, ms) bands.
THROUGHPUT_BANDS = [(338, "Bad"), (700, "Poor"), (1200, "Fair"), (2100, "Good")]
DELAY_BANDS = [(150, "Excellent / TIPHON very good"), (300, "Good"), (450, "Fair / medium")]


def throughput_band(kbps: float) -> str:
    return next((name for top, name in THROUGHPUT_BANDS if kbps < top), "Excellent")


def delay_band(ms: float) -> str:
    return next((name for top, name in DELAY_BANDS if ms < top), "Poor")


def groups(runs: list[Run]) -> Groups:
    """The runs by point, in the order they come."""
    out: Groups = {}
    for r in runs:
        out.setdefault(Key(r["experiment"], r["scenario"], r["variant"], r["load"]), []).append(r)
    return out


def axis(g: Groups, dim: str, **where: str) -> set[str]:
    """The values one part of the keys takes over the points that match `where`:
    `axis(g, "ld", exp="ab")` is every load ab ran."""
    return {getattr(k, dim) for k in g if all(getattr(k, w) == v for w, v in where.items())}


def values(rs: list[Run], field: str) -> list[float]:
    return [float(r[field]) for r in rs if field in r]


def spread(xs: list[float]) -> Spread:
    """(median, min, max) of xs; zeros for none."""
    return (statistics.median(xs), min(xs), max(xs)) if xs else (0.0, 0.0, 0.0)


def stat(rs: list[Run], field: str, scale: float = 1.0) -> Spread:
    """(median, min, max) of a field over repetitions, times `scale`."""
    med, lo, hi = spread(values(rs, field))
    return (scale * med, scale * lo, scale * hi)


def med(g: Groups, key: Key, field: str) -> float | None:
    """A point's median of `field`; None for a point that did not run."""
    rs = g.get(key)
    return stat(rs, field)[0] if rs else None


def fmt(t: Spread, digits: int = 0) -> str:
    med, lo, hi = t
    return f"{med:.{digits}f}" + ("" if lo == hi else f" ({lo:.{digits}f}–{hi:.{digits}f})")


def load_count(name: str) -> int:
    """The first figure of a load's name: ab's n of "n400-c10", the addresses of "a8-r10"."""
    return int(name.split("-")[0][1:])


def variant_order(names: set[str], algorithms: list[str]) -> list[str]:
    order = [*algorithms, "rr", "single"]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def variants(g: Groups, algorithms: list[str], **where: str) -> list[str]:
    """The variants of the points that match `where`, in the tables' order."""
    return variant_order(axis(g, "n", **where), algorithms)


@dataclass(frozen=True)
class Point:
    """One point of the suite: a variant's repetitions in a scenario under a load."""

    sc: str
    ld: str
    n: str
    runs: list[Run]

    def stat(self, field: str, scale: float = 1.0) -> Spread:
        return stat(self.runs, field, scale)

    def per_server(self) -> dict[str, Any]:
        """A many-source point's medians per server: requests, share %, capacity %."""
        r0, idx = self.runs[0], range(len(self.runs[0]["servers"]))
        return {
            "sources": 3 * load_count(self.ld),
            "served": [statistics.median(r["served"][i] for r in self.runs) for i in idx],
            "shares": [statistics.median(100 * r["shares"][i] for r in self.runs) for i in idx],
            "cap": [100 * w / sum(r0["workers"]) for w in r0["workers"]],
        }


def points(g: Groups, exp: str, algorithms: list[str], by_shape: bool = False) -> list[Point]:
    """An experiment's points in table order: scenario, load (k6's by shape), variant."""
    keys = sorted({(k.sc, k.ld) for k in g if k.exp == exp})
    if by_shape:
        keys.sort(key=lambda x: (x[0], SHAPES.index(x[1]) if x[1] in SHAPES else 9))
    return [
        Point(sc, ld, n, g[Key(exp, sc, n, ld)])
        for sc, ld in keys
        for n in variants(g, algorithms, exp=exp, sc=sc, ld=ld)
    ]


templates.ENV.filters.update(fmt=fmt, delay_band=delay_band, throughput_band=throughput_band)
