"""The papers' claims the runs decide: each claim's figures from the points, its sentences and
verdict from bench/templates/experiments/claims/NAME.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench import stats, templates
from bench.experiments.points import Groups, Key, Run, axis, load_count, med, stat, values


@dataclass(frozen=True)
class Decision:
    """What decided a comparison of two points: bench.stats' differs test."""

    a: Key
    b: Key
    field: str
    overlap: bool
    n: tuple[int, int]
    few: bool
    test: str = stats.DIFFERS_TEST
    min_reps: int = stats.MIN_REPS_TO_COMPARE


def decided(g: Groups, a: Key, b: Key, field: str) -> Decision:
    """bench.stats' differs test on two points' repetitions (`overlap`: within the noise)."""
    xs, ys = values(g.get(a, []), field), values(g.get(b, []), field)
    d = stats.differs(xs, ys)
    few = d["differs"] == "too few repetitions"
    return Decision(a, b, field, stats.ranges_overlap(xs, ys), d["n"], few)


@dataclass(frozen=True)
class Claim:
    """One row of the claimed / found table."""

    claim: str
    found: str
    verdict: str
    why: str
    decided: str


def claim(name: str, **slots: Any) -> Claim:
    """A claim's sentences and verdict from bench/templates/experiments/claims/NAME.md."""
    m = templates.module(f"experiments/claims/{name}.md", **slots)
    return Claim(str(m.claim), str(m.found), str(m.verdict), str(m.why), str(m.decided))


def random_jain(n: int, k: int) -> float:
    """Jain's index of `n` requests placed on `k` servers at random, on average (first order:
    Jain = 1 / (1 + CV²), CV² = (k - 1) / n)."""
    return 1 / (1 + (k - 1) / n)


def unfair_verdict(hash_jain: list[float], rotation_jain: list[float]) -> str:
    """Usman et al.'s fairness claim: reproduced when IP hash's whole min–max range of Jain's
    index lies below WRR's (small: one client's ports make the hash a random placement)."""
    if hash_jain and rotation_jain and max(hash_jain) < min(rotation_jain):
        return "reproduced, but small"
    return "not reproduced"


def claims(g: Groups, algorithms: list[str], c10: str, c1: str) -> list[Claim]:
    """The papers' claims whose points ran, each with its verdict; ab's at its largest -c 10
    load `c10` and -c 1 load `c1`."""

    def ab(sc: str, n: str, ld: str = c10) -> Key:
        return Key("ab", sc, n, ld)

    def m(key: Key, field: str) -> float:
        return med(g, key, field) or 0.0

    def wi(field: str, sc: str = "equal", ld: str = c10) -> tuple[float, float]:
        """WRR's and IP hash's medians."""
        return m(ab(sc, "wrr", ld), field), m(ab(sc, "iphash", ld), field)

    def vs(field: str, a: str = "wrr", b: str = "iphash", sc: str = "equal") -> Decision:
        return decided(g, ab(sc, a), ab(sc, b), field)

    def clients(sc: str, n: str | None = None) -> list[Run]:
        """The many-source runs on servers `sc` (of variant `n`)."""
        return [
            r for k, rs in g.items() if k[:2] == ("clients", sc) and n in (None, k.n) for r in rs
        ]

    def small(n: str) -> list[float]:
        """The 1-worker server's share, %, in each many-source run on 1:2:2."""
        return [100 * r["shares"][0] for r in clients("1:2:2", n)]

    def draws(sc: str) -> int:
        """How many independent draws of client addresses the many-source runs cover."""
        return len({r.get("draw") for r in clients(sc)} - {None})

    out = []

    def add(name: str, **slots: Any) -> None:
        out.append(claim(name, **slots))

    if all(wi("rps") + wi("rps", "1:1:4")):
        one = wi("rps", ld=c1)
        add("002-throughput", eq=wi("rps"), un=wi("rps", "1:1:4"), one=one, d=vs("rps"))
    if all(wi("mean_ms")):
        p95 = {"p95": wi("p95_ms"), "p95_1": wi("p95_ms", ld=c1)}
        add("002-response-time", mean=wi("mean_ms"), **p95, d=vs("mean_ms"))
    if g.get(ab("equal", "iphash")) and g.get(ab("equal", "wrr")):
        n, k = load_count(c10), len(g[ab("equal", "wrr")][0]["workers"])
        verdict = unfair_verdict(*(values(g[ab("equal", v)], "jain") for v in ("iphash", "wrr")))
        shape = {"n": n, "k": k, "random": random_jain(n, k)}
        add("002-fairness", fairness_verdict=verdict, jain=wi("jain"), **shape, d=vs("jain"))
    single = ab("equal", "single")
    rps = {n: m(ab("equal", n), "rps") for n in algorithms if ab("equal", n) in g}
    gains = {n: x / (m(single, "rps") or 1) for n, x in rps.items()}
    if gains and single in g:
        lumped = [n for n, x in gains.items() if x <= 1.5]
        p95 = {"p95": (m(ab("equal", "wrr"), "p95_ms"), m(single, "p95_ms"))}
        add("003-throughput", gains=gains, lumped=lumped, **p95, d=vs("rps", b="single"))
    lc = ab("1:1:4", "leastconn")
    p95 = {n: m(ab("1:1:4", n), "p95_ms") for n in ("leastconn", "wrr", "rr", "iphash")}
    if p95["leastconn"] and p95["wrr"]:
        ran = [n for n in algorithms if ab("1:1:4", n) in g]
        best = min(ran, key=lambda n: m(ab("1:1:4", n), "p95_ms") or 1e9)
        d = vs("p95_ms", "leastconn", "wrr", "1:1:4")
        add("003-latency", p95=p95, best=best, key=lc, reps=len(g[lc]), d=d)
    rr, ip = (Key("k6", "1:2:2", n, "average") for n in ("rr", "iphash"))
    if m(rr, "p95_ms") and m(ip, "p95_ms"):
        bp = {
            f"{n}_{f}": m(Key("k6", "1:2:2", n, "breakpoint"), f"breakpoint_{f}_rps")
            for n in ("rr", "iphash")
            for f in ("completed", "planned")
        }
        p95 = {"rr": stat(g[rr], "p95_ms"), "ip": stat(g[ip], "p95_ms")}
        add("001-latency", **p95, bp=bp, d=decided(g, rr, ip, "p95_ms"))
    if small("iphash") and small("wrr"):
        add("000-shares", ip_s=small("iphash"), w_s=small("wrr"), draws=draws("1:2:2"))
    eq = sorted(axis(g, "ld", exp="clients", sc="equal"), key=load_count)
    if eq and Key("clients", "equal", "srchash", eq[0]) in g:
        few, many = (Key("clients", "equal", "srchash", ld) for ld in (eq[0], eq[-1]))
        jain = {"few": m(few, "jain"), "many": m(many, "jain")}
        jain["iphash"] = m(Key("clients", "equal", "iphash", few.ld), "jain")
        sources = {"few": 3 * load_count(few.ld), "many": 3 * load_count(many.ld)}
        reps = {"reps": len(g[few]), "draws": draws("equal")}
        add("002-source-hash", jain=jain, sources=sources, key=few, **reps)
    return out
