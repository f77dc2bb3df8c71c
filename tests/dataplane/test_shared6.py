"""A tier's shared connections on an IPv6 VIP (real BMv2), as test_shared checks them on an
IPv4 one: a round-robin IPv6 VIP's new connection and its client's FIN are reported in
IPv6's connection event digests, naming the backend and the port the packet left by; a
balancer that never saw a connection drops its mid-connection packets as no_state until the
controller copies the connection into conn6_table, then carries them (NAT both ways, whole
packets compared) and reports the client's FIN through the copy; a backend's replies carry
the cookie in their TSval with the TCP checksum right (whole packets compared, TSvals whose
change crosses 16-bit words and wraps), and a client's echo of it takes its segment to that
backend on a balancer that holds nothing of the connection; one switch alone stamps
nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from scapy.layers.inet import TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from p4lb.intent.model import member_config
from p4lb.pipeline.entries import Update, ip
from p4lb.pipeline.ids import backend_key, ids_on_switch, vip_key
from p4lb.pipeline.shared import CLOSED, CONN_EVENT_DIGESTS, OPENED, ConnEvents
from tests.dataplane import support
from tests.dataplane.support import (
    CLIENT6,
    SWITCH_MAC,
    VIP6,
    VIP6_MAC,
    Bmv2,
    Wire,
    backend6,
    config6,
    drop_reasons,
    host_mac,
)
from tests.dataplane.test_shared import (
    COOKIE_MASK,
    DATA_OPTIONS,
    ME,
    SYN_ACK_OPTIONS,
    events,
    with_timestamp,
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bmv2]:
    with support.running(tmp_path_factory.mktemp("shared6") / "switch", config6("wrr")) as b:
        yield b


@pytest.fixture
def codec(lab: Bmv2) -> ConnEvents:
    """The switch as a balancer of a tier, its connection events on (and none left over)."""
    lab.apply(member_config(lab.cfg, ME))
    for digest in CONN_EVENT_DIGESTS:
        lab.sw.enable_digest(digest)
    c = ConnEvents.of(lab.sw.schema)
    events(lab, c, 100, timeout=0.2)
    return c


@pytest.fixture
def wire(lab: Bmv2) -> Iterator[Wire]:
    with support.flushed_wire() as w:
        yield w


def sid(lab: Bmv2) -> int:
    return ids_on_switch(lab.sw.read_entries()).services[vip_key(lab.cfg.vip("web6"))]


def backend_ids(lab: Bmv2) -> dict[int, int]:
    """switch port -> backend id of web6."""
    ids = ids_on_switch(lab.sw.read_entries())
    web6 = lab.cfg.vip("web6")
    return {
        b.switch_port: ids.backends[backend_key(web6, b.address, b.port)] for b in web6.backends
    }


def segment(sport: int, flags: str, options: list[Any] | None = None) -> Any:
    """The client's segment to the VIP from port `sport`."""
    return (
        Ether(src=host_mac(1), dst=VIP6_MAC)
        / IPv6(src=CLIENT6, dst=VIP6, hlim=64)
        / TCP(sport=sport, dport=80, flags=flags, seq=1000, ack=6, options=options or [])
        / b"request"
    )


def key6(sport: int) -> tuple[str, tuple[tuple[str, int], ...]]:
    """The connection's copy key: conn6_table and the 5-tuple as the client sent it."""
    return (
        "conn6_table",
        (
            ("src_addr", ip(CLIENT6)),
            ("dst_addr", ip(VIP6)),
            ("protocol", 6),
            ("src_port", sport),
            ("dst_port", 80),
        ),
    )


def to_backends(wire: Wire, sport: int) -> list[tuple[int, bytes]]:
    return wire.expect(
        1,
        where=lambda port, raw: port != 1 and TCP in Ether(raw) and Ether(raw)[TCP].sport == sport,
    )


def rewritten(pkt: Any, ether_src: str, ether_dst: str, **fields: Any) -> bytes:
    """`pkt` with its frame, IPv6 (src, dst) and TCP fields (sport, dport, options)
    changed, the hop limit one less and the TCP checksum as scapy computes it."""
    out = Ether(bytes(pkt))
    out[Ether].src, out[Ether].dst = ether_src, ether_dst
    out[IPv6].hlim -= 1
    for k in ("src", "dst"):
        if k in fields:
            setattr(out[IPv6], k, fields[k])
    for k in ("sport", "dport", "options"):
        if k in fields:
            setattr(out[TCP], k, fields[k])
    del out[TCP].chksum
    return bytes(Ether(bytes(out)))


