"""Every table and plot of the experiment suite, rebuilt from the raw files alone.

Reads results/experiments/raw/**/run.json (or those in raw.tar.xz, through bench.rawstore)
and the load generators' files beside each, writes results/experiments/{summary.md,
runs.json, *.png}; `readme_block` is results/README.md's experiments region
(bench.readme_figures fills it): the papers' figures next to ours, and the claimed / found
table with its verdicts, each naming the bench and the test that decided it. Points are
medians over the repetitions with min and max. The sentences are Markdown templates in
bench/templates/experiments/ (a claim's in claims/NAME.md); this module computes their
figures and verdicts."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import figure, outdir, provenance, rawstore, stats, templates
from bench.experiments import breakpoint
from bench.experiments import load as loadgen
from p4lb.stats.fairness import jain, weighted_jain
from topology import ab as abparse

# Usman et al.'s Table 4 (throughput, kbit/s) and Table 5 / TIPHON (delay, ms) bands.
THROUGHPUT_BANDS = [(338, "Bad"), (700, "Poor"), (1200, "Fair"), (2100, "Good")]
DELAY_BANDS = [(150, "Excellent / TIPHON very good"), (300, "Good"), (450, "Fair / medium")]


def throughput_band(kbps: float) -> str:
    return next((name for top, name in THROUGHPUT_BANDS if kbps < top), "Excellent")


def delay_band(ms: float) -> str:
    return next((name for top, name in DELAY_BANDS if ms < top), "Poor")


# ---------------------------------------------------------------- per run


def metrics(run_dir: Path) -> dict[str, Any]:
    """One run's figures from its raw files."""
    rec = json.loads((run_dir / "run.json").read_text())
    served = rec["served"]
    names = sorted(served)
    values = [served[k] for k in names]
    m: dict[str, Any] = {k: rec[k] for k in ("experiment", "scenario", "variant", "rep")}
    m |= {
        "load": rec["load"]["name"],
        "workers": rec["workers"],
        "weights": rec["weights"],
        "served": [served[k] for k in names],
        "servers": names,
        "requests": sum(values),
        "jain": jain(values),
        "capacity_jain": weighted_jain(values, rec["workers"]),
        "shares": [v / sum(values) if sum(values) else 0.0 for v in values],
        "switch_pps": rec["switch_pps"],
        "switch_cpu": rec["switch_cpu"],
        "machine_cpu": rec["machine_cpu_busy"],
        "loadavg": rec["loadavg_before"][0],
        "drops": sum(rec["drops"].values()),
        "drop_reasons": rec["drops"],
        "loss_pct": 100 * sum(rec["retrans_segs"].values()) / max(1, sum(rec["out_segs"].values())),
        "switch_agrees": rec["algorithm"] is None  # no VIP, nothing for the switch to count
        or all(rec["switch_connections"].get(k, 0) == rec["connections"].get(k, 0) for k in names),
        "syn_per_server": [rec["syn_connections"].get(k, 0) for k in names],
        "draw": (rec.get("sources_drawn") or {}).get("seed"),
        "other_cpu": rec.get("other_cpu"),
        "elapsed_s": rec["elapsed_s"],
    }
    times: list[float] = []
    failed = 0
    if rec["experiment"] == "ab":
        r = abparse.parse((run_dir / "ab.txt").read_text())
        times = loadgen.ab_times_ms(run_dir / "ab.tsv")
        failed = r.failed
        m |= {"rps": r.rps, "kbps": r.transfer_kbps * 8, "failed": failed, "complete": r.complete}
        m["time_taken_s"] = float(
            re.search(r"Time taken for tests:\s+([\d.]+)", r.raw).group(1)  # type: ignore[union-attr]
        )
    elif rec["experiment"] == "clients":
        complete = 0
        files = loadgen.unpacked(run_dir)
        for name in sorted(n for n in files if n.endswith(".txt")):
            r = abparse.parse(files[name].decode(errors="replace"))
            failed += r.failed
            complete += r.complete
            times += loadgen.ab_times_ms(files.get(name[: -len(".txt")] + ".tsv", b""))
        m |= {"failed": failed, "complete": complete, "rps": complete / rec["elapsed_s"]}
        m["time_taken_s"] = rec["elapsed_s"]
    else:
        summaries = [json.loads(p.read_text()) for p in sorted(run_dir.glob("k6-*.json"))]
        for p in sorted(run_dir.glob("k6-*.csv.gz")):
            durations, f = loadgen.k6_requests(p)
            times += durations
            failed += f
        total = len(times)
        dur = max((s["state"]["testRunDurationMs"] for s in summaries), default=0.0) / 1000
        m |= {
            "failed": failed,
            "complete": total,
            "fail_rate": failed / total if total else 0.0,
            "rps": total / dur if dur else 0.0,
            "duration_s": dur,
            "aborted": any(
                not t.get("ok", True)
                for s in summaries
                for metric in s["metrics"].values()
                for t in metric.get("thresholds", {}).values()
            ),
        }
        if rec["load"]["name"] == "breakpoint":
            m |= breakpoint_figures(rec, summaries, sorted(run_dir.glob("k6-*.csv.gz")))
    m |= {
        "mean_ms": statistics.fmean(times) if times else 0.0,
        **{f"p{q}_ms": stats.percentile_nearest_rank(times, q) for q in (50, 90, 95, 99)},
        "max_ms": max(times, default=0.0),
    }
    return m


