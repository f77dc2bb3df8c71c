"""The figures README.md, results/README.md and the manual (docs/) quote, generated from the
results files: no hand-copied number.

A figure lives in a marked region, `<!-- results:NAME -->` ... `<!-- /results:NAME -->`;
REGIONS maps each NAME to the function that writes it from a results directory. Text
outside the regions is prose and carries no measured number.

    python -m bench.readme_figures [--results DIR] [--check]

With --results results (the default) the files are rewritten in place; with another
directory (a quick run's scratch tree) the regenerated copies go into it (DIR/README.md
from results/README.md, DIR/README.top.md from README.md, DIR/docs/NAME.md from
docs/NAME.md), and the committed files stay as they are. --check changes nothing and
exits 1 naming each region that differs."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench import outdir, provenance, rawstore
from bench.floor import LEVELS

ROOT = outdir.ROOT
READMES = {
    rel: ROOT / rel
    for rel in (
        "results/README.md",
        "README.md",
        "docs/benchmarks.md",
        "docs/design.md",
        "docs/tier.md",
    )
}
# The papers the experiments reproduce, as the docs name them (the results files number them).
PAPERS = {
    "000": "Fathurrohim and Basuki",
    "001": "Sudiatmika et al.",
    "002": "Usman et al.",
    "003": "Ramadhan and Wardhana",
    "004": "Maulana et al.",
}
# A region is a block (markers on lines of their own) or inline (within a sentence, the
# generator's text then has no line break at its end).
REGION = re.compile(
    r"(<!-- results:(?P<name>[\w-]+) -->\n?)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S
)
ALGS = ("iphash", "wrr", "leastconn")
SPEED_NAMES = ("fast", "speed")


class MissingFile(Exception):
    pass


def load(root: Path, rel: str) -> Any:
    p = root / rel
    if not p.exists():
        raise MissingFile(rel)
    return json.loads(p.read_text())


def r2(x: float) -> str:
    return f"{x:.2f}"


def thousands(x: float) -> str:
    return f"{x:,.0f}"


def speed_build(builds: dict[str, Any]) -> str:
    return next(b for b in builds if b in SPEED_NAMES)


# ---------------------------------------------------------------- switch/


def goal_rows(root: Path, with_reps: bool) -> list[tuple[str, dict[str, str]]]:
    """(figure, {build: 'iphash / wrr / leastconn' ratios}) of lb.p4 over baseline.p4."""
    sw = load(root, "switch/switch.json")
    ab = load(root, "switch/ab.json")

    def cell(per_alg: dict[str, dict[str, float]]) -> str:
        text = " / ".join(r2(per_alg[a]["median"]) for a in ALGS)
        if with_reps:
            lo = min(per_alg[a]["min"] for a in ALGS)
            hi = max(per_alg[a]["max"] for a in ALGS)
            text += f" (reps {r2(lo)}–{r2(hi)})"
        return text

    rows: dict[str, dict[str, str]] = {}
    for build, b in sw["builds"].items():
        p = b["programs"]
        instr = b["instructions"]["programs"]
        base_all = instr["baseline"]["all_threads_per_packet"]["median"]
        rows.setdefault("zero", {})[build] = cell(
            {a: p[a]["zero_loss_vs_baseline_per_rep"] for a in ALGS}
        )
        rows.setdefault("ab", {})[build] = cell(
            {a: ab["builds"][build]["programs"][a]["vs_baseline_per_rep"] for a in ALGS}
        )
        rows.setdefault("cpu", {})[build] = cell(
            {a: p[a]["cpu_capacity_vs_baseline_per_rep"] for a in ALGS}
        )
        rows.setdefault("all", {})[build] = " / ".join(
            r2(base_all / instr[a]["all_threads_per_packet"]["median"]) for a in ALGS
        )
        rows.setdefault("busiest", {})[build] = " / ".join(
            r2(instr[a]["capacity_vs_baseline_per_rep"]["median"]) for a in ALGS
        )
    n, c, reps = ab["n"], ab["c"], ab["reps"]
    labels = {
        "zero": "zero-loss packet rate",
        "ab": f"ab requests/s through the VIP (`ab -n {n} -c {c}`, {reps} reps)"
        if with_reps
        else f"ab requests/s (`-n {n} -c {c}`, {reps} repetitions)",
        "cpu": "busiest thread's CPU per packet at 2,000 pps",
        "all": "instructions per packet, all threads (callgrind"
        + ("; repetitions within 1 %)" if with_reps else ")"),
        "busiest": "instructions per packet, busiest thread",
    }
    keys = ["zero", "ab", "cpu", "all"] + (["busiest"] if with_reps else [])
    return [(labels[k], rows[k]) for k in keys]


def _builds_table(root: Path, header: str, goal: bool) -> str:
    """goal_rows as a table with a column per build (standard, speed)."""
    sw = load(root, "switch/switch.json")
    std, spd = "standard", speed_build(sw["builds"])
    lines = [header, "|---|---|---|"]
    lines += [f"| {label} | {v[std]} | {v[spd]} |" for label, v in goal_rows(root, goal)]
    return "\n".join(lines) + "\n"


def overhead_goal(root: Path) -> str:
    return _builds_table(
        root,
        "| figure (lb.p4 over baseline.p4; iphash / wrr / leastconn) | standard build (goal 0.75) "
        "| speed build (goal 0.9) |",
        True,
    )


def switch_summary(root: Path) -> str:
    return _builds_table(
        root,
        "| figure | standard build (logging macros, as p4lang ships it) | speed build "
        "(`--disable-logging-macros --disable-elogger`, -O3) |",
        False,
    )


def floor_order(names: Iterable[str]) -> list[str]:
    """The floor's programs level by level, then lb.p4's (a run records them in the order
    its first repetition drew)."""
    return sorted(names, key=lambda n: (n not in LEVELS, LEVELS.get(n, 0), n))


def floor_table(root: Path) -> str:
    fl = load(root, "switch/floor.json")
    std, spd = "standard", speed_build(fl["builds"])
    spread = max(
        (p[f"{k}_vs_baseline_per_rep"]["max"] - p[f"{k}_vs_baseline_per_rep"]["min"])
        / p[f"{k}_vs_baseline_per_rep"]["median"]
        for b in fl["builds"].values()
        for n, p in b["programs"].items()
        if n != "baseline"
        for k in ("all", "busiest")
    )
    lines = [
        "| program (over baseline.p4; instructions per packet, callgrind; repetitions within "
        f"{100 * spread:.1f} %) | standard, all threads | standard, busiest thread | speed, all "
        "threads | speed, busiest thread |",
        "|---|---|---|---|---|",
    ]
    names = floor_order(n for n in fl["builds"][std]["programs"] if n != "baseline")
    for n in names:
        label = n if n.startswith("floor") else f"lb.p4, {n.upper()}"
        cells = [
            r2(fl["builds"][b]["programs"][n][f"{k}_vs_baseline_per_rep"]["median"])
            for b in (std, spd)
            for k in ("all", "busiest")
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| goal | 0.75 | 0.75 | 0.9 | 0.9 |")
    return "\n".join(lines) + "\n"


def path_instructions(root: Path) -> str:
    sw = load(root, "switch/switch.json")
    pi = sw["builds"][speed_build(sw["builds"])]["path_instructions"]["programs"]
    names = list(pi)
    lines = ["| path | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for kind in pi[names[0]]:
        base = pi[names[0]][kind]["all_threads"]["median"]
        cells = []
        for n in names:
            c = pi[n][kind]
            all_, busy = c["all_threads"]["median"], c["busiest_thread"]["median"]
            cell = f"{thousands(all_)} ({thousands(busy)})"
            cells.append(cell if n == names[0] else f"{cell}, {r2(base / all_)}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- tier/


def span(s: dict[str, float]) -> str:
    def f(x: float, d: int) -> str:
        return f"{x:.1f}" if x >= 10 else f"{x:.{d}f}"

    d = 1 if s["median"] >= 5 else 2
    return f"{f(s['median'], d)} ({f(s['min'], d)}–{f(s['max'], d)})"


TIER_EVENTS = {
    "switch killed": "switch killed (kill -9 BMv2)",
    "speaker killed": "speaker killed (kill -9 gobgpd)",
    "drain": "drain (`p4lb tier drain`)",
}


def tier_failover(root: Path) -> str:
    t = load(root, "tier/tier.json")
    held = sum(r["connections"] for r in next(iter(t["failover"].values()))["runs"])
    lines = [
        "| event | router follows, s | longest wait of an open connection, s | back in, s | "
        f"broken / moved (of {held}) | ab failed while converged | ab failed across a route "
        "change |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, v in t["failover"].items():
        runs = v["runs"]
        conv = sum(r["ab_requests_while_converged"] for r in runs)
        across = sum(r["ab_requests_across_route_changes"] for r in runs)
        gave_up = v["ab_gave_up_across_route_changes"]
        lines.append(
            f"| {TIER_EVENTS.get(kind, kind)} | {span(v['detection_s'])} | "
            f"{span(v['longest_stall_s'])} | {span(v['rejoin_s'])} | "
            f"**{v['broken']} / {v['moved']}** | {v['ab_failed_while_converged']} of "
            f"{thousands(conv)} | {v['ab_failed_across_route_changes']} of {thousands(across)}"
            + (f" ({gave_up} batch{'es' if gave_up != 1 else ''})" if gave_up else "")
            + " |"
        )
    return "\n".join(lines) + "\n"


def tier_scaling(root: Path) -> str:
    t = load(root, "tier/tier.json")
    lines = [
        "| balancers announcing | requests/s, median (min–max) | switch CPU per request, ms |",
        "|---|---|---|",
    ]
    for n, v in t["scaling"].items():
        r, c = v["rps"], v["switch_cpu_ms_per_request"]
        lines.append(
            f"| {n} | {r['median']:.0f} ({r['min']:.0f}–{r['max']:.0f}) | "
            f"{c['median']:.2f} ({c['min']:.2f}–{c['max']:.2f}) |"
        )
    return "\n".join(lines) + "\n"


COOKIE_LABELS = {
    "plain forwarding": "plain forwarding (baseline.p4)",
    "single switch, no TCP options": "round robin, single switch, TCP without options",
    "single switch, timestamps": "round robin, single switch, Linux's TCP options (timestamps)",
    "tier balancer, timestamps": "round robin, a tier's balancer (shared VIP), timestamps",
}


def tier_cookie(root: Path) -> str:
    c = load(root, "tier/cookie.json")
    builds = list(c["builds"])
    lines = [
        "| variant | " + " | ".join(f"{b} build" for b in builds) + " |",
        "|---|" + "---|" * len(builds),
    ]
    ref = "single switch, no TCP options"
    for name in c["builds"][builds[0]]:
        cells = []
        for b in builds:
            v = c["builds"][b][name]["busiest_thread_per_packet"]["median"]
            base = c["builds"][b][ref]["busiest_thread_per_packet"]["median"]
            more = "timestamps" in name
            cells.append(thousands(v) + (f" ({100 * (v / base - 1):+.1f} %)" if more else ""))
        lines.append(f"| {COOKIE_LABELS.get(name, name)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# Quoted, not measured here: the independent check's figures from before control traffic
# left the switches (the overload region sets them beside the ones measured now).
OVERLOAD_BEFORE = (
    "Before this change (quoted from the independent check of the tier that found the "
    "cascade, not measured by `make bench-tier`): at 3 x ab -c 64 r0 had fewer than 3 of 3 "
    "next hops for 56 of 60 s and 25 requests failed; heavier runs left r0 without a route "
    "for 6–12 s."
)


def tier_overload(root: Path) -> str:
    """docs/tier.md's overload figures (tier/tier.json's "overload"), or one line saying
    they are not measured yet."""
    t = load(root, "tier/tier.json")
    o = t.get("overload")
    if not o:
        return (
            "Overload: not measured yet (`make bench-tier` writes it to results/tier/tier.json). "
            + OVERLOAD_BEFORE
            + "\n"
        )
    n, cap, ms = o["balancers"], o["capacity_rps"], o["unloaded_ms_per_request"]
    pts = o["points"]
    runs = [r for v in pts.values() for r in v["runs"]]
    secs = statistics.median(r["seconds"] for r in runs) if runs else 0.0
    reps = t.get("reps", max((len(v["runs"]) for v in pts.values()), default=0))
    lines = [
        f"Measured (`make bench-tier`, results/tier/, {reps} repetitions of "
        f"{secs:.0f} s per point, points interleaved, {n} balancers, nothing killed, 120 "
        "keep-alive connections held through each point): the tier's capacity is "
        f"{cap:.0f} req/s (ab -c 20) and one request takes {ms:.1f} ms through the idle tier. "
        "Offered load is a closed loop's: C requests in flight offer C / (one request's time "
        "through the idle tier) per second. By that definition the 1x, 2x and 3x points are "
        "light (a few requests in flight); 3 x ab -c 64, the load the independent check "
        "used, is the heavy one.",
        "",
        f"| offered load | offered req/s | served req/s, median (min–max) | failed requests "
        f"| s r0 below {n} of {n} next hops | s r0 without a route | s r1 without a route "
        "| longest stall of a held connection, s | held connections broken / timed out |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, v in pts.items():
        rs = v["runs"]
        offered = statistics.median(r["offered_rps"] for r in rs) if rs else 0.0
        inflight = rs[0]["concurrency_per_client"] if rs else 0
        what = name if "ab" in name else f"{name} capacity (3 x ab -c {inflight})"
        held = sum(r.get("held", 0) for r in rs)
        timed_out = sum(r.get("held_timed_out", 0) for r in rs)
        sv = v["served_rps"]
        lines.append(
            f"| {what} | {offered:,.0f} ({offered / cap:.1f} x capacity) | "
            f"{sv['median']:,.0f} ({sv['min']:,.0f}–{sv['max']:,.0f}) | {v['failed']:,.0f} | "
            f"{span(v['r0_s_below_n'])} | "
            f"{span(v['r0_s_none'])} | {span(v['r1_s_none'])} | "
            f"{span(v['longest_stall_s'])} | {v['held_broken']} / {timed_out} of {held:,} |"
        )
    return "\n".join([*lines, "", OVERLOAD_BEFORE]) + "\n"


# ---------------------------------------------------------------- controller, older ab


def controller(root: Path) -> str:
    c = load(root, "controller.json")
    noop = c["apply_noop_s"]
    eff = c["weight_change_effect_ms"]
    n = len(eff)
    return (
        "| figure | measured | goal |\n|---|---|---|\n"
        f"| pipeline push (P4Info + BMv2 JSON) | {c['pipeline_push_s']:.2f} s | — |\n"
        f"| `apply` on an empty switch (after the push) | {c['apply_empty_s']:.2f} s, "
        f"{c['apply_empty_writes']} writes | < 2 s |\n"
        f"| no-op `apply` (reads back all {c['apply_empty_writes']} entries, writes 0) | "
        f"{statistics.median(noop):.2f} s median, {max(noop):.2f} s max ({len(noop)} runs) "
        "| < 0.5 s |\n"
        "| `p4lb weight set` as a command, Python start-up included | "
        f"{statistics.median(c['cli_weight_set_s']):.2f} s median | — |\n"
        f"| weight change → next new connection follows it | {c['weight_change_trials_ok']}/{n} "
        f"trials; the SYN leaves the switch {statistics.median(eff):.1f} ms median, "
        f"{max(eff):.1f} ms max after the CLI returns | < 100 ms |\n"
    )


OLDER_CASES = {
    "iphash": ("iphash", "IP hash"),
    "wrr": ("wrr 1:1:1", "WRR 1:1:1"),
    "wrr-1:2:2": ("wrr 1:2:2", "WRR 1:2:2"),
    "wrr-change": ("wrr, change mid-run", "WRR, weight change + drain mid-run"),
    "baseline": ("baseline", None),
}


def _older(root: Path) -> dict[str, dict[str, Any]]:
    runs = [r for r in load(root, "runs.json") if r["concurrency"] == 10]
    base = {r["n"]: r["rps"] for r in runs if r["algorithm"] == "baseline"}
    out: dict[str, dict[str, Any]] = {}
    for case in OLDER_CASES:
        rs = [r for r in runs if r["case"] == case]
        ratios = [r["rps"] / base[r["n"]] for r in rs if base.get(r["n"])]
        out[case] = {
            "rps": (min(r["rps"] for r in rs), max(r["rps"] for r in rs)),
            "ratio": (min(ratios), max(ratios)) if case != "baseline" else None,
            "failed": sum(r["failed"] for r in rs),
            "agree": (sum(r["agree"] for r in rs), len(rs)),
            "jain": (min(r["jain"] for r in rs), max(r["jain"] for r in rs)),
            "wjain": (min(r["weighted_jain"] for r in rs), max(r["weighted_jain"] for r in rs)),
        }
    return out


def older_ab_results(root: Path) -> str:
    """results/README.md's summary of the older ab set (results/runs.json, -c 10)."""
    o = _older(root)
    lines = [
        "| case | req/s (20k→100k) | vs baseline | failed | switch counters = access logs | "
        "Jain (raw / weighted) |",
        "|---|---|---|---|---|---|",
    ]
    for case, (label, _) in OLDER_CASES.items():
        v = o[case]
        ratio = f"{r2(v['ratio'][0])}–{r2(v['ratio'][1])}" if v["ratio"] else "1"
        jain = "—" if case == "baseline" else "see below" if case == "wrr-change" else _jain(v)
        agree = "—" if case == "baseline" else f"{v['agree'][0]}/{v['agree'][1]}"
        lines.append(
            f"| {label} | {v['rps'][0]:.0f}–{v['rps'][1]:.0f} | {ratio} | {v['failed']} | "
            f"{agree} | {jain} |"
        )
    return "\n".join(lines) + "\n"


