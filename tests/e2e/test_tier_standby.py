"""A standby controller for the tier: with held connections and ab running, the primary
`p4lb run` is killed (SIGKILL, by its PID); `p4lb run --standby` becomes primary on every
balancer (the switches' arbitration updates), adopts the shared connections' copies they
hold, and nothing breaks: no connection, no ab request, no route withdrawn."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from tests.e2e.support import running_tier
from tests.e2e.test_tier import assert_no_failures_between, assert_none_broken, run_on, traffic
from tests.support import poll_until
from topology import tier_plan as plan
from topology.tier_load import start_controller
from topology.tier_procs import Tier

BALANCERS = 3
# From the SIGKILL to every balancer's takeover logged: the switches answer within
# milliseconds, each reconcile reads and writes one switch on a loaded 2-core machine.
TAKEOVER_S = 10.0


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    with running_tier(BALANCERS, 3) as t:
        yield t


def standby_log() -> str:
    p = plan.RUN / "standby.log"
    return p.read_text() if p.exists() else ""


def test_the_standby_takes_the_tier_over_and_nothing_breaks(tier: Tier) -> None:
    start_controller(tier, plan.config_file(), standby=True)
    names = [f"lb{i}" for i in range(1, BALANCERS + 1)]
    assert poll_until(
        lambda: all(f"{n}: standby on" in standby_log() for n in names), 60, "standby waits"
    ), standby_log()[-2000:]
    hops = tier.ecmp_next_hops()
    with traffic() as (result, load):
        killed = time.monotonic()
        tier.kill("controller")
        assert poll_until(
            lambda: all(f"{n}: took over" in standby_log() for n in names),
            TAKEOVER_S,
            "the standby primary on every balancer",
            every=0.05,
        ), standby_log()[-2000:]
        took = time.monotonic() - killed
        print(f"takeover of {BALANCERS} balancers: {took * 1000:.0f} ms (polled every 50 ms)")
        run_on(load, time.monotonic())
    assert_none_broken(result)
    assert_no_failures_between(load, (killed, math.inf))
    assert tier.ecmp_next_hops() == hops  # nothing withdrawn because the controller changed
    assert "withdrawn" not in standby_log()
