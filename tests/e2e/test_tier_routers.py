"""A router pair in front of the tier and on its return path, on real engines (`make run
TOPO=tier ROUTERS=2`): r0 and r0b both learn the VIP from every speaker and spread the
flows over every balancer; r1 and r1b both learn the way back. The clients, the servers and the
balancers each reach a pair through one VRRP address (FRR's vrrpd). While 120 keep-alive
connections (round robin on port 80, Maglev on 81) ask every second and ab sends short
requests, each router that is master dies as a box does (its daemons killed, its links
down) and comes back: no connection held since a second before breaks or moves to another
backend, and no ab request fails while the routes are converged. The router that came back
stays the backup (no preemption), so each failure moves the traffic once."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from tests.e2e.support import (
    assert_no_failures_between,
    assert_none_broken,
    held,
    run_on,
    running_tier,
)
from tests.support import poll_until
from topology.tier_load import wait_hops
from topology.tier_plan import (
    NS,
    VIP,
    VRRP_CLIENTS,
    VRRP_FRONT_LB,
    VRRP_SERVERS,
    client_addr,
)
from topology.tier_procs import Tier, in_ns

AB_CONCURRENCY = 4  # as tests/e2e/test_tier.py
OPEN_BEFORE_S = 1.0
# A backup takes over after 3 advertisements (0.1 s apart) and its skew; the rest is the
# 2-core machine's scheduling with every daemon of the tier on it.
TAKEOVER_WAIT_S = 10.0


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    with running_tier(3, 3, pair=True) as t:
        yield t


def groups(front: bool) -> set[int]:
    return {VRRP_FRONT_LB, VRRP_CLIENTS + 1} if front else {VRRP_SERVERS}


def wait_master(tier: Tier, name: str, front: bool) -> float:
    t0 = time.monotonic()
    what = f"{name} master of {sorted(groups(front))}"
    poll_until(lambda: tier.vrrp_masters(name) == groups(front), TAKEOVER_WAIT_S, what, every=0.05)
    return time.monotonic() - t0


def test_both_front_routers_spread_the_flows_over_every_balancer(tier: Tier) -> None:
    """Each router of the front pair holds the VIP's ECMP route over every balancer, and
    hashes a flow the same way (policy, fields and seed). Its next hops come in the order
    BGP learned them, which differs between the two, so a flow may reach another balancer
    through the other router: how many do is printed (docs/tier.md quotes it); the cookie,
    the copies and Maglev's identical tables carry them (the next test)."""
    client = client_addr(1)
    chosen: dict[str, list[str]] = {}
    for router in ("r0", "r0b"):
        chosen[router] = []
        for sport in range(40000, 40200):
            out = in_ns(
                NS + router,
                *("ip", "route", "get", VIP, "from", client, "iif", f"{router}-c1"),
                *("ipproto", "tcp", "sport", str(sport), "dport", "80"),
            ).stdout
            chosen[router].append(out.split(" via ")[1].split()[0])
        assert len(set(chosen[router])) == 3, (router, set(chosen[router]))
    same = sum(a == b for a, b in zip(chosen["r0"], chosen["r0b"], strict=True))
    print(f"flows reaching the same balancer through r0 and through r0b: {same} of 200")


def test_the_first_router_of_each_pair_is_master(tier: Tier) -> None:
    assert tier.vrrp_masters("r0") == groups(front=True)
    assert tier.vrrp_masters("r1") == groups(front=False)
    assert tier.vrrp_masters("r0b") == set() and tier.vrrp_masters("r1b") == set()


@pytest.mark.parametrize("first,second,front", [("r0", "r0b", True), ("r1", "r1b", False)])
def test_each_master_dies_and_comes_back(tier: Tier, first: str, second: str, front: bool) -> None:
    """The master dies, its twin takes over; it comes back as the backup; then the twin
    dies and it takes over again. Connections held through all four events."""
    with held(OPEN_BEFORE_S, AB_CONCURRENCY) as (result, load):
        spans = []
        for dying, taking in ((first, second), (second, first)):
            tier.router_down(dying)
            took = wait_master(tier, taking, front)
            if front:  # the twin's BGP sessions never went down: its routes are all there
                wait_hops(tier, [1, 2, 3], router=taking)
            converged = time.monotonic()
            run_on(load, converged)
            print(f"{dying} died: {taking} master after {took:.2f} s")
            back = time.monotonic()
            tier.router_up(dying)
            if front:
                wait_hops(tier, [1, 2, 3], router=dying)
            assert tier.vrrp_masters(dying) == set()  # the backup: no preemption
            spans.append((converged, back))
        ready = time.monotonic()
        run_on(load, ready)
    assert_none_broken(result)
    assert_no_failures_between(load, *spans, (ready, math.inf))


@pytest.mark.parametrize("backup,master,front", [("r0b", "r0", True), ("r1b", "r1", False)])
def test_a_backup_router_dies_and_nothing_moves(
    tier: Tier, backup: str, master: str, front: bool
) -> None:
    """The backup of a pair dies and comes back: the master stays master throughout."""
    live = master if tier.vrrp_masters(master) else backup  # the last test may have swapped
    dead = backup if live == master else master
    with held(OPEN_BEFORE_S, AB_CONCURRENCY) as (result, load):
        start = time.monotonic()
        tier.router_down(dead)
        run_on(load, time.monotonic())
        assert tier.vrrp_masters(live) == groups(front)
        tier.router_up(dead)
        if front:
            wait_hops(tier, [1, 2, 3], router=dead)
        assert tier.vrrp_masters(dead) == set() and tier.vrrp_masters(live) == groups(front)
        run_on(load, time.monotonic())
    assert_none_broken(result)
    assert_no_failures_between(load, (start, math.inf))