def _jain(v: dict[str, Any]) -> str:
    lo, hi = v["jain"]
    wlo, whi = v["wjain"]
    raw = f"{lo:.4f}" if f"{lo:.4f}" == f"{hi:.4f}" else f"{lo:.4f}–{hi:.4f}"
    if (wlo, whi) != (lo, hi):
        return (
            f"{raw} / {wlo:.4f}" if f"{wlo:.4f}" == f"{whi:.4f}" else f"{raw} / {wlo:.4f}–{whi:.4f}"
        )
    return raw


def older_ab_readme(root: Path) -> str:
    """README.md's version of the same table (lb-only rows)."""
    o = _older(root)
    total = sum(o[c]["agree"][1] for c in OLDER_CASES if c != "baseline")
    agree = sum(o[c]["agree"][0] for c in OLDER_CASES if c != "baseline")
    lines = [
        "| case | req/s | vs plain forwarding | failed | switch = server logs | "
        "Jain (raw / weighted) |",
        "|---|---|---|---|---|---|",
    ]
    first = True
    for case, (_, label) in OLDER_CASES.items():
        if label is None:
            continue
        v = o[case]
        lines.append(
            f"| {label} | {v['rps'][0]:.0f}–{v['rps'][1]:.0f} | "
            f"{r2(v['ratio'][0])}–{r2(v['ratio'][1])} | {v['failed']} | "
            f"{f'{agree}/{total} runs' if first else '″'} | "
            f"{'—' if case == 'wrr-change' else _jain(v)} |"
        )
        first = False
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- experiments


