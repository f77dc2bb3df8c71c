"""Packet tests on a real simple_switch_grpc: whole packets in, whole packets out
(checksums included), or a drop seen in the drop counter."""

from __future__ import annotations

import time
from typing import Any

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether

from p4lb.intent import edits
from p4lb.models.hashing import Flow, iphash_member
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.digests import ConnDigests
from p4lb.pipeline.entries import Update
from p4lb.pipeline.ids import backend_key, ids_on_switch, vip_key
from p4lb.pipeline.plan import plan
from tests.dataplane.support import (
    SWITCH_MAC,
    VIP,
    VIP_MAC,
    WEB_SERVICE_ID,
    Bmv2,
    Wire,
    backend_of,
    drop_reasons,
    flow_syn,
    flush,
    host_iface,
    host_ip,
    host_mac,
    same_bucket_flows,
)
from tests.support import poll_until

CLIENT = host_ip(1)
BACKEND_PORTS = (2, 3, 4)
DROPS = drop_reasons()


def syn(sport: int, flags: str = "S", dport: int = 80, ttl: int = 64) -> Any:
    return (
        Ether(src=host_mac(1), dst=VIP_MAC)
        / IP(src=CLIENT, dst=VIP, ttl=ttl)
        / TCP(sport=sport, dport=dport, flags=flags, seq=1000)
    )


def to_backend(pkt: Any, port: int) -> bytes:
    """What the switch must emit toward backend `port` for client packet `pkt`."""
    out = pkt.copy()
    out[Ether].src, out[Ether].dst = SWITCH_MAC, host_mac(port)
    out[IP].dst, out[IP].ttl = host_ip(port), pkt[IP].ttl - 1
    out[TCP].dport = 8000
    del out[IP].chksum, out[TCP].chksum
    return bytes(Ether(bytes(out)))


def test_arp_request_for_the_vip_is_answered_by_the_switch(bmv2: Bmv2, wire: Wire) -> None:
    req = Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=host_mac(1), psrc=CLIENT, pdst=VIP
    )
    wire.send(1, req)
    want = Ether(src=VIP_MAC, dst=host_mac(1)) / ARP(
        op=2, hwsrc=VIP_MAC, psrc=VIP, hwdst=host_mac(1), pdst=CLIENT
    )
    wire.expect(1)
    flush(wire)  # a late or flooded copy would be here by now
    assert wire.got == [(1, bytes(want))]


def test_arp_for_another_host_is_flooded_to_every_other_port(bmv2: Bmv2, wire: Wire) -> None:
    req = Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=host_mac(1), psrc=CLIENT, pdst=host_ip(3)
    )
    wire.send(1, req)
    flush(wire)  # each port's copy is out, and any second copy
    assert sorted(p for p, _ in wire.got) == [2, 3, 4]
    assert all(raw == bytes(req) for _, raw in wire.got)


def test_nat_both_ways_with_valid_checksums(bmv2: Bmv2, wire: Wire) -> None:
    s = syn(40000)
    wire.send(1, s)
    port = backend_of(wire, 40000)
    assert [raw for p, raw in wire.got if p == port] == [to_backend(s, port)]
    reply = (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IP(src=host_ip(port), dst=CLIENT, ttl=64)
        / TCP(sport=8000, dport=40000, flags="SA", seq=5, ack=1001)
    )
    wire.clear()
    wire.send(port, reply)
    got = wire.expect(1, where=lambda p, raw: p == 1)
    want = (
        Ether(src=SWITCH_MAC, dst=host_mac(1))
        / IP(src=VIP, dst=CLIENT, ttl=63)
        / TCP(sport=80, dport=40000, flags="SA", seq=5, ack=1001)
    )
    assert [raw for _, raw in got] == [bytes(want)]


def test_wrr_equal_weights_is_exact_round_robin(bmv2: Bmv2, wire: Wire) -> None:
    seen = []
    for i in range(9):
        wire.send(1, syn(41000 + i))
        seen.append(backend_of(wire, 41000 + i))
    assert seen == [2, 3, 4] * 3


