"""The figures README.md, results/README.md and the manual (docs/) quote, generated from the
results files: no hand-copied number.

A figure lives in a marked region, `<!-- results:NAME -->` ... `<!-- /results:NAME -->`,
filled from the Markdown template bench/templates/regions/NAME.md; REGIONS maps each NAME to
the function that computes the template's slots from a results directory. Text outside the
regions is prose and carries no measured number.

    python -m bench.readme_figures [--results DIR] [--check]

With --results results (the default) the files are rewritten in place; with another
directory (a quick run's scratch tree) the regenerated copies go into it (DIR/README.md
from results/README.md, DIR/README.top.md from README.md, DIR/docs/NAME.md from
docs/NAME.md), and the committed files stay as they are. --check changes nothing and
exits 1 naming each region that differs, one line each."""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench import outdir, provenance, rawstore, templates
from bench.dsr import MODES
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
        "docs/dsr.md",
    )
}
# A region is a block (markers on lines of their own) or inline (within a sentence, the
# generator's text then has no line break at its end).
REGION = re.compile(
    r"(<!-- results:(?P<name>[\w-]+) -->\n?)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S
)
ALGS = ("iphash", "wrr", "leastconn")
SPEED_NAMES = ("fast", "speed")
Slots = dict[str, Any]


class MissingFile(Exception):
    pass


def load(root: Path, rel: str) -> Any:
    p = root / rel
    if not p.exists():
        raise MissingFile(rel)
    return json.loads(p.read_text())


def speed_build(builds: dict[str, Any]) -> str:
    return next(b for b in builds if b in SPEED_NAMES)


# ---------------------------------------------------------------- switch/


def ratios(per_alg: list[dict[str, float]]) -> Slots:
    """lb.p4 over baseline.p4 for iphash / wrr / leastconn (medians), and the lowest and
    highest repetition of the three."""
    lo, hi = min(s["min"] for s in per_alg), max(s["max"] for s in per_alg)
    return {"med": [s["median"] for s in per_alg], "lo": lo, "hi": hi}


def goal(root: Path) -> Slots:
    """The rows both switch tables quote, per build (switch/switch.json, switch/ab.json)."""
    sw, ab = load(root, "switch/switch.json"), load(root, "switch/ab.json")
    rows: dict[str, dict[str, Slots]] = {k: {} for k in ("zero", "ab", "cpu", "all", "busiest")}
    for build, b in sw["builds"].items():
        p, instr = b["programs"], b["instructions"]["programs"]
        base_all = instr["baseline"]["all_threads_per_packet"]["median"]
        rows["zero"][build] = ratios([p[a]["zero_loss_vs_baseline_per_rep"] for a in ALGS])
        abp = ab["builds"][build]["programs"]
        rows["ab"][build] = ratios([abp[a]["vs_baseline_per_rep"] for a in ALGS])
        rows["cpu"][build] = ratios([p[a]["cpu_capacity_vs_baseline_per_rep"] for a in ALGS])
        # Counted, not timed: no repetitions' range.
        all_ = [base_all / instr[a]["all_threads_per_packet"]["median"] for a in ALGS]
        rows["all"][build] = {"med": all_}
        busiest = [instr[a]["capacity_vs_baseline_per_rep"]["median"] for a in ALGS]
        rows["busiest"][build] = {"med": busiest}
    builds = ("standard", speed_build(sw["builds"]))
    return {"g": rows | {"builds": builds, "n": ab["n"], "c": ab["c"], "reps": ab["reps"]}}


def floor_order(names: Iterable[str]) -> list[str]:
    """The floor's programs level by level, then lb.p4's (a run records them in the order
    its first repetition drew)."""
    return sorted(names, key=lambda n: (n not in LEVELS, LEVELS.get(n, 0), n))


def floor_ratio(fl: dict[str, Any], build: str, name: str, kind: str = "all") -> float:
    return float(fl["builds"][build]["programs"][name][f"{kind}_vs_baseline_per_rep"]["median"])


def floor_work(fl: dict[str, Any], build: str, name: str) -> float:
    """A program's instructions per packet, all threads (median) in switch/floor.json."""
    return float(fl["builds"][build]["programs"][name]["all"]["median"])