def recorded_runs(experiments: Path) -> int:
    """Runs with a run.json in an experiments directory's raw files (a begun run has none)."""
    return rawstore.run_count(experiments)


def experiments_dir(root: Path) -> Path:
    """The experiments the READMEs quote: the full profile's once every run of its plan is
    recorded (it runs in parts, `--resume`), the quick profile's until then."""
    full = root / "experiments-full"
    if (full / "meta.json").exists():
        planned = json.loads((full / "meta.json").read_text()).get("runs_planned")
        if isinstance(planned, int) and recorded_runs(full) >= planned:
            return full
    return root / "experiments"


def experiments(root: Path) -> str:
    from bench.experiments import report

    where = experiments_dir(root)
    try:
        block = report.readme_block(where)
    except rawstore.RawError as e:
        raise MissingFile(str(e)) from None
    if block is None:
        raise MissingFile(f"{where.name}/raw")
    return block


def claims(block: str) -> list[list[str]]:
    """The rows of an experiments block's claimed/found table, as cells: claim, found,
    verdict, ..., what decided it (fifth)."""
    rows = block.split("### Claimed / found", 1)[1].strip().splitlines()[2:]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    return [c for c in cells if len(c) >= 5]


def verdicts(root: Path) -> str:
    """README.md's list of the seeds' claims with their verdicts and what decided them."""
    out = [
        f"* {paper_named(c[0])}: **{c[2]}** ({c[1]}). Decided by {c[4]}."
        for c in claims(experiments(root))
    ]
    return "\n".join(out) + "\n"