def test_wrr_weighted_shares_are_exact_per_cycle(bmv2: Bmv2, wire: Wire) -> None:
    cfg = edits.set_weight(edits.set_weight(bmv2.cfg, "web", "s3", 2), "web", "s4", 2)
    bmv2.apply(cfg)
    seen = []
    for i in range(10):
        wire.send(1, syn(42000 + i))
        seen.append(backend_of(wire, 42000 + i))
    for cycle in (seen[:5], seen[5:]):
        assert sorted(cycle) == [2, 3, 3, 4, 4]


def test_retransmitted_syn_keeps_backend_and_does_not_advance(bmv2: Bmv2, wire: Wire) -> None:
    wire.send(1, syn(43000))
    first = backend_of(wire, 43000)
    wire.clear()
    wire.send(1, syn(43000) / b"")  # the same SYN again
    assert backend_of(wire, 43000) == first
    wire.clear()
    wire.send(1, syn(43001))
    assert backend_of(wire, 43001) == BACKEND_PORTS[(BACKEND_PORTS.index(first) + 1) % 3]


def test_affinity_survives_a_weight_change_and_a_drain(bmv2: Bmv2, wire: Wire) -> None:
    wire.send(1, syn(44000))
    first = backend_of(wire, 44000)
    name = f"s{first}"
    cfg = edits.drain(bmv2.cfg, "web", name)
    bmv2.apply(cfg)
    wire.clear()
    wire.send(1, syn(44000, flags="A"))
    assert backend_of(wire, 44000) == first
    for i in range(4):
        wire.clear()
        wire.send(1, syn(44100 + i))
        assert backend_of(wire, 44100 + i) != first


def test_a_weight_change_is_invisible_until_its_single_flip(bmv2: Bmv2, wire: Wire) -> None:
    """Write a change batch by batch, sending new connections after each: until the one
    batch that modifies vip_table they follow the old 1:1:1 cycle, after it only s2."""
    new = edits.drain(edits.drain(bmv2.cfg, "web", "s3"), "web", "s4")
    current = bmv2.sw.read_entries()
    batches = plan(desired_entries(new, current)[1], current)
    flips = [i for i, b in enumerate(batches) if any(u.entry.table == "vip_table" for u in b)]
    assert len(flips) == 1 and 0 < flips[0] < len(batches) - 1, [len(b) for b in batches]
    sport = 52000
    for i, batch in enumerate(batches):
        bmv2.sw.write(batch)
        seen = []
        for _ in range(3):
            sport += 1
            wire.send(1, syn(sport))
            seen.append(backend_of(wire, sport))
        assert sorted(seen) == ([2, 3, 4] if i < flips[0] else [2, 2, 2]), (i, seen)


def test_an_open_connection_to_a_removed_backend_is_dropped_as_no_backend(
    bmv2: Bmv2, wire: Wire
) -> None:
    wire.send(1, syn(53000))
    port = backend_of(wire, 53000)
    bmv2.apply(edits.remove_backend(bmv2.cfg, "web", f"s{port}"))
    sid = ids_on_switch(bmv2.sw.read_entries()).services[vip_key(bmv2.cfg.vip("web"))]
    index = sid * bmv2.sw.schema.drop_counter_stride() + DROPS["no_backend"]
    before = bmv2.counter("drops", index)
    wire.clear()
    wire.send(1, syn(53000, flags="A"))
    assert bmv2.wait_counter("drops", index, before + 1) == before + 1
    assert wire.expect(1, timeout=0.3) == []


def test_affinity_survives_an_algorithm_change(bmv2: Bmv2, wire: Wire) -> None:
    ports = {}
    for i in range(6):
        wire.send(1, syn(45000 + i))
        ports[45000 + i] = backend_of(wire, 45000 + i)
        wire.clear()
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "iphash"))
    for sport, port in ports.items():
        wire.send(1, syn(sport, flags="PA"))
        assert backend_of(wire, sport) == port
        wire.clear()


@pytest.mark.parametrize("closer", ["F", "R"])
def test_a_new_syn_after_fin_or_rst_is_a_new_connection(
    bmv2: Bmv2, wire: Wire, closer: str
) -> None:
    wire.send(1, syn(46000))
    first = backend_of(wire, 46000)
    wire.clear()
    wire.send(1, syn(46000, flags=closer + "A" if closer == "F" else closer))
    assert backend_of(wire, 46000) == first
    wire.clear()
    wire.send(1, syn(46000))  # source-port reuse: a new connection, round robin moves on
    assert backend_of(wire, 46000) == BACKEND_PORTS[(BACKEND_PORTS.index(first) + 1) % 3]


