"""IPv6 VIPs on a real simple_switch_grpc: Maglev (TCP) and IP hash (UDP) VIPs beside the
IPv4 ones of support.CONFIG, each flow sent to the backend the model predicts from the
switch's own pool and slot tables, NAT both ways compared as whole packets (the
checksums scapy computes for the rewritten packet), the connection's packets kept on
their backend, a full bucket reported as an IPv6 collision, and every drop toward
an IPv6 VIP counted by reason under the VIP, and neighbour solicitations for a VIP
answered."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import (
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.l2 import Ether

from p4lb.models.hashing import Flow, signature
from p4lb.pipeline.digests import ConnDigests
from p4lb.pipeline.entries import Entry, ip
from p4lb.pipeline.ids import ids_on_switch, vip_key
from tests.dataplane import support
from tests.dataplane.support import (
    CLIENT6,
    SWITCH_MAC,
    VIP,
    VIP6,
    VIP6_MAC,
    WEB_SERVICE_ID,
    Bmv2,
    Wire,
    backend6,
    backend_of,
    config6,
    drop_reasons,
    flow_syn,
    flush,
    host_ip,
    host_mac,
    same_bucket_flows6,
)

DROPS = drop_reasons()
DNS6 = "2001:db8::101"  # a second IPv6 VIP address (as a source: martian)


CONFIG6 = (
    config6("maglev")
    + f"""
[vip.dns6]
address = "{DNS6}"
protocol = "udp"
port = 53
algorithm = "iphash"
mac = "{VIP6_MAC}"
"""
    + "".join(
        f"""
[[vip.dns6.backend]]
name = "d{p}"
address = "{backend6(p)}"
port = 5353
mac = "{host_mac(p)}"
switch_port = {p}
"""
        for p in (2, 3)
    )
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bmv2]:
    with support.running(tmp_path_factory.mktemp("ipv6vip") / "switch", CONFIG6) as b:
        yield b


@pytest.fixture
def wire(lab: Bmv2) -> Iterator[Wire]:
    with support.flushed_wire() as w:
        yield w


def sid_of(lab: Bmv2, vip: str) -> int:
    return ids_on_switch(lab.sw.read_entries()).services[vip_key(lab.cfg.vip(vip))]


def predicted(lab: Bmv2, vip: str, f: Flow) -> tuple[str, int, int]:
    """The backend (address, port, switch port) the switch must pick for flow `f`: the
    model's signature modulo the size the VIP's entry names, looked up in the pool or
    slot table the switch holds, the backend's NAT entry read back."""
    held = lab.sw.read_entries()
    sid = sid_of(lab, vip)
    entry = next(e for e in held if e.table == "vip6_table" and e.p("service_id") == sid)
    iphash = lab.cfg.vip(vip).algorithm == "iphash"
    size = entry.p("pool_size") if iphash else entry.p("slot_count")
    table, index = ("pool_table", "index") if iphash else ("slot_table", "slot")
    want = (("service_id", sid), ("version", entry.p("version")), (index, signature(f) % size))
    member = next(e for e in held if e.table == table and e.match == want)
    nat: Entry = next(
        e
        for e in held
        if e.table == "backend_table" and e.exact("backend_id") == member.p("backend_id")
    )
    b = next(b for b in lab.cfg.vip(vip).backends if ip(b.address) == nat.p("addr"))
    return b.address, nat.p("port"), b.switch_port


def client_pkt(dst: str, l4: Any, src: str = CLIENT6, hlim: int = 64) -> Any:
    return Ether(src=host_mac(1), dst=VIP6_MAC) / IPv6(src=src, dst=dst, hlim=hlim) / l4


def rewritten(pkt: Any, **changes: Any) -> bytes:
    """`pkt` as the switch must send it: the frame, the IPv6 and the TCP/UDP fields in
    `changes` (ether_src, ether_dst, src, dst, sport, dport), the hop limit one less, the
    TCP/UDP checksum as scapy computes it over the rewritten packet."""
    out = Ether(bytes(pkt))
    out[Ether].src, out[Ether].dst = changes.pop("ether_src"), changes.pop("ether_dst")
    out[IPv6].hlim -= 1
    l4 = out[TCP] if TCP in out else out[UDP]
    for k in ("src", "dst"):
        if k in changes:
            setattr(out[IPv6], k, changes[k])
    for k in ("sport", "dport"):
        if k in changes:
            setattr(l4, k, changes[k])
    del l4.chksum
    return bytes(out)


