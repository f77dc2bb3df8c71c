"""Packet tests of the load-driven algorithms (leastconn, leasttime, leastpkt) and of the
per-backend load they compare, on a real simple_switch_grpc: the active-connection count
rises once per handshake and falls exactly once per connection however it ends, and each
algorithm keeps new connections off the backend that is more loaded by its measure.

Connections are put on a chosen backend by giving the others weight 0 for a moment: a
weight changes only what new connections get, so the load stays where it was put."""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from p4lb.intent import edits
from p4lb.intent.model import CHOICES_ALL, Config
from p4lb.pipeline.ids import backend_key, ids_on_switch, vip_key
from p4lb.service import operations
from tests.dataplane.support import (
    SWITCH_MAC,
    VIP,
    VIP_MAC,
    Bmv2,
    Wire,
    backend_of,
    drop_reasons,
    flush,
    host_ip,
    host_mac,
)

CLIENT = host_ip(1)
BACKENDS = (2, 3, 4)
LEAST = ("leastconn", "leasttime", "leastpkt")


def client(sport: int, flags: str, payload: bytes = b"") -> Any:
    return (
        Ether(src=host_mac(1), dst=VIP_MAC)
        / IP(src=CLIENT, dst=VIP)
        / TCP(sport=sport, dport=80, flags=flags, seq=1000)
        / payload
    )


def server(port: int, sport: int, flags: str, payload: bytes = b"") -> Any:
    """A packet of backend `port` back to the client's connection `sport`."""
    return (
        Ether(src=host_mac(port), dst=SWITCH_MAC)
        / IP(src=host_ip(port), dst=CLIENT)
        / TCP(sport=8000, dport=sport, flags=flags, seq=5000)
        / payload
    )


def out_port(wire: Wire, sport: int) -> int:
    """The backend port the client's packet from `sport` came out of (exactly once); the
    wire is cleared for the next packet."""
    port = backend_of(wire, sport)
    wire.clear()
    return port


def to_client(wire: Wire, sport: int) -> None:
    """Wait until the backend's packet to `sport` came out toward the client."""
    got = wire.expect(
        1, where=lambda p, raw: p == 1 and TCP in Ether(raw) and Ether(raw)[TCP].dport == sport
    )
    assert len(got) == 1, f"reply to port {sport} came out {len(got)} times"
    wire.clear()


def only(cfg: Config, port: int) -> Config:
    """Every web backend but `port` at weight 0: new connections go to `port`."""
    for p in BACKENDS:
        cfg = edits.set_weight(cfg, "web", f"s{p}", 1 if p == port else 0)
    return cfg


def equal(cfg: Config) -> Config:
    for p in BACKENDS:
        cfg = edits.set_weight(cfg, "web", f"s{p}", 1)
    return cfg


def open_on(bmv2: Bmv2, wire: Wire, port: int, sports: range, establish: bool = True) -> None:
    """Connections from `sports` on backend `port` (handshake completed unless not)."""
    bmv2.apply(only(bmv2.cfg, port))
    for sport in sports:
        wire.send(1, client(sport, "S"))
        assert out_port(wire, sport) == port
        if establish:
            wire.send(1, client(sport, "A"))
            assert out_port(wire, sport) == port
    bmv2.apply(equal(bmv2.cfg))


def backend_ids(bmv2: Bmv2) -> dict[int, int]:
    ids = ids_on_switch(bmv2.sw.read_entries())
    web = bmv2.cfg.vip("web")
    return {p: ids.backends[backend_key(web, host_ip(p), 8000)] for p in BACKENDS}


def ports_of(wire: Wire, sport: int) -> list[int]:
    """The backend ports the client's packets from `sport` came out of, as seen so far."""
    return [
        p for p, raw in wire.got if p != 1 and TCP in Ether(raw) and Ether(raw)[TCP].sport == sport
    ]


def new_connections(wire: Wire, sports: range) -> Counter[int]:
    """Backend port of a SYN from each of `sports` (half-open: they add no load)."""
    got: Counter[int] = Counter()
    for sport in sports:
        wire.send(1, client(sport, "S"))
        got[out_port(wire, sport)] += 1
    return got


def test_active_connections_count_handshakes_not_syns(bmv2: Bmv2, wire: Wire) -> None:
    """A SYN flood adds nothing; each client ACK completing a handshake adds one; a
    retransmitted ACK adds nothing."""
    bid = backend_ids(bmv2)
    open_on(bmv2, wire, 2, range(30000, 30020), establish=False)
    assert bmv2.register("active_conns", bid[2]) == 0
    for sport in range(30000, 30003):
        wire.send(1, client(sport, "A"))
        assert out_port(wire, sport) == 2
    wire.send(1, client(30000, "A"))  # again
    assert out_port(wire, 30000) == 2
    assert bmv2.register("active_conns", bid[2]) == 3
    assert bmv2.register("active_conns", bid[3]) == 0


