"""The algorithms beyond the flow hashes on an IPv6 VIP, on a real simple_switch_grpc,
each asserting what the IPv4 tests of the same algorithm assert (test_packets.py,
test_algorithms.py): source hash sends a client to the backend its address's bucket
names, whatever its port, the buckets in proportion to the weights; round robin's shares
are exact; the least-* algorithms keep new connections off the backend loaded most by
their measure; a flow that finds its bucket full takes its turn, is reported (an IPv6
collision digest) and follows the controller's conn6_table entry."""

from __future__ import annotations

import ipaddress
import math
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from p4lb.intent import edits
from p4lb.models.hashing import source_slot
from p4lb.pipeline.digests import ConnDigests
from p4lb.pipeline.entries import Update
from p4lb.pipeline.ids import backend_key, ids_on_switch, vip_key
from tests.dataplane import support
from tests.dataplane.support import (
    CLIENT6,
    SWITCH_MAC,
    VIP6,
    VIP6_MAC,
    Bmv2,
    Wire,
    backend6,
    backend_of,
    config6,
    drop_reasons,
    flush,
    host_mac,
    same_bucket_flows6,
)

BACKENDS = (2, 3, 4)


CONFIG6 = config6("srchash")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Bmv2]:
    with support.running(tmp_path / "switch", CONFIG6) as b:
        yield b


@pytest.fixture
def wire(lab: Bmv2) -> Iterator[Wire]:
    w = Wire()
    try:
        yield w
    finally:
        w.close()


def client(sport: int, flags: str, src: str = CLIENT6, payload: bytes = b"") -> Any:
    return (
        Ether(src=host_mac(1), dst=VIP6_MAC)
        / IPv6(src=src, dst=VIP6)
        / TCP(sport=sport, dport=80, flags=flags, seq=1000)
        / payload
    )


def sid(lab: Bmv2) -> int:
    return ids_on_switch(lab.sw.read_entries()).services[vip_key(lab.cfg.vip("web6"))]


def weights(lab: Bmv2, **by_name: int) -> None:
    cfg = lab.cfg
    for name, weight in by_name.items():
        cfg = edits.set_weight(cfg, "web6", name, weight)
    lab.apply(cfg)


def source_hash_port(lab: Bmv2, src: str) -> int:
    """The switch port of the backend the VIP's live slot table holds in the slot the
    model says `src` hashes to."""
    held = lab.sw.read_entries()
    s = sid(lab)
    vip = next(e for e in held if e.table == "vip6_table" and e.p("service_id") == s)
    slot = source_slot(src, vip.p("slot_count"))
    want = (("service_id", s), ("version", vip.p("version")), ("slot", slot))
    member = next(e for e in held if e.table == "slot_table" and e.match == want)
    port = next(
        e
        for e in held
        if e.table == "backend_port_table" and e.exact("backend_id") == member.p("backend_id")
    )
    return int(port.p("switch_port"))


def send_bursts(wire: Wire, pkts: list[Any], burst: int = 20) -> None:
    """Send `pkts` from the client port in bursts the switch's input queue holds, each
    through the switch (flush) before the next."""
    for i in range(0, len(pkts), burst):
        wire.send_all(1, pkts[i : i + burst])
        flush(wire)


def ports_by_source(wire: Wire) -> dict[tuple[str, int], int]:
    """(client address, port) -> the switch port its packet came out of, for everything
    seen so far (each exactly once)."""
    flush(wire)
    out: dict[tuple[str, int], int] = {}
    for port, raw in wire.got:
        pkt = Ether(raw)
        if port == 1 or IPv6 not in pkt or TCP not in pkt:
            continue
        key = (pkt[IPv6].src, int(pkt[TCP].sport))
        assert key not in out, f"{key} came out twice"
        out[key] = port
    return out


