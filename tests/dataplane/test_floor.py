"""floor.p4 does the work bench/floor.py charges it for: on real BMv2, a client's TCP
packet to the VIP leaves rewritten to the backend and a backend's reply leaves rewritten
to the VIP, both with valid checksums, and the state level stores the signature. A floor
that skipped a step would make the bound it gives look lower than it is."""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import time
from collections.abc import Iterator

import pytest

from bench import floor_program as floor
from bench import lab as sw
from bench.toolchain import p4c, p4c_problem
from bench.traffic import flow_packets
from p4lb.models.hashing import crc32

SHAPE = sw.Shape(flows=1)
NEEDS = ("simple_switch_grpc", "simple_switch_CLI")


@pytest.fixture(scope="module")
def floor_switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    missing = [t for t in NEEDS if not shutil.which(t)]
    if missing or os.geteuid() != 0:
        pytest.skip(f"floor layer skipped: needs root and {', '.join(missing) or 'nothing else'}")
    if problem := p4c_problem(p4c()):
        pytest.skip(f"floor layer skipped: {problem}")
    json_path = floor.compile_floor(4, tmp_path_factory.mktemp("floor"))
    with sw.LAB.veths(), sw.LAB.switch(program=json_path):
        floor.program_floor(SHAPE)
        yield


def exchange(frame: bytes, port: int) -> bytes:
    """Send `frame` into port 1; the frame that comes out of `port` (5 s at most)."""
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        rx.bind((sw.LAB.host_if(port), 0))
        tx.bind((sw.LAB.host_if(1), 0))
        tx.send(frame)
        deadline = time.monotonic() + 5
        while (left := deadline - time.monotonic()) > 0:
            if select.select([rx], [], [], left)[0]:
                data, addr = rx.recvfrom(65535)
                if addr[2] != socket.PACKET_OUTGOING:
                    return data
        raise AssertionError(f"nothing out of port {port} within 5 s")
    finally:
        rx.close()
        tx.close()


def checksums_valid(pkt: object) -> bool:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    assert isinstance(pkt, Ether)
    fresh = pkt.copy()
    del fresh[IP].chksum, fresh[TCP].chksum
    fresh = Ether(bytes(fresh))
    return bool(fresh[IP].chksum == pkt[IP].chksum and fresh[TCP].chksum == pkt[TCP].chksum)


def test_client_packet_rewritten_to_backend_and_reply_to_vip(floor_switch: None) -> None:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    syn, syn_ack = flow_packets(0, SHAPE, direct=False)[:2]
    backend = sw.backend_addr(0, 0, SHAPE.backends)
    out = Ether(exchange(syn, sw.backend_port_of(0)))
    assert (out[IP].dst, out[TCP].dport) == (backend, 8000)
    assert (out[IP].src, out[TCP].sport) == (Ether(syn)[IP].src, Ether(syn)[TCP].sport)
    assert checksums_valid(out)
    back = Ether(exchange(syn_ack, 1))
    assert (back[IP].src, back[TCP].sport) == (sw.vip_addr(0), 80)
    assert checksums_valid(back)


def test_state_level_stores_the_client_signature(floor_switch: None) -> None:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    syn = Ether(flow_packets(0, SHAPE, direct=False)[0])
    exchange(bytes(syn), sw.backend_port_of(0))
    sig = crc32(socket.inet_aton(syn[IP].src) + syn[TCP].sport.to_bytes(2, "big"))
    out = sw.thrift_cli([f"register_read floor_conn {sig & 0xFFFF}"])
    found = re.search(rf"floor_conn\[{sig & 0xFFFF}\]\s*=\s*(\d+)", out)
    assert found, out
    assert int(found.group(1)) == (1 << 32) | sig