# Each way a connection ends, sent three times: client FIN (and its retransmissions),
# client RST storm, the backend's FIN (the client's own FIN may be lost), the backend's
# RST, and a SYN reusing the 5-tuple (the old connection's slot is reclaimed).
ENDINGS: dict[str, Callable[[int], tuple[int, Any]]] = {
    "client_fin": lambda sport: (1, client(sport, "FA")),
    "client_rst": lambda sport: (1, client(sport, "R")),
    "backend_fin": lambda sport: (2, server(2, sport, "FA")),
    "backend_rst": lambda sport: (2, server(2, sport, "R")),
    "port_reuse": lambda sport: (1, client(sport, "S")),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_connection_ends_exactly_once(bmv2: Bmv2, wire: Wire, ending: str) -> None:
    bid = backend_ids(bmv2)
    open_on(bmv2, wire, 2, range(31000, 31003))
    assert bmv2.register("active_conns", bid[2]) == 3
    closes = bmv2.counter("backend_closes", bid[2])
    bmv2.apply(only(bmv2.cfg, 2))  # a reused port's new connection lands on 2 as well
    for i in range(3):
        port, pkt = ENDINGS[ending](31000)
        wire.send(port, pkt)
        if port != 1:
            to_client(wire, 31000)
        elif ending != "client_rst" or i == 0:  # a freed slot's stray RST is dropped
            assert out_port(wire, 31000) == 2
    # The other two are untouched and still open on their backend (and the switch has
    # seen everything sent before this).
    wire.send(1, client(31001, "PA", b"GET /"))
    assert out_port(wire, 31001) == 2
    assert bmv2.register("active_conns", bid[2]) == 2
    assert bmv2.wait_counter("backend_closes", bid[2], closes + 1) == closes + 1


def test_leastconn_sends_new_connections_to_the_less_loaded(bmv2: Bmv2, wire: Wire) -> None:
    """With two candidates per slot, a backend holding open connections loses every
    comparison until they close; then it takes its share again."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "leastconn"))
    open_on(bmv2, wire, 2, range(32000, 32004))
    got = new_connections(wire, range(32100, 32130))
    assert got[2] == 0 and got[3] > 0 and got[4] > 0, got
    for sport in range(32000, 32004):
        wire.send(1, client(sport, "FA"))
        assert out_port(wire, sport) == 2
    got = new_connections(wire, range(32200, 32260))
    assert got[2] > 0, got


def test_leastconn_weighs_connections_by_weight(bmv2: Bmv2, wire: Wire) -> None:
    """Backend 2 at weight 3: with 4 open connections its load (4+1)/3 is above an idle
    weight-1 backend's (0+1)/1, and it loses every comparison; with 1 open, (1+1)/3 is
    below, and it wins every comparison it is in (it is a candidate in most slots)."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "leastconn"))
    open_on(bmv2, wire, 2, range(33000, 33004))
    bmv2.apply(edits.set_weight(bmv2.cfg, "web", "s2", 3))
    got = new_connections(wire, range(33100, 33140))
    assert got[2] == 0 and got[3] + got[4] == 40, got
    for sport in range(33000, 33003):  # one left: (1+1)/3 < 1, it wins its comparisons
        wire.send(1, client(sport, "R"))
        assert out_port(wire, sport) == 2
    got = new_connections(wire, range(33200, 33240))
    assert got[2] > got[3] and got[2] > got[4], got


def establish(wire: Wire, sport: int) -> int:
    """A new connection from `sport`, handshake completed: the backend port it went to."""
    wire.send(1, client(sport, "S"))
    port = out_port(wire, sport)
    wire.send(1, client(sport, "A"))
    assert out_port(wire, sport) == port
    return port


@pytest.mark.parametrize("algorithm", ("leastconn", "leasttime"))
def test_exact_least_fills_the_empty_backend_until_the_loads_meet(
    bmv2: Bmv2, wire: Wire, algorithm: str
) -> None:
    """The operator's restore scenario (issue 28) at packet level, choices = "all": 4 open
    connections on s2 and 4 on s3 while s4 is drained, s4 back at weight 1; new
    connections opened one by one all go to s4 until its load meets the others'. Then the
    next three spread, one each: every backend ties, and each winner is one ahead. (No
    backend answers, so leasttime's times are all untimed and it orders by connections;
    leastpkt's counts age out by the second, which a packet test cannot pace.)"""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", algorithm, choices=CHOICES_ALL))
    open_on(bmv2, wire, 2, range(34000, 34004))
    open_on(bmv2, wire, 3, range(34010, 34014))
    got = Counter(establish(wire, sport) for sport in range(34100, 34104))
    assert got == {4: 4}, got
    got = Counter(establish(wire, sport) for sport in range(34200, 34203))
    assert got == {2: 1, 3: 1, 4: 1}, got


def test_two_choices_can_miss_the_empty_backend(bmv2: Bmv2, wire: Wire) -> None:
    """choices = 2 on three backends: a slot's two candidates leave one backend out a
    third of the time, so some new connections miss the empty backend (the behaviour the
    exact mode fixes; the same ports, slot table and loads as the exact test)."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "leastconn", choices=2))
    open_on(bmv2, wire, 2, range(34000, 34004))
    open_on(bmv2, wire, 3, range(34010, 34014))
    got = Counter(establish(wire, sport) for sport in range(34300, 34312))
    assert got[4] < 12 and got[2] + got[3] > 0, got


LEASTPKT_WINDOW_S = 1.0  # lb.p4's WINDOW_ID: a window of 2^10 ticks of 1.024 ms (~1.05 s)
TICK_S = 1.024e-3  # lb.p4's NOW: the switch's microseconds over 1024


def test_leasttime_avoids_the_backend_that_answers_slowly(bmv2: Bmv2, wire: Wire) -> None:
    """One request each to backends 2 and 3; 2 answers after 300 ms, 3 at once. The
    moving average of 2 is the larger, and new connections go elsewhere while both hold
    one open connection (backend 4 none)."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "leasttime"))
    bid = backend_ids(bmv2)
    open_on(bmv2, wire, 2, range(34000, 34001))
    open_on(bmv2, wire, 3, range(34001, 34002))
    expected: dict[int, tuple[int, int]] = {}
    for port, sport, delay in ((2, 34000, 0.3), (3, 34001, 0.0)):
        t0 = time.monotonic()
        wire.send(1, client(sport, "PA", b"GET / HTTP/1.0\r\n\r\n"))
        assert out_port(wire, sport) == port
        t1 = time.monotonic()
        time.sleep(delay)  # the backend's service time: what is being measured
        t2 = time.monotonic()
        wire.send(port, server(port, sport, "PA", b"HTTP/1.0 200 OK\r\n\r\n"))
        to_client(wire, sport)
        t3 = time.monotonic()
        # The switch timed the request between t0 and t1 and the answer between t2 and t3,
        # in ticks of 1.024 ms; the first sample, at gain 1/8 and 16 per tick, is 2 per tick.
        expected[port] = (2 * math.floor((t2 - t1) / TICK_S), 2 * math.ceil((t3 - t0) / TICK_S))
        # A second pushed segment of the same answer is not a new sample.
        wire.send(port, server(port, sport, "PA", b"body"))
        to_client(wire, sport)
    slow, fast = bmv2.register("response_time", bid[2]), bmv2.register("response_time", bid[3])
    assert expected[2][0] <= slow <= expected[2][1], (slow, expected)
    assert expected[3][0] <= fast <= expected[3][1], (fast, expected)
    assert fast < slow, (fast, slow)
    assert bmv2.register("response_time", bid[4]) == 0
    got = new_connections(wire, range(34100, 34140))
    assert got[2] == 0 and got[4] > got[3], got


def test_leastpkt_avoids_the_backend_that_received_the_most_packets(bmv2: Bmv2, wire: Wire) -> None:
    """Ten packets to backend 2, then new connections within the window that counts them
    (a window lasts LEASTPKT_WINDOW_S; its counts are seen through the next): none goes
    to 2. Sent back to back, each packet's way checked after (flush)."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "leastpkt"))
    open_on(bmv2, wire, 2, range(35000, 35001))
    for attempt in range(3):  # bounded: a machine too slow to send it all within the window
        sports = range(35100 + 100 * attempt, 35130 + 100 * attempt)
        t0 = time.monotonic()
        wire.send_all(
            1, [client(35000, "PA", b"data")] * 10 + [client(sport, "S") for sport in sports]
        )
        sent_within = time.monotonic() - t0 < LEASTPKT_WINDOW_S
        flush(wire)
        ways = [p for p, raw in wire.got if p != 1 and Ether(raw)[TCP].sport == 35000]
        got = Counter(p for sport in sports for p in ports_of(wire, sport))
        wire.clear()
        assert ways == [2] * 10
        assert sum(got.values()) == len(sports), got  # each SYN came out once
        if sent_within:
            assert got[2] == 0 and got[3] > 0 and got[4] > 0, got
            return
    pytest.fail(f"never sent 40 packets within {LEASTPKT_WINDOW_S} s")


@pytest.mark.parametrize("algorithm", LEAST)
def test_a_packet_without_state_is_dropped_not_guessed(
    bmv2: Bmv2, wire: Wire, algorithm: str
) -> None:
    """The load-driven choice cannot be recomputed for a mid-connection packet."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", algorithm))
    sid = ids_on_switch(bmv2.sw.read_entries()).services[vip_key(bmv2.cfg.vip("web"))]
    index = sid * bmv2.sw.schema.drop_counter_stride() + drop_reasons()["no_state"]
    before = bmv2.counter("drops", index)
    wire.send(1, client(36000, "A"))
    assert bmv2.wait_counter("drops", index, before + 1) == before + 1
    assert wire.expect(1, timeout=0.3, where=lambda p, raw: p != 1) == []