def test_srchash_sends_a_client_to_its_sources_backend_from_every_port(
    lab: Bmv2, wire: Wire
) -> None:
    """40 clients, three connections each and a mid-connection packet no state knows
    (source hash recomputes it): every packet of a client leaves by the one backend the
    switch's slot table holds for its address's CRC32; the clients use every backend."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "srchash"))
    sources = [f"2001:db8:1::{i:x}" for i in range(1, 41)]
    sent = [client(sport, "S", src) for src in sources for sport in (40000, 40001, 40002)]
    sent += [client(40003, "A", src) for src in sources]
    send_bursts(wire, sent)
    got = ports_by_source(wire)
    assert len(got) == len(sent)
    for src in sources:
        want = source_hash_port(lab, src)
        assert {got[(src, sport)] for sport in range(40000, 40004)} == {want}, src
    assert {got[(src, 40000)] for src in sources} == set(BACKENDS)


def test_srchash_gives_each_backend_sources_in_proportion_to_its_weight(
    lab: Bmv2, wire: Wire
) -> None:
    """Weights 1:2:3 over 300 clients: each backend's share of the clients is within 0.07
    of its weight's; a backend at weight 0 gets no new client, and a client already
    connected to it keeps its connection."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "srchash"))
    weights(lab, s2=1, s3=2, s4=3)
    sources = [f"2001:db8:2::{i:x}" for i in range(1, 301)]
    send_bursts(wire, [client(41000, "S", src) for src in sources])
    got = ports_by_source(wire)
    assert len(got) == len(sources)
    # The last client on s4 completes its handshake (its half-open state lasts ~3 s).
    on_s4 = next(src for src in reversed(sources) if got[(src, 41000)] == 4)
    wire.clear()
    wire.send(1, client(41000, "A", on_s4))
    assert backend_of(wire, 41000) == 4
    for src in sources[:20]:
        assert got[(src, 41000)] == source_hash_port(lab, src), src
    shares = Counter(got.values())
    for port, weight in ((2, 1), (3, 2), (4, 3)):
        assert abs(shares[port] / len(sources) - weight / 6) <= 0.07, shares
    weights(lab, s4=0)
    wire.clear()
    send_bursts(wire, [client(41001, "S", src) for src in sources])
    wire.send(1, client(41000, "PA", on_s4, b"GET"))  # its open connection
    after = ports_by_source(wire)
    assert 4 not in {after[(src, 41001)] for src in sources}
    assert after[(on_s4, 41000)] == 4
    wire.clear()
    wire.send(1, client(41002, "S", on_s4))
    assert backend_of(wire, 41002) == source_hash_port(lab, on_s4) != 4


def out_port(wire: Wire, sport: int) -> int:
    """The backend port the client's packet from `sport` came out of (exactly once); the
    wire is cleared for the next packet."""
    port = backend_of(wire, sport)
    wire.clear()
    return port


def server(port: int, sport: int, flags: str, payload: bytes = b"") -> Any:
    """A packet of backend `port` back to the client's connection `sport`."""
    return (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IPv6(src=backend6(port), dst=CLIENT6)
        / TCP(sport=8000, dport=sport, flags=flags, seq=5000)
        / payload
    )


def to_client(wire: Wire, sport: int) -> None:
    """Wait until the backend's packet to `sport` came out toward the client."""
    got = wire.expect(
        1, where=lambda p, raw: p == 1 and TCP in Ether(raw) and Ether(raw)[TCP].dport == sport
    )
    assert len(got) == 1, f"reply to port {sport} came out {len(got)} times"
    wire.clear()


def only(lab: Bmv2, port: int) -> None:
    """Every backend but `port` at weight 0: new connections go to `port`."""
    weights(lab, **{f"s{p}": int(p == port) for p in BACKENDS})


def open_on(lab: Bmv2, wire: Wire, port: int, sports: range) -> None:
    """Established connections from `sports` on backend `port`; then equal weights."""
    only(lab, port)
    for sport in sports:
        wire.send(1, client(sport, "S"))
        assert out_port(wire, sport) == port
        wire.send(1, client(sport, "A"))
        assert out_port(wire, sport) == port
    weights(lab, s2=1, s3=1, s4=1)


def new_connections(wire: Wire, sports: range) -> Counter[int]:
    """Backend port of a SYN from each of `sports` (half-open: they add no load)."""
    got: Counter[int] = Counter()
    for sport in sports:
        wire.send(1, client(sport, "S"))
        got[out_port(wire, sport)] += 1
    return got


