"""The algorithms beyond the hashes on an IPv6 VIP, on a real simple_switch_grpc, each
asserting what the IPv4 tests of the same algorithm assert: source hash sends a client to
the backend its address's bucket names, whatever its port, the buckets in proportion to
the weights."""

from __future__ import annotations

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
from p4lb.pipeline.ids import ids_on_switch, vip_key
from tests.dataplane import support
from tests.dataplane.support import CONFIG, Bmv2, Wire, backend_of, flush, host_mac

VIP6 = "2001:db8::100"
VIP6_MAC = "00:00:00:00:01:66"
CLIENT6 = "2001:db8::1"
BACKENDS = (2, 3, 4)


def backend6(port: int) -> str:
    return f"2001:db8::{port}"


CONFIG6 = (
    CONFIG
    + f"""
[[host]]
name = "client6"
address = "{CLIENT6}"
mac = "{host_mac(1)}"
switch_port = 1

[vip.web6]
address = "{VIP6}"
protocol = "tcp"
port = 80
algorithm = "srchash"
mac = "{VIP6_MAC}"
"""
    + "".join(
        f"""
[[vip.web6.backend]]
name = "s{p}"
address = "{backend6(p)}"
port = 8000
mac = "{host_mac(p)}"
switch_port = {p}
"""
        for p in BACKENDS
    )
)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Bmv2]:
    if not support.have_artifacts():
        pytest.skip("dataplane layer skipped: missing p4src/compiled artifacts (make artifacts)")
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
