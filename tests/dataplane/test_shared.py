"""A tier's shared connections in the data plane (real BMv2): a shared VIP's new connection
and its client's FIN are reported as connection event digests naming the backend the packet went
to; a balancer that never saw a connection carries its mid-connection packets once the
controller copied its backend there (and drops them as no_state before), or at once when
the client echoes the cookie a backend's reply got from any balancer's reverse NAT (a cookie
of no backend of the VIP is dropped as no_state); a single switch reports nothing and leaves
timestamps alone."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from p4lb.intent.model import Balancer, member_config
from p4lb.models.hashing import Flow
from p4lb.pipeline.entries import Update, ip
from p4lb.pipeline.ids import backend_key, ids_on_switch
from p4lb.pipeline.shared import CLOSED, CONN_EVENT_DIGESTS, OPENED, ConnEvent, ConnEvents
from p4lb.service.session import digest_name
from tests.dataplane.support import (
    GRPC_PORT,
    SWITCH_MAC,
    VIP,
    WEB_SERVICE_ID,
    Bmv2,
    Wire,
    drop_reasons,
    flow_syn,
    host_ip,
    host_mac,
)

ME = Balancer("lb1", f"127.0.0.1:{GRPC_PORT}", 0, "00:00:00:00:01:00")


def shared(bmv2: Bmv2) -> ConnEvents:
    """Program the switch as a balancer of a tier and turn its connection events on."""
    bmv2.apply(member_config(bmv2.cfg, ME))
    for digest in CONN_EVENT_DIGESTS:
        bmv2.sw.enable_digest(digest)
    return ConnEvents.of(bmv2.sw.schema)


def events(bmv2: Bmv2, codec: ConnEvents, n: int, timeout: float = 3.0) -> list[ConnEvent]:
    """The next digests (at most n, bounded in time), acknowledged."""
    out: list[ConnEvent] = []
    wait = timeout
    while len(out) < n:
        rep = bmv2.sw.next_stream_message("digest", timeout=wait)
        if rep is None:
            break
        name = digest_name(bmv2.sw, rep.digest.digest_id)
        out += [codec.event(m, name) for m in rep.digest.data]
        bmv2.sw.ack_digest(rep.digest.digest_id, rep.digest.list_id)
        wait = 0.5
    return out


def backend_ids(bmv2: Bmv2) -> dict[int, int]:
    """switch port -> backend id of the web VIP."""
    ids = ids_on_switch(bmv2.sw.read_entries(("vip_table", "reverse_nat_table")))
    web = bmv2.cfg.vip("web")
    return {b.switch_port: ids.backends[backend_key(web, b.address, b.port)] for b in web.backends}


def out_port(wire: Wire, sport: int) -> list[int]:
    got = wire.expect(
        1,
        where=lambda port, raw: TCP in Ether(raw) and Ether(raw)[TCP].sport == sport and port != 1,
    )
    return [port for port, _ in got]


def backend_fin(f: Flow, port: int) -> Any:
    """The backend's FIN for flow `f`, from the backend on `port` to the client."""
    return (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IP(src=host_ip(port), dst=f.src)
        / TCP(sport=8000, dport=f.sport, flags="FA")  # the web VIP's backends listen on 8000
    )


def flow_key(f: Flow) -> dict[str, int]:
    return {
        "src_addr": ip(f.src),
        "dst_addr": ip(f.dst),
        "protocol": 6,
        "src_port": f.sport,
        "dst_port": f.dport,
    }


