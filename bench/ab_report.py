"""bench-ab's summary table (Markdown) and plots from its runs: requests/s, mean time and
Jain's index per request count, each case's requests/s over the baseline's, and the
requests each server served."""

from __future__ import annotations

import json
from pathlib import Path

from bench import figure, templates
from bench.ab_run import Run


def overhead(runs: list[Run]) -> dict[tuple[str, int], dict[int, float]]:
    """Requests/s of each load-balanced case over the baseline's, at the same n and -c."""
    base = {(r.n, r.concurrency): r.rps for r in runs if r.algorithm == "baseline"}
    out: dict[tuple[str, int], dict[int, float]] = {}
    for r in sorted(runs, key=lambda r: r.n):
        if r.algorithm != "baseline" and base.get((r.n, r.concurrency)):
            ratio = r.rps / base[(r.n, r.concurrency)]
            out.setdefault((r.case, r.concurrency), {})[r.n] = ratio
    return out


def summary(runs: list[Run]) -> str:
    """The results table (Markdown), one row per run."""
    ratios = overhead(runs)
    rows = [
        (r, ratios.get((r.case, r.concurrency), {}).get(r.n), json.loads(r.served)) for r in runs
    ]
    return templates.render("ab-summary.md", rows=rows)


def plots(runs: list[Run], out: Path) -> None:
    plt = figure.pyplot()
    top = max(r.concurrency for r in runs)  # the lines at the highest concurrency

    def by_n(case: str, metric: str) -> dict[int, float]:
        return {r.n: getattr(r, metric) for r in runs if r.case == case and r.concurrency == top}

    charts = {
        (metric, label): {case: by_n(case, metric) for case in sorted({r.case for r in runs})}
        for metric, label in (
            ("rps", "requests/s"),
            ("mean_ms", "mean time per request (ms)"),
            ("jain", "Jain's fairness index"),
        )
    }
    ratios = {f"{case} -c {k}": v for (case, k), v in sorted(overhead(runs).items())}
    charts[("overhead", "requests/s relative to the baseline")] = ratios
    for (name, label), series in charts.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        for key, points in series.items():
            if points:
                ax.plot(sorted(points), [points[n] for n in sorted(points)], marker="o", label=key)
        if name == "overhead":
            ax.axhline(0.95, color="grey", linestyle="--", linewidth=1, label="goal 0.95")
            ax.set_ylim(0, 1.1)
        ax.set_xlabel("requests (ab -n)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        figure.save(fig, out / f"{name}.png", 110)
    fig, ax = plt.subplots(figsize=(7, 4))
    biggest = max(r.n for r in runs)
    served = {}
    for r in runs:
        if r.algorithm != "baseline" and r.n == biggest:
            served.setdefault(r.case, json.loads(r.served))
    if served:
        names = list(next(iter(served.values())))
        width = 0.8 / len(served)
        figure.bars(ax, {c: list(s.values()) for c, s in sorted(served.items())}, width, names)
    ax.set_ylabel(f"requests served (n={biggest})")
    ax.legend()
    figure.save(fig, out / "distribution.png", 110)