def _every_ordered_pair(names: tuple[str, ...]) -> list[str]:
    """A walk through `names` taking every ordered pair (a, b), a != b, as a step: an
    Eulerian circuit of the complete directed graph (Hierholzer)."""
    out_edges = {a: [b for b in names if b != a] for a in names}
    stack, walk = [names[0]], []
    while stack:
        if out_edges[stack[-1]]:
            stack.append(out_edges[stack[-1]].pop())
        else:
            walk.append(stack.pop())
    return walk[::-1]


def test_switching_between_any_two_algorithms_keeps_every_connection(
    bmv2: Bmv2, wire: Wire
) -> None:
    """Every ordered pair of algorithms, one switch each: a connection opened under every
    algorithm so far keeps its backend through every later switch."""
    names = tuple(sorted(bmv2.sw.schema.algorithms()))
    assert set(LEAST) | {"iphash", "wrr", "srchash", "maglev"} <= set(names)
    walk = _every_ordered_pair(names)
    assert len(list(itertools.pairwise(walk))) == len(names) * (len(names) - 1)
    open_conns: dict[int, int] = {}
    sports = itertools.count(37000)
    for step, algorithm in enumerate(walk):
        bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", algorithm))
        sport = next(sports)
        wire.send(1, client(sport, "S"))
        open_conns[sport] = out_port(wire, sport)
        wire.send(1, client(sport, "A"))
        assert out_port(wire, sport) == open_conns[sport]
        # Every connection so far (a sample of up to 6, to bound the run), data packets.
        for old in list(open_conns)[-6:]:
            wire.send(1, client(old, "PA", b"x"))
            assert out_port(wire, old) == open_conns[old], (step, algorithm, old)