def test_a_shared_connection_is_reported_opened_and_closed(bmv2: Bmv2, wire: Wire) -> None:
    codec = shared(bmv2)
    f = Flow("10.0.0.1", VIP, 6, 41000, 80, WEB_SERVICE_ID)
    wire.send(1, flow_syn(f))
    (port,) = out_port(wire, f.sport)
    (opened,) = events(bmv2, codec, 1)
    assert opened.event == OPENED
    assert opened.flow == ("conn_table", tuple(flow_key(f).items()))
    assert opened.backend_id == backend_ids(bmv2)[port]
    wire.clear()
    wire.send(1, flow_syn(f, "A"))  # the handshake's ACK: no event
    assert len(out_port(wire, f.sport)) == 1
    # The backend closes first (an HTTP/1.0 server does): its FIN passes the reverse NAT
    # and marks the connection closing; the client's FIN still reports the end.
    wire.send(port, backend_fin(f, port))
    assert wire.expect(1, where=lambda p, raw: p == 1 and TCP in Ether(raw)) != []
    assert events(bmv2, codec, 1, timeout=0.5) == []  # the backend's FIN reports nothing
    wire.send(1, flow_syn(f, "FA"))
    (closed,) = events(bmv2, codec, 1, timeout=2.0)
    assert (closed.event, closed.backend_id, closed.flow) == (
        CLOSED,
        opened.backend_id,
        opened.flow,
    )


def test_a_reused_5_tuple_is_reported_each_time_it_opens_and_closes(bmv2: Bmv2, wire: Wire) -> None:
    """A client port comes back (a busy client wraps its ephemeral ports): every
    connection on it is an event of its own, including one that lands on the backend an
    earlier one had, whose event carries the same bytes. BMv2 drops a sample equal to one
    its learn list has not had acknowledged, so each event's list must be the one the
    controller's acknowledgement reaches."""
    codec = shared(bmv2)
    id_of = backend_ids(bmv2)
    f = Flow("10.0.0.1", VIP, 6, 41500, 80, WEB_SERVICE_ID)
    flow = ("conn_table", tuple(flow_key(f).items()))
    chosen: list[int] = []
    got: list[tuple[int, int]] = []
    for _ in range(len(id_of) + 1):  # so at least two of them land on the same backend
        wire.clear()
        wire.send(1, flow_syn(f))
        (port,) = out_port(wire, f.sport)
        chosen.append(id_of[port])
        wire.send(1, flow_syn(f, "A"))
        wire.send(1, flow_syn(f, "FA"))
        got += [(e.event, e.backend_id) for e in events(bmv2, codec, 2) if e.flow == flow]
    # A loaded switch may send a list later than the next connection's: every event the
    # connections made is waited for (bounded), not only those of their own round.
    deadline = time.monotonic() + 10
    while len(got) < 2 * len(chosen) and time.monotonic() < deadline:
        late = events(bmv2, codec, 2 * len(chosen) - len(got))
        got += [(e.event, e.backend_id) for e in late if e.flow == flow]
    assert len(set(chosen)) < len(chosen)
    assert sorted(got) == sorted((event, bid) for bid in chosen for event in (OPENED, CLOSED))
    # And the close of a connection another balancer opened (a copy here, no slot),
    # twice with the same bytes: each one reported.
    g = Flow("10.0.0.1", VIP, 6, 41501, 80, WEB_SERVICE_ID)
    copied = ("conn_table", tuple(flow_key(g).items()))
    for _ in range(2):
        bmv2.sw.write([Update("INSERT", codec.copy(copied, (chosen[0],)))])
        wire.send(1, flow_syn(g, "FA"))
        assert [(e.event, e.flow, e.backend_id) for e in events(bmv2, codec, 1)] == [
            (CLOSED, copied, chosen[0])
        ]
        bmv2.sw.write([Update("DELETE", codec.copy(copied, None))])


def test_a_copied_connection_is_carried_mid_connection(bmv2: Bmv2, wire: Wire) -> None:
    codec = shared(bmv2)
    f = Flow("10.0.0.1", VIP, 6, 42000, 80, WEB_SERVICE_ID)
    port_of = {bid: port for port, bid in backend_ids(bmv2).items()}
    no_state = drop_reasons()["no_state"]
    stride = bmv2.sw.schema.drop_counter_stride()
    dropped = bmv2.counter("drops", WEB_SERVICE_ID * stride + no_state)
    wire.send(1, flow_syn(f, "A"))  # another balancer opened it: no state here
    assert (
        bmv2.wait_counter("drops", WEB_SERVICE_ID * stride + no_state, dropped + 1) == dropped + 1
    )
    assert out_port(wire, f.sport) == []
    # The controller copies its backend here (the third one, not what WRR would pick next).
    bid = max(port_of)
    flow = ("conn_table", tuple(flow_key(f).items()))
    bmv2.sw.write([Update("INSERT", codec.copy(flow, (bid,)))])
    wire.send(1, flow_syn(f, "PA"))
    assert out_port(wire, f.sport) == [port_of[bid]]
    wire.clear()
    wire.send(1, flow_syn(f, "FA"))
    assert out_port(wire, f.sport) == [port_of[bid]]
    (closed,) = events(bmv2, codec, 1)
    assert (closed.event, closed.flow, closed.backend_id) == (CLOSED, flow, bid)