def out_of(wire: Wire, port: int) -> list[bytes]:
    flush(wire)
    return [raw for p, raw in wire.got if p == port]


CASES = [
    ("web6", "tcp SYN", lambda sport: TCP(sport=sport, dport=80, flags="S", seq=1000)),
    (
        "web6",
        "tcp SYN with options",
        lambda sport: TCP(
            sport=sport, dport=80, flags="S", options=[("MSS", 1460), ("SAckOK", b"")]
        ),
    ),
    ("dns6", "udp query", lambda sport: UDP(sport=sport, dport=53) / (b"q" * 33)),
]


@pytest.mark.parametrize(("vip", "desc", "make"), CASES, ids=[c[1] for c in CASES])
def test_a_client_packet_is_rewritten_to_the_predicted_backend_and_its_reply_to_the_vip(
    lab: Bmv2, wire: Wire, vip: str, desc: str, make: Any
) -> None:
    address = lab.cfg.vip(vip).address
    for sport in (41000, 41001, 41002, 41003):
        wire.clear()
        l4 = make(sport)
        proto = 6 if TCP in l4 else 17
        f = Flow(CLIENT6, address, proto, sport, l4.dport, sid_of(lab, vip))
        baddr, bport, swport = predicted(lab, vip, f)
        pkt = client_pkt(address, l4)
        wire.send(1, pkt)
        want = rewritten(
            pkt, ether_src=SWITCH_MAC, ether_dst=host_mac(swport), dst=baddr, dport=bport
        )
        assert out_of(wire, swport) == [want], desc
        # The backend's reply becomes the VIP's, on its way to the client.
        wire.clear()
        reply_l4 = (
            TCP(sport=bport, dport=sport, flags="SA", seq=5, ack=1001)
            if proto == 6
            else UDP(sport=bport, dport=sport) / b"answer"
        )
        reply = (
            Ether(src=host_mac(swport), dst=SWITCH_MAC) / IPv6(src=baddr, dst=CLIENT6) / reply_l4
        )
        wire.send(swport, reply)
        want = rewritten(
            reply, ether_src=SWITCH_MAC, ether_dst=host_mac(1), src=address, sport=l4.dport
        )
        assert out_of(wire, 1) == [want], desc


def test_flows_spread_over_the_backends_and_each_keeps_its_own(lab: Bmv2, wire: Wire) -> None:
    """Maglev: 30 flows use every backend; each flow's data packets (the state's known
    connection, no new choice) leave by its SYN's port."""
    first: dict[int, int] = {}
    for sport in range(42000, 42030):
        wire.clear()
        wire.send(1, client_pkt(VIP6, TCP(sport=sport, dport=80, flags="S")))
        first[sport] = backend_of(wire, sport)
    assert set(first.values()) == {2, 3, 4}
    for sport, port in first.items():
        wire.clear()
        wire.send(1, client_pkt(VIP6, TCP(sport=sport, dport=80, flags="A", ack=1) / b"GET"))
        assert backend_of(wire, sport) == port


