"""One run's figures, read from its raw files alone: run.json and the load generator's own
files beside it."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from bench import rawstore, stats
from bench.experiments import breakpoint
from bench.experiments import load as loadgen
from bench.experiments.points import Run
from p4lb.stats.fairness import jain, weighted_jain
from topology import ab as abparse

Figures = tuple[list[float], dict[str, Any]]  # per-request times (ms), the load's own figures


def ab(run_dir: Path, rec: dict[str, Any]) -> Figures:
    r = abparse.parse((run_dir / "ab.txt").read_text())
    taken = re.search(r"Time taken for tests:\s+([\d.]+)", r.raw)
    return loadgen.ab_times_ms(run_dir / "ab.tsv"), {
        "rps": r.rps,
        "kbps": r.transfer_kbps * 8,
        "failed": r.failed,
        "complete": r.complete,
        "time_taken_s": float(taken.group(1)),  # type: ignore[union-attr]
    }


def clients(run_dir: Path, rec: dict[str, Any]) -> Figures:
    """Every source's ab, added up."""
    files = loadgen.unpacked(run_dir)
    reports = [
        (abparse.parse(files[name].decode(errors="replace")), name[: -len(".txt")] + ".tsv")
        for name in sorted(n for n in files if n.endswith(".txt"))
    ]
    times = [t for _, tsv in reports for t in loadgen.ab_times_ms(files.get(tsv, b""))]
    complete = sum(r.complete for r, _ in reports)
    return times, {
        "failed": sum(r.failed for r, _ in reports),
        "complete": complete,
        "rps": complete / rec["elapsed_s"],
        "time_taken_s": rec["elapsed_s"],
    }


def k6(run_dir: Path, rec: dict[str, Any]) -> Figures:
    """Every k6 client's requests, and a breakpoint run's rate (bench.experiments.breakpoint)."""
    summaries = [json.loads(p.read_text()) for p in sorted(run_dir.glob("k6-*.json"))]
    csvs = sorted(run_dir.glob("k6-*.csv.gz"))
    requests = [loadgen.k6_requests(p) for p in csvs]
    times = [t for durations, _ in requests for t in durations]
    failed, total = sum(f for _, f in requests), len(times)
    ran = [s["state"]["testRunDurationMs"] / 1000 for s in summaries]
    dur = max(ran, default=0.0)
    figures = {
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
        ld = rec["load"]
        counts = breakpoint.merge(breakpoint.per_second(loadgen.k6_outcomes(p)) for p in csvs)
        done = breakpoint.completed_rate(counts)
        planned = 0.0
        if ran:  # what k6 had been asked for when its first client stopped
            planned = breakpoint.planned_rate(ld["rate"], ld["ramp_s"], min(ran), len(ran))
        figures |= {
            "breakpoint_completed_rps": done["completed_rps"] or 0.0,
            "breakpoint_window_s": done["window_s"],
            "breakpoint_max_fail": done["max_fail"],
            "breakpoint_planned_rps": planned,
        }
    return times, figures


def metrics(run_dir: Path) -> Run:
    """One run's figures from its raw files."""
    rec = json.loads((run_dir / "run.json").read_text())
    names = sorted(rec["served"])
    served = [rec["served"][k] for k in names]
    total = sum(served)
    run = {k: rec[k] for k in ("experiment", "scenario", "variant", "rep")} | {
        "load": rec["load"]["name"],
        "workers": rec["workers"],
        "weights": rec["weights"],
        "served": served,
        "servers": names,
        "requests": total,
        "jain": jain(served),
        "capacity_jain": weighted_jain(served, rec["workers"]),
        "shares": [v / total if total else 0.0 for v in served],
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
    times, figures = {"ab": ab, "clients": clients}.get(rec["experiment"], k6)(run_dir, rec)
    return (
        run
        | figures
        | {
            "mean_ms": statistics.fmean(times) if times else 0.0,
            **{f"p{q}_ms": stats.percentile(times, q) if times else 0.0 for q in (50, 90, 95, 99)},
            "max_ms": max(times, default=0.0),
        }
    )


def load_runs(root: Path) -> list[Run]:
    """Every run's figures from root's raw files (raw/ or raw.tar.xz: bench.rawstore)."""
    runs = []
    for p in rawstore.run_files(root):
        try:
            runs.append(metrics(p.parent))
        except (ValueError, KeyError, OSError) as e:
            print(f"report: {p.parent}: skipped ({e})", file=sys.stderr)
    return runs