def test_an_ipv6_shared_connection_is_reported_opened_and_closed(
    lab: Bmv2, codec: ConnEvents, wire: Wire
) -> None:
    wire.send(1, segment(41000, "S"))
    ((port, _),) = to_backends(wire, 41000)
    (opened,) = events(lab, codec, 1)
    assert (opened.event, opened.flow) == (OPENED, key6(41000))
    # The backend and the port the copy is to send the connection's packets to.
    assert opened.backend == (backend_ids(lab)[port], port)
    wire.clear()
    wire.send(1, segment(41000, "A"))  # the handshake's ACK: no event
    assert [p for p, _ in to_backends(wire, 41000)] == [port]
    wire.send(1, segment(41000, "FA"))
    (closed,) = events(lab, codec, 1)
    assert (closed.event, closed.flow, closed.backend) == (CLOSED, opened.flow, opened.backend)


def test_a_copied_ipv6_connection_is_carried_mid_connection(
    lab: Bmv2, codec: ConnEvents, wire: Wire
) -> None:
    index = sid(lab) * lab.sw.schema.drop_counter_stride() + drop_reasons()["no_state"]
    dropped = lab.counter("drops", index)
    pkt = segment(42000, "PA")
    wire.send(1, pkt)  # another balancer opened it: no state here
    assert lab.wait_counter("drops", index, dropped + 1) == dropped + 1
    assert to_backends(wire, 42000) == []
    # The controller copies it here: the last backend (not what round robin picks next).
    port, bid = max(backend_ids(lab).items(), key=lambda kv: kv[1])
    lab.sw.write([Update("INSERT", codec.copy(key6(42000), (bid, port)))])
    wire.send(1, pkt)
    want = rewritten(pkt, SWITCH_MAC, host_mac(port), dst=backend6(port), dport=8000)
    assert to_backends(wire, 42000) == [(port, want)]
    wire.clear()
    wire.send(1, segment(42000, "FA"))
    assert [p for p, _ in to_backends(wire, 42000)] == [port]
    (closed,) = events(lab, codec, 1)
    assert (closed.event, closed.flow, closed.backend) == (CLOSED, key6(42000), (bid, port))
    lab.sw.write([Update("DELETE", codec.copy(key6(42000), None))])


def reply(sport: int, port: int, flags: str, options: list[Any]) -> Any:
    """The backend on `port`'s segment to the client's port `sport`."""
    return (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IPv6(src=backend6(port), dst=CLIENT6, hlim=64)
        / TCP(sport=8000, dport=sport, flags=flags, seq=5, ack=1001, options=options)
        / b"answer"
    )


def to_client(wire: Wire) -> list[bytes]:
    return [raw for port, raw in wire.expect(1, where=lambda p, raw: p == 1) if port == 1]


# TSvals whose stamp changes the low word only, both words (a carry into the high one),
# and wraps to 0 (the checksum's delta covers both words of the option).
TSVALS = [0x7654_3210, 0x1234_FFF0, 0xFFFF_FFFE]


@pytest.mark.parametrize("tsval", TSVALS, ids=[f"{t:#010x}" for t in TSVALS])
def test_ipv6_replies_carry_the_cookie_that_takes_a_connection_anywhere(
    lab: Bmv2, codec: ConnEvents, wire: Wire, tsval: int
) -> None:
    port, bid = max(backend_ids(lab).items(), key=lambda kv: kv[1])
    sport = 44000 + TSVALS.index(tsval)
    stamped = (((tsval | COOKIE_MASK) + 1) | bid) & 0xFFFF_FFFF
    for flags, options, echoed in (
        ("SA", SYN_ACK_OPTIONS, tsval),  # the handshake's TSval stays
        ("PA", DATA_OPTIONS, stamped),
    ):
        wire.clear()
        seg = reply(sport, port, flags, with_timestamp(options, tsval, 99))
        wire.send(port, seg)
        want = rewritten(
            seg,
            SWITCH_MAC,
            host_mac(1),
            src=VIP6,
            sport=80,
            options=with_timestamp(options, echoed, 99),
        )
        assert to_client(wire) == [want]
    # The client echoes it: its segment, which no state here knows, follows the cookie to
    # that backend (not what round robin would pick), its timestamp untouched.
    wire.clear()
    seg = segment(sport, "A", with_timestamp(DATA_OPTIONS, 1234, stamped))
    wire.send(1, seg)
    want = rewritten(seg, SWITCH_MAC, host_mac(port), dst=backend6(port), dport=8000)
    assert to_backends(wire, sport) == [(port, want)]


def test_one_ipv6_switch_alone_stamps_nothing(lab: Bmv2, wire: Wire) -> None:
    lab.apply(dataclasses.replace(lab.cfg, shared=False))
    try:
        seg = reply(46000, 2, "PA", with_timestamp(DATA_OPTIONS, 0x7654_3210, 99))
        wire.send(2, seg)
        assert to_client(wire) == [rewritten(seg, SWITCH_MAC, host_mac(1), src=VIP6, sport=80)]
    finally:
        lab.apply(member_config(lab.cfg, ME))