def paper_named(claim: str) -> str:
    """A claim with its leading paper number ("002: ...", "002's ...") as the authors' names."""
    return re.sub(r"^(\d{3})\b", lambda m: PAPERS.get(m.group(1), m.group(1)), claim)


def profiles_compared(root: Path) -> str:
    """Each seed claim's verdict and figures on the quick profile beside the full profile's,
    and the verdicts that changed between them (issue 33)."""
    from bench.experiments import report

    full = root / "experiments-full"
    if experiments_dir(root) != full:
        return "The full profile is not complete: nothing to compare yet.\n"
    try:
        quick_block = report.readme_block(root / "experiments")
    except rawstore.RawError as e:
        raise MissingFile(str(e)) from None
    if quick_block is None:
        raise MissingFile("experiments/raw")
    quick = {c[0]: c for c in claims(quick_block)}
    lines = ["| claim | quick profile | full profile |", "|---|---|---|"]
    changed = []
    for c in claims(experiments(root)):
        q = quick.get(c[0])
        if q is not None and q[2] != c[2]:
            changed.append(c[0])
        was = "not in the quick profile" if q is None else f"**{q[2]}** ({q[1]})"
        lines.append(f"| {c[0]} | {was} | **{c[2]}** ({c[1]}) |")
    head = (
        "Verdicts that changed from the quick profile to the full one: "
        f"{'; '.join(changed) if changed else 'none'}."
    )
    return head + "\n\n" + "\n".join(lines) + "\n"


# ---------------------------------------------------------------- inline figures


