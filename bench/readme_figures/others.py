"""The regions of the smaller results files: the controller's timings, the older ab set
(runs.json), bench-qos beside the paper's table, and DSR against NAT."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench import provenance
from bench.dsr_run import MODES
from bench.readme_figures.common import Slots, load

OLDER_CASES = ("iphash", "wrr", "wrr-1:2:2", "wrr-change", "baseline")


def controller(root: Path) -> Slots:
    doc = load(root, "controller.json")
    c = doc["builds"]["standard"]
    return {
        "doc": doc,
        "c": c,
        "noop_median": statistics.median(c["apply_noop_s"]),
        "cli_median": statistics.median(c["cli_weight_set_s"]),
        "effect_median": statistics.median(c["weight_change_effect_ms"]),
    }


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


def qos_tiphon(root: Path) -> Slots:
    """bench-qos's full profile (results/qos/summary.json) beside the paper's own table."""
    from bench.qos_report import SEED

    return {"doc": load(root, "qos/summary.json"), "seed": SEED}


def dsr(root: Path) -> Slots:
    """docs/dsr.md's figures (dsr/dsr.json): per build, place and response size, NAT's and
    DSR's figures and their ratio."""
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
    keys = ("reps", "concurrency", "peak_concurrency")
    return {"rows": rows, "how": provenance.describe(d), **{k: d[k] for k in keys}}
