"""The tier on real engines: three BMv2 balancers running lb.p4 behind FRR (ECMP, BGP, BFD),
each with a GoBGP speaker, driven by one `p4lb run`. While 120 keep-alive connections (60 to a
round-robin VIP, 60 to a Maglev VIP) ask every 0.2 s and ab sends short requests, a balancer
dies and comes back, a speaker dies and comes back, a balancer is drained and restored, and a
fourth balancer joins. Each time: the router's next hops follow within the detection time,
no Maglev connection breaks, no connection moves to another backend, at most a few
round-robin connections break (WRR_BROKEN_AT_MOST: copies that arrived late; issue 30 is
open on it), and no ab request fails once the router has converged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from topology import tier_load
from topology.tier import BFD_MS, BFD_MULT, RUN, Tier, missing_tools, p4lb_config
from topology.tier_load import Load, controller_log, p4lb, start_tier, wait_hops

COMPILED = Path(__file__).resolve().parents[2] / "p4src" / "compiled"
DETECT_S = BFD_MULT * BFD_MS / 1000  # the router's BFD: 3 x 100 ms
MARGIN_S = 1.0  # scheduling on a 2-core machine running 3 switches, 2 routers, 3 speakers
# ab's concurrency: what the controller keeps copying within about a second here. At ab -c 10
# (~500 new connections/s) on this 2-core machine the copies fall seconds behind (results/
# tier: the window grows with the rate of new connections).
AB_CONCURRENCY = 4
# How old the held connections are when the event comes: older than the controller's delay
# to copy them (0.3 s median, p99 up to ~2 s here under this load, results/tier/).
OPEN_BEFORE_S = 2.0


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    missing = missing_tools()
    if missing:
        pytest.skip(f"tier layer skipped: missing {', '.join(missing)}")
    if not (COMPILED / "lb.json").exists():
        pytest.skip("tier layer skipped: missing p4src/compiled artifacts (make artifacts)")
    t = start_tier(3, 3)
    try:
        yield t
    finally:
        t.down()


@contextmanager
def traffic() -> Iterator[tuple[dict[str, Any], Load]]:
    with tier_load.traffic(OPEN_BEFORE_S, AB_CONCURRENCY) as held:
        yield held


# What the tier guarantees today (issue 30 is open on it): a Maglev connection never breaks;
# a round-robin connection survives through the copies the controller writes, which on this
# 2-core machine sometimes arrive after the connection moved (make bench-tier: 7 of 540
# broke). A round-robin connection may break, a few at most: without the sharing (no copies,
# or copies that name the wrong backend) every connection that moves breaks, a third or more.
WRR_BROKEN_AT_MOST = 3  # of 60


def assert_none_broken(result: dict[str, Any]) -> None:
    print("drops by balancer:", result.get("drops"))
    conns = result["connections"]
    assert len(conns) == 120
    for port, allowed in ((80, WRR_BROKEN_AT_MOST), (81, 0)):
        mine = [c for c in conns if c["port"] == port]
        broken = [c for c in mine if c["broken"]]
        moved = [c for c in mine if c["moved"]]
        assert len(broken) <= allowed, f"port {port}: {len(broken)} broken, e.g. {broken[:2]}"
        assert not moved, f"port {port}: {len(moved)} moved, e.g. {moved[:2]}"
        assert all(c["requests"] >= 5 for c in mine)  # they were asking throughout


def assert_no_failures_after(load: Load, converged: float) -> None:
    """No request failed once the router converged; an ab that gave up (one request of its
    batch unanswered for 5 s: a round-robin connection in the window above) at most once."""
    after = [b for b in load.batches if b["start"] >= converged]
    assert after, "no ab batch ran after the router converged"
    gave_up = [b for b in after if b["error"]]
    done = [b for b in after if not b["error"]]
    assert len(gave_up) <= 1, gave_up
    failed = [b | {"at": b["start"] - converged} for b in done if b["failed"]]
    assert not failed, failed
    assert done and all(b["complete"] == 200 for b in done), after


def test_a_balancer_dies_and_comes_back(tier: Tier) -> None:
    with traffic() as (result, load):
        t0 = time.monotonic()
        tier.kill("switch-lb2")
        detect = wait_hops(tier, [1, 3])
        assert detect <= DETECT_S + MARGIN_S
        converged = t0 + detect
        while time.monotonic() < converged + 3:  # traffic on the survivors for a while
            time.sleep(0.1)
        log_mark = len(controller_log())
        tier.start_switch(2)
        wait_hops(tier, [1, 2, 3])
        back = time.monotonic()
        while time.monotonic() < back + 2:
            time.sleep(0.1)
    assert_none_broken(result)
    assert_no_failures_after(load, converged)
    # It announced only once it held the tier's state.
    after = controller_log()[log_mark:]
    joined = after.find("lb2: in the tier")
    announced = after.find("lb2: announced")
    assert 0 <= joined < announced, after[-1500:]


def test_a_speaker_dies_and_comes_back(tier: Tier) -> None:
    with traffic() as (result, load):
        t0 = time.monotonic()
        tier.kill("gobgpd-lb3")
        detect = wait_hops(tier, [1, 2])
        assert detect <= DETECT_S + MARGIN_S
        converged = t0 + detect
        while time.monotonic() < converged + 2:
            time.sleep(0.1)
        tier.start_speaker(3)  # `p4lb run` sees its empty RIB and announces again
        wait_hops(tier, [1, 2, 3])
    assert_none_broken(result)
    assert_no_failures_after(load, converged)


def test_a_balancer_is_drained_and_restored(tier: Tier) -> None:
    with traffic() as (result, load):
        t0 = time.monotonic()
        r = p4lb("tier", "drain", "lb1")
        assert r.returncode == 0, r.stderr
        detect = wait_hops(tier, [2, 3])
        converged = t0 + detect
        while time.monotonic() < converged + 2:
            time.sleep(0.1)
        r = p4lb("tier", "restore", "lb1")
        assert r.returncode == 0, r.stderr
        wait_hops(tier, [1, 2, 3])
    assert_none_broken(result)
    assert_no_failures_after(load, converged)


def test_a_fourth_balancer_joins(tier: Tier) -> None:
    from p4lb.intent import writer

    with traffic() as (result, load):
        tier.balancer_links(4)
        tier.start_switch(4)
        tier.start_speaker(4)
        writer.save(p4lb_config(4, 3), RUN / "lb.toml")
        wait_hops(tier, [1, 2, 3, 4])
        converged = time.monotonic()
        while time.monotonic() < converged + 2:
            time.sleep(0.1)
    assert_none_broken(result)
    assert_no_failures_after(load, converged)
    stats = p4lb("stats", "--json")
    assert stats.returncode == 0, stats.stderr
    doc = json.loads(stats.stdout)
    assert set(doc["balancers"]) == {"lb1", "lb2", "lb3", "lb4"}
    web = next(v for v in doc["tier"]["vips"] if v["name"] == "web")
    per = [next(v for v in b["vips"] if v["name"] == "web") for b in doc["balancers"].values()]
    # The tier's count of a backend's connections is the sum of its balancers' counts.
    for i, b in enumerate(web["backends"]):
        assert b["connections"] == sum(p["backends"][i]["connections"] for p in per)
