"""How the experiments were measured, the paragraphs above their tables (from meta.json and
the runs' own records)."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from bench import outdir, provenance, rawstore, stats, templates
from bench.experiments.points import Run, groups

OURS = ("topology.server", "bench.experiments", "ab -r", "k6 run", "127.0.0.1:9559", "ps -eo")


def switch_ceiling(results: Path | None = None) -> dict[str, Any]:
    """The standard build's measured zero-loss and overloaded rates for wrr, and when
    (switch/switch.json beside the experiments)."""
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


def others(root: Path) -> dict[str, Any] | None:
    """Processes not part of the suite that were busy (> 20 % CPU) right after some run."""
    seen: Counter[str] = Counter()
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


def other_cpu(runs: list[Run], meta: dict[str, Any]) -> dict[str, Any] | None:
    """Other processes' share of all cores during each run (sampled per run)."""
    xs = [r["other_cpu"] for r in runs if r.get("other_cpu") is not None]
    limit = (meta.get("provenance") or {}).get("load", {}).get("limit", 0.25)
    return stats.summary(xs) | {"over": sum(x > limit for x in xs), "limit": limit} if xs else None


def parts_text(meta: dict[str, Any], recorded: int) -> str:
    """How far a run of a plan got (`recorded` of its runs), in how many invocations, at which
    commits, and how many were stopped before their end."""
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


def head(root: Path, runs: list[Run], meta: dict[str, Any]) -> str:
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