def breakpoint_figures(
    rec: dict[str, Any], summaries: list[dict[str, Any]], csvs: list[Path]
) -> dict[str, Any]:
    """The breakpoint run's measured figure, the highest completed rate (all clients) over
    a window whose failures stay below k6's threshold, and beside it the arrival rate k6
    had been asked for (planned) when the first client stopped."""
    ld = rec["load"]
    counts = breakpoint.merge(breakpoint.per_second(loadgen.k6_outcomes(p)) for p in csvs)
    done = breakpoint.completed_rate(counts)
    planned = 0.0
    if summaries:
        t = min(s["state"]["testRunDurationMs"] for s in summaries) / 1000
        planned = breakpoint.planned_rate(ld["rate"], ld["ramp_s"], t, len(summaries))
    return {
        "breakpoint_completed_rps": done["completed_rps"] or 0.0,
        "breakpoint_window_s": done["window_s"],
        "breakpoint_max_fail": done["max_fail"],
        "breakpoint_planned_rps": planned,
    }


def load_runs(root: Path) -> list[dict[str, Any]]:
    """Every run's figures from root's raw files (raw/ or raw.tar.xz: bench.rawstore)."""
    runs = []
    for p in rawstore.run_files(root):
        try:
            runs.append(metrics(p.parent))
        except (ValueError, KeyError, OSError) as e:
            print(f"report: {p.parent}: skipped ({e})", file=sys.stderr)
    return runs


# ---------------------------------------------------------------- aggregation

Key = tuple[str, str, str, str]  # experiment, scenario, variant, load


def groups(runs: list[dict[str, Any]]) -> dict[Key, list[dict[str, Any]]]:
    out: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        out[(r["experiment"], r["scenario"], r["variant"], r["load"])].append(r)
    return out


def stat(rs: list[dict[str, Any]], field: str) -> tuple[float, float, float]:
    """(median, min, max) of a field over repetitions."""
    xs = values(rs, field)
    if not xs:
        return (0.0, 0.0, 0.0)
    return (statistics.median(xs), min(xs), max(xs))


def fmt(t: tuple[float, float, float], digits: int = 0) -> str:
    med, lo, hi = t
    if lo == hi:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def variant_order(names: set[str], algorithms: list[str]) -> list[str]:
    order = [*algorithms, "rr", "single"]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


templates.ENV.filters.update(fmt=fmt, delay_band=delay_band, throughput_band=throughput_band)


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class Point:
    """One point of the suite: a variant's repetitions in a scenario under a load."""

    sc: str
    ld: str
    n: str
    runs: list[dict[str, Any]]

    def stat(self, field: str, scale: float = 1.0) -> tuple[float, float, float]:
        med, lo, hi = stat(self.runs, field)
        return (scale * med, scale * lo, scale * hi)


SHAPES = ["average", "stress", "breakpoint"]