def test_a_full_bucket_is_counted_and_reported_as_an_ipv6_flow_and_still_balances(
    lab: Bmv2, wire: Wire
) -> None:
    """The fifth IPv6 flow in a bucket is a collision (counted for its VIP) and an IPv6
    collision digest naming it, none of IPv4's: Maglev recomputes its backend for its
    every packet meanwhile."""
    sid = sid_of(lab, "web6")
    *held, last = same_bucket_flows6(5, sid)
    lab.sw.enable_digest()
    lab.sw.enable_digest("conn6_digest_t")
    for f in held:
        wire.clear()
        wire.send(1, client_pkt(VIP6, TCP(sport=f.sport, dport=80, flags="S"), src=f.src))
        assert backend_of(wire, f.sport) == predicted(lab, "web6", f)[2]
    before = lab.counter("collisions", sid)
    for flags in ("S", "A"):
        wire.clear()
        wire.send(1, client_pkt(VIP6, TCP(sport=last.sport, dport=80, flags=flags), src=last.src))
        assert backend_of(wire, last.sport) == predicted(lab, "web6", last)[2]
    # Only the SYN starts a connection (and finds no way for it): one collision, one digest.
    assert lab.wait_counter("collisions", sid, before + 1) == before + 1
    msg = lab.sw.next_stream_message("digest", timeout=3.0)
    assert msg is not None
    layout = ConnDigests.of(lab.sw.schema, "conn6_digest_t")
    assert msg.digest.digest_id == lab.sw.schema.digest_id("conn6_digest_t")
    fields = layout.values(msg.digest.data[0])
    assert (fields["src_addr"], fields["src_port"], fields["switch_port"]) == (
        int(ipaddress.ip_address(last.src)),
        last.sport,
        predicted(lab, "web6", last)[2],
    )
    lab.sw.ack_digest(msg.digest.digest_id, msg.digest.list_id)
    assert lab.sw.next_stream_message("digest", timeout=0.5) is None


def _fragment() -> Any:
    return IPv6ExtHdrFragment(m=1, id=9, nh=6) / TCP(sport=43000, dport=80)


DROP_CASES = [
    # (description, packet, reason, counted under the VIP (else service 0))
    ("fragment", lambda: client_pkt(VIP6, _fragment()), "fragment", False),
    (
        "hop-by-hop before TCP",
        lambda: client_pkt(VIP6, IPv6ExtHdrHopByHop() / TCP(sport=43001, dport=80)),
        "extension_header",
        False,
    ),
    (
        "routing header before TCP",
        lambda: client_pkt(VIP6, IPv6ExtHdrRouting(addresses=[], segleft=0) / TCP(sport=43002)),
        "extension_header",
        False,
    ),
    (
        "destination options before UDP",
        lambda: client_pkt(DNS6, IPv6ExtHdrDestOpt() / UDP(sport=43003, dport=53)),
        "extension_header",
        False,
    ),
    (
        "a port no VIP serves",
        lambda: client_pkt(VIP6, TCP(sport=43004, dport=81)),
        "vip_port_unknown",
        False,
    ),
    (
        "UDP to the TCP VIP's port",
        lambda: client_pkt(VIP6, UDP(sport=43005, dport=80)),
        "vip_port_unknown",
        False,
    ),
    (
        "another VIP's address as source",
        lambda: client_pkt(VIP6, TCP(sport=43006, dport=80, flags="S"), src=DNS6),
        "martian_source",
        True,
    ),
    (
        "link-local source",
        lambda: client_pkt(VIP6, TCP(sport=43007, dport=80, flags="S"), src="fe80::1"),
        "martian_source",
        True,
    ),
    (
        "hop limit 1",
        lambda: client_pkt(VIP6, TCP(sport=43008, dport=80), hlim=1),
        "ttl_expired",
        False,
    ),
]


@pytest.mark.parametrize(
    ("desc", "make", "reason", "per_vip"), DROP_CASES, ids=[c[0] for c in DROP_CASES]
)
def test_drops_toward_an_ipv6_vip_are_counted_by_reason(
    lab: Bmv2, wire: Wire, desc: str, make: Any, reason: str, per_vip: bool
) -> None:
    sid = sid_of(lab, "web6") if per_vip else 0
    index = sid * lab.sw.schema.drop_counter_stride() + DROPS[reason]
    before = lab.counter("drops", index)
    wire.send(1, make())
    assert lab.wait_counter("drops", index, before + 1) == before + 1
    flush(wire)
    assert wire.got == []


def test_an_ipv4_vip_balances_beside_the_ipv6_ones(lab: Bmv2, wire: Wire) -> None:
    wire.send(1, flow_syn(Flow(host_ip(1), VIP, 6, 44000, 80, WEB_SERVICE_ID)))
    assert backend_of(wire, 44000) in (2, 3, 4)
    wire.clear()
    wire.send(1, client_pkt(VIP6, TCP(sport=44000, dport=80, flags="S")))
    f = Flow(CLIENT6, VIP6, 6, 44000, 80, sid_of(lab, "web6"))
    assert backend_of(wire, 44000) == predicted(lab, "web6", f)[2]