def test_iphash_picks_the_member_the_model_predicts(bmv2: Bmv2, wire: Wire) -> None:
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "iphash"))
    counts = {2: 0, 3: 0, 4: 0}
    for i in range(60):
        sport = 47000 + 7 * i
        wire.send(1, syn(sport))
        got = backend_of(wire, sport)
        want = BACKEND_PORTS[iphash_member(Flow(CLIENT, VIP, 6, sport, 80, WEB_SERVICE_ID), 3)]
        assert got == want
        counts[got] += 1
        wire.clear()
    assert all(c > 0 for c in counts.values())


def test_udp_flow_sticks_to_its_first_backend(bmv2: Bmv2, wire: Wire) -> None:
    def dgram(sport: int) -> Any:
        return (
            Ether(src=host_mac(1), dst=VIP_MAC)
            / IP(src=CLIENT, dst=VIP)
            / UDP(sport=sport, dport=53)
            / b"query"
        )

    for sport in (5000, 5001, 5002):
        wire.send(1, dgram(sport))
        flush(wire)
        got = [(p, raw) for p, raw in wire.got if p != 1]
        assert len(got) == 1, got
        first = got[0][0]
        assert Ether(got[0][1])[UDP].dport == 5353
        wire.clear()
        bmv2.apply(edits.drain(bmv2.cfg, "dns", f"d{first}"))
        wire.send(1, dgram(sport))
        flush(wire)
        assert [p for p, _ in wire.got if p != 1] == [first]
        bmv2.apply(edits.set_weight(bmv2.cfg, "dns", f"d{first}", 1))
        wire.clear()


def _truncated() -> bytes:
    return bytes(syn(48000))[: 14 + 12]


def _bad_ihl() -> bytes:
    raw = bytearray(bytes(syn(48003)))
    raw[14] = 0x44  # version 4, IHL 4
    return bytes(raw)


def _bad_checksum() -> Any:
    p = syn(48001)
    p[IP].chksum = 0x1234
    return p


def _fragment() -> Any:
    p = syn(48002)
    p[IP].flags = "MF"
    return p


def _from(src: str) -> Any:
    p = syn(48011)
    p[IP].src = src
    return p


def _total_len(n: int) -> Any:
    p = syn(48012)
    p[IP].len = n  # the checksum is computed over the lying length: only the length is bad
    return p


DROP_CASES = [
    ("truncated IPv4 header", _truncated, "malformed", 0),
    (
        "IHL below 5",
        lambda: _bad_ihl(),
        "malformed",
        0,
    ),
    ("bad IPv4 checksum", _bad_checksum, "bad_checksum", 0),
    ("TTL 1", lambda: syn(48004, ttl=1), "ttl_expired", 0),
    ("VIP on an unknown port", lambda: syn(48005, dport=443), "vip_port_unknown", 0),
    (
        "ICMP to the VIP",
        lambda: Ether(src=host_mac(1), dst=VIP_MAC) / IP(src=CLIENT, dst=VIP) / ICMP(),
        "vip_port_unknown",
        0,
    ),
    (
        "no route",
        lambda: Ether(src=host_mac(1), dst=SWITCH_MAC) / IP(src=CLIENT, dst="192.0.2.1") / UDP(),
        "no_route",
        0,
    ),
    ("fragment to a VIP", _fragment, "fragment", 0),
    ("SYN+FIN", lambda: syn(48006, flags="SF"), "bad_tcp_flags", 0),
    ("SYN+RST", lambda: syn(48007, flags="SR"), "bad_tcp_flags", 0),
    ("no TCP flags (null scan)", lambda: syn(48008, flags=""), "bad_tcp_flags", 0),
    ("FIN+PSH+URG (xmas)", lambda: syn(48009, flags="FPU"), "bad_tcp_flags", 0),
    ("every TCP flag", lambda: syn(48010, flags="FSRPAUEC"), "bad_tcp_flags", 0),
    ("source 127.0.0.1", lambda: _from("127.0.0.1"), "martian_source", 0),
    ("source 255.255.255.255", lambda: _from("255.255.255.255"), "martian_source", 0),
    ("source 0.0.0.7", lambda: _from("0.0.0.7"), "martian_source", 0),
    ("multicast source", lambda: _from("224.0.0.9"), "martian_source", 0),
    ("source is the destination VIP", lambda: _from(VIP), "martian_source", 0),
    ("total length 1500 in a 54-byte frame", lambda: _total_len(1500), "bad_length", 0),
    ("total length 20 with a TCP header", lambda: _total_len(20), "bad_length", 0),
    ("total length 30 cuts the TCP header", lambda: _total_len(30), "bad_length", 0),
    (
        "neither IPv4, IPv6 nor ARP",
        lambda: Ether(src=host_mac(1), dst=SWITCH_MAC, type=0x88B5) / bytes(46),
        "unsupported",
        0,
    ),
]