def points(
    g: dict[Key, list[dict[str, Any]]], exp: str, algorithms: list[str], by_shape: bool = False
) -> list[Point]:
    """An experiment's points in table order: scenario, load (k6's by shape), variant."""
    keys = sorted({(k[1], k[3]) for k in g if k[0] == exp})
    if by_shape:
        keys.sort(key=lambda x: (x[0], SHAPES.index(x[1]) if x[1] in SHAPES else 9))
    return [
        Point(sc, ld, n, g[(exp, sc, n, ld)])
        for sc, ld in keys
        for n in variant_order({k[2] for k in g if k[:2] == (exp, sc) and k[3] == ld}, algorithms)
    ]


def clients_shares(p: Point) -> dict[str, Any]:
    """A many-source point's medians per server: requests, share %, capacity %."""
    r0, idx = p.runs[0], range(len(p.runs[0]["servers"]))
    return {
        "sources": 3 * load_count(p.ld),
        "served": [statistics.median(r["served"][i] for r in p.runs) for i in idx],
        "shares": [statistics.median(100 * r["shares"][i] for r in p.runs) for i in idx],
        "cap": [100 * w / sum(r0["workers"]) for w in r0["workers"]],
    }


def med(g: dict[Key, list[dict[str, Any]]], key: Key, field: str) -> float | None:
    rs = g.get(key)
    return stat(rs, field)[0] if rs else None


def values(rs: list[dict[str, Any]], field: str) -> list[float]:
    return [float(r[field]) for r in rs if field in r]


@dataclass(frozen=True)
class Decision:
    """What decided a comparison of two points: bench.stats' differs test on the
    repetitions' values, provisional below its five repetitions a side."""

    a: Key
    b: Key
    field: str
    overlap: bool
    n: tuple[int, int]
    few: bool
    test: str = stats.DIFFERS_TEST
    min_reps: int = stats.MIN_REPS_TO_COMPARE


def decided(g: dict[Key, list[dict[str, Any]]], a: Key, b: Key, field: str) -> Decision:
    """bench.stats' differs test on two points' repetitions; `overlap`: their min–max
    ranges overlap (no difference beyond the noise)."""
    xs, ys = values(g[a], field), values(g[b], field)
    d = stats.differs(xs, ys)
    few = d["differs"] == "too few repetitions"
    return Decision(a, b, field, stats.ranges_overlap(xs, ys), d["n"], few)


def draws(g: dict[Key, list[dict[str, Any]]], scenario: str) -> str:
    """How many independent draws of client addresses the many-source runs cover."""
    seeds = {r.get("draw") for k, rs in g.items() if k[:2] == ("clients", scenario) for r in rs}
    return templates.render("experiments/claims/_draws.md", recorded=len(seeds - {None}))


def load_count(name: str) -> int:
    """The first figure of a load's name: ab's n of "n400-c10", the addresses of "a8-r10"."""
    return int(name.split("-")[0][1:])


def random_jain(n: int, k: int) -> float:
    """Jain's index of `n` requests placed on `k` servers at random, on average (to first order):
    the counts' squared coefficient of variation is (k - 1) / n, and Jain = 1 / (1 + CV²)."""
    return 1 / (1 + (k - 1) / n)


def unfair_verdict(hash_jain: list[float], rotation_jain: list[float]) -> str:
    """Usman et al.'s fairness claim (IP hash's Jain below 1, WRR's at 1) on the repetitions'
    values: reproduced when the hash's whole min–max range lies below the rotation's. It is
    small whatever it measures: one client's ports make the hash a random placement."""
    if hash_jain and rotation_jain and max(hash_jain) < min(rotation_jain):
        return "reproduced, but small"
    return "not reproduced"


# ---------------------------------------------------------------- the papers' claims


@dataclass(frozen=True)
class Claim:
    """One row of the claimed / found table: a paper's claim, what the suite found, the
    verdict, why, and which bench and test decided it."""

    claim: str
    found: str
    verdict: str
    why: str
    decided: str


def claim(name: str, **slots: Any) -> Claim:
    """A claim's sentences and verdict from bench/templates/experiments/claims/NAME.md."""
    m = templates.module(f"experiments/claims/{name}.md", **slots)
    return Claim(str(m.claim), str(m.found), str(m.verdict), str(m.why), str(m.decided))


