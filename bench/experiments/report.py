"""Every table and plot of the experiment suite, rebuilt from the raw files alone.

Reads results/experiments/raw/**/run.json (or those in raw.tar.xz, through bench.rawstore)
and the load generators' files beside each, writes results/experiments/{summary.md,
runs.json, *.png}; `readme_block` is results/README.md's experiments region
(bench.readme_figures fills it): the seeds' figures next to ours, and the claimed / found
table with its verdicts, each naming the bench and the test that decided it. Points are
medians over the repetitions with min and max."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import ab as abparse
from bench import rawstore, stats
from bench.experiments import breakpoint
from bench.experiments import load as loadgen
from p4lb.stats.fairness import jain, weighted_jain

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "experiments"

# Seed 002 Table 4 (throughput, kbit/s) and Table 5 / TIPHON (delay, ms) bands.
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
        failed = r.failed + (r.complete and 0)
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
        first, last, total = float("inf"), 0.0, 0
        summaries = [json.loads(p.read_text()) for p in sorted(run_dir.glob("k6-*.json"))]
        for p in sorted(run_dir.glob("k6-*.csv.gz")):
            d, f, t0, t1 = loadgen.k6_requests(p)
            times += d
            failed += f
            if d:
                first, last = min(first, t0), max(last, t1)
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
        "p50_ms": loadgen.percentile(times, 50),
        "p90_ms": loadgen.percentile(times, 90),
        "p95_ms": loadgen.percentile(times, 95),
        "p99_ms": loadgen.percentile(times, 99),
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
    xs = [float(r[field]) for r in rs if field in r]
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


# ---------------------------------------------------------------- tables


def fair(rs: list[dict[str, Any]], field: str) -> str:
    """A fairness figure, or – without a load balancer (one server takes everything)."""
    return "–" if rs[0]["variant"] == "single" else fmt(stat(rs, field), 3)


def ab_table(g: dict[Key, list[dict[str, Any]]], algorithms: list[str]) -> str:
    rows = [
        "| scenario | load | variant | req/s | vs single | vs iphash | p50 ms | p95 ms | p99 ms "
        "| max ms | failed | loss % | Jain (requests) | Jain / capacity | delay band (p95) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(k[1], k[3]) for k in g if k[0] == "ab"})
    for sc, ld in keys:
        names = variant_order(
            {k[2] for k in g if k[0] == "ab" and k[1] == sc and k[3] == ld}, algorithms
        )
        base = {n: stat(g[("ab", sc, n, ld)], "rps")[0] for n in names}
        for n in names:
            rs = g[("ab", sc, n, ld)]
            rps = stat(rs, "rps")
            vs_single = f"{rps[0] / base['single']:.2f}×" if base.get("single") else ""
            vs_ip = f"{100 * (rps[0] / base['iphash'] - 1):+.0f} %" if base.get("iphash") else ""
            rows.append(
                f"| {sc} | {ld} | {n} | {fmt(rps)} | {vs_single} | {vs_ip} | "
                f"{fmt(stat(rs, 'p50_ms'))} | {fmt(stat(rs, 'p95_ms'))} | "
                f"{fmt(stat(rs, 'p99_ms'))} | "
                f"{fmt(stat(rs, 'max_ms'))} | {fmt(stat(rs, 'failed'))} | "
                f"{fmt(stat(rs, 'loss_pct'), 2)} | {fair(rs, 'jain')} | "
                f"{fair(rs, 'capacity_jain')} | {delay_band(stat(rs, 'p95_ms')[0])} |"
            )
    return "\n".join(rows) + "\n"


def clients_table(g: dict[Key, list[dict[str, Any]]], algorithms: list[str]) -> str:
    rows = [
        "| scenario | sources | variant | requests per server | shares % (capacity %) | "
        "Jain | Jain / capacity | finished in s | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for sc, ld in sorted({(k[1], k[3]) for k in g if k[0] == "clients"}):
        names = variant_order(
            {k[2] for k in g if k[0] == "clients" and k[1] == sc and k[3] == ld}, algorithms
        )
        for n in names:
            rs = g[("clients", sc, n, ld)]
            r0 = rs[0]
            cap = [100 * w / sum(r0["workers"]) for w in r0["workers"]]
            served = [
                statistics.median(r["served"][i] for r in rs) for i in range(len(r0["servers"]))
            ]
            shares = [
                statistics.median(100 * r["shares"][i] for r in rs)
                for i in range(len(r0["servers"]))
            ]
            sources = 3 * load_count(ld)
            rows.append(
                f"| {sc} | {sources} ({ld}) | {n} | {' / '.join(f'{x:.0f}' for x in served)} | "
                + " / ".join(f"{s:.0f} ({c:.0f})" for s, c in zip(shares, cap, strict=True))
                + f" | {fmt(stat(rs, 'jain'), 3)} | {fmt(stat(rs, 'capacity_jain'), 3)} | "
                f"{fmt(stat(rs, 'time_taken_s'), 1)} | {fmt(stat(rs, 'p95_ms'))} |"
            )
    return "\n".join(rows) + "\n"


def k6_table(g: dict[Key, list[dict[str, Any]]], algorithms: list[str]) -> str:
    rows = [
        "| scenario | shape | variant | requests | req/s | avg ms | med ms | p90 ms | p95 ms | "
        "max ms | failed % | breakpoint: completed req/s (planned) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    shapes = ["average", "stress", "breakpoint"]
    keys = sorted(
        {(k[1], k[3]) for k in g if k[0] == "k6"},
        key=lambda x: (x[0], shapes.index(x[1]) if x[1] in shapes else 9),
    )
    for sc, ld in keys:
        names = variant_order(
            {k[2] for k in g if k[0] == "k6" and k[1] == sc and k[3] == ld}, algorithms
        )
        for n in names:
            rs = g[("k6", sc, n, ld)]
            fail = tuple(100 * x for x in stat(rs, "fail_rate"))
            bp = bp_cell(rs) if ld == "breakpoint" else ""
            rows.append(
                f"| {sc} | {ld} | {n} | {fmt(stat(rs, 'complete'))} | {fmt(stat(rs, 'rps'))} | "
                f"{fmt(stat(rs, 'mean_ms'))} | {fmt(stat(rs, 'p50_ms'))} | "
                f"{fmt(stat(rs, 'p90_ms'))} | "
                f"{fmt(stat(rs, 'p95_ms'))} | {fmt(stat(rs, 'max_ms'))} | "
                f"{fmt((fail[0], fail[1], fail[2]), 2)} | {bp} |"
            )
    return "\n".join(rows) + "\n"


def bp_cell(rs: list[dict[str, Any]]) -> str:
    """The breakpoint: the highest rate of completed requests (3 s window, failures below
    1 %), and the arrival rate k6 had planned when it stopped, labelled."""
    return (
        f"{fmt(stat(rs, 'breakpoint_completed_rps'))} "
        f"(planned {fmt(stat(rs, 'breakpoint_planned_rps'))})"
    )


def med(g: dict[Key, list[dict[str, Any]]], key: Key, field: str) -> float | None:
    rs = g.get(key)
    return stat(rs, field)[0] if rs else None


def spread_overlaps(g: dict[Key, list[dict[str, Any]]], a: Key, b: Key, field: str) -> bool:
    """Whether the min–max ranges of two points overlap (no difference beyond the noise)."""
    return stats.ranges_overlap(values(g[a], field), values(g[b], field))


def values(rs: list[dict[str, Any]], field: str) -> list[float]:
    return [float(r[field]) for r in rs if field in r]


def decided(g: dict[Key, list[dict[str, Any]]], a: Key, b: Key, field: str) -> str:
    """Which bench and test decided a comparison of two points: bench.stats' differs test
    on the repetitions' values, provisional below its five repetitions a side."""
    d = stats.differs(values(g[a], field), values(g[b], field))
    few = d["differs"] == "too few repetitions"
    return (
        f"`make bench` ({a[0]}, {a[1]}, {a[3]}): {a[2]} vs {b[2]} {field}, "
        f"{stats.DIFFERS_TEST} → "
        f"{'ranges overlap' if spread_overlaps(g, a, b, field) else 'differ'}"
        f" ({d['n'][0]} / {d['n'][1]} repetitions"
        + (f"; provisional: the test needs {stats.MIN_REPS_TO_COMPARE}" if few else "")
        + ")"
    )


