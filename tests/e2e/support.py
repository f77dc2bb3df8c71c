"""The e2e layer's labs: the single-switch Mininet lab with BMv2, the config applied and the
HTTP servers started, and the tier; each skipped (naming what is missing) where the machine
cannot run it, and always stopped (by the PIDs it started) and removed afterwards."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

COMPILED = Path(__file__).resolve().parents[2] / "p4src" / "compiled"


@contextmanager
def running_lab(opts: Any, threaded: bool, apply_timeout_s: float = 60) -> Iterator[Any]:
    """A `topology.net.Lab` built from `opts` (a `topology.net.Options`), programmed with
    `p4lb apply`, its servers started. Skips without the compiled program."""
    if not (COMPILED / "lb.json").exists():
        pytest.skip("e2e layer skipped: missing p4src/compiled artifacts (make artifacts)")
    from topology.net import build, p4lb_cmd, start_servers, stop

    lab = build(opts)
    try:
        subprocess.run(
            p4lb_cmd(lab, "apply"), check=True, capture_output=True, timeout=apply_timeout_s
        )
        start_servers(lab, threaded=threaded)
        yield lab
    finally:
        stop(lab)


@contextmanager
def running_tier(
    balancers: int, servers: int, algorithm: str = "wrr", mode: str = "nat"
) -> Iterator[Any]:
    """The tier (a `topology.tier_procs.Tier`) with `balancers` balancers and `servers`
    servers, the port-80 VIP's `algorithm` and `mode`, its controller running and every
    balancer routed to. Skips without the tier's tools or the compiled program."""
    from topology.tier_load import start_tier
    from topology.tier_procs import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip(f"tier layer skipped: missing {', '.join(missing)}")
    if not (COMPILED / "lb.json").exists():
        pytest.skip("tier layer skipped: missing p4src/compiled artifacts (make artifacts)")
    t = start_tier(balancers, servers, algorithm, mode)
    try:
        yield t
    finally:
        t.down()