@pytest.mark.parametrize(
    ("desc", "make", "reason", "service"), DROP_CASES, ids=[c[0] for c in DROP_CASES]
)
def test_drops_are_counted_and_nothing_leaves(
    bmv2: Bmv2, wire: Wire, desc: str, make: Any, reason: str, service: int
) -> None:
    index = service * bmv2.sw.schema.drop_counter_stride() + DROPS[reason]
    before = bmv2.counter("drops", index)
    pkt = make()
    wire.send(1, pkt)
    assert bmv2.wait_counter("drops", index, before + 1) == before + 1
    # The switch is done with the packet (counted); then a normal flow still works.
    wire.send(1, syn(49000))
    assert backend_of(wire, 49000) in BACKEND_PORTS
    assert all(TCP in Ether(raw) and Ether(raw)[TCP].sport == 49000 for _, raw in wire.got)


def test_a_full_bucket_keeps_wrr_and_reports_the_flow(bmv2: Bmv2, wire: Wire) -> None:
    """Four flows fill a state bucket; the fifth still gets the next WRR turn (the cycle
    does not skip or repeat), is counted as a collision and reported with that backend.
    Its later packets are not guessed at before the controller's entry lands (dropped as
    no_state), and follow the entry after."""
    *held, b = same_bucket_flows(5)
    bmv2.sw.enable_digest()
    ports = []
    for f in held:
        wire.send(1, flow_syn(f))
        ports.append(backend_of(wire, f.sport))
        wire.clear()
    before = bmv2.counter("collisions", 1)
    wire.send(1, flow_syn(b))
    port_b = backend_of(wire, b.sport)
    ports.append(port_b)
    assert ports == [2, 3, 4, 2, 3], "a flow in a full bucket must take its WRR turn"
    assert bmv2.wait_counter("collisions", 1, before + 1) == before + 1
    msg = bmv2.sw.next_stream_message("digest", timeout=3.0)
    assert msg is not None
    digests = ConnDigests.of(bmv2.sw.schema)
    fields = digests.values(msg.digest.data[0])
    assert fields == {
        "src_addr": int.from_bytes(bytes(map(int, b.src.split("."))), "big"),
        "dst_addr": 0x0A000064,
        "protocol": 6,
        "src_port": b.sport,
        "dst_port": 80,
        "backend_id": port_b - 1,
    }
    # Before the controller's entry lands, a later packet is dropped, not misrouted ...
    sid = ids_on_switch(bmv2.sw.read_entries()).services[vip_key(bmv2.cfg.vip("web"))]
    index = sid * bmv2.sw.schema.drop_counter_stride() + DROPS["no_state"]
    dropped = bmv2.counter("drops", index)
    wire.clear()
    wire.send(1, flow_syn(b, "A"))
    assert bmv2.wait_counter("drops", index, dropped + 1) == dropped + 1
    assert wire.expect(1, timeout=0.3, where=lambda p, raw: p != 1) == []
    # ... and after it, the entry decides; the held flows keep their backends throughout.
    bmv2.sw.write([Update("INSERT", digests.entry(fields))])
    bmv2.apply(edits.set_weight(bmv2.cfg, "web", f"s{port_b}", 0))
    wire.send(1, flow_syn(b, "A"))
    assert backend_of(wire, b.sport) == port_b
    for f, port in zip(held, ports, strict=False):
        wire.clear()
        wire.send(1, flow_syn(f, "A"))
        assert backend_of(wire, f.sport) == port