def test_stats_show_the_ipv6_vips_backends(lab: Bmv2, wire: Wire) -> None:
    """`p4lb stats`' numbers: an IPv6 backend's new connections and replies are counted
    under its VIP as an IPv4 backend's are."""
    from p4lb.service.operations import read_stats

    f = Flow(CLIENT6, VIP6, 6, 45000, 80, sid_of(lab, "web6"))
    baddr, bport, swport = predicted(lab, "web6", f)
    name = f"s{swport}"

    def row() -> Any:
        stats = read_stats(lab.sw, lab.cfg)
        v = next(v for v in stats.vips if v.name == "web6")
        return next(b for b in v.backends if b.name == name)

    before = row()
    wire.send(1, client_pkt(VIP6, TCP(sport=45000, dport=80, flags="S")))
    assert backend_of(wire, 45000) == swport
    wire.send(
        swport,
        Ether(src=host_mac(swport), dst=SWITCH_MAC)
        / IPv6(src=baddr, dst=CLIENT6)
        / TCP(sport=bport, dport=45000, flags="SA"),
    )
    flush(wire)
    after = row()
    assert (after.connections - before.connections, after.reply_packets - before.reply_packets) == (
        1,
        1,
    )


def solicited_node(address: str) -> str:
    low = int(ipaddress.IPv6Address(address)) & 0xFFFFFF
    return str(ipaddress.IPv6Address((0xFF02_0000_0000_0000_0000_0001_FF00_0000) | low))


NEIGHBOUR_SOLICITATIONS = [
    # (description, the solicitation's destination IPv6 address and MAC)
    ("to the solicited-node group", lambda a: (solicited_node(a), "33:33:ff:00:01:00")),
    ("unicast (reachability)", lambda a: (a, VIP6_MAC)),
]


@pytest.mark.parametrize("vip", [VIP6, DNS6])
@pytest.mark.parametrize(
    ("desc", "dst"), NEIGHBOUR_SOLICITATIONS, ids=[c[0] for c in NEIGHBOUR_SOLICITATIONS]
)
def test_a_neighbour_solicitation_for_a_vip_is_answered_with_its_mac(
    lab: Bmv2, wire: Wire, vip: str, desc: str, dst: Any
) -> None:
    """As ARP for an IPv4 VIP: an advertisement back out of the asking port, from the VIP
    to the asker, solicited and override, the VIP's MAC as the target's link-layer
    address, its ICMPv6 checksum as scapy computes it."""
    ip_dst, mac_dst = dst(vip)
    ns = (
        Ether(src=host_mac(1), dst=mac_dst)
        / IPv6(src=CLIENT6, dst=ip_dst, hlim=255)
        / ICMPv6ND_NS(tgt=vip)
        / ICMPv6NDOptSrcLLAddr(lladdr=host_mac(1))
    )
    wire.send(1, ns)
    na = (
        Ether(src=VIP6_MAC, dst=host_mac(1))
        / IPv6(src=vip, dst=CLIENT6, hlim=255)
        / ICMPv6ND_NA(tgt=vip, R=0, S=1, O=1)
        / ICMPv6NDOptDstLLAddr(lladdr=VIP6_MAC)
    )
    flush(wire)
    assert wire.got == [(1, bytes(na))]


