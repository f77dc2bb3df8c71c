"""The tier for the e2e tests: built once per module, skipped (naming what is missing) where
the machine cannot run it, and always taken down."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from topology.tier_load import start_tier
from topology.tier_procs import Tier, missing_tools

COMPILED = Path(__file__).resolve().parents[2] / "p4src" / "compiled"


@contextmanager
def running_tier(balancers: int, servers: int) -> Iterator[Tier]:
    missing = missing_tools()
    if missing:
        pytest.skip(f"tier layer skipped: missing {', '.join(missing)}")
    if not (COMPILED / "lb.json").exists():
        pytest.skip("tier layer skipped: missing p4src/compiled artifacts (make artifacts)")
    t = start_tier(balancers, servers)
    try:
        yield t
    finally:
        t.down()
