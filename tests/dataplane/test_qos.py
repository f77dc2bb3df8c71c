"""Queueing disciplines on a real BMv2 (qos.p4 + BMv2's shaped queues): each discipline's
mechanism, asserted on packet counts and drop counters, never on timings.

Traffic is routed (not to a VIP): UDP from the client port to the host behind port 2,
whose queue the discipline shapes; drops of routed packets count under service 0."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent import qos
from p4lb.models.hashing import qos_flow_bucket, qos_host_bucket
from tests.dataplane import support
from tests.support import poll_until

PORT = 2  # the congested port: toward 10.0.0.2
DST = support.host_ip(PORT)
SLOT = 0  # the only port with a discipline takes slot 0
DST6 = "2001:db8::2"  # the same host behind port 2, over IPv6
QOS_CONFIG = (
    support.CONFIG
    + f"""
[[host]]
name = "h{PORT}-v6"
address = "{DST6}"
mac = "{support.host_mac(PORT)}"
switch_port = {PORT}

[qos]
thrift_port = {support.THRIFT_PORT}
"""
)


@pytest.fixture
def qsw(tmp_path: Path) -> Iterator[support.Bmv2]:
    """The test switch with 8 priority queues per port and an empty [qos]."""
    with support.running(tmp_path / "switch", QOS_CONFIG, priority_queues=8) as b:
        yield b


@pytest.fixture
def qwire(qsw: support.Bmv2) -> Iterator[support.Wire]:
    w = support.Wire()
    try:
        yield w
    finally:
        w.close()


# Back to back, a burst of a hundred packets overflows BMv2's receive socket before its
# ingress (with trace logging) takes them: packets the switch never saw would count as
# neither delivered nor dropped. Paced at one per 2 ms they all arrive, still far faster
# than the shaped port drains them.
PACE_S = 0.002


def send_paced(wire: support.Wire, pkts: list[bytes]) -> None:
    from scapy.sendrecv import sendp

    sendp(pkts, iface=support.host_iface(1), inter=PACE_S)


def set_discipline(b: support.Bmv2, **params: Any) -> None:
    b.apply(qos.with_port(b.cfg, qos.parse_port(PORT, params, "test", f"qos.port.{PORT}")))


def udp(src: str, sport: int, seq: int, size: int = 0) -> bytes:
    """A UDP packet from `src` to the host behind PORT, over IPv4 or IPv6 as `src` is."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    payload = seq.to_bytes(4, "big") + bytes(size)
    ip = IPv6(src=src, dst=DST6) if ":" in src else IP(src=src, dst=DST)
    return bytes(
        Ether(src=support.host_mac(1), dst=support.SWITCH_MAC)
        / ip
        / UDP(sport=sport, dport=9000)
        / Raw(payload)
    )


def source_of(pkt: Any) -> str:
    from scapy.layers.inet import IP
    from scapy.layers.inet6 import IPv6

    return str((pkt[IPv6] if IPv6 in pkt else pkt[IP]).src)


def received(wire: support.Wire, src: str, sport: int) -> list[int]:
    """Sequence numbers of the flow's packets that came out of PORT, in arrival order."""
    from scapy.layers.inet import UDP
    from scapy.layers.l2 import Ether

    out = []
    for port, raw in wire.got:
        pkt = Ether(raw)
        if port == PORT and UDP in pkt and source_of(pkt) == src and pkt[UDP].sport == sport:
            out.append(int.from_bytes(bytes(pkt[UDP].payload)[:4], "big"))
    return out


def arrivals(wire: support.Wire) -> list[tuple[str, int]]:
    """(source, source port) of every UDP packet out of PORT, in arrival order."""
    from scapy.layers.inet import UDP
    from scapy.layers.l2 import Ether

    out = []
    for port, raw in wire.got:
        pkt = Ether(raw)
        if port == PORT and UDP in pkt:
            out.append((source_of(pkt), pkt[UDP].sport))
    return out


def drained(b: support.Bmv2, wire: support.Wire, expected: int, timeout: float) -> None:
    """Wait (bounded) until `expected` packets (delivered + counted drops) are accounted for
    on PORT, then until the shaped queue is empty (a sentinel flush behind it)."""

    def accounted() -> int:
        return sum(1 for port, _ in wire.got if port == PORT) + sum(qos_drops(b).values())

    poll_until(lambda: accounted() >= expected, timeout, every=0.05)
    support.flush(wire)


def qos_drops(b: support.Bmv2) -> dict[str, int]:
    """Routed packets' QoS drops by cause (service 0's cells of the drops counter)."""
    codes = support.drop_reasons()
    return {r: b.counter("drops", codes[r]) for r in ("qos_tail", "qos_aqm", "qos_meter")}


CLIENT = "10.0.1.1"
# Per family: the first source, and a second one in another flow and host bucket.
SOURCES = {"ipv4": (CLIENT, "10.0.1.3"), "ipv6": ("2001:db8:1::1", "2001:db8:1::3")}


def test_fifo_tail_drops_everything_above_its_limit_and_counts_it(
    qsw: support.Bmv2, qwire: support.Wire
) -> None:
    # 100 packets/s, room for 10: 80 packets arriving at 500/s lose most of them, each
    # one counted as a tail drop.
    set_discipline(qsw, discipline="fifo", rate_pps=100, limit=10)
    send_paced(qwire, [udp(CLIENT, 5000, i) for i in range(80)])
    drained(qsw, qwire, 80, timeout=10)
    got = received(qwire, CLIENT, 5000)
    drops = qos_drops(qsw)
    assert got == sorted(got), "a FIFO reordered packets"
    assert len(got) >= 10, f"only {len(got)} delivered: the queue holds 10"
    assert drops["qos_tail"] >= 1
    assert len(got) + drops["qos_tail"] == 80, (len(got), drops)
    assert drops["qos_aqm"] == drops["qos_meter"] == 0


