"""The e2e layer's lab: the Mininet topology with BMv2, the config applied and the HTTP
servers started; stopped (by the PIDs it started) and removed afterwards."""

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
