"""How soon a weight change takes effect, seen from the wire (bench.controller): SYNs sent
on the lab's one port through a raw socket, the backend each came out toward."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from p4lb.cli.main import main as p4lb_main
from topology.wire import VethLab

# One port, apart from bench.lab's (make bench-switch) and the packet tests', so they can
# run at once.
LAB = VethLab("p4lbc", ports=1, grpc_port=49559, thrift_port=49090)
SWITCH_MAC = "00:00:00:00:01:00"
CLIENT_MAC = "02:00:00:00:00:01"
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def _syn(sport: int) -> bytes:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    pkt = (
        Ether(src=CLIENT_MAC, dst=SWITCH_MAC)
        / IP(src="10.0.0.1", dst="10.0.0.100")
        / TCP(sport=sport, dport=80, flags="S")
    )
    return bytes(pkt)


def _backend_of(sock: socket.socket, sport: int, timeout_s: float = 2.0) -> tuple[str, float]:
    """The backend address the switch sent our SYN to, and when we saw it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            raw, addr = sock.recvfrom(2048)
        except TimeoutError:
            break
        if addr[2] == PACKET_OUTGOING or len(raw) < 38 or raw[12:14] != b"\x08\x00":
            continue
        ihl = (raw[14] & 0x0F) * 4
        if raw[23] == 6 and int.from_bytes(raw[14 + ihl : 16 + ihl], "big") == sport:
            return socket.inet_ntoa(raw[30:34]), time.monotonic()
    raise TimeoutError(f"SYN from port {sport} did not come out of the switch")


def weight_trials(cfg_path: Path, trials: int) -> tuple[list[float], int]:
    """Two backends of "web" at 1:1 alternate. Each trial finds the moment the next slot is
    b1's, drains b1 through the CLI, and sends a SYN the instant the CLI returns: it must go
    to b0 (an old schedule would send it to b1). Then b1 comes back for the next trial."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((LAB.host_if(1), 0))
    effects: list[float] = []
    ok = 0
    sport = 20000
    try:
        for _ in range(trials):
            for _ in range(4):  # bounded: at most two SYNs find b0, so b1's slot is next
                sport += 1
                sock.send(_syn(sport))
                if _backend_of(sock, sport)[0] == "10.0.0.2":
                    break
            if p4lb_main(["-c", str(cfg_path), "weight", "set", "web", "b1", "0"]) != 0:
                raise RuntimeError("p4lb weight set failed")
            returned = time.monotonic()
            sport += 1
            sock.send(_syn(sport))
            backend, seen = _backend_of(sock, sport)
            effects.append((seen - returned) * 1000)
            ok += backend == "10.0.0.2"
            if p4lb_main(["-c", str(cfg_path), "weight", "set", "web", "b1", "1"]) != 0:
                raise RuntimeError("p4lb weight set failed")
    finally:
        sock.close()
    return effects, ok
