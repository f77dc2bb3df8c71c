"""Figures drawn without a display: pyplot on the Agg back end, and a figure laid out, written
and closed in one call."""

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
