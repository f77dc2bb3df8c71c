"""Direct server return in the tier, on real engines: three BMv2 balancers behind FRR, the
port-80 VIP a dsr one (`make run TOPO=tier MODE=dsr`), the port-81 VIP a NAT Maglev one
beside it, and likewise over IPv6 (web6, Maglev, dsr; web6-rr, round robin, NAT). The
servers answer the dsr VIPs' clients themselves, through r1 and r0: their replies reach r0
from r1 and never from a balancer, while the NAT VIPs' replies still come through the
balancers' reverse NAT. ab through the dsr VIPs fails no request, and 120 keep-alive
connections held to the IPv4 one (60 to each IPv6 VIP) survive a balancer's death and its
restart. Both kinds of algorithm on the IPv4 dsr VIP: Maglev (the same table on every
balancer: nothing else needed) and round robin (no reply crosses a balancer, so no cookie:
every connection older than the copy window holds by the controller's copies alone, every
one of them copied).
"""

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
from topology.tier_load import ab, count_replies, verb, wait_hops
from topology.tier_plan import (
    BFD_MS,
    BFD_MULT,
    NS,
    ROUTER_LB,
    VIP,
    VIP6,
    VIPS6,
    client_addr,
    ipv6_twin,
)
from topology.tier_procs import Tier, in_ns

DETECT_S = BFD_MULT * BFD_MS / 1000  # the routers' BFD (a dead switch: the bond, sooner)
MARGIN_S = 1.0  # scheduling on a 2-core machine running 3 switches, 2 routers, 3 speakers
AB_CONCURRENCY = 4  # as tests/e2e/test_tier.py: room left for detecting the failure
OPEN_BEFORE_S = 1.0
HELD = 120  # keep-alive connections to the dsr VIP


@pytest.fixture(scope="module", params=["maglev", "wrr"])
def tier(request: pytest.FixtureRequest) -> Iterator[Tier]:
    with running_tier(3, 3, request.param, "dsr") as t:
        count_replies()  # the fabric's reply counters, from here on
        yield t


def replies_since(before: dict[str, int]) -> dict[str, int]:
    return {k: v - before[k] for k, v in count_replies().items()}


def test_r1_routes_what_comes_from_the_vip_to_r0(tier: Tier) -> None:
    client = client_addr(1)
    dsr = in_ns(NS + "r1", "ip", "route", "get", client, "from", VIP, "iif", "r1-srv").stdout
    assert f"via {ROUTER_LB} dev r1-lb" in dsr, dsr
    # A NAT reply, from a server's own address, still goes to the balancers (ECMP).
    nat = in_ns(NS + "r1", "ip", "route", "get", client, "from", "10.2.0.11", "iif", "r1-srv")
    assert f"via {ROUTER_LB}" not in nat.stdout and "via 10.10.0.4" in nat.stdout, nat.stdout
    # And over IPv6: the IPv6 VIP's replies to r0's IPv6 address, a server's own to ECMP.
    client6, r0 = ipv6_twin(client), ipv6_twin(ROUTER_LB)
    get6 = ("ip", "-6", "route", "get", client6, "from")
    dsr6 = in_ns(NS + "r1", *get6, VIP6, "iif", "r1-srv").stdout
    assert f"via {r0} dev r1-lb" in dsr6, dsr6
    nat6 = in_ns(NS + "r1", *get6, ipv6_twin("10.2.0.11"), "iif", "r1-srv").stdout
    assert f"via {r0}" not in nat6 and "via fd00:10::4" in nat6, nat6


def test_ab_through_the_dsr_vip_and_its_replies_pass_the_balancers(tier: Tier) -> None:
    before = count_replies()
    dsr = ab(600, 10)
    nat = ab(300, 5, port=81)
    assert (dsr["complete"], dsr["failed"], dsr["error"]) == (600, 0, ""), dsr
    assert (nat["complete"], nat["failed"], nat["error"]) == (300, 0, ""), nat
    seen = replies_since(before)
    print("reply frames reaching r0, by way:", seen)
    # Each answered request's reply is at least one frame (SYN-ACK, data, FIN: more).
    assert seen["web_from_balancers"] == 0
    assert seen["web_from_r1"] >= 600
    assert seen["web_maglev_from_r1"] == 0
    assert seen["web_maglev_from_balancers"] >= 300


def test_ab_over_ipv6_and_the_dsr_vips_replies_pass_the_balancers(tier: Tier) -> None:
    before = count_replies()
    dsr = ab(600, 10, vip=VIP6)
    nat = ab(300, 5, port=81, vip=VIP6)
    assert (dsr["complete"], dsr["failed"], dsr["error"]) == (600, 0, ""), dsr
    assert (nat["complete"], nat["failed"], nat["error"]) == (300, 0, ""), nat
    seen = replies_since(before)
    print("reply frames reaching r0, by way:", seen)
    assert seen["web6_from_balancers"] == 0
    assert seen["web6_from_r1"] >= 600
    assert seen["web6_rr_from_r1"] == 0
    assert seen["web6_rr_from_balancers"] >= 300


def test_held_dsr_connections_survive_a_balancer_dying_and_coming_back(tier: Tier) -> None:
    before = count_replies()
    with held(OPEN_BEFORE_S, AB_CONCURRENCY, HELD, ports=(80,)) as (result, load):
        tier.kill("switch-lb2")
        assert wait_hops(tier, [1, 3]) <= DETECT_S + MARGIN_S
        converged = time.monotonic()
        run_on(load, converged)
        restart = time.monotonic()
        verb(tier, "restart", "lb2")
        wait_hops(tier, [1, 2, 3])
        back = time.monotonic()
        run_on(load, back)
    assert_none_broken(result, ports=(80,), per_port=HELD)
    assert_no_failures_between(load, (converged, restart), (back, math.inf))
    seen = replies_since(before)
    assert seen["web_from_balancers"] == 0, seen
    assert seen["web_from_r1"] > 0, seen


def test_held_ipv6_connections_survive_a_balancer_dying_and_coming_back(tier: Tier) -> None:
    """60 connections to the dsr IPv6 VIP (Maglev) and 60 to the NAT round-robin one (a
    third of each from a client without TCP timestamps: the copies alone hold those)."""
    ports = tuple(port for _, port, _ in VIPS6)
    before = count_replies()
    with held(OPEN_BEFORE_S, AB_CONCURRENCY, ports=ports, vip=VIP6) as (result, load):
        tier.kill("switch-lb2")
        assert wait_hops(tier, [1, 3], vip=VIP6) <= DETECT_S + MARGIN_S
        converged = time.monotonic()
        run_on(load, converged)
        restart = time.monotonic()
        verb(tier, "restart", "lb2")
        wait_hops(tier, [1, 2, 3], vip=VIP6)
        back = time.monotonic()
        run_on(load, back)
    assert_none_broken(result, ports=ports)
    assert_no_failures_between(load, (converged, restart), (back, math.inf))
    seen = replies_since(before)
    assert seen["web6_from_balancers"] == 0, seen
    assert seen["web6_from_r1"] > 0, seen