def draws_text(g: dict[Key, list[dict[str, Any]]], scenario: str) -> str:
    """How many independent draws of client addresses the many-source runs cover."""
    draws = {r.get("draw") for k, rs in g.items() if k[:2] == ("clients", scenario) for r in rs}
    if draws == {None}:
        return "1 draw of client addresses: not redrawn per repetition (runs before issue 33)"
    return f"{len(draws - {None})} independent draws of client addresses"


def by_median(g: dict[Key, list[dict[str, Any]]], key: Key, field: str, rule: str) -> str:
    rs = g.get(key, [])
    return (
        f"`make bench` ({key[0]}, {key[1]}, {key[3]}): median {field} of {len(rs)} "
        f"repetitions, {rule}"
    )


def load_count(name: str) -> int:
    """The first figure of a load's name: ab's n of "n400-c10", the addresses of "a8-r10"."""
    return int(name.split("-")[0][1:])


def random_jain(n: int, k: int) -> float:
    """Jain's index of `n` requests placed on `k` servers at random, on average (to first order):
    the counts' squared coefficient of variation is (k - 1) / n, and Jain = 1 / (1 + CV²)."""
    return 1 / (1 + (k - 1) / n)


def unfair_verdict(hash_jain: list[float], rotation_jain: list[float]) -> str:
    """Seed 002's fairness claim (IP hash's Jain below 1, WRR's at 1) on the repetitions'
    values: reproduced when the hash's whole min–max range lies below the rotation's. It is
    small whatever it measures: one client's ports make the hash a random placement."""
    if hash_jain and rotation_jain and max(hash_jain) < min(rotation_jain):
        return "reproduced, but small"
    return "not reproduced"


NOISE = " (within the repetitions' spread)"


def pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+.0f} %" if b else "n/a"


