"""Figures drawn without a display: pyplot on the Agg back end, bars in groups, and a figure
laid out, written and closed in one call."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg back end (imported when a report draws, not before)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, dpi: int) -> None:
    """`fig` laid out tight, written to `path` and closed."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def bars(ax: Any, series: dict[str, list[float]], width: float, ticks: list[str]) -> None:
    """Groups of bars, one at each of 0, 1, ... (named by `ticks`), a bar of each series
    (label: values) in it, each `width` wide, the group centred."""
    for k, (label, values) in enumerate(series.items()):
        offset = (k - (len(series) - 1) / 2) * width
        ax.bar([i + offset for i in range(len(values))], values, width=width, label=label)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=8)
