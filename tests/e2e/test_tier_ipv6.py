"""IPv6 VIPs in the tier: the dual-stack tier's Maglev VIP [fd00::100]:80 and round-robin
VIP [fd00::100]:81, announced as a /128 by every balancer's GoBGP speaker (over its IPv4
session, via the balancer's IPv6 data address) to FRR, which spreads it over the balancers
with the kernel's ECMP (hashing the 5-tuple, never the flow label). While 60 keep-alive
connections over IPv6 to each VIP ask every 0.2 s (a third of them from a client that
sends no TCP timestamps, so a round-robin one that moves holds by the copies alone) and ab
sends short requests over IPv6, a balancer dies and an operator restarts it, a balancer is
drained and restored, and a fourth balancer is added and removed. Each time: r0's IPv6 next
hops follow (a dead switch within the detection time), no connection held since a second
before the event breaks or moves to another backend (Maglev: the same table on every
balancer; round robin: the cookie and the copies, in IPv6's conn6_table), and no ab request
fails while the routes are converged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.e2e.support import (
    assert_no_failures_between,
    assert_none_broken,
    held,
    run_on,
    running_tier,
)
from tests.e2e.test_tier import AB_CONCURRENCY, DETECT_S, MARGIN_S, OPEN_BEFORE_S, ok, out_and_back
from topology.tier_load import Load, controller_log, verb, wait_hops
from topology.tier_plan import NS, VIP6, VIPS6, nexthop6_addr
from topology.tier_procs import Tier, in_ns

(NAME, _, _), _ = VIPS6  # web6, Maglev (port 80); web6-rr, round robin (port 81)
PORTS = tuple(port for _, port, _ in VIPS6)


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    with running_tier(3, 3) as t:
        yield t


@contextmanager
def traffic() -> Iterator[tuple[dict[str, Any], Load]]:
    """60 held connections to each IPv6 VIP and ab batches (to its port 80)."""
    with held(OPEN_BEFORE_S, AB_CONCURRENCY, ports=PORTS, vip=VIP6) as result_and_load:
        yield result_and_load


def test_ipv6_connections_hold_when_a_balancer_dies_and_comes_back(tier: Tier) -> None:
    # s1 out of the Maglev table first (weight 0): the balancers' table then keeps s2's and
    # s3's entries where they were, which a table built from scratch would not; the
    # restarted balancer must get the tier's, or the flows the router moves to it reset.
    ok("weight", "set", NAME, "s1", "0")
    try:
        with traffic() as (result, load):
            log_mark = len(controller_log())
            converged, restart, back = out_and_back(
                tier,
                load,
                lambda: tier.kill("switch-lb2"),
                [1, 3],
                lambda: verb(tier, "restart", "lb2"),
                DETECT_S + MARGIN_S,
                vip=VIP6,
            )
    finally:
        ok("weight", "set", NAME, "s1", "1")
    assert_none_broken(result, ports=PORTS)
    assert_no_failures_between(load, (converged, restart), (back, math.inf))
    # Announced again (both families) only once it held the tier's state.
    after = controller_log()[log_mark:]
    joined = after.find("lb2: in the tier")
    announced = after.find("lb2: announced")
    assert 0 <= joined < announced, after[-1500:]
    assert f"{VIP6}/128" in after[announced:].splitlines()[0]


def test_ipv6_connections_hold_when_a_balancer_is_drained_and_restored(tier: Tier) -> None:
    with traffic() as (result, load):
        converged, restore, back = out_and_back(
            tier,
            load,
            lambda: ok("tier", "drain", "lb1"),
            [2, 3],
            lambda: ok("tier", "restore", "lb1"),
            None,  # a drain goes through the file and the controller's next round
            vip=VIP6,
        )
    assert_none_broken(result, ports=PORTS)
    assert_no_failures_between(load, (converged, restore), (back, math.inf))


def test_ipv6_connections_hold_when_a_fourth_balancer_joins_and_leaves(tier: Tier) -> None:
    with traffic() as (result, load):
        verb(tier, "add")
        wait_hops(tier, [1, 2, 3, 4], vip=VIP6)
        wait_hops(tier, [1, 2, 3, 4])  # and the IPv4 VIP: one speaker, both families
        converged = time.monotonic()
        run_on(load, converged)
    assert_none_broken(result, ports=PORTS)
    assert_no_failures_between(load, (converged, math.inf))
    with traffic() as (result, load):
        out = verb(tier, "remove", "lb4")
        wait_hops(tier, [1, 2, 3], vip=VIP6)
        converged = time.monotonic()
        run_on(load, converged)
    assert "lb4 withdrawn" in out, out
    assert_none_broken(result, ports=PORTS)
    assert_no_failures_between(load, (converged, math.inf))
    # Its IPv6 neighbour entry went with it (the routers hold none for a balancer gone).
    neighbours = in_ns(NS + "r0", "ip", "-6", "neigh", "show", "dev", "r0-lb").stdout
    assert nexthop6_addr(4) not in neighbours