def claims(
    g: dict[Key, list[dict[str, Any]]], algorithms: list[str], c10: str, c1: str
) -> list[Claim]:
    """The papers' claims the runs can decide, each with its verdict."""
    out = []

    def ab(sc: str, n: str, ld: str = c10) -> Key:
        return ("ab", sc, n, ld)

    def m(key: Key, field: str) -> float | None:
        return med(g, key, field)

    w_eq, i_eq = m(ab("equal", "wrr"), "rps"), m(ab("equal", "iphash"), "rps")
    w_un, i_un = m(ab("1:1:4", "wrr"), "rps"), m(ab("1:1:4", "iphash"), "rps")
    if w_eq and i_eq and w_un and i_un:
        d = decided(g, ab("equal", "wrr"), ab("equal", "iphash"), "rps")
        out.append(
            claim(
                "002-throughput",
                w_eq=w_eq,
                i_eq=i_eq,
                w_un=w_un,
                i_un=i_un,
                eq_win=w_eq > 1.05 * i_eq and not d.overlap,
                w1=m(ab("equal", "wrr", c1), "rps") or 0.0,
                i1=m(ab("equal", "iphash", c1), "rps") or 0.0,
                d=d,
            )
        )
    wm, im = m(ab("equal", "wrr"), "mean_ms"), m(ab("equal", "iphash"), "mean_ms")
    if wm and im:
        d = decided(g, ab("equal", "wrr"), ab("equal", "iphash"), "mean_ms")
        out.append(
            claim(
                "002-response-time",
                wm=wm,
                im=im,
                wp=m(ab("equal", "wrr"), "p95_ms") or 0.0,
                ip=m(ab("equal", "iphash"), "p95_ms") or 0.0,
                wp1=m(ab("equal", "wrr", c1), "p95_ms") or 0.0,
                ip1=m(ab("equal", "iphash", c1), "p95_ms") or 0.0,
                d=d,
            )
        )
    ij, wj = ab("equal", "iphash"), ab("equal", "wrr")
    if g.get(ij) and g.get(wj):
        n, k = load_count(c10), len(g[ij][0]["workers"])
        out.append(
            claim(
                "002-fairness",
                fairness_verdict=unfair_verdict(values(g[ij], "jain"), values(g[wj], "jain")),
                ji=m(ij, "jain") or 0.0,
                wji=m(wj, "jain") or 0.0,
                n=n,
                k=k,
                random=random_jain(n, k),
                d=decided(g, wj, ij, "jain"),
            )
        )
    single = ab("equal", "single")
    gains = {
        n: (m(ab("equal", n), "rps") or 0) / (m(single, "rps") or 1)
        for n in algorithms
        if ab("equal", n) in g
    }
    if gains and single in g:
        out.append(
            claim(
                "003-throughput",
                gains=gains,
                lumped=[n for n in gains if gains[n] <= 1.5],
                p_single=m(single, "p95_ms") or 0.0,
                p_wrr=m(ab("equal", "wrr"), "p95_ms") or 0.0,
                d=decided(g, ab("equal", "wrr"), single, "rps"),
            )
        )
    lc, wr = m(ab("1:1:4", "leastconn"), "p95_ms"), m(ab("1:1:4", "wrr"), "p95_ms")
    if lc and wr:
        best = min(
            (n for n in algorithms if ab("1:1:4", n) in g),
            key=lambda n: m(ab("1:1:4", n), "p95_ms") or 1e9,
        )
        out.append(
            claim(
                "003-latency",
                lc=lc,
                wr=wr,
                rr=m(ab("1:1:4", "rr"), "p95_ms"),
                ipp=m(ab("1:1:4", "iphash"), "p95_ms"),
                best=best,
                key=ab("1:1:4", "leastconn"),
                reps=len(g.get(ab("1:1:4", "leastconn"), [])),
                d=decided(g, ab("1:1:4", "leastconn"), ab("1:1:4", "wrr"), "p95_ms"),
            )
        )
    rr_key, ip_key = ("k6", "1:2:2", "rr", "average"), ("k6", "1:2:2", "iphash", "average")
    rr_p95, ip_p95 = m(rr_key, "p95_ms"), m(ip_key, "p95_ms")
    if any(k[0] == "k6" for k in g) and rr_p95 and ip_p95:
        d = decided(g, rr_key, ip_key, "p95_ms")

        def bp(v: str, f: str) -> float | None:
            return m(("k6", "1:2:2", v, "breakpoint"), f"breakpoint_{f}_rps")

        rr_bp, ip_bp = bp("rr", "completed"), bp("iphash", "completed")
        bp_alike = bool(rr_bp and ip_bp and abs(rr_bp - ip_bp) < 0.1 * ip_bp)
        out.append(
            claim(
                "001-latency",
                rr_p95=stat(g[rr_key], "p95_ms"),
                ip_p95=stat(g[ip_key], "p95_ms"),
                rr_bp=rr_bp,
                ip_bp=ip_bp,
                rr_plan=bp("rr", "planned") or 0,
                ip_plan=bp("iphash", "planned") or 0,
                bp_alike=bp_alike,
                d=d,
            )
        )
    cl = sorted({k[3] for k in g if k[:2] == ("clients", "1:2:2")})

    def small_share(n: str) -> list[float]:
        return [100 * r["shares"][0] for ld in cl for r in g.get(("clients", "1:2:2", n, ld), [])]

    ip_s, w_s = small_share("iphash"), small_share("wrr")
    if ip_s and w_s:
        out.append(claim("000-shares", ip_s=ip_s, w_s=w_s, draws=draws(g, "1:2:2")))
    eq = sorted({k[3] for k in g if k[:2] == ("clients", "equal")}, key=load_count)
    if eq and ("clients", "equal", "srchash", eq[0]) in g:
        few, many = eq[0], eq[-1]  # a partial run may lack iphash: its figure is left out
        jf = m(("clients", "equal", "srchash", few), "jain")
        out.append(
            claim(
                "002-source-hash",
                jf=jf,
                jm=m(("clients", "equal", "srchash", many), "jain"),
                ji_f=m(("clients", "equal", "iphash", few), "jain"),
                few=3 * load_count(few),
                many=3 * load_count(many),
                key=("clients", "equal", "srchash", few),
                reps=len(g.get(("clients", "equal", "srchash", few), [])),
                draws=draws(g, "equal"),
            )
        )
    return out