def test_maglev_drain_moves_only_the_drained_backends_flows(bmv2: Bmv2, wire: Wire) -> None:
    """Flows the state does not hold follow the Maglev table; draining a backend rewrites
    only its entries, so exactly its flows move and every other flow stays put."""
    bmv2.apply(edits.set_algorithm(bmv2.cfg, "web", "maglev"))

    def where() -> dict[int, int]:
        out = {}
        for sport in range(38000, 38060):
            wire.send(1, client(sport, "A"))  # mid-flow, no state: the table decides
            out[sport] = out_port(wire, sport)
        return out

    before = where()
    assert set(before.values()) == set(BACKENDS)
    bmv2.apply(edits.drain(bmv2.cfg, "web", "s3"))
    after = where()
    moved = {s for s in before if before[s] != after[s]}
    assert moved == {s for s in before if before[s] == 3}
    assert 3 not in after.values()


def test_drain_reports_the_active_connections_the_switch_counts(bmv2: Bmv2, wire: Wire) -> None:
    """What `backend drain` reports (established - closes, from the counters) follows
    the data plane's own count, through every way a connection ends."""
    bid = backend_ids(bmv2)
    open_on(bmv2, wire, 2, range(39000, 39005))
    bmv2.apply(edits.drain(bmv2.cfg, "web", "s2"))
    assert operations.active_connections(bmv2.sw, bmv2.cfg, "web", "s2") == 5
    endings = [
        (1, client(39000, "FA")),
        (1, client(39001, "R")),
        (2, server(2, 39002, "FA")),
        (2, server(2, 39003, "R")),
    ]
    for n, (port, pkt) in enumerate(endings, start=1):
        wire.send(port, pkt)
        if port == 1:
            assert out_port(wire, int(pkt[TCP].sport)) == 2
        else:
            to_client(wire, int(pkt[TCP].dport))
        assert operations.active_connections(bmv2.sw, bmv2.cfg, "web", "s2") == 5 - n
        assert bmv2.register("active_conns", bid[2]) == 5 - n
    # The drained backend still carries its last open connection.
    wire.send(1, client(39004, "PA", b"x"))
    assert out_port(wire, 39004) == 2
