"""Direct server return on a real simple_switch_grpc: a dsr VIP's packets leave toward
their backend with only the frame changed; the backends' replies (from the VIP) are plain
routed traffic if they reach the switch at all; the connection state follows the client's
packets alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from p4lb.intent import edits
from p4lb.intent.model import Config
from p4lb.pipeline.ids import backend_key, ids_on_switch
from tests.dataplane.support import (
    SWITCH_MAC,
    VIP,
    VIP_MAC,
    Bmv2,
    Wire,
    backend_of,
    flush,
    host_ip,
    host_mac,
)

CLIENT = host_ip(1)
VIP_PORT = 80


def dsr(cfg: Config) -> Config:
    """The test config's web VIP in dsr mode: its backends listen on the VIP's port."""
    web = cfg.vip("web")
    backends = tuple(replace(b, port=VIP_PORT) for b in web.backends)
    return cfg.with_vip(replace(web, mode="dsr", backends=backends))


def client(sport: int, flags: str = "S", payload: bytes = b"") -> Any:
    return (
        Ether(src=host_mac(1), dst=VIP_MAC)
        / IP(src=CLIENT, dst=VIP, ttl=64)
        / TCP(sport=sport, dport=VIP_PORT, flags=flags, seq=1000, ack=1 if "A" in flags else 0)
        / payload
    )


def test_dsr_changes_only_the_frame(bmv2: Bmv2, wire: Wire) -> None:
    """Destination MAC and port toward the backend, source MAC the switch's; the IP packet
    (addresses, ports, TTL, checksums, payload) leaves byte for byte as it came."""
    bmv2.apply(dsr(bmv2.cfg))
    for sport, flags, payload in ((40000, "S", b""), (40000, "A", b""), (40000, "PA", b"GET /")):
        wire.clear()
        pkt = client(sport, flags, payload)
        wire.send(1, pkt)
        port = backend_of(wire, sport)
        out = [raw for p, raw in wire.got if p == port]
        assert len(out) == 1
        frame = Ether(out[0])
        assert (frame.src, frame.dst) == (SWITCH_MAC, host_mac(port))
        assert out[0][14:] == bytes(pkt)[14:]


def test_a_reply_from_a_dsr_vip_is_routed_untouched(bmv2: Bmv2, wire: Wire) -> None:
    """A backend's reply carries the VIP as its source: no reverse NAT entry matches it
    (those match backends' own addresses), so if it crosses the switch it is routed like
    any packet: only the TTL (and the header checksum) change."""
    bmv2.apply(dsr(bmv2.cfg))
    wire.send(1, client(40100))
    port = backend_of(wire, 40100)
    reply = (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IP(src=VIP, dst=CLIENT, ttl=64)
        / TCP(sport=VIP_PORT, dport=40100, flags="SA", seq=5, ack=1001)
    )
    wire.clear()
    wire.send(port, reply)
    got = wire.expect(1, where=lambda p, raw: p == 1)
    want = reply.copy()
    want[Ether].src, want[Ether].dst = SWITCH_MAC, host_mac(1)
    want[IP].ttl = 63
    del want[IP].chksum
    assert [raw for _, raw in got] == [bytes(Ether(bytes(want)))]
    flush(wire)
    assert [p for p, _ in wire.got] == [1]


def test_dsr_affinity_survives_a_drain(bmv2: Bmv2, wire: Wire) -> None:
    bmv2.apply(dsr(bmv2.cfg))
    wire.send(1, client(44000))
    first = backend_of(wire, 44000)
    bmv2.apply(edits.drain(bmv2.cfg, "web", f"s{first}"))
    wire.clear()
    wire.send(1, client(44000, "A"))
    assert backend_of(wire, 44000) == first
    for i in range(4):
        wire.clear()
        wire.send(1, client(44100 + i))
        assert backend_of(wire, 44100 + i) != first


def test_the_clients_fin_ends_a_dsr_connection(bmv2: Bmv2, wire: Wire) -> None:
    """The backend's FIN never crosses the switch under dsr: the client's ends the
    connection, counted once for its backend (so drain --wait and the least-* algorithms
    see it go)."""
    bmv2.apply(dsr(bmv2.cfg))
    wire.send(1, client(45000))
    port = backend_of(wire, 45000)
    web = bmv2.cfg.vip("web")
    backend = next(b for b in web.backends if b.switch_port == port)
    bid = ids_on_switch(bmv2.sw.read_entries()).backends[
        backend_key(web, backend.address, backend.port)
    ]
    established = bmv2.counter("backend_established", bid)
    closes = bmv2.counter("backend_closes", bid)
    wire.send(1, client(45000, "A"))
    assert bmv2.wait_counter("backend_established", bid, established + 1) == established + 1
    for _ in range(2):  # a retransmitted FIN does not count again
        wire.clear()
        wire.send(1, client(45000, "FA"))
        assert backend_of(wire, 45000) == port
    assert bmv2.wait_counter("backend_closes", bid, closes + 1) == closes + 1
    assert bmv2.counter("backend_closes", bid) == closes + 1
