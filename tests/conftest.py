"""Markers by folder, and one clear skip message naming what a layer is missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def missing_for(layer: str) -> list[str]:
    """What this machine lacks for the dataplane or e2e layer (empty: runnable)."""
    need = ["simple_switch_grpc", "nft"]  # nft: every switch's Thrift port is confined
    if layer == "e2e":
        need += ["mn", "ab"]
    missing = [t for t in need if shutil.which(t) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # The layer is the first folder under tests/ (tests/unit/intent/... is unit).
        parts = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests").parts
        layer = parts[0] if len(parts) > 1 else ""
        if layer in ("unit", "dataplane", "e2e"):
            item.add_marker(getattr(pytest.mark, layer))
        if layer in ("dataplane", "e2e"):
            missing = missing_for(layer)
            if missing:
                item.add_marker(
                    pytest.mark.skip(reason=f"{layer} layer skipped: missing {', '.join(missing)}")
                )
