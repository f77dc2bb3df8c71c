"""IPv6 on a real simple_switch_grpc: routed on its destination (the hop limit decremented,
nothing else changed), neighbour discovery and the link's multicast listener reports
flooded as ARP is, and every validation's drop
counted by reason: IPv6 to no VIP, forwarded as IPv4 to no VIP is. IPv6 VIPs are
test_ipv6_vip.py's, IPv4 alongside test_packets.py's."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import (
    ICMPv6EchoRequest,
    ICMPv6MLReport2,
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6ND_RS,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    RouterAlert,
)
from scapy.layers.l2 import Ether

from p4lb.intent.model import Host
from p4lb.models.hashing import Flow
from p4lb.pipeline.entries import mac
from tests.dataplane import support
from tests.dataplane.support import (
    N_PORTS,
    SWITCH_MAC,
    VIP,
    WEB_SERVICE_ID,
    Bmv2,
    Wire,
    backend_of,
    drop_reasons,
    flow_syn,
    flush,
    host_ip,
    host_mac,
)

DROPS = drop_reasons()


def host_ip6(port: int) -> str:
    return f"2001:db8::{port}"


PREFIX = "2001:db8:f::/48"  # a network behind a router on port 4
PREFIX_PORT = 4
# The IPv6 hosts the controller routes to (the IPv4 config of support.CONFIG stays).
HOSTS6 = (
    Host("client6", host_ip6(1), host_mac(1), 1),
    Host("h3v6", host_ip6(3), host_mac(3), 3),
    Host("router6", "2001:db8:f::", host_mac(PREFIX_PORT), PREFIX_PORT, prefix_len=48),
)


@pytest.fixture(scope="module")
def lab6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bmv2]:
    """One switch for the module (each test reads its counters before and after), with
    the IPv6 hosts added to the test config by the controller."""
    with support.running(tmp_path_factory.mktemp("ipv6") / "switch") as b:
        b.apply(dataclasses.replace(b.cfg, hosts=b.cfg.hosts + HOSTS6))
        yield b


@pytest.fixture
def wire6(lab6: Bmv2) -> Iterator[Wire]:
    with support.flushed_wire() as w:  # nothing of an earlier test's still on its way out
        yield w


def frame(dst_mac: str = SWITCH_MAC) -> Any:
    return Ether(src=host_mac(1), dst=dst_mac)


def tcp6(dst: str = host_ip6(3), hlim: int = 64, src: str = host_ip6(1), **tcp: Any) -> Any:
    fields = {"sport": 40000, "dport": 80, "flags": "S", "seq": 1000} | tcp
    return frame() / IPv6(src=src, dst=dst, hlim=hlim) / TCP(**fields)


def routed(pkt: Any, port: int) -> bytes:
    """What the switch must send out of `port` for `pkt`: the frame toward the next hop,
    the hop limit one less, every other byte (the TCP/UDP checksum included) the same."""
    out = Ether(bytes(pkt))
    out[Ether].src, out[Ether].dst = SWITCH_MAC, host_mac(port)
    out[IPv6].hlim -= 1
    return bytes(out)


def test_the_controller_writes_the_ipv6_routes(lab6: Bmv2) -> None:
    got = {
        e.m("dst_addr"): (e.action, e.params)
        for e in lab6.sw.read_entries()
        if e.table == "ipv6_route_table"
    }

    def route(port: int) -> tuple[str, tuple[tuple[str, int], ...]]:
        params = (("port", port), ("src_mac", mac(SWITCH_MAC)), ("dst_mac", mac(host_mac(port))))
        return ("forward_ipv6", params)

    net = ipaddress.IPv6Network(PREFIX)
    assert got == {
        (int(ipaddress.IPv6Address(host_ip6(1))), 128): route(1),
        (int(ipaddress.IPv6Address(host_ip6(3))), 128): route(3),
        (int(net.network_address), 48): route(PREFIX_PORT),
    }


FORWARDED = [
    ("TCP SYN to a host", lambda: tcp6(), 3),
    ("TCP data to a host", lambda: tcp6(flags="PA", ack=7) / (b"x" * 100), 3),
    (
        "UDP to a network behind a router",
        lambda: frame() / IPv6(src=host_ip6(1), dst="2001:db8:f:1::9") / UDP(sport=5000, dport=53),
        PREFIX_PORT,
    ),
    (
        "UDP without a checksum",
        lambda: frame() / IPv6(src=host_ip6(1), dst=host_ip6(3)) / UDP(sport=5000, chksum=0),
        3,
    ),
    (
        "ICMPv6 echo request",
        lambda: frame() / IPv6(src=host_ip6(1), dst=host_ip6(3)) / ICMPv6EchoRequest(id=7),
        3,
    ),
    (
        "hop limit 2",
        lambda: tcp6(hlim=2),
        3,
    ),
    (
        "hop-by-hop header before TCP",
        lambda: (
            frame()
            / IPv6(src=host_ip6(1), dst=host_ip6(3))
            / IPv6ExtHdrHopByHop()
            / TCP(sport=40001, dport=80)
        ),
        3,
    ),
    (
        "routing header (segments left 0)",
        lambda: (
            frame()
            / IPv6(src=host_ip6(1), dst=host_ip6(3))
            / IPv6ExtHdrRouting(addresses=[], segleft=0)
            / UDP(sport=5001)
        ),
        3,
    ),
    (
        "destination options",
        lambda: (
            frame() / IPv6(src=host_ip6(1), dst=host_ip6(3)) / IPv6ExtHdrDestOpt() / UDP(sport=5002)
        ),
        3,
    ),
    (
        "fragment to a host (not a VIP)",
        lambda: (
            frame()
            / IPv6(src=host_ip6(1), dst=host_ip6(3))
            / IPv6ExtHdrFragment(m=1, id=9)
            / (b"f" * 64)
        ),
        3,
    ),
    (
        "link-local source",
        lambda: tcp6(src="fe80::1"),
        3,
    ),
]


@pytest.mark.parametrize(("desc", "make", "port"), FORWARDED, ids=[c[0] for c in FORWARDED])
def test_ipv6_is_routed_on_its_destination(
    lab6: Bmv2, wire6: Wire, desc: str, make: Any, port: int
) -> None:
    pkt = make()
    wire6.send(1, pkt)
    wire6.expect(1)
    flush(wire6)  # a second or late copy would be here by now
    assert wire6.got == [(port, routed(pkt, port))]


def _ns(src: str, hlim: int = 255) -> Any:
    """A neighbour solicitation for host 3's address, to its solicited-node group."""
    pkt = (
        Ether(src=host_mac(1), dst="33:33:ff:00:00:03")
        / IPv6(src=src, dst="ff02::1:ff00:3", hlim=hlim)
        / ICMPv6ND_NS(tgt=host_ip6(3))
    )
    return pkt / ICMPv6NDOptSrcLLAddr(lladdr=host_mac(1)) if src != "::" else pkt