def backend_ids(lab: Bmv2) -> dict[int, int]:
    ids = ids_on_switch(lab.sw.read_entries())
    web6 = lab.cfg.vip("web6")
    return {p: ids.backends[backend_key(web6, backend6(p), 8000)] for p in BACKENDS}


def test_wrr_equal_weights_is_exact_round_robin(lab: Bmv2, wire: Wire) -> None:
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "wrr"))
    seen = []
    for sport in range(42000, 42009):
        wire.send(1, client(sport, "S"))
        seen.append(out_port(wire, sport))
    assert seen == [2, 3, 4] * 3


def test_wrr_is_exact_over_many_clients(lab: Bmv2, wire: Wire) -> None:
    """600 connections from 30 client addresses at weights 1:2:3: every backend gets
    exactly its share (the switch's own connection counters), and no flow collides."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "wrr"))
    weights(lab, s2=1, s3=2, s4=3)
    bid = backend_ids(lab)
    send_bursts(wire, [client(43000 + i, "S", f"2001:db8:3::{1 + i % 30:x}") for i in range(600)])
    counts = {p: lab.counter("backend_conns", b) for p, b in bid.items()}
    seen = sum(counts.values())
    # A SYN the kernel drops on a loaded machine never reaches the switch; over the ones
    # that did, the cycle is exact: each backend within one of its share.
    assert seen >= 595, counts
    for port, weight in ((2, 1), (3, 2), (4, 3)):
        assert abs(counts[port] - seen * weight / 6) <= 1, counts
    assert lab.counter("collisions", sid(lab)) == 0


def test_leastconn_sends_new_connections_to_the_less_loaded(lab: Bmv2, wire: Wire) -> None:
    """With two candidates per slot, a backend holding open connections loses every
    comparison until they close; then it takes its share again."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "leastconn"))
    open_on(lab, wire, 2, range(44000, 44004))
    assert lab.register("active_conns", backend_ids(lab)[2]) == 4
    got = new_connections(wire, range(44100, 44130))
    assert got[2] == 0 and got[3] > 0 and got[4] > 0, got
    for sport in range(44000, 44004):
        wire.send(1, client(sport, "FA"))
        assert out_port(wire, sport) == 2
    got = new_connections(wire, range(44200, 44260))
    assert got[2] > 0, got


TICK_S = 1.024e-3  # lb.p4's NOW: the switch's microseconds over 1024