def test_half_open_connections_free_their_slots_within_seconds(bmv2: Bmv2, wire: Wire) -> None:
    """A SYN flood's half-open state expires after CONN_EMBRYONIC_TICKS (~3 s); an
    established connection in the same bucket keeps its slot and its backend."""
    flows = same_bucket_flows(7)
    established, half_open, late = flows[:2], flows[2:4], flows[4:]
    ports = {}
    for f in established:
        wire.send(1, flow_syn(f))
        ports[f] = backend_of(wire, f.sport)
        wire.send(1, flow_syn(f, "A"))  # the client's ACK: established
        wire.clear()
    for f in half_open:
        wire.send(1, flow_syn(f))
    before = bmv2.counter("collisions", 1)
    wire.send(1, flow_syn(late[0]))  # the bucket is full of live state
    assert bmv2.wait_counter("collisions", 1, before + 1) == before + 1
    # What is under test is the timeout itself: let ~3.1 s of switch time pass.
    time.sleep(3.5)
    wire.clear()
    for f in late[1:]:
        wire.send(1, flow_syn(f))  # two half-open slots expired: both fit
    assert len(wire.expect(2, where=lambda p, raw: p != 1)) == 2
    assert bmv2.counter("collisions", 1) == before + 1
    for f in established:
        wire.clear()
        wire.send(1, flow_syn(f, "PA"))
        assert backend_of(wire, f.sport) == ports[f]


def test_a_packet_without_state_is_dropped_for_wrr_and_hashed_for_iphash(
    bmv2: Bmv2, wire: Wire
) -> None:
    sid = ids_on_switch(bmv2.sw.read_entries()).services[vip_key(bmv2.cfg.vip("web"))]
    index = sid * bmv2.sw.schema.drop_counter_stride() + DROPS["no_state"]
    before = bmv2.counter("drops", index)
    wire.send(1, syn(54000, flags="A"))  # no SYN was ever seen for this flow
    assert bmv2.wait_counter("drops", index, before + 1) == before + 1
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "iphash"))
    wire.clear()
    wire.send(1, syn(54001, flags="A"))
    want = BACKEND_PORTS[iphash_member(Flow(CLIENT, VIP, 6, 54001, 80, WEB_SERVICE_ID), 3)]
    assert backend_of(wire, 54001) == want


def test_wrr_is_exact_over_many_clients(bmv2: Bmv2, wire: Wire) -> None:
    """1,500 connections from 30 client addresses at weights 1:2:3: every backend gets
    exactly its share (the switch's own connection counters), and no flow collides."""
    del wire  # only for its fresh view of the veths (scapy caches interface indexes)
    bmv2.apply(edits.set_weight(edits.set_weight(bmv2.cfg, "web", "s3", 2), "web", "s4", 3))
    from scapy.sendrecv import sendp

    ids = ids_on_switch(bmv2.sw.read_entries())
    web = bmv2.cfg.vip("web")
    bid = {p: ids.backends[backend_key(web, host_ip(p), 8000)] for p in BACKEND_PORTS}
    flows = [
        Flow(f"10.0.2.{1 + i % 30}", VIP, 6, 30000 + i, 80, WEB_SERVICE_ID) for i in range(1500)
    ]

    def total() -> int:
        return sum(bmv2.counter("backend_conns", b) for b in bid.values())

    for i in range(0, len(flows), 50):  # bursts BMv2's input queue holds
        sendp([bytes(flow_syn(f)) for f in flows[i : i + 50]], iface=host_iface(1), verbose=False)
        poll_until(lambda i=i: total() >= i + 50, 10, every=0.02)
    counts = {p: bmv2.counter("backend_conns", b) for p, b in bid.items()}
    seen = sum(counts.values())
    # A SYN the kernel drops on a loaded machine never reaches the switch; over the ones
    # that did, the cycle is exact: each backend within one of its share.
    assert seen >= 1490, counts
    for port, weight in ((2, 1), (3, 2), (4, 3)):
        assert abs(counts[port] - seen * weight / 6) <= 1, counts
    assert bmv2.counter("collisions", 1) == 0