def _listener_report(src: str, dst: str = "ff02::16", hlim: int = 1) -> Any:
    """A multicast listener report (MLDv2), as a host sends one for each group it joins:
    behind a hop-by-hop header with the router alert, hop limit 1."""
    return (
        Ether(src=host_mac(1), dst="33:33:00:00:00:16")
        / IPv6(src=src, dst=dst, hlim=hlim)
        / IPv6ExtHdrHopByHop(options=[RouterAlert()])
        / ICMPv6MLReport2()
    )


NEIGHBOUR_DISCOVERY = [
    ("multicast listener report", lambda: _listener_report("fe80::1")),
    ("multicast listener report before an address (from ::)", lambda: _listener_report("::")),
    ("neighbour solicitation", lambda: _ns(host_ip6(1))),
    ("duplicate address detection (from ::)", lambda: _ns("::")),
    (
        "neighbour advertisement",
        lambda: (
            Ether(src=host_mac(1), dst=host_mac(3))
            / IPv6(src=host_ip6(1), dst=host_ip6(3), hlim=255)
            / ICMPv6ND_NA(tgt=host_ip6(1), R=0, S=1, O=1)
        ),
    ),
    (
        "router solicitation",
        lambda: (
            Ether(src=host_mac(1), dst="33:33:00:00:00:02")
            / IPv6(src="fe80::1", dst="ff02::2", hlim=255)
            / ICMPv6ND_RS()
        ),
    ),
]


@pytest.mark.parametrize(
    ("desc", "make"), NEIGHBOUR_DISCOVERY, ids=[c[0] for c in NEIGHBOUR_DISCOVERY]
)
def test_the_links_own_traffic_is_flooded_unchanged_like_arp(
    lab6: Bmv2, wire6: Wire, desc: str, make: Any
) -> None:
    pkt = make()
    wire6.send(1, pkt)
    flush(wire6)  # each port's copy is out by now, and any second copy
    assert sorted(wire6.got) == [(p, bytes(pkt)) for p in range(2, N_PORTS + 1)]