def floor_table(root: Path) -> Slots:
    fl = load(root, "switch/floor.json")
    builds = ("standard", speed_build(fl["builds"]))
    spread = max(
        (r["max"] - r["min"]) / r["median"]
        for b in fl["builds"].values()
        for n, p in b["programs"].items()
        if n != "baseline"
        for r in (p["all_vs_baseline_per_rep"], p["busiest_vs_baseline_per_rep"])
    )
    names = floor_order(n for n in fl["builds"]["standard"]["programs"] if n != "baseline")
    rows = [
        (n, [floor_ratio(fl, b, n, k) for b in builds for k in ("all", "busiest")]) for n in names
    ]
    return {"spread": spread, "rows": rows}


def path_instructions(root: Path) -> Slots:
    sw = load(root, "switch/switch.json")
    pi = sw["builds"][speed_build(sw["builds"])]["path_instructions"]["programs"]
    names = list(pi)
    rows = [
        (
            kind,
            [
                (pi[n][kind]["all_threads"]["median"], pi[n][kind]["busiest_thread"]["median"])
                for n in names
            ],
        )
        for kind in pi[names[0]]
    ]
    return {"names": names, "rows": rows}


def floor_bullets(root: Path) -> Slots:
    """results/README.md's reading of the floor table: what each step costs, per build,
    the timed ratios beside the counts, and lb.p4 against the floor (switch/floor.json)."""
    fl = load(root, "switch/floor.json")
    std, spd = "standard", speed_build(fl["builds"])

    def steps(b: str) -> Slots:
        r = [1.0] + [floor_ratio(fl, b, n) for n in floor_order(LEVELS)]
        return {
            "cost": [100 * (r[i] - r[i + 1]) for i in range(len(LEVELS))],
            "state": r[-1],
            "state_busiest": floor_ratio(fl, b, "floor-state", "busiest"),
            "nat_busiest": floor_ratio(fl, b, "floor-nat", "busiest"),
        }

    progs = fl["builds"][spd]["programs"]
    zero_loss = {
        n: progs[n]["zero_loss_vs_baseline_per_rep"]
        for n in floor_order(progs)
        if "zero_loss_vs_baseline_per_rep" in progs[n]
    }
    work = [(b, floor_work(fl, b, "wrr"), floor_work(fl, b, "floor-state")) for b in (spd, std)]
    return {
        "speed": steps(spd),
        "standard": steps(std),
        "zero_loss": zero_loss,
        "base_rate": progs["baseline"]["zero_loss"] if zero_loss else {},
        "work": work,
    }


