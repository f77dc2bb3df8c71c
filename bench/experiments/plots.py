"""The experiments' plots: per variant, a point's median with whiskers to its min and max;
and every run's switch packet rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import figure
from bench.experiments.points import SHAPES, Groups, Key, Spread, axis, load_count, spread, stat
from bench.experiments.points import variants as variants_of

PLOTS = (
    "ab_rps.png",
    "ab_p95.png",
    "clients_jain.png",
    "shares_1-2-2.png",
    "k6_p95.png",
    "switch_pps.png",
)
SCEN_CAP = [20.0, 40.0, 40.0]  # the 1:2:2 servers' shares of the capacity, %
Series = list[tuple[str, list[Spread]]]  # (label, a point per variant)
Panel = tuple[str, list[str], Series]  # title, variants, series


def bars(ax: Any, names: list[str], series: Series, title: str) -> None:
    """Bars per variant (median, whiskers to min and max), one colour per series."""
    width = 0.8 / max(1, len(series))
    for j, (label, items) in enumerate(series):
        offset = j * width - 0.4 + width / 2
        err = [[t[0] - t[1] for t in items], [t[2] - t[0] for t in items]]
        xs = [i + offset for i in range(len(names))]
        ax.bar(xs, [t[0] for t in items], width=width, yerr=err, capsize=3, label=label)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def plots(g: Groups, algorithms: list[str], out: Path, ceiling: float | None) -> list[str]:
    """Every plot the runs allow, written under `out`; their file names."""
    plt = figure.pyplot()
    made: list[str] = []

    def save(fig: Any, fname: str) -> None:
        figure.save(fig, out / fname, 100)
        made.append(fname)

    def panel(title: str, field: str, labels: dict[str, dict[str, str]], **where: str) -> Panel:
        """A panel of the points that match `where`: a series per labelled key part."""
        names = variants_of(g, algorithms, **where)
        series = [
            (label, [stat(g.get(Key(**where, n=n, **part), []), field) for n in names])
            for label, part in labels.items()
        ]
        return title, names, series

    def row(panels: list[Panel], size: tuple[float, float], stacked: bool = False) -> Any:
        """A figure of panels side by side (or stacked), each `size`: the figure, its axes."""
        shape = (len(panels), 1) if stacked else (1, len(panels))
        figsize = (size[0] * shape[1], size[1] * shape[0])
        fig, axes = plt.subplots(*shape, figsize=figsize, squeeze=False)
        for ax, (title, names, series) in zip(axes.flat, panels, strict=True):
            bars(ax, names, series, title)
            ax.grid(alpha=0.3, axis="y")
        return fig, axes.flat

    def servers(exp: str, **where: str) -> dict[str, dict[str, str]]:
        return {f"servers {sc}": {"sc": sc} for sc in sorted(axis(g, "sc", exp=exp, **where))}

    lds = sorted(axis(g, "ld", exp="ab"))
    for field, ylabel, fname in (
        ("rps", "requests/s (median, min–max)", "ab_rps.png"),
        ("p95_ms", "p95 latency ms (median, min–max)", "ab_p95.png"),
    ):
        if lds:
            panels = [panel(f"ab {ld}", field, servers("ab"), exp="ab", ld=ld) for ld in lds]
            fig, axes = row(panels, (9, 3.2), stacked=True)
            for ax in axes:
                ax.set_ylabel(ylabel, fontsize=8)
            save(fig, fname)

    lds = sorted(axis(g, "ld", exp="clients"), key=load_count)
    if lds:
        sources = {f"{3 * load_count(ld)} sources": {"ld": ld} for ld in lds}
        panels = [
            panel(
                f"servers {sc}: Jain's index"
                + ("" if sc == "equal" else " of requests / capacity"),
                "jain" if sc == "equal" else "capacity_jain",
                sources,
                exp="clients",
                sc=sc,
            )
            for sc in sorted(axis(g, "sc", exp="clients"))
        ]
        fig, axes = row(panels, (5, 3.6))
        for ax in axes:
            ax.set_ylim(0, 1.05)
        save(fig, "clients_jain.png")

        names, ld = variants_of(g, algorithms, exp="clients", sc="1:2:2"), lds[-1]
        if names:
            fig, ax = plt.subplots(figsize=(8, 3.6))
            key = Key("clients", "1:2:2", "", ld)
            series = [
                (
                    f"server {i + 1}",
                    [
                        spread([100 * r["shares"][i] for r in g.get(key._replace(n=n), [])])
                        for n in names
                    ],
                )
                for i in range(3)
            ]
            bars(ax, names, series, f"servers 1:2:2, {3 * load_count(ld)} sources")
            for i, c in enumerate(SCEN_CAP):
                ax.axhline(c, color=f"C{i}", linestyle="--", linewidth=1)
            ax.set_ylabel("share of requests % (dashed: capacity)")
            save(fig, "shares_1-2-2.png")

    shapes = [s for s in SHAPES if s in axis(g, "ld", exp="k6")]
    if shapes:
        panels = [
            panel(f"k6 {sh}: p95 ms", "p95_ms", servers("k6", ld=sh), exp="k6", ld=sh)
            for sh in shapes
        ]
        save(row(panels, (4.5, 3.6))[0], "k6_p95.png")

    runs = [r for rs in g.values() for r in rs]
    if runs:
        fig, ax = plt.subplots(figsize=(8, 3.4))
        exps = sorted({r["experiment"] for r in runs})
        for i, e in enumerate(exps):
            ys = [r["switch_pps"] for r in runs if r["experiment"] == e]
            ax.scatter([i + (k % 20 - 10) * 0.015 for k in range(len(ys))], ys, s=8, label=e)
        if ceiling:
            label = f"zero-loss ceiling {ceiling:.0f} pps"
            ax.axhline(ceiling, color="red", linestyle="--", label=label)
        ax.set_xticks(range(len(exps)), exps)
        ax.set_ylabel("switch packets/s (each run)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, axis="y")
        save(fig, "switch_pps.png")
    return made
