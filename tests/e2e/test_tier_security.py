"""The tier's BGP sessions on real engines (FRR, GoBGP): authenticated with TCP MD5, GTSM on,
closed to the clients' side,
and a balancer that announces a prefix it does not own (a server's address, the clients'
network) is ignored by the router: received, filtered, never in its table or its kernel."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.support import running_tier
from tests.support import poll_until
from topology.tier_plan import (
    GTSM_HOPS,
    NS,
    ROUTER_CLIENT,
    ROUTER_LB,
    RUN,
    speaker_addr,
    speaker_conf,
)
from topology.tier_procs import Tier, bgp_password, in_ns

HIJACKS = ("10.2.0.11/32", "10.1.0.0/24")  # server s1, the clients' network


@pytest.fixture(scope="module")
def tier() -> Iterator[Tier]:
    with running_tier(1, 1) as t:
        yield t


def vtysh(cmd: str) -> str:
    return in_ns(NS + "r0", "vtysh", "--vty_socket", str(RUN / "r0"), "-c", cmd).stdout


def gobgp(*args: str) -> str:
    return in_ns(NS + "lb1", "gobgp", "-u", "127.0.0.1", "-p", "50051", *args).stdout


def test_a_balancer_announcing_what_it_does_not_own_is_ignored(tier: Tier) -> None:
    peer = speaker_addr(1)
    # The session is up and its VIP route accepted (the filter lets the balancer's own in).
    assert "10.0.0.100/32" in vtysh(f"show ip bgp neighbors {peer} routes")
    for prefix in HIJACKS:
        gobgp("global", "rib", "add", "-a", "ipv4", prefix)
    try:
        # The router received them (soft-reconfiguration keeps what came in) ...
        assert poll_until(
            lambda: all(
                p in vtysh(f"show ip bgp neighbors {peer} received-routes") for p in HIJACKS
            ),
            15.0,
            every=0.1,
        ), vtysh(f"show ip bgp neighbors {peer} received-routes")
        accepted = vtysh(f"show ip bgp neighbors {peer} routes")
        table = vtysh("show ip bgp")
        kernel = in_ns(NS + "r0", "ip", "route", "show").stdout
        for prefix in HIJACKS:
            # ... and dropped them: not accepted, not in BGP's table, not in the kernel's.
            assert prefix not in accepted
            assert prefix not in table
            assert f"{prefix} via {peer}" not in kernel and f"{prefix} nhid" not in kernel
    finally:
        for prefix in HIJACKS:
            gobgp("global", "rib", "del", "-a", "ipv4", prefix)


def test_bgp_sessions_are_authenticated_and_ttl_protected(tier: Tier) -> None:
    neighbour = vtysh(f"show ip bgp neighbors {speaker_addr(1)}")
    assert "BGP state = Established" in neighbour
    assert "Peer Authentication Enabled" in neighbour
    # Multihop BFD (the routers' profile): what withdraws a speaker that falls silent.
    assert "BFD: Type: multi hop" in neighbour
    speaker = gobgp("neighbor", ROUTER_LB)
    assert "BGP state = ESTABLISHED" in speaker
    # GTSM: the router drops BGP packets that crossed any router (the speakers share its
    # link), and any from outside the balancers' side.
    rules = in_ns(NS + "r0", "nft", "list", "table", "inet", "p4lb_bgp").stdout
    assert f"ip ttl < {256 - GTSM_HOPS} drop" in rules and GTSM_HOPS == 1


def test_the_routers_bgp_is_closed_to_the_clients(tier: Tier) -> None:
    """From the clients' namespace, r0's BGP port on its client-side address gives nothing
    (dropped), while r0's other services answer as before (a refused port is refused)."""
    probe = (
        "import socket,sys\n"
        "s=socket.socket(); s.settimeout(2)\n"
        "try:\n s.connect((sys.argv[1], int(sys.argv[2]))); print('open')\n"
        "except socket.timeout: print('dropped')\n"
        "except OSError: print('refused')\n"
    )

    def connect(port: int) -> str:
        return in_ns(
            NS + "c1", sys.executable, "-c", probe, ROUTER_CLIENT, str(port)
        ).stdout.strip()

    assert connect(179) == "dropped"
    assert connect(2605) == "refused"  # nothing listens there: the path itself works


def md5_failures() -> int:
    """r0's kernel count of TCP segments whose MD5 signature did not verify."""
    out = in_ns(NS + "r0", "nstat", "-az", "TcpExtTCPMD5Failure").stdout
    return int(out.split("TcpExtTCPMD5Failure")[1].split()[0])


def test_a_speaker_without_the_key_gets_no_session(tier: Tier) -> None:
    """A speaker on the balancers' network at a balancer's address (one the tier does not
    use): with the tier's key its session comes up (the setup works); with another key
    r0's kernel drops its segments as failing MD5, and no session comes up."""
    i = 9  # 10.10.0.19: inside r0's listen range and its per-balancer filter
    ns = tier.netns("rogue")
    tier.veth("rogue-f", NS + "fab", "eth0", ns)
    in_ns(NS + "fab", "ip", "link", "set", "rogue-f", "master", "br-lb")
    tier.addr(ns, "eth0", f"{speaker_addr(i)}/24", twin=False)  # a speaker: IPv4 only

    def speaker(password: str) -> int:
        conf = RUN / "rogue" / f"gobgpd-{password[:4]}.toml"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(speaker_conf(i, password))
        return tier.start(
            f"gobgpd-rogue-{password[:4]}",
            ["gobgpd", "-f", str(conf), "-p", "--api-hosts", "127.0.0.1:50051", "--pprof-disable"],
            ns,
            conf.with_suffix(".log"),
        )

    def established() -> bool:
        return "BGP state = Established" in vtysh(f"show ip bgp neighbors {speaker_addr(i)}")

    right = speaker(bgp_password())
    assert poll_until(established, 20.0, every=0.1), vtysh(
        f"show ip bgp neighbors {speaker_addr(i)}"
    )
    os.kill(right, signal.SIGTERM)
    assert poll_until(lambda: not established(), 20.0, every=0.1)
    failures = md5_failures()
    speaker("wrong-" + bgp_password())
    assert poll_until(lambda: md5_failures() > failures, 20.0, every=0.1)
    assert not established()