def seed_figures(
    g: dict[Key, list[dict[str, Any]]], algorithms: list[str], ab_loads: list[str]
) -> tuple[str, list[Claim]]:
    """The papers' figures next to ours, and the claimed / found table (its claims too)."""

    def largest(suffix: str) -> str:
        return max((ld for ld in ab_loads if ld.endswith(suffix)), key=load_count, default="")

    c10, c1 = largest("-c10"), largest("-c1")
    fields = {"rps": "rps", "mean": "mean_ms", "p95": "p95_ms", "band": "p95_ms"}
    fields |= {"loss": "loss_pct", "kbps": "kbps"}

    def pair(sc: str, k: str, ld: str) -> tuple[float, float] | None:
        """WRR's and IP hash's medians of one of Usman et al.'s metrics, or None when either
        is missing."""
        f = ("jain" if sc == "equal" else "capacity_jain") if k == "jain" else fields[k]
        w, i = med(g, ("ab", sc, "wrr", ld), f), med(g, ("ab", sc, "iphash", ld), f)
        ok = w is not None and i is not None if k == "loss" else bool(w and i)
        return (w, i) if ok else None  # type: ignore[return-value]

    def vs_single(n: str) -> list[tuple[float | None, float | None]]:
        return [
            (med(g, ("ab", sc, n, c10), f), med(g, ("ab", sc, "single", c10), f))
            for sc in ("equal", "1:1:4")
            for f in ("rps", "p95_ms")
        ]

    ab_names = {k[2] for k in g if k[0] == "ab" and k[3] == c10} - {"single"}
    cl = sorted({k[3] for k in g if k[:2] == ("clients", "1:2:2")})
    shares = [
        (
            n,
            [
                (statistics.median(100 * r["shares"][0] for r in rs), 3 * load_count(ld))
                for ld in cl
                if (rs := g.get(("clients", "1:2:2", n, ld)))
            ],
        )
        for n in variant_order({k[2] for k in g if k[:2] == ("clients", "1:2:2")}, algorithms)
    ]
    found = claims(g, algorithms, c10, c1)
    text = templates.render(
        "experiments/seeds.md",
        c10=c10,
        c1=c1,
        pair=pair,
        vs_single=[(n, vs_single(n)) for n in variant_order(ab_names, algorithms)],
        k6=points(g, "k6", algorithms),
        shares=shares,
        claims=found,
    )
    return text, found