def test_leasttime_avoids_the_backend_that_answers_slowly(lab: Bmv2, wire: Wire) -> None:
    """One request each to backends 2 and 3; 2 answers after 300 ms, 3 at once: the
    IPv6 replies are timed, 2's average is the larger, and new connections go elsewhere
    while both hold one open connection (backend 4 none)."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "leasttime"))
    bid = backend_ids(lab)
    open_on(lab, wire, 2, range(45000, 45001))
    open_on(lab, wire, 3, range(45001, 45002))
    expected: dict[int, tuple[int, int]] = {}
    for port, sport, delay in ((2, 45000, 0.3), (3, 45001, 0.0)):
        t0 = time.monotonic()
        wire.send(1, client(sport, "PA", payload=b"GET / HTTP/1.0\r\n\r\n"))
        assert out_port(wire, sport) == port
        t1 = time.monotonic()
        time.sleep(delay)  # the backend's service time: what is being measured
        t2 = time.monotonic()
        wire.send(port, server(port, sport, "PA", b"HTTP/1.0 200 OK\r\n\r\n"))
        to_client(wire, sport)
        t3 = time.monotonic()
        # The first sample, at gain 1/8 and 16 per tick, is 2 per tick (test_algorithms).
        expected[port] = (2 * math.floor((t2 - t1) / TICK_S), 2 * math.ceil((t3 - t0) / TICK_S))
    slow, fast = lab.register("response_time", bid[2]), lab.register("response_time", bid[3])
    assert expected[2][0] <= slow <= expected[2][1], (slow, expected)
    assert expected[3][0] <= fast <= expected[3][1], (fast, expected)
    assert fast < slow, (fast, slow)
    got = new_connections(wire, range(45100, 45140))
    assert got[2] == 0 and got[4] > got[3], got


def test_leastpkt_avoids_the_backend_that_received_the_most_packets(lab: Bmv2, wire: Wire) -> None:
    """Ten packets to backend 2, then new connections within the window that counts them:
    none goes to 2 (test_algorithms' test, on IPv6)."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", "leastpkt"))
    open_on(lab, wire, 2, range(46000, 46001))
    for attempt in range(3):  # bounded: a machine too slow to send it all within the window
        sports = range(46100 + 100 * attempt, 46130 + 100 * attempt)
        t0 = time.monotonic()
        wire.send_all(
            1,
            [client(46000, "PA", payload=b"data")] * 10 + [client(sport, "S") for sport in sports],
        )
        sent_within = time.monotonic() - t0 < 1.0
        flush(wire)
        ways = [p for p, raw in wire.got if p != 1 and Ether(raw)[TCP].sport == 46000]
        got = Counter(p for p, raw in wire.got if p != 1 and Ether(raw)[TCP].sport in sports)
        wire.clear()
        assert ways == [2] * 10
        assert sum(got.values()) == len(sports), got  # each SYN came out once
        if sent_within:
            assert got[2] == 0 and got[3] > 0 and got[4] > 0, got
            return
    pytest.fail("never sent 40 packets within a packet window")


@pytest.mark.parametrize("algorithm", ("wrr", "leastconn"))
def test_a_full_bucket_keeps_the_algorithm_and_pins_the_flow(
    lab: Bmv2, wire: Wire, algorithm: str
) -> None:
    """Four flows fill a state bucket; the fifth still gets its algorithm's choice (WRR's
    next turn), is counted as a collision and reported in an IPv6 collision digest with
    its 5-tuple, backend and port. Its later packets are dropped (no_state) until the
    controller's conn6_table entry lands, and follow the entry after, whatever the
    weights; the held flows keep their backends throughout."""
    lab.apply(edits.set_algorithm(lab.cfg, "web6", algorithm))
    s = sid(lab)
    *held, last = same_bucket_flows6(5, s, "2001:db8:4::")
    lab.sw.enable_digest("conn6_digest_t")
    ports = []
    for f in held:
        wire.send(1, client(f.sport, "S", f.src))
        ports.append(out_port(wire, f.sport))
    before = lab.counter("collisions", s)
    wire.send(1, client(last.sport, "S", last.src))
    port = out_port(wire, last.sport)
    if algorithm == "wrr":
        assert [*ports, port] == [2, 3, 4, 2, 3], "a flow in a full bucket takes its turn"
    assert lab.wait_counter("collisions", s, before + 1) == before + 1
    msg = lab.sw.next_stream_message("digest", timeout=3.0)
    assert msg is not None
    digests = ConnDigests.of(lab.sw.schema, "conn6_digest_t")
    fields = digests.values(msg.digest.data[0])
    assert fields == {
        "src_addr": int(ipaddress.ip_address(last.src)),
        "dst_addr": int(ipaddress.ip_address(VIP6)),
        "protocol": 6,
        "src_port": last.sport,
        "dst_port": 80,
        "backend_id": backend_ids(lab)[port],
        "switch_port": port,
    }
    lab.sw.ack_digest(msg.digest.digest_id, msg.digest.list_id)
    # Before the controller's entry lands, a later packet is dropped, not misrouted ...
    index = s * lab.sw.schema.drop_counter_stride() + drop_reasons()["no_state"]
    dropped = lab.counter("drops", index)
    wire.send(1, client(last.sport, "A", last.src))
    assert lab.wait_counter("drops", index, dropped + 1) == dropped + 1
    assert wire.expect(1, timeout=0.3, where=lambda p, raw: p != 1) == []
    # ... and after it, the entry decides; the held flows keep their backends throughout.
    lab.sw.write([Update("INSERT", digests.entry(fields))])
    weights(lab, **{f"s{port}": 0})
    for flags in ("A", "PA", "FA"):
        wire.clear()
        wire.send(1, client(last.sport, flags, last.src))
        assert out_port(wire, last.sport) == port
    for f, p in zip(held, ports, strict=True):
        wire.send(1, client(f.sport, "A", f.src))
        assert out_port(wire, f.sport) == p
