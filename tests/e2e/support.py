"""The e2e layer's labs: the single-switch Mininet lab with BMv2, the config applied and the
HTTP servers started, and the tier; each skipped (naming what is missing) where the machine
cannot run it, and always stopped (by the PIDs it started) and removed afterwards. And what
the tier's tests assert of the traffic through an event: the connections held through it
(topology.holder), the ab batches run while the routes were converged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

COMPILED = Path(__file__).resolve().parents[2] / "p4src" / "compiled"


@contextmanager
def running_lab(opts: Any, threaded: bool, apply_timeout_s: float = 60) -> Iterator[Any]:
    """A `topology.net.Lab` built from `opts` (a `topology.net.Options`), programmed with
    `p4lb apply`, its servers started (`topology.net.running`). Skips without the compiled
    program."""
    if not (COMPILED / "lb.json").exists():
        pytest.skip("e2e layer skipped: missing p4src/compiled artifacts (make artifacts)")
    from topology.net import running

    with running(opts, threaded, apply_timeout_s=apply_timeout_s) as lab:
        yield lab


@contextmanager
def running_tier(
    balancers: int, servers: int, algorithm: str = "wrr", mode: str = "nat", pair: bool = False
) -> Iterator[Any]:
    """The tier (a `topology.tier_procs.Tier`) with `balancers` balancers and `servers`
    servers, the port-80 VIP's `algorithm` and `mode` (and a router pair with `pair`), its
    controller running and every balancer routed to. Skips without the tier's tools or the
    compiled program."""
    from topology.tier_load import start_tier
    from topology.tier_procs import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip(f"tier layer skipped: missing {', '.join(missing)}")
    if not (COMPILED / "lb.json").exists():
        pytest.skip("tier layer skipped: missing p4src/compiled artifacts (make artifacts)")
    t = start_tier(balancers, servers, algorithm, mode, pair=pair)
    try:
        yield t
    finally:
        t.down()


# What the controller logged that can move a connection: a backend's health, a balancer
# leaving or joining the tier (shown when a connection broke or moved).
def held(
    open_before_s: float,
    ab_concurrency: int,
    connections: int = 60,
    ports: tuple[int, ...] = (80, 81),
    vip: str | None = None,
) -> Any:
    """topology.tier_load.traffic with a third of each port's held connections from a
    client that sends no TCP timestamps: no cookie, so a round-robin one holds through a
    move by the copies alone (assert_none_broken counts them). `vip`: another VIP than the
    tier's IPv4 one (its IPv6 VIP), connections and ab batches both."""
    from topology.tier_load import traffic
    from topology.tier_plan import VIP

    return traffic(open_before_s, ab_concurrency, connections, ports, connections // 3, vip or VIP)


EVENTS = (" is DOWN", " is UP", "out of the tier", "in the tier", "announced", "withdrawn")


def assert_none_broken(
    result: dict[str, Any],
    ports: tuple[int, ...] = (80, 81),
    per_port: int = 60,
    without_timestamps: int | None = None,
) -> None:
    """Of the connections held through an event (topology.tier_load.traffic's result), none
    broke or moved to another backend, each kept asking, and `without_timestamps` of each
    port's (a third: `held`) sent no TCP timestamps (they hold by the copies alone).
    Without the tier's sharing (no cookie, no copies, or either naming the wrong backend)
    every round-robin connection that moves breaks: a third or more of them."""
    from topology.tier_load import controller_log

    print("drops by balancer:", result.get("drops"))
    conns = result["connections"]
    assert len(conns) == per_port * len(ports)
    for port in ports:
        mine = [c for c in conns if c["port"] == port]
        no_ts = per_port // 3 if without_timestamps is None else without_timestamps
        assert sum(not c.get("timestamps", True) for c in mine) == no_ts
        broken = [c for c in mine if c["broken"]]
        moved = [c for c in mine if c["moved"]]
        if broken or moved:
            clocks = f"monotonic {time.monotonic():.3f} = {time.strftime('%H:%M:%S')}"
            log = "\n".join(
                ln for ln in controller_log().splitlines() if any(e in ln for e in EVENTS)
            )
            print(f"now {clocks}; the controller's events:\n{log}")
        assert not broken, f"port {port}: {len(broken)} broken, e.g. {broken[:2]}"
        assert not moved, f"port {port}: {len(moved)} moved, e.g. {moved[:2]}"
        assert all(c["requests"] >= 5 for c in mine)  # they were asking throughout


def run_on(load: Any, since: float, timeout_s: float = 30.0) -> None:
    """Keep the traffic (a topology.tier_load.Load) going until an ab batch started after
    `since` (bounded)."""
    from tests.support import poll_until

    what = "an ab batch started after the routes converged"
    poll_until(lambda: any(b["start"] >= since for b in load.batches), timeout_s, what, every=0.1)


def assert_no_failures_between(load: Any, *spans: tuple[float, float]) -> None:
    """No ab request failed in a batch run wholly within a span of converged routes (from a
    convergence to the next route change). Batches that overlap a route change are printed
    (a connection younger than its first stamped reply can break there), not asserted."""
    from topology.tier_load import steady_batches

    within, across = steady_batches(load, *spans)
    print(
        "ab batches with failures across a route change:",
        [b for b in across if b["failed"] or b["error"]],
    )
    assert within, f"no ab batch ran within {spans}"
    bad = [b for b in within if b["error"] or b["failed"] or b["complete"] != 200]
    assert not bad, bad