def switch_prose(root: Path) -> Slots:
    """README.md's paragraph after the switch table: the floor, the collisions, the flood."""
    fl, sw = load(root, "switch/floor.json"), load(root, "switch/switch.json")
    fd = load(root, "switch/flood.json")
    std, spd = "standard", speed_build(fl["builds"])
    floor = {
        name: {k: floor_ratio(fl, b, "floor-state", k) for k in ("all", "busiest")}
        for name, b in (("standard", std), ("speed", spd))
    }
    work = [floor_work(fl, b, "wrr") / floor_work(fl, b, "floor-state") for b in (std, spd)]

    def ingress(c: dict[str, int]) -> dict[str, int]:  # older runs did not split the ingress
        return {k: c.get(f"ingress_{k}", c[k]) for k in ("tables", "conditions", "primitives")}

    trace = sw["trace"]["counts"]
    growth = [
        g
        for b in sw["builds"].values()
        for g in b.get("growth", [])
        if g["dimension"] == "live" and "collisions" in g
    ]
    b0 = next(iter(fd.values()))
    exact, flood = b0["exactness"], b0["flood"][0]
    return {
        "floor": floor,
        "work": work,
        "known": ingress(trace["wrr"]["established"]),
        "base": ingress(trace["baseline"]["established"]),
        "g": max(growth, key=lambda g: g["value"]),
        "exact_ok": all(r["max_deviation"] == 0 and r["collisions"] == 0 for r in exact),
        "exact_weights": [
            ":".join(map(str, r["weights"])) for r in exact[:: max(1, len(exact) // 2)]
        ],
        "flood": flood,
        "first": flood["rounds"][0] if flood["rounds"] else None,
    }


def collision_rate(root: Path) -> Slots:
    """New flows finding their bucket full at the model's largest live count (the model in
    switch/collision_model.json: the data plane's own hash and bucket layout)."""
    return {"last": load(root, "switch/collision_model.json")[-1]}


def peers(root: Path) -> Slots:
    """lb.p4 beside the public course balancer (results/switch/peers.json), per build."""
    return {"doc": load(root, "switch/peers.json")}


# ---------------------------------------------------------------- tier/


def events(t: dict[str, Any]) -> dict[str, Slots]:
    """Each kind of failover event in tier/tier.json ("switch killed", "drain", ...): its
    times (median, min, max over the runs) and its counts summed over the runs: connections
    held (open a second before the event) and broken or moved, ab requests in batches while
    the routes were converged and across a route change, and those failed or given up."""

    def event(kind: str, v: dict[str, Any]) -> Slots:
        def total(key: str) -> int:
            return sum(r[key] for r in v["runs"])

        return {
            "kind": kind,
            **{k: v[k] for k in ("detection_s", "longest_stall_s", "rejoin_s", "broken", "moved")},
            "held": total("connections"),
            "converged": total("ab_requests_while_converged"),
            "failed_converged": v["ab_failed_while_converged"],
            "across": total("ab_requests_across_route_changes"),
            "failed_across": v["ab_failed_across_route_changes"],
            "gave_up": v["ab_gave_up_across_route_changes"],
        }

    return {kind: event(kind, v) for kind, v in t["failover"].items()}


def tier_failover(root: Path) -> Slots:
    ev = list(events(load(root, "tier/tier.json")).values())
    return {"events": ev, "held": ev[0]["held"]}


def tier_ha(root: Path) -> Slots:
    doc = load(root, "tier/ha.json")
    ev = list(events(doc).values())
    how = provenance.describe(doc)
    return {"events": ev, "held": ev[0]["held"], "reps": doc["reps"], "how": how}


def tier_scaling(root: Path) -> Slots:
    return {"scaling": load(root, "tier/tier.json")["scaling"]}


COOKIE_REF = "single switch, no TCP options"


def cookie_more(c: dict[str, Any], build: str, name: str) -> float:
    """A variant's instructions per packet (busiest thread) over the single switch's
    without TCP options, less one."""
    v = c["builds"][build]
    return float(
        v[name]["busiest_thread_per_packet"]["median"]
        / v[COOKIE_REF]["busiest_thread_per_packet"]["median"]
        - 1
    )


def tier_cookie(root: Path) -> Slots:
    c = load(root, "tier/cookie.json")
    builds = list(c["builds"])
    rows = [
        (
            name,
            [
                (
                    c["builds"][b][name]["busiest_thread_per_packet"]["median"],
                    cookie_more(c, b, name) if "timestamps" in name else None,
                )
                for b in builds
            ],
        )
        for name in c["builds"][builds[0]]
    ]
    return {"builds": builds, "rows": rows}


def tier_overload(root: Path) -> Slots:
    """docs/tier.md's overload figures (tier/tier.json's "overload"), or a line saying they
    are not measured yet."""
    t = load(root, "tier/tier.json")
    o = t.get("overload")
    if not o:
        return {"o": None}
    pts = o["points"]
    runs = [r for v in pts.values() for r in v["runs"]]
    points = [
        {
            "name": name,
            "v": v,
            "offered": statistics.median(r["offered_rps"] for r in v["runs"]) if v["runs"] else 0.0,
            "inflight": v["runs"][0]["concurrency_per_client"] if v["runs"] else 0,
            "held": sum(r.get("held", 0) for r in v["runs"]),
            "timed_out": sum(r.get("held_timed_out", 0) for r in v["runs"]),
        }
        for name, v in pts.items()
    ]
    return {
        "o": o,
        "points": points,
        "seconds": statistics.median(r["seconds"] for r in runs) if runs else 0.0,
        "reps": t.get("reps", max((len(v["runs"]) for v in pts.values()), default=0)),
    }


def tier_summary(root: Path) -> Slots:
    """docs/tier.md's paragraph on what the tier measured (tier/tier.json, tier/cookie.json)."""
    t, c = load(root, "tier/tier.json"), load(root, "tier/cookie.json")
    f, scal = events(t), t["scaling"]
    std, spd = list(c["builds"])[:2]
    kinds = ("tier balancer, timestamps", "single switch, timestamps")
    return {
        "f": f,
        "reps": t.get("reps", len(next(iter(t["failover"].values()))["runs"])),
        **{k: sum(e[k] for e in f.values()) for k in ("held", "failed_across", "across")},
        "broken": sum(e["broken"] + e["moved"] for e in f.values()),
        "conv_failed": sum(e["failed_converged"] for e in f.values()),
        "pct": {b: {k: 100 * cookie_more(c, b, k) for k in kinds} for b in (std, spd)},
        "std": std,
        "spd": spd,
        "scaling": scal,
        "most": max(scal),
        "cpu": [v["switch_cpu_ms_per_request"]["median"] for v in scal.values()],
    }


# ---------------------------------------------------------------- controller, older ab


def controller(root: Path) -> Slots:
    c = load(root, "controller.json")
    return {
        "c": c,
        "noop_median": statistics.median(c["apply_noop_s"]),
        "cli_median": statistics.median(c["cli_weight_set_s"]),
        "effect_median": statistics.median(c["weight_change_effect_ms"]),
    }


OLDER_CASES = ("iphash", "wrr", "wrr-1:2:2", "wrr-change", "baseline")


def older(root: Path) -> Slots:
    """The older ab set (results/runs.json, -c 10) per case: ranges over the request counts."""
    runs = [r for r in load(root, "runs.json") if r["concurrency"] == 10]
    base = {r["n"]: r["rps"] for r in runs if r["algorithm"] == "baseline"}

    def lohi(xs: list[float]) -> tuple[float, float]:
        return (min(xs), max(xs))

    cases = {}
    for case in OLDER_CASES:
        rs = [r for r in runs if r["case"] == case]
        ratios = [r["rps"] / base[r["n"]] for r in rs if base.get(r["n"])]
        cases[case] = {
            "rps": lohi([r["rps"] for r in rs]),
            "ratio": lohi(ratios) if case != "baseline" else None,
            "failed": sum(r["failed"] for r in rs),
            "agree": (sum(r["agree"] for r in rs), len(rs)),
            "jain": lohi([r["jain"] for r in rs]),
            "wjain": lohi([r["weighted_jain"] for r in rs]),
        }
    lb = [v for c, v in cases.items() if c != "baseline"]
    return {
        "cases": cases,
        "agree": sum(v["agree"][0] for v in lb),
        "total": sum(v["agree"][1] for v in lb),
    }


# ---------------------------------------------------------------- experiments


def experiments_dir(root: Path) -> Path:
    """The experiments the READMEs quote: the full profile's once every run of its plan is
    recorded (it runs in parts, `--resume`), the quick profile's until then."""
    full = root / "experiments-full"
    planned = rawstore.read_meta(full).get("runs_planned")
    if isinstance(planned, int) and rawstore.run_count(full) >= planned:
        return full
    return root / "experiments"


@functools.cache
def _block(where: Path) -> Any:
    from bench.experiments import report

    try:
        block = report.readme_block(where)
    except rawstore.RawError as e:
        raise MissingFile(str(e)) from None
    if block is None:
        raise MissingFile(f"{where.name}/raw")
    return block


def experiments(root: Path) -> Slots:
    return {"text": _block(experiments_dir(root)).text}


def verdicts(root: Path) -> Slots:
    """README.md's list of the seeds' claims with their verdicts and what decided them."""
    return {"claims": _block(experiments_dir(root)).claims}


def profiles_compared(root: Path) -> Slots:
    """Each seed claim's verdict and figures on the quick profile beside the full profile's,
    and the verdicts that changed between them."""
    full = root / "experiments-full"
    if experiments_dir(root) != full:
        return {"complete": False}
    quick = {c.claim: c for c in _block(root / "experiments").claims}
    pairs = [(c, quick.get(c.claim)) for c in _block(full).claims]
    changed = [c.claim for c, q in pairs if q is not None and q.verdict != c.verdict]
    return {"complete": True, "pairs": pairs, "changed": changed}


# ---------------------------------------------------------------- algorithms/, qos/


def maglev_plain(root: Path) -> Slots:
    """Plain Maglev's removal disruption over the ideal, over every N (>= 100N tables)."""
    rows = load(root, "algorithms/maglev.json")["disruption"]
    return {"xs": [r["maglev_ladder"]["remove_vs_ideal"] for r in rows]}


def over_argmin(policy: str) -> Callable[[Path], Slots]:
    """A least-connections policy's max/mean over the exact argmin's, over every case of
    results/algorithms/leastconn.json: "exact" (choices = "all"), "p2c_pairs" (choices = 2)."""

    def slots(root: Path) -> Slots:
        runs = load(root, "algorithms/leastconn.json")["runs"]
        by = {(r["weights"], r["mean_active_per_backend"], r["policy"]): r for r in runs}
        xs = [
            r["max_over_mean"] / by[(w, n, "argmin")]["max_over_mean"]
            for (w, n, pol), r in by.items()
            if pol == policy
        ]
        return {"xs": xs}

    return slots


def choices_cost(root: Path) -> Slots:
    """What comparing every backend adds to a new connection over two choices, per build
    and pool size (busiest thread, medians of results/algorithms/choices.json)."""
    doc = load(root, "algorithms/choices.json")

    def more(v: dict[str, Any]) -> float:
        per_syn = {
            k: v[f"leastconn choices={k}"]["busiest_thread_per_syn"]["median"] for k in ("all", "2")
        }
        return float(per_syn["all"] / per_syn["2"] - 1)

    return {
        "builds": [
            (b, [(n, more(v)) for n, v in by_n.items()]) for b, by_n in doc["builds"].items()
        ]
    }


def restore_peer(root: Path) -> Slots:
    """HAProxy's leastconn in the restore scenario: new connections on the restored server."""
    runs = load(root, "algorithms/restore.json")["runs"]
    return {
        "got": sorted({r["new"]["s3"] for r in runs}),
        "total": sum(runs[0]["new"].values()),
        "runs": len(runs),
    }


def qos_tiphon(root: Path) -> Slots:
    """bench-qos's full profile (results/qos/summary.json) beside the paper's own table."""
    from bench.qos import SEED

    return {"doc": load(root, "qos/summary.json"), "seed": SEED}


# ---------------------------------------------------------------- provenance

PROVENANCE_FILES = (
    "dsr/dsr.json",
    "tier/ha.json",
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
    """How a results file says it was measured; files from before provenance was recorded
    say what they lack."""
    if isinstance(doc, dict) and isinstance(doc.get("meta"), dict):
        doc = doc["meta"]  # algorithms/*.json
    partial = functools.partial(
        templates.render, "regions/_partial.md", not_recorded=provenance.NOT_RECORDED
    )
    if isinstance(doc, dict) and isinstance(doc.get("provenance"), dict):
        p = doc["provenance"]
        if "git" not in p and "commit" in p:  # the tier's own record, from before
            return partial(kind="tier", p=p).rstrip("\n")
        return provenance.describe(doc)
    if isinstance(doc, dict) and isinstance(doc.get("commit"), str):  # meta.json files
        return partial(kind="meta", p=doc).rstrip("\n")
    if isinstance(doc, dict) and all(isinstance(v, dict) for v in doc.values()) and doc:
        return "; ".join(f"{k}: {provenance.describe(v)}" for k, v in doc.items())  # flood.json
    return provenance.describe(doc if isinstance(doc, dict) else {})


def provenance_table(root: Path) -> Slots:
    from bench.experiments.report import parts_text

    rows = []
    for rel in PROVENANCE_FILES:
        p = root / rel
        if not p.exists():
            rows.append((rel, "not in this tree"))
            continue
        doc = json.loads(p.read_text())
        text = describe_file(doc)
        if p.name == "meta.json" and rawstore.has_raw(p.parent):
            more = parts_text(doc, rawstore.run_count(p.parent)).replace("**", "")
            text += f";{more}" if more else ""
        rows.append((rel, text))
    return {"rows": rows}


def dsr(root: Path) -> Slots:
    """docs/dsr.md's figures (dsr/dsr.json): per build, single switch and tier, and response
    size, the switch's CPU per request and the peak rate under NAT and DSR, and DSR's share
    of NAT's."""
    d = load(root, "dsr/dsr.json")

    def row(build: str, b: dict[str, Any], where: str, size: str) -> dict[str, Any]:
        if where == "single switch":
            nat, dsr_, ratio = b[f"nat {size}"], b[f"dsr {size}"], b[f"dsr/nat {size}"]
        else:  # one tier measured both: "nat cpu_ms_per_request", "dsr ..."
            t = b[f"tier {size}"]
            nat, dsr_ = ({k[4:]: v for k, v in t.items() if k[:4] == f"{m} "} for m in MODES)
            ratio = b[f"tier dsr/nat {size}"]
        lost = sum(sum(m["failed"]["values"]) for m in (nat, dsr_))
        return {
            "build": build,
            "where": where,
            "size": size,
            "nat": nat,
            "dsr": dsr_,
            "ratio": ratio,
            "failed": lost,
        }

    rows = [
        row(build, b, where, size)
        for build, b in d["builds"].items()
        for where in ("single switch", "tier")
        for size in d["sizes"]
    ]
    return {
        "rows": rows,
        "reps": d["reps"],
        "concurrency": d["concurrency"],
        "peak_concurrency": d["peak_concurrency"],
        "how": provenance.describe(d),
    }


REGIONS: dict[str, Callable[[Path], Slots]] = {
    "dsr": dsr,
    "experiments": experiments,
    "verdicts": verdicts,
    "profiles-compared": profiles_compared,
    "overhead-goal": goal,
    "switch-summary": goal,
    "floor": floor_table,
    "path-instructions": path_instructions,
    "tier-failover": tier_failover,
    "tier-ha": tier_ha,
    "tier-scaling": tier_scaling,
    "tier-cookie": tier_cookie,
    "tier-overload": tier_overload,
    "controller": controller,
    "older-ab-results": older,
    "older-ab-readme": older,
    "provenance": provenance_table,
    "collision-rate": collision_rate,
    "maglev-plain": maglev_plain,
    "leastconn-pairs": over_argmin("p2c_pairs"),
    "leastconn-exact": over_argmin("exact"),
    "choices-cost": choices_cost,
    "restore-peer": restore_peer,
    "peers": peers,
    "qos-tiphon": qos_tiphon,
    "tier-summary": tier_summary,
    "controller-summary": controller,
    "switch-prose": switch_prose,
    "floor-bullets": floor_bullets,
}
# Regions that share one template: the same figures in several documents.
TEMPLATES = {
    "maglev-plain": "_ratio-range",
    "leastconn-pairs": "_ratio-range",
    "leastconn-exact": "_ratio-range",
}


def region(name: str, root: Path, inline: bool = False) -> str:
    """Region `name`'s body generated from `root`: its template with the slots filled (a
    block region ends with a line break, an inline one does not)."""
    text = templates.render(f"regions/{TEMPLATES.get(name, name)}.md", **REGIONS[name](root))
    return text.rstrip("\n") + ("" if inline else "\n")


def regenerate(
    text: str, root: Path, where: str = "", placeholder: bool = False
) -> tuple[str, list[str]]:
    """`text` with every region rewritten from `root`; and the names of regions whose
    source file is missing there or lacks what they quote: left as they were, or with
    `placeholder` (a copy for a partial run) replaced by a line saying so, so that no
    committed figure passes for one of the run's."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in REGIONS:
            raise KeyError(f"{where}: unknown region results:{name}")
        inline = not m.group(1).endswith("\n")
        try:
            body = region(name, root, inline)
        except MissingFile as e:
            missing.append(f"{name} (no {e})")
            body = hole(m, placeholder, missing[-1])
        except (KeyError, StopIteration, TypeError, ValueError, ZeroDivisionError) as e:
            # A partial run's files lack what the region quotes (a build, a variant).
            missing.append(f"{name} (the files lack what it quotes: {type(e).__name__} {e})")
            body = hole(m, placeholder, missing[-1])
        return m.group(1) + body + m.group(4)

    return REGION.sub(sub, text), missing


def hole(m: re.Match[str], placeholder: bool, why: str) -> str:
    if not placeholder:
        return m.group("body")
    inline = not m.group(1).endswith("\n")
    return f"_(not measured in this run: {why})_" + ("" if inline else "\n")


def regions(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in REGION.finditer(text)}


def differing(text: str, root: Path, where: str = "") -> tuple[list[str], list[str]]:
    """The regions of `text` that differ from what `root` generates, and those it could
    not generate (left as they are)."""
    new, missing = regenerate(text, root, where)
    old_r, new_r = regions(text), regions(new)
    return [name for name in old_r if old_r[name] != new_r[name]], missing


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
    kept = "left as it was" if in_place or a.check else "marked not measured"
    bad = 0
    for rel, path in READMES.items():
        text = path.read_text()
        if a.check:
            differ, missing = differing(text, root, rel)
            for name in differ:
                print(f"readme-figures: {rel}: region {name} differs from {root}")
            bad += len(differ)
        else:
            new, missing = regenerate(text, root, rel, placeholder=not in_place)
        for m in missing:
            print(f"readme-figures: {rel}: region {m} in {root}: {kept}", file=sys.stderr)
        if a.check:
            continue
        target = path if in_place else root / copy_name(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new)
        note = "" if in_place else " (a copy; the committed README is untouched)"
        print(f"readme-figures: {target}{note}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