def test_a_single_switch_and_a_hashing_vip_report_nothing(bmv2: Bmv2, wire: Wire) -> None:
    bmv2.apply(bmv2.cfg)  # not a tier
    for digest in CONN_EVENT_DIGESTS:
        bmv2.sw.enable_digest(digest)
    codec = ConnEvents.of(bmv2.sw.schema)
    f = Flow("10.0.0.1", VIP, 6, 43000, 80, WEB_SERVICE_ID)
    wire.send(1, flow_syn(f))
    assert len(out_port(wire, f.sport)) == 1
    # A tier's Maglev VIP: the same tables everywhere, nothing to share.
    web = bmv2.cfg.vip("web")
    maglev = bmv2.cfg.with_vip(dataclasses.replace(web, algorithm="maglev"))
    bmv2.apply(member_config(maglev, ME))
    g = Flow("10.0.0.1", VIP, 6, 43001, 80, WEB_SERVICE_ID)
    wire.send(1, flow_syn(g))
    assert len(out_port(wire, g.sport)) == 1
    wire.send(1, flow_syn(g, "FA"))
    got: list[Any] = events(bmv2, codec, 1, timeout=1.0)
    assert got == []


COOKIE_MASK = (1 << 10) - 1  # lb.p4's COOKIE_BITS
# Linux's layouts: a SYN-ACK's MSS, SACK-permitted, timestamp, NOP, window scale; a data
# segment's NOP NOP timestamp.
SYN_ACK_OPTIONS = [
    ("MSS", 1460),
    ("SAckOK", b""),
    ("Timestamp", (0, 0)),
    ("NOP", None),
    ("WScale", 7),
]
DATA_OPTIONS = [("NOP", None), ("NOP", None), ("Timestamp", (0, 0))]


def with_timestamp(options: list[Any], tsval: int, tsecr: int) -> list[Any]:
    return [("Timestamp", (tsval, tsecr)) if k == "Timestamp" else (k, v) for k, v in options]


def reply(f: Flow, port: int, flags: str, options: list[Any]) -> Any:
    """The backend on `port`'s segment of flow `f`, to the client."""
    return (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IP(src=host_ip(port), dst=f.src, ttl=64)
        / TCP(sport=8000, dport=f.sport, flags=flags, seq=5, ack=1001, options=options)
        / b"answer"
    )


def as_client_sees(pkt: Any, f: Flow, options: list[Any]) -> bytes:
    """Segment `pkt` after the reverse NAT: from the VIP, with `options`, checksums anew."""
    out = pkt.copy()
    out[Ether].src, out[Ether].dst = SWITCH_MAC, host_mac(1)
    out[IP].src, out[IP].ttl = f.dst, pkt[IP].ttl - 1
    out[TCP].sport, out[TCP].options = f.dport, options
    del out[IP].chksum, out[TCP].chksum
    return bytes(Ether(bytes(out)))


def to_client(wire: Wire) -> list[bytes]:
    return [raw for port, raw in wire.expect(1, where=lambda p, raw: p == 1) if port == 1]


