"""A standby controller for the tier: with held connections and ab running, the primary
`p4lb run` is killed (SIGKILL, by its PID); `p4lb run --standby` becomes primary on every
balancer (the switches' arbitration updates), adopts the shared connections' copies they
hold, and nothing breaks: no connection, no ab request, no route withdrawn. Then the worse
cases, each with a new standby waiting: the primary and, before anything could be rebuilt,
a balancer die together, and the balancer comes back under the new primary; and a backend
dies in the controllers' gap, which the new primary's health checks take out. A third of
the held connections come from a client that sends no TCP timestamps: no cookie, so their
round-robin connections hold by the copies alone."""

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
from topology import tier_plan as plan
from topology.tier_load import ab, start_controller, verb, wait_hops
from topology.tier_procs import Tier

BALANCERS = 3
# From the SIGKILL to every balancer's takeover logged: the switches answer within
# milliseconds, each reconcile reads and writes one switch on a loaded 2-core machine.
TAKEOVER_S = 10.0
# A backend's death to the health checks' verdict: interval x fall, and scheduling.
HEALTH_S = 15.0
OPEN_BEFORE_S = 1.0
AB_CONCURRENCY = 4


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    with running_tier(BALANCERS, 3) as t:
        yield t


def log_of(name: str) -> str:
    p = plan.RUN / f"{name}.log"
    return p.read_text() if p.exists() else ""


def standing_by(tier: Tier, name: str) -> None:
    """A new `p4lb run --standby` recorded as `name`, waiting on every balancer."""
    start_controller(tier, plan.config_file(), standby=True, name=name)
    names = [f"lb{i}" for i in tier.lbs]
    assert poll_until(
        lambda: all(f"{n}: standby on" in log_of(name) for n in names), 60, f"{name} waits"
    ), log_of(name)[-2000:]


def took_over(name: str, lbs: list[int]) -> float:
    """Seconds until `name` logged its takeover of every balancer in `lbs` (bounded)."""
    t0 = time.monotonic()
    assert poll_until(
        lambda: all(f"lb{i}: took over" in log_of(name) for i in lbs),
        TAKEOVER_S,
        f"{name} primary on {lbs}",
        every=0.05,
    ), log_of(name)[-2000:]
    return time.monotonic() - t0


def test_the_standby_takes_the_tier_over_and_nothing_breaks(tier: Tier) -> None:
    standing_by(tier, "standby")
    hops = tier.ecmp_next_hops()
    with held(OPEN_BEFORE_S, AB_CONCURRENCY) as (result, load):
        killed = time.monotonic()
        tier.kill("controller")
        took = took_over("standby", tier.lbs)
        print(f"takeover of {BALANCERS} balancers: {took * 1000:.0f} ms (polled every 50 ms)")
        run_on(load, time.monotonic())
    assert_none_broken(result)
    assert_no_failures_between(load, (killed, math.inf))
    assert tier.ecmp_next_hops() == hops  # nothing withdrawn because the controller changed
    assert "withdrawn" not in log_of("standby")


def test_the_primary_and_a_balancer_die_together(tier: Tier) -> None:
    """The worst case: the balancer dies before the new primary could adopt anything from
    it. Its connections move to the others, which carry them by the cookie and the copies
    the old primary wrote. The balancer comes back, and the new primary programs it and
    announces it again."""
    # Two new standbys while the primary holds id 9: they take 8 and 7, below it (one
    # started later, with 9 free, would take 9 and be primary at once).
    standing_by(tier, "standby2")
    standing_by(tier, "standby3")
    with held(OPEN_BEFORE_S, AB_CONCURRENCY) as (result, load):
        tier.kill("standby")  # the primary now
        tier.kill("switch-lb2")
        took_over("standby2", [1, 3])
        wait_hops(tier, [1, 3])
        converged = time.monotonic()
        run_on(load, converged)
        restart = time.monotonic()
        verb(tier, "restart", "lb2")
        wait_hops(tier, [1, 2, 3])  # programmed and announced by the new primary
        back = time.monotonic()
        run_on(load, back)
    assert_none_broken(result)
    assert_no_failures_between(load, (converged, restart), (back, math.inf))
    # Programmed by a controller before it announced: standby2, or standby3 when it reached
    # the restarted switch first (its only controller for a moment; standby2 then preempts).
    assert "lb2: in the tier" in log_of("standby2") + log_of("standby3")


def test_a_backend_that_dies_in_the_gap_is_taken_out_by_the_new_primary(tier: Tier) -> None:
    """The primary dies, and a backend with it; standby3 (waiting since the last test, its
    health checks running all along) takes over and takes the backend out."""
    tier.kill("standby2")
    tier.kill("server-s1-8000")  # s1 on the round-robin VIP (port 80 -> 8000)
    took_over("standby3", tier.lbs)
    down = "backend s1 of VIP web (10.2.0.11:8000) is DOWN"
    assert poll_until(lambda: down in log_of("standby3"), HEALTH_S, down), log_of("standby3")[
        -2000:
    ]
    # The verdict reaches every balancer with the next reconcile of each: until then a
    # few connections still go to s1 (its weight is not 0 there yet). Round robin over
    # three backends: 30 requests through three balancers would meet s1 several times on
    # each were it still in rotation anywhere.
    what = "an ab run of 30 requests with none failed (s1 out on every balancer)"
    assert poll_until(lambda: ab(30, AB_CONCURRENCY)["failed"] == 0, HEALTH_S, what, every=0.2)