def test_codel_does_not_drop_a_queue_that_drains_within_one_interval(
    qsw: support.Bmv2, qwire: support.Wire
) -> None:
    # 30 packets drain at 200 packets/s within ~150 ms: the sojourn is above the 1 ms
    # target for most of them but never for a whole 400 ms interval.
    set_discipline(
        qsw, discipline="codel", rate_pps=200, limit=100, target_us=1000, interval_us=400_000
    )
    send_paced(qwire, [udp(CLIENT, 5001, i) for i in range(30)])
    drained(qsw, qwire, 30, timeout=10)
    assert len(received(qwire, CLIENT, 5001)) == 30
    assert qos_drops(qsw) == {"qos_tail": 0, "qos_aqm": 0, "qos_meter": 0}


def test_codel_drops_once_the_sojourn_stays_above_target_for_an_interval(
    qsw: support.Bmv2, qwire: support.Wire
) -> None:
    # 100 packets arriving at 500/s, leaving at 200/s: ~500 ms of a standing queue against
    # a 100 ms interval.
    # CoDel drops after the first interval and then at interval/sqrt(count): a handful,
    # not every packet above target (which would be ~99).
    set_discipline(
        qsw, discipline="codel", rate_pps=200, limit=200, target_us=1000, interval_us=100_000
    )
    send_paced(qwire, [udp(CLIENT, 5002, i) for i in range(100)])
    drained(qsw, qwire, 100, timeout=10)
    got = received(qwire, CLIENT, 5002)
    drops = qos_drops(qsw)
    assert drops["qos_tail"] == 0
    assert 1 <= drops["qos_aqm"] <= 12, drops
    assert len(got) + drops["qos_aqm"] == 100
    lost = sorted(set(range(100)) - set(got))
    # Nothing is dropped before a packet has waited one interval's worth of the queue's
    # departures after the first one above target (200 packets/s x 100 ms = 20).
    assert lost[0] >= 15, f"CoDel dropped packet {lost[0]} before an interval had passed"


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
@pytest.mark.parametrize("discipline", ["sfq-approx", "fq_codel-approx"])
def test_a_flow_cannot_hold_more_than_its_share_of_the_queue(
    qsw: support.Bmv2, qwire: support.Wire, discipline: str, family: str
) -> None:
    # Flow A floods first (150 packets), then flow B sends 12: with a FIFO of 40 A would
    # hold all 40 places and B would lose everything; a flow's share is 6 places.
    src_a, src_b = SOURCES[family]
    dst = DST6 if family == "ipv6" else DST
    assert qos_flow_bucket(src_a, dst, 17, 6000, 9000) != qos_flow_bucket(
        src_b, dst, 17, 6001, 9000
    )
    set_discipline(qsw, discipline=discipline, rate_pps=50, limit=40, flow_limit=6)
    a = [udp(src_a, 6000, i) for i in range(150)]
    b_flow = [udp(src_b, 6001, i) for i in range(12)]
    send_paced(qwire, a + b_flow)
    drained(qsw, qwire, 162, timeout=15)
    got_a, got_b = received(qwire, src_a, 6000), received(qwire, src_b, 6001)
    drops = qos_drops(qsw)
    assert len(got_b) >= 6, f"flow B got {len(got_b)} of its 6 places"
    assert len(got_a) < 40, f"flow A took {len(got_a)} places: more than a FIFO's share"
    assert len(got_a) + len(got_b) + drops["qos_tail"] + drops["qos_aqm"] == 162, drops
    # B's first packet found its flow with nothing queued: the sparse queue sent it ahead
    # of A's backlog.
    order = arrivals(qwire)
    assert order.index((src_b, 6001)) < len(got_a), "flow B waited behind all of flow A"


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_pcq_holds_each_address_to_its_class_rate(
    qsw: support.Bmv2, qwire: support.Wire, family: str
) -> None:
    # Class rate 50 packets/s with a burst of 5: source A's 200-packet burst is policed
    # (meter drops), source B's 4 packets right after are untouched by A's class.
    # (10.0.1.3, not .2: BMv2's crc16 is CRC-16/ARC, which puts 10.0.1.1 and 10.0.1.2 in
    # the same of 64 buckets; they would share a class.)
    src_a, src_b = SOURCES[family]
    assert qos_host_bucket(src_a) != qos_host_bucket(src_b)
    set_discipline(
        qsw,
        discipline="pcq-approx",
        rate_pps=1000,
        limit=400,
        host_limit=5,
        class_rate_pps=50,
        classifier="src",
    )
    start = time.monotonic()
    send_paced(qwire, [udp(src_a, 7000, i) for i in range(200)])
    send_paced(qwire, [udp(src_b, 7001, i) for i in range(4)])
    drained(qsw, qwire, 204, timeout=10)
    elapsed = time.monotonic() - start
    got_a, got_b = received(qwire, src_a, 7000), received(qwire, src_b, 7001)
    drops = qos_drops(qsw)
    assert len(got_b) == 4, f"source B lost {4 - len(got_b)} packets to A's class"
    # At most the burst plus the rate over the whole time A's packets could meet the meter.
    assert len(got_a) <= 5 + 50 * elapsed + 1, (len(got_a), elapsed)
    assert drops["qos_meter"] >= 200 - (5 + 50 * elapsed + 1)
    assert len(got_a) + drops["qos_meter"] + drops["qos_tail"] == 200, drops
