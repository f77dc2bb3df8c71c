"""bench-qos's files beside runs.json: runs.csv, summary.json, tiphon.md (the run's table
beside Maulana et al.'s) and the plots."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench import figure, runner, templates


# Maulana et al. (MikroTik RouterOS v7, RB450G, 35 Mbit/s), their own figures and grades.
def _seed(ping: int, loss: int, cpu: int, mbps: float, grade: str, loss_grade: str) -> Any:
    keys = ("ping_ms", "loss_pct", "cpu_pct", "mbps", "grade", "loss_grade")
    return dict(zip(keys, (ping, loss, cpu, mbps, grade, loss_grade), strict=True))


SEED = {
    "sfq": _seed(215, 8, 15, 33.2, "Poor", "Good"),
    "pcq": _seed(35, 6, 25, 34.8, "Good", "Good"),
    "fq_codel": _seed(31, 0, 45, 34.1, "Very Good", "Very Good"),
    "cake": _seed(29, 0, 70, 34.5, "Very Good", "Very Good"),
}


def tiphon(prov: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    """tiphon.md: how the run was measured, its table, and Maulana et al.'s beside it."""
    return templates.render("qos/tiphon.md", p=prov, summary=summary, seed=SEED) + "\n"


def plots(runs: list[dict[str, Any]], summary: dict[str, dict[str, Any]], out: Path) -> None:
    plt = figure.pyplot()

    fig, ax = plt.subplots(figsize=(7, 4))
    for v in summary:
        p95 = sorted(r["voip_p95_ms"] for r in runs if r["variant"] == v)
        ax.plot(p95, [(i + 1) / len(p95) for i in range(len(p95))], marker="o", label=v)
    ax.set_xscale("log")
    ax.set_xlabel("VoIP one-way delay p95 per run (ms, log)")
    ax.set_ylabel("fraction of runs")
    ax.legend(fontsize=7)
    figure.save(fig, out / "delay_cdf.png", 120)

    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(summary)
    x = range(len(names))
    for offset, (host, label) in (
        (-0.2, ("10.0.0.1", "h1 (3 flows)")),
        (0.2, ("10.0.0.2", "h2 (1 flow)")),
    ):
        mbps = [
            statistics.median(r["hosts_mbps"].get(host, 0) for r in runs if r["variant"] == v)
            for v in names
        ]
        ax.bar([i + offset for i in x], mbps, width=0.4, label=label)
    ax.set_xticks(list(x), names, rotation=30, fontsize=7)
    ax.set_ylabel("goodput, Mbit/s (median)")
    ax.legend()
    figure.save(fig, out / "goodput.png", 120)


def write(
    out: Path, runs: list[dict[str, Any]], summary: dict[str, Any], prov: dict[str, Any]
) -> None:
    cols = [k for k, v in runs[0].items() if isinstance(v, (int, float, str))]
    runner.write_csv(out / "runs.csv", runs, cols)
    doc = {"provenance": prov, "summary": summary}
    (out / "summary.json").write_text(json.dumps(doc, indent=1))
    (out / "tiphon.md").write_text(tiphon(prov, summary))
    plots(runs, summary, out)
    print(tiphon(prov, summary), end="")