def test_a_connection_is_counted_open_then_closed_by_the_backends_fin(
    lab: Bmv2, wire: Wire
) -> None:
    """The state follows an IPv6 connection as an IPv4 one: the client's first ACK
    establishes it, the backend's FIN (through the reverse NAT) closes it, each counted
    once for its backend."""
    from p4lb.pipeline.ids import backend_key

    sport = 46000
    f = Flow(CLIENT6, VIP6, 6, sport, 80, sid_of(lab, "web6"))
    baddr, bport, swport = predicted(lab, "web6", f)
    bid = ids_on_switch(lab.sw.read_entries()).backends[
        backend_key(lab.cfg.vip("web6"), baddr, bport)
    ]
    established = lab.counter("backend_established", bid)
    closes = lab.counter("backend_closes", bid)
    wire.send(1, client_pkt(VIP6, TCP(sport=sport, dport=80, flags="S", seq=1)))
    wire.send(1, client_pkt(VIP6, TCP(sport=sport, dport=80, flags="A", seq=2, ack=11)))
    assert lab.wait_counter("backend_established", bid, established + 1) == established + 1
    fin = TCP(sport=bport, dport=sport, flags="FA", seq=11, ack=2)
    wire.send(
        swport, Ether(src=host_mac(swport), dst=SWITCH_MAC) / IPv6(src=baddr, dst=CLIENT6) / fin
    )
    assert lab.wait_counter("backend_closes", bid, closes + 1) == closes + 1
    flush(wire)
    assert lab.counter("backend_closes", bid) == closes + 1


def test_a_udp_checksum_that_comes_out_zero_is_sent_as_ffff(lab: Bmv2, wire: Wire) -> None:
    """The payload is chosen so that the rewritten datagram's sum is all ones: its
    checksum computes to 0, which UDP over IPv6 sends as 0xffff (0 would mean none)."""
    sport = 47000
    f = Flow(CLIENT6, DNS6, 17, sport, 53, sid_of(lab, "dns6"))
    baddr, bport, swport = predicted(lab, "dns6", f)
    probe = IPv6(src=CLIENT6, dst=baddr) / UDP(sport=sport, dport=bport) / b"\x00\x00"
    word = IPv6(bytes(probe))[UDP].chksum  # the complement of the sum without the word
    pkt = client_pkt(DNS6, UDP(sport=sport, dport=53) / word.to_bytes(2, "big"))
    wire.send(1, pkt)
    want = rewritten(pkt, ether_src=SWITCH_MAC, ether_dst=host_mac(swport), dst=baddr, dport=bport)
    assert Ether(want)[UDP].chksum == 0xFFFF
    assert out_of(wire, swport) == [want]


@pytest.fixture
def dsr6(lab: Bmv2) -> Iterator[Bmv2]:
    """web6 in dsr mode (its backends on the VIP's port) for one test, then back."""
    before = lab.cfg
    web6 = before.vip("web6")
    backends = tuple(dataclasses.replace(b, port=80) for b in web6.backends)
    lab.apply(before.with_vip(dataclasses.replace(web6, mode="dsr", backends=backends)))
    try:
        yield lab
    finally:
        lab.apply(before)


def test_an_ipv6_dsr_vip_changes_only_the_frame_and_its_replies_are_routed(
    dsr6: Bmv2, wire: Wire
) -> None:
    """Toward the backend only the MACs change: the IPv6 packet (addresses, ports, hop
    limit, checksum, payload) leaves byte for byte as it came, as under IPv4 dsr. The
    connection's later packets keep the SYN's backend. A backend's reply, from the VIP
    itself, is routed like any packet if it crosses the switch at all: no reverse NAT."""
    ports = {}
    for sport in range(43000, 43012):
        for flags, payload in (("S", b""), ("A", b""), ("PA", b"GET /")):
            wire.clear()
            l4 = TCP(sport=sport, dport=80, flags=flags, seq=1000, ack=1 if "A" in flags else 0)
            pkt = client_pkt(VIP6, l4 / payload)
            wire.send(1, pkt)
            port = backend_of(wire, sport)
            assert ports.setdefault(sport, port) == port
            out = out_of(wire, port)
            assert len(out) == 1 and out[0][14:] == bytes(pkt)[14:]
            assert (Ether(out[0]).src, Ether(out[0]).dst) == (SWITCH_MAC, host_mac(port))
    assert set(ports.values()) == {2, 3, 4}
    sport, port = next(iter(ports.items()))
    reply = (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IPv6(src=VIP6, dst=CLIENT6, hlim=64)
        / TCP(sport=80, dport=sport, flags="SA", seq=5, ack=1001)
    )
    wire.clear()
    wire.send(port, reply)
    want = Ether(bytes(reply))
    want[Ether].src, want[Ether].dst = SWITCH_MAC, host_mac(1)
    want[IPv6].hlim = 63
    assert out_of(wire, 1) == [bytes(want)]