def collision_rate(root: Path) -> str:
    """New flows finding their bucket full at the model's largest live count (the model in
    switch/collision_model.json: the data plane's own hash and bucket layout)."""
    last = load(root, "switch/collision_model.json")[-1]
    return (
        f"with {last['live']:,} live connections a new flow finds its bucket full with "
        f"probability {100 * last['after']:.2f} % (it was {100 * last['before']:.0f} % with the "
        "former 65,536 single slots"
    )


def maglev_plain(root: Path) -> str:
    """Plain Maglev's removal disruption over the ideal, over every N (>= 100N tables)."""
    rows = load(root, "algorithms/maglev.json")["disruption"]
    xs = [r["maglev_ladder"]["remove_vs_ideal"] for r in rows]
    return f"{min(xs):.2f}–{max(xs):.2f}×"


def _over_argmin(root: Path, policy: str) -> str:
    """A least-connections policy's max/mean over the exact argmin's, over every case of
    results/algorithms/leastconn.json."""
    runs = load(root, "algorithms/leastconn.json")["runs"]
    by = {(r["weights"], r["mean_active_per_backend"], r["policy"]): r for r in runs}
    xs = [
        r["max_over_mean"] / by[(w, n, "argmin")]["max_over_mean"]
        for (w, n, pol), r in by.items()
        if pol == policy
    ]
    return f"{min(xs):.2f}–{max(xs):.2f}×"


def leastconn_pairs(root: Path) -> str:
    """p4lb's candidate pairs (choices = 2) over the exact argmin."""
    return _over_argmin(root, "p2c_pairs")


def tier_summary(root: Path) -> str:
    """docs/tier.md's paragraph on what the tier measured (tier/tier.json, tier/cookie.json)."""
    t = load(root, "tier/tier.json")
    c = load(root, "tier/cookie.json")
    f = t["failover"]
    runs = [r for v in f.values() for r in v["runs"]]
    held = sum(r["connections"] for r in runs)
    broken = sum(v["broken"] + v["moved"] for v in f.values())
    conv_failed = sum(v["ab_failed_while_converged"] for v in f.values())
    across_failed = sum(v["ab_failed_across_route_changes"] for v in f.values())
    across = sum(r["ab_requests_across_route_changes"] for r in runs)
    stall = {k: v["longest_stall_s"] for k, v in f.items()}
    ref = "single switch, no TCP options"
    pct = {
        b: {
            k: 100
            * (
                v[k]["busiest_thread_per_packet"]["median"]
                / v[ref]["busiest_thread_per_packet"]["median"]
                - 1
            )
            for k in ("tier balancer, timestamps", "single switch, timestamps")
        }
        for b, v in c["builds"].items()
    }
    std, spd = list(c["builds"])[:2]
    scal = t["scaling"]
    first, last = scal[min(scal)], scal[max(scal)]
    cpu = [v["switch_cpu_ms_per_request"]["median"] for v in scal.values()]
    reps = t.get("reps", len(next(iter(f.values()))["runs"]))
    return (
        f"Measured (`make bench-tier`, results/tier/, {reps} repetitions of each event, this "
        "2-core machine running the whole tier, standard BMv2 build): a dead switch leaves the "
        f"router's ECMP set in {f['switch killed']['detection_s']['median']:.2f} s, a dead "
        f"speaker in {f['speaker killed']['detection_s']['median']:.2f} s, a drained balancer in "
        f"{f['drain']['detection_s']['median']:.1f} s (medians); the longest wait of an open "
        f"connection was {stall['switch killed']['median']:.2f} s (switch killed; at most "
        f"{stall['switch killed']['max']:.1f} s) and at most "
        f"{max(stall['speaker killed']['max'], stall['drain']['max']):.2f} s otherwise. "
        f"**{broken} of {held:,} connections held a second before the event broke or moved, "
        "round robin and Maglev alike**, and "
        f"{conv_failed} ab requests failed in batches run while the routes were converged "
        f"({across_failed} of {across:,} failed in batches across a route change: new "
        "connections, in the window below). Sharing costs a round-robin balancer "
        f"{pct[std]['tier balancer, timestamps']:.1f} % more instructions per packet (busiest "
        f"thread) than a single switch on traffic without TCP options on the {std} build, "
        f"{pct[spd]['tier balancer, timestamps']:.1f} % on the {spd} build "
        f"({pct[std]['single switch, timestamps']:.1f} % and "
        f"{pct[spd]['single switch, timestamps']:.1f} % of it the timestamp's parsing, which a "
        "single switch pays too). Throughput with 1 and with "
        f"{max(scal)} balancers: {first['rps']['median']:.0f} and {last['rps']['median']:.0f} "
        "req/s: every balancer, server and router shares the same 2 cores; the switch CPU per "
        f"request is {min(cpu):.1f}–{max(cpu):.1f} ms.\n"
    )


def controller_summary(root: Path) -> str:
    c = load(root, "controller.json")
    eff = c["weight_change_effect_ms"]
    return (
        f"The controller applies {c['vips']} WRR VIPs × {c['backends_per_vip']} backends "
        f"({c['apply_empty_writes']} entries) to an empty switch in {c['apply_empty_s']:.2f} s, "
        f"and a no-op apply takes {statistics.median(c['apply_noop_s']):.2f} s (median). A "
        f"changed weight is in effect for the very next connection in "
        f"{c['weight_change_trials_ok']} of {len(eff)} trials, {min(eff):.0f}–{max(eff):.0f} ms "
        "after `p4lb weight set` returns.\n"
    )