def test_replies_carry_the_cookie_that_takes_a_connection_anywhere(bmv2: Bmv2, wire: Wire) -> None:
    shared(bmv2)
    f = Flow("10.0.0.1", VIP, 6, 44000, 80, WEB_SERVICE_ID)
    port_of = {bid: port for port, bid in backend_ids(bmv2).items()}
    bid = max(port_of)
    port = port_of[bid]
    # Another balancer opened the connection; its backend's replies pass this one's
    # reverse NAT (any balancer carries replies). A data segment gets the backend's id in
    # its TSval's low bits, in the next block of them (never below the backend's TSval), the
    # checksum right; the SYN-ACK keeps its TSval (the backend checks the handshake's echo).
    tsval = 0x7654_3210
    stamped = ((tsval | COOKIE_MASK) + 1) | bid
    for flags, options, echoed in (
        ("SA", SYN_ACK_OPTIONS, tsval),
        ("PA", DATA_OPTIONS, stamped),
    ):
        wire.clear()
        seg = reply(f, port, flags, with_timestamp(options, tsval, 99))
        wire.send(port, seg)
        assert to_client(wire) == [as_client_sees(seg, f, with_timestamp(options, echoed, 99))]
    # The client echoes it: its next segment, which no state here knows, follows the
    # cookie to that backend (not what round robin would pick), timestamp untouched.
    wire.clear()
    seg = flow_syn(f, "A")
    seg[TCP].options = with_timestamp(DATA_OPTIONS, 1234, stamped)
    wire.send(1, seg)
    got = wire.expect(1, where=lambda p, raw: p != 1)
    assert [p for p, _ in got] == [port]
    want = seg.copy()
    want[Ether].src, want[Ether].dst = SWITCH_MAC, host_mac(port)
    want[IP].dst, want[IP].ttl, want[TCP].dport = host_ip(port), seg[IP].ttl - 1, 8000
    del want[IP].chksum, want[TCP].chksum
    assert got[0][1] == bytes(Ether(bytes(want)))


def test_a_cookie_of_no_backend_of_the_vip_is_dropped(bmv2: Bmv2, wire: Wire) -> None:
    shared(bmv2)
    no_state = drop_reasons()["no_state"]
    index = WEB_SERVICE_ID * bmv2.sw.schema.drop_counter_stride() + no_state
    dropped = bmv2.counter("drops", index)
    unknown = max(backend_ids(bmv2).values()) + 1
    for sport, options in ((45000, with_timestamp(DATA_OPTIONS, 1, unknown)), (45001, [])):
        seg = flow_syn(Flow("10.0.0.1", VIP, 6, sport, 80, WEB_SERVICE_ID), "A")
        seg[TCP].options = options
        wire.send(1, seg)
    assert bmv2.wait_counter("drops", index, dropped + 2) == dropped + 2
    assert out_port(wire, 45000) == [] and out_port(wire, 45001) == []


def test_a_single_switch_leaves_timestamps_alone(bmv2: Bmv2, wire: Wire) -> None:
    bmv2.apply(bmv2.cfg)  # not a tier
    f = Flow("10.0.0.1", VIP, 6, 46000, 80, WEB_SERVICE_ID)
    options = with_timestamp(DATA_OPTIONS, 0x7654_3210, 99)
    seg = reply(f, 2, "PA", options)
    wire.send(2, seg)
    assert to_client(wire) == [as_client_sees(seg, f, options)]


def test_an_mss_without_room_for_a_timestamp_after_it_is_left_alone(bmv2: Bmv2, wire: Wire) -> None:
    """Options that begin like a SYN's (MSS, SACK-permitted, timestamp) in a header with
    room for 12 bytes of options only: the timestamp would run into the payload, so none is
    parsed, and the reply goes out with its options and payload as they were."""
    shared(bmv2)
    f = Flow("10.0.0.1", VIP, 6, 47000, 80, WEB_SERVICE_ID)
    options = bytes.fromhex("020405b40402080a00000001")  # 12 bytes: data offset 8

    def segment(src: str, dst: str, sport: int, ttl: int, mac_src: str, mac_dst: str) -> bytes:
        # The options as raw bytes after a header that says 8 words: scapy would rewrite
        # an option list that is not well formed.
        return bytes(
            Ether(src=mac_src, dst=mac_dst)
            / IP(src=src, dst=dst, ttl=ttl)
            / TCP(sport=sport, dport=f.sport, flags="PA", seq=5, ack=1001, dataofs=8)
            / (options + b"answer")
        )

    wire.send(2, Ether(segment(host_ip(2), f.src, 8000, 64, host_mac(2), SWITCH_MAC)))
    assert to_client(wire) == [segment(VIP, f.src, 80, 63, SWITCH_MAC, host_mac(1))]