def seed_tables(
    g: dict[Key, list[dict[str, Any]]], algorithms: list[str], ab_loads: list[str]
) -> str:
    """Seed figures next to ours, and the claimed / found table."""
    c10 = max(
        (ld for ld in ab_loads if ld.endswith("-c10")),
        key=load_count,
        default="",
    )
    c1 = max(
        (ld for ld in ab_loads if ld.endswith("-c1")),
        key=load_count,
        default="",
    )
    lines = []
    found: list[tuple[str, str, str, str, str]] = []

    # ---- seed 002: WRR vs IP hash
    lines += [
        "### Seed 002: WRR against IP hash (one client, ab)",
        "",
        "Seed: 3 servers, one client, ab -n 20k–100k, single-threaded python servers of equal "
        "power; its 'response time' is ab's mean time per request. Ours: the same with servers "
        "of a fixed capacity (25 ms per request, workers per scenario), latency percentiles from "
        "ab's per-request data (-g), and loss as TCP retransmissions over segments sent (the "
        "kernel counters of client and servers; the seed counted retransmissions in tcpdump "
        "captures of the server interfaces).",
        "",
        "| metric | seed 002 | ours: equal | ours: 1:1:4 |",
        "|---|---|---|---|",
    ]

    def cell(sc: str, ld: str, f: Any) -> str:
        try:
            return str(f(sc, ld))
        except (KeyError, ZeroDivisionError, TypeError):
            return "–"

    def rps_gain(sc: str, ld: str) -> str:
        w, i = med(g, ("ab", sc, "wrr", ld), "rps"), med(g, ("ab", sc, "iphash", ld), "rps")
        return f"{pct(w, i)} ({w:.0f} vs {i:.0f} req/s, {ld})" if w and i else "–"

    def p95_gain(sc: str, ld: str) -> str:
        w, i = med(g, ("ab", sc, "wrr", ld), "p95_ms"), med(g, ("ab", sc, "iphash", ld), "p95_ms")
        return f"{pct(w, i)} ({w:.0f} vs {i:.0f} ms p95, {ld})" if w and i else "–"

    def mean_gain(sc: str, ld: str) -> str:
        w, i = med(g, ("ab", sc, "wrr", ld), "mean_ms"), med(g, ("ab", sc, "iphash", ld), "mean_ms")
        return f"{pct(w, i)} ({w:.1f} vs {i:.1f} ms mean, {ld})" if w and i else "–"

    def jains(sc: str, ld: str) -> str:
        field = "jain" if sc == "equal" else "capacity_jain"
        w, i = med(g, ("ab", sc, "wrr", ld), field), med(g, ("ab", sc, "iphash", ld), field)
        per = "" if sc == "equal" else " (of requests per unit of capacity)"
        return f"iphash {i:.4f}, wrr {w:.4f}{per}" if w and i else "–"

    def tband(sc: str, ld: str) -> str:
        w, i = med(g, ("ab", sc, "wrr", ld), "kbps"), med(g, ("ab", sc, "iphash", ld), "kbps")
        if not (w and i):
            return "–"
        return (
            f"iphash {i:.0f} kbit/s {throughput_band(i)}, wrr {w:.0f} kbit/s {throughput_band(w)}"
        )

    def dband(sc: str, ld: str) -> str:
        w, i = med(g, ("ab", sc, "wrr", ld), "p95_ms"), med(g, ("ab", sc, "iphash", ld), "p95_ms")
        if not (w and i):
            return "–"
        return f"iphash {delay_band(i)}, wrr {delay_band(w)}"

    def loss(sc: str, ld: str) -> str:
        w, i = (
            med(g, ("ab", sc, "wrr", ld), "loss_pct"),
            med(g, ("ab", sc, "iphash", ld), "loss_pct"),
        )
        return f"iphash {i:.2f} %, wrr {w:.2f} %" if w is not None and i is not None else "–"

    for label, seed, f, ld in (
        ("throughput, WRR vs IP hash (-c 10)", "+13 %", rps_gain, c10),
        ("throughput, WRR vs IP hash (-c 1)", "–", rps_gain, c1),
        ("response time, WRR vs IP hash (mean)", "+2 %", mean_gain, c10),
        ("response time, WRR vs IP hash (p95)", "–", p95_gain, c10),
        ("Jain's index of requests per server", "IP hash < 1, WRR 1", jains, c10),
        ("packet loss", "both 'very good' (< 3 %); IP hash higher at 100k", loss, c10),
        ("throughput band (Table 4, ab's transfer rate)", "–", tband, c10),
        ("response time band (Table 5 / TIPHON, on p95)", "–", dband, c10),
    ):
        lines.append(f"| {label} | {seed} | {cell('equal', ld, f)} | {cell('1:1:4', ld, f)} |")
    lines.append("")

    w_eq, i_eq = (
        med(g, ("ab", "equal", "wrr", c10), "rps"),
        med(g, ("ab", "equal", "iphash", c10), "rps"),
    )
    w_un, i_un = (
        med(g, ("ab", "1:1:4", "wrr", c10), "rps"),
        med(g, ("ab", "1:1:4", "iphash", c10), "rps"),
    )
    if w_eq and i_eq and w_un and i_un:
        same = spread_overlaps(
            g, ("ab", "equal", "wrr", c10), ("ab", "equal", "iphash", c10), "rps"
        )
        w1 = med(g, ("ab", "equal", "wrr", c1), "rps") or 0.0
        i1 = med(g, ("ab", "equal", "iphash", c1), "rps") or 0.0
        eq_win = w_eq > 1.05 * i_eq and not same
        why = [
            "with 1:1:4 servers IP hash (no weights) sends each a third and the 1-worker "
            "servers become the bottleneck, while WRR 1:1:4 keeps all busy"
        ]
        if eq_win:
            why.append(
                "with equal servers at -c 10 the gain is short-term imbalance: a hash places "
                "each connection at random, so one server queues while another's workers idle "
                "(10 requests in flight on 6 workers); strict rotation never does. At -c 1 "
                "nothing queues and the two are equal"
            )
        found.append(
            (
                "002: WRR +13 % throughput over IP hash",
                f"equal servers -c 10: {pct(w_eq, i_eq)}{NOISE if same else ''}; -c 1: "
                f"{pct(w1, i1)}; 1:1:4 servers, weights 1:1:4, -c 10: {pct(w_un, i_un)}",
                "reproduced at -c 10 (larger with unequal servers)"
                if eq_win
                else (
                    "reproduced only with unequal servers"
                    if w_un > 1.1 * i_un
                    else "not reproduced"
                ),
                "; ".join(why),
                decided(g, ("ab", "equal", "wrr", c10), ("ab", "equal", "iphash", c10), "rps")
                + " (and > 5 % apart)",
            )
        )
    wm, im = (
        med(g, ("ab", "equal", "wrr", c10), "mean_ms"),
        med(g, ("ab", "equal", "iphash", c10), "mean_ms"),
    )
    wp = med(g, ("ab", "equal", "wrr", c10), "p95_ms") or 0.0
    ip = med(g, ("ab", "equal", "iphash", c10), "p95_ms") or 0.0
    wp1 = med(g, ("ab", "equal", "wrr", c1), "p95_ms") or 0.0
    ip1 = med(g, ("ab", "equal", "iphash", c1), "p95_ms") or 0.0
    if wm and im:
        same = spread_overlaps(
            g, ("ab", "equal", "wrr", c10), ("ab", "equal", "iphash", c10), "mean_ms"
        )
        found.append(
            (
                "002: IP hash −2 % response time vs WRR",
                f"equal servers -c 10: WRR mean {pct(wm, im)} vs IP hash, p95 "
                f"{pct(wp, ip)}; -c 1 p95 {pct(wp1, ip1)}"
                + (" (within the spread)" if same else ""),
                "not reproduced" if same else ("reversed" if wm < im else "reproduced"),
                "the switch's selection costs microseconds against a 25 ms service time, so the "
                "algorithm's own cost never shows; what shows is queueing at the servers, which "
                "WRR's rotation avoids. ab's mean is concurrency / throughput and only mirrors "
                "the throughput difference; the per-request p95 shows the queueing directly",
                decided(g, ("ab", "equal", "wrr", c10), ("ab", "equal", "iphash", c10), "mean_ms"),
            )
        )
    ij, wj = ("ab", "equal", "iphash", c10), ("ab", "equal", "wrr", c10)
    if g.get(ij) and g.get(wj):
        ji, wji = med(g, ij, "jain") or 0.0, med(g, wj, "jain") or 0.0
        n, k = load_count(c10), len(g[ij][0]["workers"])
        found.append(
            (
                "002: IP hash is unfair (Jain < 1), WRR is 1",
                f"one client, IP hash Jain {ji:.4f}, WRR {wji:.4f}; random placement of {n} "
                f"requests on {k} servers gives {random_jain(n, k):.4f} on average; see the "
                "many-source table for srchash",
                unfair_verdict(values(g[ij], "jain"), values(g[wj], "jain")),
                "with ports in the hash, one client's connections spread like random draws: the "
                "imbalance is binomial noise, shrinking with the request count; the strong "
                "imbalance needs a hash over few inputs (source address, few clients)",
                decided(g, wj, ij, "jain") + " (and IP hash lower)",
            )
        )

    # ---- seed 003: LB vs one server
    lines += [
        "### Seed 003: every algorithm against one server without a load balancer",
        "",
        "Seed: Citrix ADC, 4 web servers vs one, ab -n 3k–12k -c 10; +53 % throughput and −33 % "
        "response time for least connection, round robin evenest 'service hits'. Ours: ab -c 10 "
        "through the VIP vs the same ab straight to one server (the largest) through the switch.",
        "",
        "| variant | seed 003 throughput vs no LB | ours equal: req/s vs single | ours "
        "equal: p95 vs single "
        "| ours 1:1:4: req/s vs single | ours 1:1:4: p95 vs single |",
        "|---|---|---|---|---|---|",
    ]
    # Seed 003 Table 6 at 12k requests: kbit/s against 57.51 without a load balancer.
    seed003 = {
        "wrr": "+49 % (round robin, 12k)",
        "rr": "+49 % (round robin, 12k)",
        "leastconn": "+54 % (12k)",
        "leasttime": "+50 % (12k)",
        "leastpkt": "+22 % (12k)",
    }
    for n in variant_order(
        {k[2] for k in g if k[0] == "ab" and k[3] == c10} - {"single"}, algorithms
    ):
        cells = []
        for sc in ("equal", "1:1:4"):
            s_r, s_p = (
                med(g, ("ab", sc, "single", c10), "rps"),
                med(g, ("ab", sc, "single", c10), "p95_ms"),
            )
            v_r, v_p = med(g, ("ab", sc, n, c10), "rps"), med(g, ("ab", sc, n, c10), "p95_ms")
            cells += [pct(v_r, s_r) if v_r and s_r else "–", pct(v_p, s_p) if v_p and s_p else "–"]
        lines.append(f"| {n} | {seed003.get(n, '–')} | " + " | ".join(cells) + " |")
    lines.append("")
    gains = {
        n: (med(g, ("ab", "equal", n, c10), "rps") or 0)
        / (med(g, ("ab", "equal", "single", c10), "rps") or 1)
        for n in algorithms
        if ("ab", "equal", n, c10) in g
    }
    if gains and ("ab", "equal", "single", c10) in g:
        spread = [n for n in gains if gains[n] > 1.5]
        lumped = [n for n in gains if gains[n] <= 1.5]
        p_single = med(g, ("ab", "equal", "single", c10), "p95_ms") or 0.0
        p_wrr = med(g, ("ab", "equal", "wrr", c10), "p95_ms") or 0.0
        found.append(
            (
                "003: LB +53 % throughput, −33 % response time vs one server",
                "equal servers, -c 10, req/s over one server's: "
                + ", ".join(f"{n} {gains[n]:.2f}×" for n in gains)
                + (f"; p95 wrr {pct(p_wrr, p_single)} vs one server" if p_single else ""),
                "reproduced, larger" if "wrr" in spread else "not reproduced",
                "once the servers are the bottleneck, 3 servers answer up to 3× one; the seed's "
                "smaller gain fits a client or an ADC that was itself near its limit"
                + (f"; {', '.join(lumped)} gain little or nothing" if lumped else "")
                + (
                    " (srchash: one client is one source address, so it sends everything to "
                    "one server)"
                    if "srchash" in lumped
                    else ""
                ),
                decided(g, ("ab", "equal", "wrr", c10), ("ab", "equal", "single", c10), "rps")
                + " (and wrr's median > 1.5× single's)",
            )
        )
    lc = med(g, ("ab", "1:1:4", "leastconn", c10), "p95_ms")
    wr = med(g, ("ab", "1:1:4", "wrr", c10), "p95_ms")
    rr = med(g, ("ab", "1:1:4", "rr", c10), "p95_ms")
    ipp = med(g, ("ab", "1:1:4", "iphash", c10), "p95_ms")
    if lc and wr:
        best_p95 = min(
            (n for n in algorithms if ("ab", "1:1:4", n, c10) in g),
            key=lambda n: med(g, ("ab", "1:1:4", n, c10), "p95_ms") or 1e9,
        )
        found.append(
            (
                "003: least connection has the best response time",
                f"1:1:4, -c 10 p95: leastconn {lc:.0f} ms, wrr (weights 1:1:4) {wr:.0f} ms"
                + (f", rr (equal weights) {rr:.0f} ms" if rr else "")
                + (f", iphash {ipp:.0f} ms" if ipp else "")
                + f"; lowest: {best_p95}",
                "reproduced" if best_p95 == "leastconn" else "not reproduced",
                "with weights that match the capacities exactly, WRR's rotation already fits a "
                "closed-loop load and least connections has nothing left to fix; against "
                "capacity-blind configs (rr, iphash) it wins, which is the seed's comparison "
                "(its round robin had no weights)",
                by_median(g, ("ab", "1:1:4", "leastconn", c10), "p95_ms", "lowest of every variant")
                + "; "
                + decided(
                    g, ("ab", "1:1:4", "leastconn", c10), ("ab", "1:1:4", "wrr", c10), "p95_ms"
                ),
            )
        )

    # ---- seed 001: k6
    lines += [
        "### Seed 001: round robin against IP hash under k6's load shapes",
        "",
        "Seed (average load, 100 VUs, 1 s pause per iteration, http_req_duration): round robin avg "
        "109.32 ms, med 114.79, p90 199.14, p95 226.37, max 2.39 s, 0.00 % failed; IP hash avg "
        "154.45 ms, med 121.04, p90 216.97, p95 262.81, max 60 s, 4 of 172,781 failed. Ours: 3 "
        "k6 clients, VUs spread over their source addresses (--local-ips), servers 1:2:2; `rr` is "
        "wrr with equal weights (the seed's round robin), iphash the 5-tuple hash.",
        "",
    ]
    k6keys = sorted({(k[1], k[3]) for k in g if k[0] == "k6"})
    if k6keys:
        lines += [
            "| scenario | shape | variant | avg ms | med ms | p90 ms | p95 ms | max ms | "
            "failed % | breakpoint: completed req/s (planned) |",
            "|---|---|---|---|---|---|---|---|---|---|",
            "| seed 001 | average | round robin | 109.32 | 114.79 | 199.14 | 226.37 | 2390 | "
            "0.00 | – |",
            "| seed 001 | average | IP hash | 154.45 | 121.04 | 216.97 | 262.81 | 60000 | "
            "0.002 | – |",
        ]
        for sc, ld in k6keys:
            for n in variant_order(
                {k[2] for k in g if k[0] == "k6" and k[1] == sc and k[3] == ld}, algorithms
            ):
                rs = g[("k6", sc, n, ld)]
                lines.append(
                    f"| {sc} | {ld} | {n} | {fmt(stat(rs, 'mean_ms'))} | "
                    f"{fmt(stat(rs, 'p50_ms'))} | "
                    f"{fmt(stat(rs, 'p90_ms'))} | {fmt(stat(rs, 'p95_ms'))} | "
                    f"{fmt(stat(rs, 'max_ms'))} | "
                    f"{100 * stat(rs, 'fail_rate')[0]:.2f} | "
                    f"{bp_cell(rs) if ld == 'breakpoint' else '–'} |"
                )
        rr_p95 = med(g, ("k6", "1:2:2", "rr", "average"), "p95_ms")
        ip_p95 = med(g, ("k6", "1:2:2", "iphash", "average"), "p95_ms")
        rr_bp = med(g, ("k6", "1:2:2", "rr", "breakpoint"), "breakpoint_completed_rps")
        ip_bp = med(g, ("k6", "1:2:2", "iphash", "breakpoint"), "breakpoint_completed_rps")
        rr_plan = med(g, ("k6", "1:2:2", "rr", "breakpoint"), "breakpoint_planned_rps")
        ip_plan = med(g, ("k6", "1:2:2", "iphash", "breakpoint"), "breakpoint_planned_rps")
        rr_key = ("k6", "1:2:2", "rr", "average")
        ip_key = ("k6", "1:2:2", "iphash", "average")
        if rr_p95 and ip_p95:
            k6_same = spread_overlaps(g, rr_key, ip_key, "p95_ms")
            found.append(
                (
                    "001: round robin has lower latency than IP hash (p95 226 vs 263 ms)",
                    f"average load, 1:2:2: rr p95 {fmt(stat(g[rr_key], 'p95_ms'))} ms, iphash "
                    f"{fmt(stat(g[ip_key], 'p95_ms'))} ms"
                    + (
                        f"; breakpoint (highest completed rate, failures < 1 %) rr {rr_bp:.0f}, "
                        f"iphash {ip_bp:.0f} req/s (planned arrival rate when k6 stopped: "
                        f"{rr_plan or 0:.0f} and {ip_plan or 0:.0f})"
                        if rr_bp and ip_bp
                        else ""
                    ),
                    "not reproduced (within the spread)"
                    if k6_same
                    else ("reproduced" if rr_p95 < ip_p95 else "reversed"),
                    (
                        "at this load (a tenth of the servers' capacity) both stay near the 25 ms "
                        "service time and their tails differ by less than the repetitions' spread: "
                        "noise from the shared machine, not the algorithm, sets the p95"
                        if k6_same
                        else "both are capacity-blind on 1:2:2 servers; the hash places "
                        "connections at random, so a 1-worker server sometimes holds two at once "
                        "where strict rotation spaces them out: a tail (p95) effect"
                    )
                    + (
                        "; both complete about the same rate at their breakpoint: each sends "
                        "the 1-worker server a third, which saturates it at 3 × 40 = 120 req/s "
                        "(k6 stops later, when the p95 of the whole run passes the bound)"
                        if rr_bp and ip_bp and abs(rr_bp - ip_bp) < 0.1 * ip_bp
                        else ""
                    ),
                    decided(g, rr_key, ip_key, "p95_ms"),
                )
            )
    else:
        lines.append("k6 was not installed when the suite ran: no seed 001 figures.\n")
    lines.append("")

    # ---- seed 000: share vs capacity
    lines += [
        "### Seed 000: share of traffic against capacity (1:2:2)",
        "",
        "Seed: ECMP (hash mod N) gave the 100 Mbps ISP 36–40 % of the traffic where its capacity "
        "share is 20 %; PCC with 1:2:2 buckets gave it 20–22 % (week 5: 177 / 406 / 313 GiB "
        "upload, "
        "1,105 / 2,423 / 2,443 GiB download). Ours: requests per server from 3 clients × k source "
        "addresses, one ab -c 1 per address.",
        "",
        "| variant | seed 000 share of the small path | ours: share of the 1-worker server "
        "(capacity 20 %) |",
        "|---|---|---|",
    ]
    seed000 = {"iphash": "ECMP: 40 % up, 32 % down", "srchash": "PCC 1:2:2: 20 % up, 18 % down"}
    cl = sorted({k[3] for k in g if k[0] == "clients" and k[1] == "1:2:2"})
    for n in variant_order({k[2] for k in g if k[0] == "clients" and k[1] == "1:2:2"}, algorithms):
        cells = []
        for ld in cl:
            rs = g.get(("clients", "1:2:2", n, ld))
            if rs:
                sh = stat([{"s": 100 * r["shares"][0]} for r in rs], "s")
                cells.append(f"{sh[0]:.0f} % ({3 * int(ld.split('-')[0][1:])} sources)")
        lines.append(f"| {n} | {seed000.get(n, '–')} | {', '.join(cells)} |")
    lines.append("")
    ip_s = [
        100 * r["shares"][0] for ld in cl for r in g.get(("clients", "1:2:2", "iphash", ld), [])
    ]
    w_s = [100 * r["shares"][0] for ld in cl for r in g.get(("clients", "1:2:2", "wrr", ld), [])]
    if ip_s and w_s:
        found.append(
            (
                "000: hash mod N ignores capacity; weighted buckets follow 1:2:2",
                f"small server's share: iphash {min(ip_s):.0f}–{max(ip_s):.0f} %, wrr "
                f"{min(w_s):.0f}–{max(w_s):.0f} % (capacity 20 %)",
                "reproduced" if min(ip_s) > max(w_s) else "not reproduced",
                "iphash has no weights (each server a third); wrr, maglev and srchash read the "
                "weights, srchash only as far as its few source addresses let it",
                f"`make bench` (clients, 1:2:2, every source count): the small server's share, "
                f"iphash's lowest above wrr's highest over {len(ip_s)} / {len(w_s)} runs "
                f"({draws_text(g, '1:2:2')})",
            )
        )
    # srchash fairness with few / many sources
    eq = sorted(
        {k[3] for k in g if k[0] == "clients" and k[1] == "equal"},
        key=load_count,
    )
    if eq and ("clients", "equal", "srchash", eq[0]) in g:
        few, many = eq[0], eq[-1]  # a partial run may lack iphash: its figure is left out
        jf = med(g, ("clients", "equal", "srchash", few), "jain")
        jm = med(g, ("clients", "equal", "srchash", many), "jain")
        ji_f = med(g, ("clients", "equal", "iphash", few), "jain")
        found.append(
            (
                "002's problem statement: IP hash imbalances load",
                f"equal servers: srchash Jain {jf:.3f} with {3 * int(few.split('-')[0][1:])} "
                f"sources, "
                f"{jm or 0.0:.3f} with {3 * int(many.split('-')[0][1:])}"
                + (f"; 5-tuple iphash {ji_f:.3f} with the fewest" if ji_f is not None else ""),
                "reproduced for the source-address hash with few clients"
                if (jf or 1.0) < 0.9
                else "not reproduced",
                "a hash of the source address puts all of one client's requests on one server, so "
                "with few clients (or clients behind NAT) shares are lumpy; hashing the ports too "
                "spreads even one client's connections",
                by_median(g, ("clients", "equal", "srchash", few), "jain", "reproduced when < 0.9")
                + f" ({draws_text(g, 'equal')})",
            )
        )

    lines += [
        "### Claimed / found",
        "",
        "| seed claim | what we found | verdict | why | decided by |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in found]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- plots


def plots(
    g: dict[Key, list[dict[str, Any]]], algorithms: list[str], out: Path, ceiling: float | None
) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def bars(
        ax: Any,
        items: list[tuple[str, tuple[float, float, float]]],
        offset: float,
        width: float,
        label: str,
    ) -> None:
        xs = [i + offset for i in range(len(items))]
        meds = [t[0] for _, t in items]
        err = [[t[0] - t[1] for _, t in items], [t[2] - t[0] for _, t in items]]
        ax.bar(xs, meds, width=width, yerr=err, capsize=3, label=label)

    for exp, field, ylabel, fname in (
        ("ab", "rps", "requests/s (median, min–max)", "ab_rps.png"),
        ("ab", "p95_ms", "p95 latency ms (median, min–max)", "ab_p95.png"),
    ):
        loads = sorted({k[3] for k in g if k[0] == exp})
        scen = sorted({k[1] for k in g if k[0] == exp})
        if not loads:
            continue
        fig, axes = plt.subplots(len(loads), 1, figsize=(9, 3.2 * len(loads)), squeeze=False)
        for ax, ld in zip(axes[:, 0], loads, strict=True):
            names = variant_order({k[2] for k in g if k[0] == exp and k[3] == ld}, algorithms)
            width = 0.8 / max(1, len(scen))
            for j, sc in enumerate(scen):
                items = [
                    (
                        n,
                        stat(g[(exp, sc, n, ld)], field)
                        if (exp, sc, n, ld) in g
                        else (0.0, 0.0, 0.0),
                    )
                    for n in names
                ]
                bars(ax, items, j * width - 0.4 + width / 2, width, f"servers {sc}")
            ax.set_xticks(range(len(names)), names, fontsize=8)
            ax.set_title(f"ab {ld}", fontsize=9)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(out / fname, dpi=100)
        plt.close(fig)
        made.append(fname)

    loads = sorted({k[3] for k in g if k[0] == "clients"}, key=load_count)
    if loads:
        scen = sorted({k[1] for k in g if k[0] == "clients"})
        fig, axes = plt.subplots(1, len(scen), figsize=(5 * len(scen), 3.6), squeeze=False)
        for ax, sc in zip(axes[0], scen, strict=True):
            names = variant_order({k[2] for k in g if k[0] == "clients" and k[1] == sc}, algorithms)
            width = 0.8 / len(loads)
            field = "jain" if sc == "equal" else "capacity_jain"
            for j, ld in enumerate(loads):
                items = [
                    (
                        n,
                        stat(g[("clients", sc, n, ld)], field)
                        if ("clients", sc, n, ld) in g
                        else (0.0, 0.0, 0.0),
                    )
                    for n in names
                ]
                bars(
                    ax,
                    items,
                    j * width - 0.4 + width / 2,
                    width,
                    f"{3 * int(ld.split('-')[0][1:])} sources",
                )
            ax.set_xticks(range(len(names)), names, fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.set_title(
                f"servers {sc}: Jain's index"
                + (" of requests / capacity" if sc != "equal" else ""),
                fontsize=9,
            )
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(out / "clients_jain.png", dpi=100)
        plt.close(fig)
        made.append("clients_jain.png")

        sc = "1:2:2"
        names = variant_order({k[2] for k in g if k[0] == "clients" and k[1] == sc}, algorithms)
        if names:
            ld = loads[-1]
            fig, ax = plt.subplots(figsize=(8, 3.6))
            width = 0.8 / 3
            for i in range(3):
                items = []
                for n in names:
                    rs = g.get(("clients", sc, n, ld), [])
                    items.append((n, stat([{"s": 100 * r["shares"][i]} for r in rs], "s")))
                bars(ax, items, i * width - 0.4 + width / 2, width, f"server {i + 1}")
            cap = SCEN_CAP
            for i, c in enumerate(cap):
                ax.axhline(c, color=f"C{i}", linestyle="--", linewidth=1)
            ax.set_xticks(range(len(names)), names, fontsize=8)
            ax.set_ylabel("share of requests % (dashed: capacity)")
            ax.set_title(f"servers 1:2:2, {3 * int(ld.split('-')[0][1:])} sources", fontsize=9)
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(out / "shares_1-2-2.png", dpi=100)
            plt.close(fig)
            made.append("shares_1-2-2.png")

    shapes = [
        s for s in ("average", "stress", "breakpoint") if any(k[0] == "k6" and k[3] == s for k in g)
    ]
    if shapes:
        fig, axes = plt.subplots(1, len(shapes), figsize=(4.5 * len(shapes), 3.6), squeeze=False)
        for ax, sh in zip(axes[0], shapes, strict=True):
            names = variant_order({k[2] for k in g if k[0] == "k6" and k[3] == sh}, algorithms)
            scen = sorted({k[1] for k in g if k[0] == "k6" and k[3] == sh})
            width = 0.8 / len(scen)
            for j, sc in enumerate(scen):
                items = [
                    (
                        n,
                        stat(g[("k6", sc, n, sh)], "p95_ms")
                        if ("k6", sc, n, sh) in g
                        else (0.0, 0.0, 0.0),
                    )
                    for n in names
                ]
                bars(ax, items, j * width - 0.4 + width / 2, width, f"servers {sc}")
            ax.set_xticks(range(len(names)), names, fontsize=8)
            ax.set_title(f"k6 {sh}: p95 ms", fontsize=9)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(out / "k6_p95.png", dpi=100)
        plt.close(fig)
        made.append("k6_p95.png")

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
        fig.tight_layout()
        fig.savefig(out / "switch_pps.png", dpi=100)
        plt.close(fig)
        made.append("switch_pps.png")
    return made


SCEN_CAP = [20.0, 40.0, 40.0]


def switch_ceiling(results: Path | None = None) -> tuple[float | None, str]:
    """The standard build's measured zero-loss rate for wrr (switch/switch.json beside the
    experiments), and when that file was measured."""
    p = (results or ROOT / "results") / "switch" / "switch.json"
    try:
        d = json.loads(p.read_text())
        z = d["builds"]["standard"]["programs"]["wrr"]["zero_loss_pps"]
        s = d["builds"]["standard"]["programs"]["wrr"]["saturation_pps"]
        return float(z["median"]), (
            f"{z['median']:.0f} pps zero-loss ({z['min']:.0f}–{z['max']:.0f}); it delivers only "
            f"{s['median']:.0f} pps once overloaded (switch/switch.json, measured "
            f"{d.get('when', '?')}, not in the same run as these experiments)"
        )
    except (OSError, KeyError, ValueError):
        return None, f"unknown ({p} missing)"


OURS = ("topology.server", "bench.experiments", "ab -r", "k6 run", "127.0.0.1:9559", "ps -eo")


def others_text(root: Path) -> str:
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
    if not n:
        return "not recorded"
    if not seen:
        return f"none in {n} runs"
    return "; ".join(f"{k} (after {v} of {n} runs)" for k, v in sorted(seen.items()))


def other_cpu_text(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Other processes' share of all cores during each run (issue 33: sampled per run)."""
    xs = [r["other_cpu"] for r in runs if r.get("other_cpu") is not None]
    if not xs:
        return "Other processes' CPU share during each run: not recorded (runs before issue 33)."
    limit = (meta.get("provenance") or {}).get("load", {}).get("limit", 0.25)
    over = sum(x > limit for x in xs)
    return (
        "Other processes' share of the CPU during each run: median "
        f"{100 * statistics.median(xs):.0f} %, max {100 * max(xs):.0f} %; "
        f"{over} of {len(xs)} runs above the limit of "
        f"{100 * limit:.0f} %."
    )


def drop_text(runs: list[dict[str, Any]]) -> str:
    total: dict[str, int] = defaultdict(int)
    for r in runs:
        for k, v in r["drop_reasons"].items():
            total[k] += v
    notes = {
        "unsupported": "frames neither IPv4 nor ARP (the hosts' own IPv6 chatter)",
        "no_state": "segments of connections k6 abandoned when a breakpoint run stopped",
    }
    return (
        ", ".join(
            f"{k} {v}" + (f" ({notes[k]})" if k in notes else "") for k, v in sorted(total.items())
        )
        or "none"
    )


def mismatch_text(runs: list[dict[str, Any]]) -> str:
    bad = [r for r in runs if not r["switch_agrees"]]
    if not bad:
        return "none"
    by: dict[str, int] = defaultdict(int)
    for r in bad:
        by[f"{r['experiment']} {r['load']}"] += 1
    return ", ".join(f"{v} × {k}" for k, v in sorted(by.items())) + (
        " (a stopped k6 breakpoint run leaves connections the servers never accepted)"
        if all(r["load"] == "breakpoint" for r in bad)
        else ""
    )


PLOTS = (
    "ab_rps.png",
    "ab_p95.png",
    "clients_jain.png",
    "shares_1-2-2.png",
    "k6_p95.png",
    "switch_pps.png",
)


def parts_text(meta: dict[str, Any], recorded: int) -> str:
    """How far a run of a plan got (`recorded` of its runs: `--resume` runs a profile in
    parts), in how many invocations, at which commits, and how many of them were stopped
    before their end."""
    parts = [*meta.get("earlier_invocations", []), meta]
    planned = meta.get("runs_planned")
    out = ""
    if isinstance(planned, int) and recorded < planned:
        out = f" **Under way: {recorded} of the plan's {planned} runs so far.**"
    if len(parts) == 1 and not meta.get("interrupted"):
        return out
    commits = list(dict.fromkeys(str(m.get("commit", "?"))[:10] for m in parts))
    stopped = sum(1 for m in parts if m.get("interrupted") or not m.get("finished"))
    return out + (
        f" Measured in {len(parts)} part{'s' if len(parts) > 1 else ''} (`--resume`: one "
        f"order seed, finished runs kept), {parts[0].get('started', '?')} to "
        f"{meta.get('finished') or '(running)'}, at commit{'s' if len(commits) > 1 else ''} "
        f"{', '.join(commits)}; {stopped} of them stopped before the end of the plan."
    )


def head_lines(root: Path, runs: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The paragraph that says how the experiments were measured (from meta.json)."""
    from bench import provenance

    g = groups(runs)
    _, ceiling_text = switch_ceiling(root.parent)
    pps = [r["switch_pps"] for r in runs]
    reps = sorted({len(v) for v in g.values()})
    return [
        f"Profile **{meta.get('profile', '?')}**, {len(runs)} runs, {'/'.join(map(str, reps))} "
        f"repetitions per point; medians with (min–max). Measured {meta.get('started', '?')} → "
        f"{meta.get('finished', '?')} on {meta.get('cpus', '?')} CPUs, kernel "
        f"{meta.get('kernel', '?')}, commit {str(meta.get('commit', '?'))[:10]}, P4 program "
        f"{str(meta.get('p4_program', '?'))[:10]}; "
        f"BMv2 `{meta.get('bmv2', '?')}`; {meta.get('ab', '')}; k6 {meta.get('k6', '?')}. "
        f"Provenance (issue 33): {provenance.describe(meta)}. Variants' order within a "
        "repetition: "
        + (
            f"shuffled per repetition (seed {meta['order_seed']})"
            if "order_seed" in meta
            else "not interleaved (each point's repetitions ran back to back; runs before issue 33)"
        )
        + "."
        + parts_text(meta, len(runs)),
        "",
        f"Machine load: load average {meta.get('loadavg_at_start', [0.0])[0]:.2f} at the start, "
        f"{meta.get('loadavg_at_end', [0.0])[0]:.2f} at the end; busiest processes at the start: "
        f"{'; '.join(meta.get('busiest_processes_at_start', [])[:4])}. Median machine CPU "
        f"busy during "
        f"runs {100 * statistics.median(r['machine_cpu'] for r in runs):.0f} %, the switch process "
        f"{100 * statistics.median(r['switch_cpu'] for r in runs):.0f} % of one core (max "
        f"{100 * max(r['switch_cpu'] for r in runs):.0f} %).",
        "",
        f"Switch packet rate: median {statistics.median(pps):.0f} pps, max {max(pps):.0f} pps, "
        f"against the standard build's measured ceiling for wrr: {ceiling_text}. Switch drops in "
        f"all runs, by reason: {drop_text(runs)}. Runs where the switch's per-backend "
        f"connection counters differ from the servers' access logs: "
        f"{mismatch_text(runs)}.",
        "",
        f"Other work on the machine, busy (> 20 % CPU) right after a run: {others_text(root)}. "
        f"{other_cpu_text(runs, meta)}",
        "",
        "tc queueing disciplines on this kernel: "
        + ", ".join(f"{q} {'yes' if ok else 'missing'}" for q, ok in meta.get("qdiscs", {}).items())
        + ".",
        "",
    ]


def readme_block(root: Path) -> str | None:
    """results/README.md's experiments region, from the raw files under `root` alone."""
    runs = load_runs(root)
    if not runs:
        return None
    meta = json.loads((root / "meta.json").read_text()) if (root / "meta.json").exists() else {}
    algorithms = meta.get("algorithms") or sorted({r["variant"] for r in runs})
    g = groups(runs)
    ab_loads = sorted({k[3] for k in g if k[0] == "ab"})
    made = [m for m in PLOTS if (root / m).exists()]
    return (
        "\n".join(head_lines(root, runs, meta))
        + "\n"
        + seed_tables(g, algorithms, ab_loads)
        + f"\nPlots (in {root.name}/): "
        + ", ".join(f"[{m}]({root.name}/{m})" for m in made)
        + f". Every run's table: [{root.name}/summary.md]({root.name}/summary.md).\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.experiments.report")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--readme", default=None, help="ignored: bench.readme_figures fills READMEs")
    a = p.parse_args(argv)
    root = Path(a.out)
    try:
        runs = load_runs(root)
    except rawstore.RawError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    if not runs:
        print(f"report: no runs under {root / 'raw'}", file=sys.stderr)
        return 1
    meta = json.loads((root / "meta.json").read_text()) if (root / "meta.json").exists() else {}
    algorithms = meta.get("algorithms") or sorted({r["variant"] for r in runs})
    g = groups(runs)
    ceiling, _ = switch_ceiling(root.parent)
    made = plots(g, algorithms, root, ceiling)
    summary = (
        "# Experiments (issue 15)\n\nGenerated by `python -m bench.experiments.report` from raw/; "
        "do not edit.\n\n"
        + "\n".join(head_lines(root, runs, meta))
        + "\n## ab, one client (seeds 002, 003)\n\n"
        + ab_table(g, algorithms)
        + "\n## Many sources: 3 clients × k addresses, one ab -c 1 each (seed 000, hash "
        "imbalance)\n\n"
        + clients_table(g, algorithms)
        + "\n## k6 load shapes (seed 001)\n\n"
        + k6_table(g, algorithms)
        + "\n"
        + "".join(f"![{m}]({m})\n" for m in made)
    )
    (root / "summary.md").write_text(summary)
    (root / "runs.json").write_text(json.dumps(runs, indent=1))
    print(f"report: {len(runs)} runs -> {root / 'summary.md'}, {', '.join(made)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