# ---------------------------------------------------------------- plots


def plots(
    g: dict[Key, list[dict[str, Any]]], algorithms: list[str], out: Path, ceiling: float | None
) -> list[str]:
    plt = figure.pyplot()

    made: list[str] = []
    Series = list[tuple[str, list[tuple[float, float, float]]]]  # (label, a point per variant)

    def point(key: Key, field: str) -> tuple[float, float, float]:
        return stat(g[key], field) if key in g else (0.0, 0.0, 0.0)

    def names_of(exp: str, **where: str) -> list[str]:
        pos = {"sc": 1, "ld": 3}
        keys = (k for k in g if k[0] == exp and all(k[pos[w]] == v for w, v in where.items()))
        return variant_order({k[2] for k in keys}, algorithms)

    def grouped(ax: Any, names: list[str], series: Series, title: str, lines: Any = ()) -> None:
        """Bars per variant (median, whiskers to min and max), one colour per series."""
        width = 0.8 / max(1, len(series))
        for j, (label, items) in enumerate(series):
            offset = j * width - 0.4 + width / 2
            err = [[t[0] - t[1] for t in items], [t[2] - t[0] for t in items]]
            xs = [i + offset for i in range(len(names))]
            ax.bar(xs, [t[0] for t in items], width=width, yerr=err, capsize=3, label=label)
        for level, colour in lines:
            ax.axhline(level, color=colour, linestyle="--", linewidth=1)
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)

    def save(fig: Any, fname: str) -> None:
        figure.save(fig, out / fname, 100)
        made.append(fname)

    for field, ylabel, fname in (
        ("rps", "requests/s (median, min–max)", "ab_rps.png"),
        ("p95_ms", "p95 latency ms (median, min–max)", "ab_p95.png"),
    ):
        loads = sorted({k[3] for k in g if k[0] == "ab"})
        scen = sorted({k[1] for k in g if k[0] == "ab"})
        if not loads:
            continue
        fig, axes = plt.subplots(len(loads), 1, figsize=(9, 3.2 * len(loads)), squeeze=False)
        for ax, ld in zip(axes[:, 0], loads, strict=True):
            names = names_of("ab", ld=ld)
            series = [
                (f"servers {sc}", [point(("ab", sc, n, ld), field) for n in names]) for sc in scen
            ]
            grouped(ax, names, series, f"ab {ld}")
            ax.set_ylabel(ylabel, fontsize=8)
            ax.grid(alpha=0.3, axis="y")
        save(fig, fname)

    loads = sorted({k[3] for k in g if k[0] == "clients"}, key=load_count)
    if loads:
        scen = sorted({k[1] for k in g if k[0] == "clients"})
        fig, axes = plt.subplots(1, len(scen), figsize=(5 * len(scen), 3.6), squeeze=False)
        for ax, sc in zip(axes[0], scen, strict=True):
            field = "jain" if sc == "equal" else "capacity_jain"
            names = names_of("clients", sc=sc)
            series = [
                (
                    f"{3 * load_count(ld)} sources",
                    [point(("clients", sc, n, ld), field) for n in names],
                )
                for ld in loads
            ]
            what = " of requests / capacity" if sc != "equal" else ""
            grouped(ax, names, series, f"servers {sc}: Jain's index{what}")
            ax.set_ylim(0, 1.05)
            ax.grid(alpha=0.3, axis="y")
        save(fig, "clients_jain.png")

        names, ld = names_of("clients", sc="1:2:2"), loads[-1]
        if names:
            fig, ax = plt.subplots(figsize=(8, 3.6))

            def share(n: str, i: int) -> tuple[float, float, float]:
                rs = g.get(("clients", "1:2:2", n, ld), [])
                return stat([{"s": 100 * r["shares"][i]} for r in rs], "s")

            series = [(f"server {i + 1}", [share(n, i) for n in names]) for i in range(3)]
            lines = [(c, f"C{i}") for i, c in enumerate(SCEN_CAP)]
            title = f"servers 1:2:2, {3 * load_count(ld)} sources"
            grouped(ax, names, series, title, lines=lines)
            ax.set_ylabel("share of requests % (dashed: capacity)")
            save(fig, "shares_1-2-2.png")

    shapes = [s for s in SHAPES if any(k[0] == "k6" and k[3] == s for k in g)]
    if shapes:
        fig, axes = plt.subplots(1, len(shapes), figsize=(4.5 * len(shapes), 3.6), squeeze=False)
        for ax, sh in zip(axes[0], shapes, strict=True):
            scen = sorted({k[1] for k in g if k[0] == "k6" and k[3] == sh})
            names = names_of("k6", ld=sh)
            series = [
                (f"servers {sc}", [point(("k6", sc, n, sh), "p95_ms") for n in names])
                for sc in scen
            ]
            grouped(ax, names, series, f"k6 {sh}: p95 ms")
            ax.grid(alpha=0.3, axis="y")
        save(fig, "k6_p95.png")

    runs = [r for rs in g.values() for r in rs]
    if runs:
        fig, ax = plt.subplots(figsize=(8, 3.4))
        exps = sorted({r["experiment"] for r in runs})
        for i, e in enumerate(exps):
            ys = [r["switch_pps"] for r in runs if r["experiment"] == e]
            ax.scatter([i + (k % 20 - 10) * 0.015 for k in range(len(ys))], ys, s=8, label=e)
        if ceiling:
            ax.axhline(
                ceiling, color="red", linestyle="--", label=f"zero-loss ceiling {ceiling:.0f} pps"
            )
        ax.set_xticks(range(len(exps)), exps)
        ax.set_ylabel("switch packets/s (each run)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, axis="y")
        save(fig, "switch_pps.png")
    return made


SCEN_CAP = [20.0, 40.0, 40.0]


# ---------------------------------------------------------------- how it was measured


def switch_ceiling(results: Path | None = None) -> dict[str, Any]:
    """The standard build's measured zero-loss rate for wrr (switch/switch.json beside the
    experiments), its rate once overloaded, and when that file was measured."""
    p = (results or outdir.RESULTS) / "switch" / "switch.json"
    try:
        d = json.loads(p.read_text())
        wrr = d["builds"]["standard"]["programs"]["wrr"]
        return {
            "zero": wrr["zero_loss_pps"],
            "saturation": wrr["saturation_pps"],
            "when": d.get("when", "?"),
        }
    except (OSError, KeyError, ValueError):
        return {"zero": None, "path": p}


OURS = ("topology.server", "bench.experiments", "ab -r", "k6 run", "127.0.0.1:9559", "ps -eo")


def others(root: Path) -> dict[str, Any] | None:
    """Processes not part of the suite that were busy (> 20 % CPU) right after some run."""
    seen: dict[str, int] = defaultdict(int)
    n = 0
    for p in rawstore.run_files(root):
        procs = json.loads(p.read_text()).get("busiest_processes_after")
        if procs is None:
            continue
        n += 1
        for line in procs:
            cpu, _, cmd = line.partition(" ")
            if float(cpu or 0) > 20 and not any(o in cmd for o in OURS):
                seen[cmd.split()[0].rsplit("/", 1)[-1] + " " + " ".join(cmd.split()[1:3])] += 1
    return {"n": n, "seen": dict(sorted(seen.items()))} if n else None


def other_cpu(runs: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any] | None:
    """Other processes' share of all cores during each run (sampled per run)."""
    xs = [r["other_cpu"] for r in runs if r.get("other_cpu") is not None]
    if not xs:
        return None
    limit = (meta.get("provenance") or {}).get("load", {}).get("limit", 0.25)
    over = sum(x > limit for x in xs)
    return {
        "median": statistics.median(xs),
        "max": max(xs),
        "over": over,
        "n": len(xs),
        "limit": limit,
    }


def parts_text(meta: dict[str, Any], recorded: int) -> str:
    """How far a run of a plan got (`recorded` of its runs: `--resume` runs a profile in
    parts), in how many invocations, at which commits, and how many of them were stopped
    before their end."""
    parts = [*meta.get("earlier_invocations", []), meta]
    planned = meta.get("runs_planned")
    whole = len(parts) == 1 and not meta.get("interrupted")
    return templates.render(
        "experiments/parts.md",
        under_way=isinstance(planned, int) and recorded < planned,
        recorded=recorded,
        planned=planned,
        parts=0 if whole else len(parts),
        started=parts[0].get("started", "?"),
        finished=meta.get("finished"),
        commits=list(dict.fromkeys(str(m.get("commit", "?"))[:10] for m in parts)),
        stopped=sum(1 for m in parts if m.get("interrupted") or not m.get("finished")),
    ).replace("\n", "")


def head(root: Path, runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The paragraphs that say how the experiments were measured (from meta.json)."""
    drops = sum((Counter(r["drop_reasons"]) for r in runs), Counter[str]())
    bad = [r for r in runs if not r["switch_agrees"]]
    mismatches = Counter(f"{r['experiment']} {r['load']}" for r in bad)
    pps = [r["switch_pps"] for r in runs]
    return templates.render(
        "experiments/head.md",
        meta=meta,
        runs=len(runs),
        reps=sorted({len(v) for v in groups(runs).values()}),
        described=provenance.describe(meta),
        parts=parts_text(meta, len(runs)),
        machine_cpu=statistics.median(r["machine_cpu"] for r in runs),
        switch_cpu=statistics.median(r["switch_cpu"] for r in runs),
        switch_cpu_max=max(r["switch_cpu"] for r in runs),
        pps=statistics.median(pps),
        pps_max=max(pps),
        ceiling=switch_ceiling(root.parent),
        drops=dict(sorted(drops.items())),
        mismatches=dict(sorted(mismatches.items())),
        all_breakpoint=all(r["load"] == "breakpoint" for r in bad),
        others=others(root),
        other_cpu=other_cpu(runs, meta),
    )


PLOTS = (
    "ab_rps.png",
    "ab_p95.png",
    "clients_jain.png",
    "shares_1-2-2.png",
    "k6_p95.png",
    "switch_pps.png",
)


@dataclass(frozen=True)
class Block:
    """results/README.md's experiments region, and the claims it decides."""

    text: str
    claims: list[Claim]


def loaded(root: Path) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Every run's figures under `root`, its meta.json, and the algorithms it compared."""
    runs = load_runs(root)
    meta = rawstore.read_meta(root)
    return runs, meta, meta.get("algorithms") or sorted({r["variant"] for r in runs})


def readme_block(root: Path) -> Block | None:
    """results/README.md's experiments region, from the raw files under `root` alone."""
    runs, meta, algorithms = loaded(root)
    if not runs:
        return None
    g = groups(runs)
    seeds, found = seed_figures(g, algorithms, sorted({k[3] for k in g if k[0] == "ab"}))
    text = templates.render(
        "experiments/block.md",
        head=head(root, runs, meta),
        seeds=seeds,
        where=root.name,
        plots=[m for m in PLOTS if (root / m).exists()],
    )
    return Block(text, found)


def summary(
    root: Path,
    runs: list[dict[str, Any]],
    meta: dict[str, Any],
    algorithms: list[str],
    made: list[str],
) -> str:
    """summary.md: how the runs were measured, every point's table, the plots `made`."""
    g = groups(runs)
    return templates.render(
        "experiments/summary.md",
        head=head(root, runs, meta),
        ab=points(g, "ab", algorithms),
        clients=[(p, clients_shares(p)) for p in points(g, "clients", algorithms)],
        k6=points(g, "k6", algorithms, by_shape=True),
        plots=made,
        rps_of=lambda p, n: med(g, ("ab", p.sc, n, p.ld), "rps"),
        zip=zip,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.experiments.report")
    p.add_argument("--out", default=str(outdir.RESULTS / "experiments"))
    a = p.parse_args(argv)
    root = Path(a.out)
    try:
        runs, meta, algorithms = loaded(root)
    except rawstore.RawError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    if not runs:
        print(f"report: no runs under {root / 'raw'}", file=sys.stderr)
        return 1
    g = groups(runs)
    zero = switch_ceiling(root.parent)["zero"]
    made = plots(g, algorithms, root, zero["median"] if zero else None)
    (root / "summary.md").write_text(summary(root, runs, meta, algorithms, made))
    (root / "runs.json").write_text(json.dumps(runs, indent=1))
    print(f"report: {len(runs)} runs -> {root / 'summary.md'}, {', '.join(made)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