def switch_prose(root: Path) -> str:
    """README.md's paragraph after the switch table: the floor, the collisions, the flood."""
    fl = load(root, "switch/floor.json")
    sw = load(root, "switch/switch.json")
    fd = load(root, "switch/flood.json")
    std, spd = "standard", speed_build(fl["builds"])

    def fr(b: str, k: str, n: str = "floor-state") -> float:
        return float(fl["builds"][b]["programs"][n][f"{k}_vs_baseline_per_rep"]["median"])

    work = [
        fl["builds"][b]["programs"]["wrr"]["all"]["median"]
        / fl["builds"][b]["programs"]["floor-state"]["all"]["median"]
        for b in (std, spd)
    ]
    trace = sw["trace"]["counts"]
    known = trace["wrr"]["established"]
    base = trace["baseline"]["established"]
    growth = [
        g
        for b in sw["builds"].values()
        for g in b.get("growth", [])
        if g["dimension"] == "live" and "collisions" in g
    ]
    g = max(growth, key=lambda g: g["value"])
    b0 = next(iter(fd.values()))
    exact = b0["exactness"]
    ex_ok = all(r["max_deviation"] == 0 and r["collisions"] == 0 for r in exact)
    flood = b0["flood"][0]
    first = flood["rounds"][0] if flood["rounds"] else None
    return (
        "Neither goal is met, and neither can be by a load balancer that keeps connection "
        "state and rewrites addresses on BMv2: `make bench-floor` measures the least such "
        "program (`p4src/floor.p4`: a VIP and a reverse NAT table, one CRC32, one register "
        f"read and write) at {r2(fr(std, 'all'))} of plain forwarding's instructions per packet "
        f"on the standard build and {r2(fr(spd, 'all'))} on the speed build (busiest thread "
        f"{r2(fr(std, 'busiest'))} and {r2(fr(spd, 'busiest'))}), below both goals before it has "
        f"chosen a backend; lb.p4 does {min(work):.2f}–{max(work):.2f} times the floor's work. "
        "The timed ratios move between runs more than the program changes, the instruction "
        "counts do not. A known connection's packet runs "
        f"{known.get('ingress_tables', known['tables'])} ingress table(s), "
        f"{known.get('ingress_conditions', known['conditions'])} conditions and "
        f"{known.get('ingress_primitives', known['primitives'])} primitives in the ingress (the "
        f"baseline: {base.get('ingress_tables', base['tables'])}, "
        f"{base.get('ingress_conditions', base['conditions'])} and "
        f"{base.get('ingress_primitives', base['primitives'])}). "
        f"The connection state took {g['value']:,} live connections with "
        f"{g['collisions']['median']:.0f} collisions ({100 * g['collision_rate']:.2f} %); WRR "
        f"over 1,500 connections from 20 clients is "
        + ("exact" if ex_ok else "not exact")
        + " at "
        + " and ".join(":".join(map(str, r["weights"])) for r in exact[:: max(1, len(exact) // 2)])
        + f" with {'no' if ex_ok else 'some'} collision; after {flood['spoofed_syns']:,} spoofed "
        "SYNs the first round of 30 new connections "
        + (
            f"({first['after_s']} s later) split {' / '.join(map(str, first['split']))}"
            if first
            else "did not run"
        )
        + f", and of the connections opened before the flood "
        f"{flood['established_packets_delivered_after']} packets still reached their backend.\n"
    )


def floor_bullets(root: Path) -> str:
    """results/README.md's reading of the floor table: what each step costs, per build,
    the timed ratios beside the counts, and lb.p4 against the floor (switch/floor.json)."""
    fl = load(root, "switch/floor.json")
    std, spd = "standard", speed_build(fl["builds"])

    def ratio(b: str, n: str, k: str = "all") -> float:
        return float(fl["builds"][b]["programs"][n][f"{k}_vs_baseline_per_rep"]["median"])

    def steps(b: str) -> str:
        levels = floor_order(LEVELS)
        r = [1.0] + [ratio(b, n) for n in levels]
        cost = [100 * (r[i] - r[i + 1]) for i in range(len(levels))]
        return (
            f"the NAT costs {cost[0]:.1f} % of plain forwarding's capacity (all threads); one "
            f"CRC32 of the client's address and port another {cost[1]:.1f} %, a register read "
            f"{cost[2]:.1f} %, the compare and write {cost[3]:.1f} %. The least program that "
            f"remembers a connection is at {r2(r[-1])} (busiest thread "
            f"{r2(ratio(b, 'floor-state', 'busiest'))}) before it has chosen a backend"
        )

    lines = [
        f"* **Speed build:** {steps(spd)}, against the goal of 0.9.",
        f"* **Standard build:** {steps(std)}, against the goal of 0.75; the NAT alone leaves "
        f"the busiest (ingress) thread at {r2(ratio(std, 'floor-nat', 'busiest'))}: BMv2's "
        "logging macros format every lookup's key and every hit's entry even with logging off.",
    ]
    progs = fl["builds"][spd]["programs"]
    zl = {
        n: progs[n]["zero_loss_vs_baseline_per_rep"]
        for n in floor_order(progs)
        if "zero_loss_vs_baseline_per_rep" in progs[n]
    }
    if zl:
        base = fl["builds"][spd]["programs"]["baseline"]["zero_loss"]
        lines.append(
            "* **The timed figures cannot tell these programs apart on this VM.** The same "
            "run's zero-loss ratios on the speed build: "
            + ", ".join(
                f"{n} {r2(v['median'])} ({r2(v['min'])}–{r2(v['max'])})" for n, v in zl.items()
            )
            + f"; the baseline's own rate {base['min']:,.0f}–{base['max']:,.0f} packets/s "
            "across repetitions. The zero-loss threshold moves with the VM more than with "
            "the program."
        )
    work = {
        b: (
            fl["builds"][b]["programs"]["wrr"]["all"]["median"],
            fl["builds"][b]["programs"]["floor-state"]["all"]["median"],
        )
        for b in (spd, std)
    }
    lines.append(
        "* **lb.p4 against the floor:** WRR does "
        + " and ".join(
            f"{w / f:.2f} times the floor's instructions per packet on the {b} build "
            f"({w:,.0f} against {f:,.0f})"
            for b, (w, f) in work.items()
        )
        + "."
    )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- provenance


def leastconn_exact(root: Path) -> str:
    """The data plane's exact choice (choices = "all") over the argmin."""
    return _over_argmin(root, "exact")


def choices_cost(root: Path) -> str:
    """What comparing every backend adds to a new connection over two choices, per build
    and pool size (busiest thread, medians of results/algorithms/choices.json)."""
    doc = load(root, "algorithms/choices.json")
    parts = []
    for build, by_n in doc["builds"].items():
        cells = []
        for n, v in by_n.items():
            exact = v["leastconn choices=all"]["busiest_thread_per_syn"]["median"]
            two = v["leastconn choices=2"]["busiest_thread_per_syn"]["median"]
            cells.append(f"{100 * (exact / two - 1):+.0f} % at {n}")
        parts.append(f"{build} build {', '.join(cells)}")
    return "instructions per SYN over two choices: " + "; ".join(parts) + " backends"


def restore_peer(root: Path) -> str:
    """HAProxy's leastconn in the restore scenario: new connections on the restored server."""
    runs = load(root, "algorithms/restore.json")["runs"]
    got = sorted({r["new"]["s3"] for r in runs})
    total = sum(runs[0]["new"].values())
    return f"{'–'.join(map(str, got))} of {total} ({len(runs)} runs)"


def peers(root: Path) -> str:
    """lb.p4 beside the public course balancer (results/switch/peers.json), per build."""
    doc = load(root, "switch/peers.json")
    lines = [
        f"Measured at {str(doc['commit'])[:10]} on {doc['when']}, p4c {doc['p4c']}, "
        f"{doc['reps']} repetitions (median; ratios per repetition).",
        "",
        "| build | lb.p4 WRR / IP hash, k instructions | peer as published / log-free, k "
        "| lb.p4 WRR vs peer / log-free | plain forwarding, k | its share of lb.p4 WRR |",
        "|---|---|---|---|---|---|",
    ]
    for build, b in doc["builds"].items():
        p = b["programs"]

        def k(name: str, p: dict[str, Any] = p) -> str:
            return f"{p[name]['all_threads']['median'] / 1000:.1f}"

        wrr = p["wrr"]
        lines.append(
            f"| {build} ({b['bmv2']}) | {k('wrr')} / {k('iphash')} | {k('peer')} / "
            f"{k('peer-log-free')} | {wrr['all_vs_peer_per_rep']['median']:.2f} / "
            f"{wrr['all_vs_peer-log-free_per_rep']['median']:.2f} | {k('baseline')} | "
            f"{p['baseline']['all_threads']['median'] / wrr['all_threads']['median']:.2f} |"
        )
    return "\n".join(lines)


QOS_SEED = "Maulana et al. (MikroTik, 35 Mbit/s; their own figures and grades)"


def qos_tiphon(root: Path) -> str:
    """bench-qos's full profile (results/qos/summary.json) beside seed 004's own table."""
    from bench.qos import SEED

    doc = load(root, "qos/summary.json")
    p = doc["provenance"]

    def cell(x: dict[str, float], scale: float = 1.0, d: int = 1) -> str:
        return f"{x['median'] * scale:.{d}f} ({x['min'] * scale:.{d}f}–{x['max'] * scale:.{d}f})"

    lines = [
        f"Measured at {str(p['commit'])[:10]} on {p['date']}, BMv2 {p['bmv2']} "
        f"({p['bmv2_binary']}), {p['reps']} repetitions of {p['duration_s']:g} s per "
        f"discipline, port shaped to {p['rate_pps']} packets/s.",
        "",
        "| discipline | VoIP p95 ms | grade | jitter ms | grade | VoIP loss % | grade "
        "| queue delay ms | Jain (hosts) | goodput Mbit/s | CPU µs/pkt |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v, x in doc["summary"].items():
        lines.append(
            f"| {v} | {cell(x['voip_p95_ms'])} | {x['grade_delay']} | "
            f"{cell(x['voip_jitter_ms'])} | {x['grade_jitter']} | {cell(x['voip_loss'], 100)} | "
            f"{x['grade_loss']} | {cell(x['queue_delay_ms'])} | {cell(x['jain_hosts'], 1, 3)} | "
            f"{cell(x['goodput_mbps'], 1, 2)} | {cell(x['cpu_us_per_packet'], 1, 0)} |"
        )
    lines += [
        "",
        f"{QOS_SEED}: "
        + "; ".join(
            f"{name} ping {s['ping_ms']} ms ({s['grade']}), loss {s['loss_pct']} %, "
            f"CPU {s['cpu_pct']} %"
            for name, s in SEED.items()
        )
        + ".",
    ]
    return "\n".join(lines)


PROVENANCE_FILES = (
    "experiments/meta.json",
    "experiments-full/meta.json",
    "switch/switch.json",
    "switch/ab.json",
    "switch/floor.json",
    "switch/flood.json",
    "controller.json",
    "algorithms/maglev.json",
    "algorithms/leastconn.json",
    "algorithms/choices.json",
    "algorithms/restore.json",
    "switch/peers.json",
    "switch/cost_breakdown.json",
    "tier/tier.json",
    "tier/cookie.json",
    "meta.json",
)


def describe_file(doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("meta"), dict):
        doc = doc["meta"]  # algorithms/*.json
    if isinstance(doc, dict) and isinstance(doc.get("provenance"), dict):
        p = doc["provenance"]
        if "git" not in p and "commit" in p:  # the tier's own record, before issue 33
            return (
                f"partial (before issue 33): {p.get('when', '?')}, commit "
                f"{str(p['commit'])[:10]}{' (dirty)' if p.get('dirty') else ''}, BMv2 "
                f"{p.get('bmv2', {}).get('version', '?')}; build flags, P4 stamp and load "
                f"sampling {provenance.NOT_RECORDED}"
            )
        return provenance.describe(doc)
    if isinstance(doc, dict) and isinstance(doc.get("commit"), str):  # meta.json files
        return (
            f"partial (before issue 33): {doc.get('started', 'date not recorded')}, commit "
            f"{doc['commit'][:10]}, BMv2 {str(doc.get('bmv2', '?')).split()[-1]}; dirty flag, "
            f"build flags and load sampling {provenance.NOT_RECORDED}"
        )
    if isinstance(doc, dict) and all(isinstance(v, dict) for v in doc.values()) and doc:
        parts = [f"{k}: {provenance.describe(v)}" for k, v in doc.items()]  # flood.json
        return "; ".join(parts)
    return provenance.describe(doc if isinstance(doc, dict) else {})


def provenance_table(root: Path) -> str:
    lines = ["| file | how it was measured |", "|---|---|"]
    for rel in PROVENANCE_FILES:
        p = root / rel
        doc = json.loads(p.read_text()) if p.exists() else None
        text = describe_file(doc) if p.exists() else "not in this tree"
        if p.exists() and p.name == "meta.json" and rawstore.has_raw(p.parent):
            from bench.experiments.report import parts_text

            more = parts_text(doc, recorded_runs(p.parent)).replace("**", "")
            text += f";{more}" if more else ""
        lines.append(f"| `{rel}` | {text} |")
    return "\n".join(lines) + "\n"


REGIONS: dict[str, Callable[[Path], str]] = {
    "experiments": experiments,
    "verdicts": verdicts,
    "profiles-compared": profiles_compared,
    "overhead-goal": overhead_goal,
    "switch-summary": switch_summary,
    "floor": floor_table,
    "path-instructions": path_instructions,
    "tier-failover": tier_failover,
    "tier-scaling": tier_scaling,
    "tier-cookie": tier_cookie,
    "tier-overload": tier_overload,
    "controller": controller,
    "older-ab-results": older_ab_results,
    "older-ab-readme": older_ab_readme,
    "provenance": provenance_table,
    "collision-rate": collision_rate,
    "maglev-plain": maglev_plain,
    "leastconn-pairs": leastconn_pairs,
    "leastconn-exact": leastconn_exact,
    "choices-cost": choices_cost,
    "restore-peer": restore_peer,
    "peers": peers,
    "qos-tiphon": qos_tiphon,
    "tier-summary": tier_summary,
    "controller-summary": controller_summary,
    "switch-prose": switch_prose,
    "floor-bullets": floor_bullets,
}


def regenerate(
    text: str, root: Path, where: str = "", placeholder: bool = False
) -> tuple[str, list[str]]:
    """`text` with every region rewritten from `root`; and the names of regions whose
    source file is missing there or lacks what they quote: left as they were, or with
    `placeholder` (a copy for a partial run) replaced by a line saying so, so that no
    committed figure passes for one of the run's."""
    missing: list[str] = []
    cache: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in REGIONS:
            raise KeyError(f"{where}: unknown region results:{name}")
        if name not in cache:
            try:
                cache[name] = REGIONS[name](root)
            except MissingFile as e:
                missing.append(f"{name} (no {e})")
                cache[name] = hole(m, placeholder, missing[-1])
            except (KeyError, StopIteration, TypeError, ValueError, ZeroDivisionError) as e:
                # A partial run's files lack what the region quotes (a build, a variant).
                missing.append(f"{name} (the files lack what it quotes: {type(e).__name__} {e})")
                cache[name] = hole(m, placeholder, missing[-1])
        return m.group(1) + cache[name] + m.group(4)

    return REGION.sub(sub, text), missing


def hole(m: re.Match[str], placeholder: bool, why: str) -> str:
    if not placeholder:
        return m.group("body")
    inline = not m.group(1).endswith("\n")
    return f"_(not measured in this run: {why})_" + ("" if inline else "\n")


def regions(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in REGION.finditer(text)}


def copy_name(rel: str) -> str:
    """Where a partial run's regenerated copy of `rel` goes, under its results directory."""
    return {"results/README.md": "README.md", "README.md": "README.top.md"}.get(rel, rel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.readme_figures", description=__doc__)
    ap.add_argument("--results", type=Path, default=outdir.RESULTS)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 on a difference")
    a = ap.parse_args(argv)
    root = a.results if a.results.is_absolute() else ROOT / a.results
    in_place = root.resolve() == outdir.RESULTS.resolve()
    bad = 0
    for rel, path in READMES.items():
        text = path.read_text()
        new, missing = regenerate(text, root, rel, placeholder=not (in_place or a.check))
        for m in missing:
            what = "left as it was" if in_place or a.check else "marked not measured"
            print(f"readme-figures: {rel}: region {m} in {root}: {what}", file=sys.stderr)
        if a.check:
            old_r, new_r = regions(text), regions(new)
            for name in old_r:
                if old_r[name] != new_r[name]:
                    print(f"readme-figures: {rel}: region {name} differs from {root}")
                    bad += 1
            continue
        target = path if in_place else root / copy_name(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new)
        print(
            f"readme-figures: {target}"
            + ("" if in_place else " (a copy; the committed README is untouched)")
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