def _raw6(first_byte: int = 0x60, length: int = 40) -> bytes:
    """A frame whose IPv6 header is a TCP SYN's, its first byte and length changed."""
    raw = bytearray(bytes(tcp6(sport=48100)))
    raw[14] = first_byte
    return bytes(raw[: 14 + length] if length < 40 else raw)


def _payload_len(n: int, pkt: Any = None) -> Any:
    p = pkt if pkt is not None else tcp6(sport=48101)
    p[IPv6].plen = n
    return p


DROP_CASES = [
    ("hop limit 1", lambda: tcp6(hlim=1), "ttl_expired"),
    ("hop limit 0", lambda: tcp6(hlim=0), "ttl_expired"),
    ("version 5 in an IPv6 frame", lambda: _raw6(first_byte=0x50), "malformed"),
    ("truncated IPv6 header", lambda: _raw6(length=20), "malformed"),
    ("TCP data offset 4", lambda: tcp6(dataofs=4), "malformed"),
    ("ND with hop limit 64", lambda: _ns(host_ip6(1), hlim=64), "malformed"),
    ("payload length 1000 in a 74-byte frame", lambda: _payload_len(1000), "bad_length"),
    ("payload length 10 cuts the TCP header", lambda: _payload_len(10), "bad_length"),
    (
        "payload length 4 cuts the UDP header",
        lambda: _payload_len(4, frame() / IPv6(src=host_ip6(1), dst=host_ip6(3)) / UDP()),
        "bad_length",
    ),
    ("SYN+FIN", lambda: tcp6(flags="SF"), "bad_tcp_flags"),
    ("no TCP flags (null scan)", lambda: tcp6(flags=""), "bad_tcp_flags"),
    ("source ::1", lambda: tcp6(src="::1"), "martian_source"),
    ("source :: (TCP)", lambda: tcp6(src="::"), "martian_source"),
    ("source :: (ND, hop limit 64)", lambda: _ns("::", hlim=64), "martian_source"),
    ("multicast source", lambda: tcp6(src="ff02::1"), "martian_source"),
    (
        "source :: (hop-by-hop, to a host)",
        lambda: _listener_report("::", dst=host_ip6(3), hlim=64),
        "martian_source",
    ),
    (
        "source :: (report to a site's group)",
        lambda: _listener_report("::", dst="ff05::16"),
        "martian_source",
    ),
    (
        "hop limit 1 to a site's group",
        lambda: _listener_report("fe80::1", dst="ff05::16"),
        "ttl_expired",
    ),
    ("IPv4-mapped source", lambda: tcp6(src="::ffff:10.0.0.1"), "martian_source"),
    ("source is the destination", lambda: tcp6(src=host_ip6(3)), "martian_source"),
    ("no route", lambda: tcp6(dst="2001:db8:99::1"), "no_route"),
    ("multicast destination", lambda: tcp6(dst="ff0e::1"), "no_route"),
]


@pytest.mark.parametrize(("desc", "make", "reason"), DROP_CASES, ids=[c[0] for c in DROP_CASES])
def test_ipv6_drops_are_counted_by_reason_and_nothing_leaves(
    lab6: Bmv2, wire6: Wire, desc: str, make: Any, reason: str
) -> None:
    index = DROPS[reason]  # service 0: not tied to a VIP
    before = lab6.counter("drops", index)
    wire6.send(1, make())
    assert lab6.wait_counter("drops", index, before + 1) == before + 1
    flush(wire6)  # anything the dropped packet made would be out by now
    assert wire6.got == []


def test_the_ipv4_vip_still_balances_beside_ipv6(lab6: Bmv2, wire6: Wire) -> None:
    """IPv4 and IPv6 through one switch at once: a SYN to the IPv4 VIP reaches one of
    its backends, rewritten, while an IPv6 packet from the same client is routed."""
    wire6.send(1, flow_syn(Flow(host_ip(1), VIP, 6, 45000, 80, WEB_SERVICE_ID)))
    assert backend_of(wire6, 45000) in (2, 3, 4)
    wire6.clear()
    pkt = tcp6(sport=45000)
    wire6.send(1, pkt)
    wire6.expect(1)
    flush(wire6)
    assert wire6.got == [(3, routed(pkt, 3))]
