"""bench-peers' programs and traffic (bench.peers): the peer (a course's L4 balancer, compiled
at run time from PEER_P4, and its log-free variant) with its table entries, and the
client-direction TCP connections every program gets, by path."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from bench import floor_program, lab, traffic
from bench.toolchain import compile_p4

DATA_SEGMENTS = 8
DATA_BYTES = 100
PEER_BACKEND_PORTS = (2, 3, 4, 5)  # the peer forwards to its backend id as a port
# How the peer's authors compile it (p4-utils: p4c, BMv2 back end, v1model).
PEER_P4C_FLAGS = ["--arch", "v1model", "--std", "p4-16"]
# A log_msg statement: its arguments hold strings and braces, never a semicolon.
LOG_MSG = re.compile(r"\blog_msg\s*\((?:\"[^\"]*\"|[^;\"])*?\)\s*;")
PATHS = ("syn", "data", "reply", "fin")


def strip_logs(source: str) -> str:
    """The source without its log_msg statements (each becomes an empty statement)."""
    return LOG_MSG.sub(";", source)


def compile_peer(source: Path, workdir: Path, log_free: bool) -> Path:
    name = "peer-log-free" if log_free else "peer"
    src = workdir / f"{name}.p4"
    text = source.read_text()
    src.write_text(strip_logs(text) if log_free else text)
    return compile_p4(src, workdir / f"{name}.json", PEER_P4C_FLAGS, str(source))


def program_peer(shape: lab.Shape) -> None:
    """The peer's tables as its control plane writes them, for this bench's addresses:
    the VIP's TCP port, its four backends (by id = port) and their replies back to it."""
    vip = lab.vip_addr(0)
    cmds = [f"table_add MyIngress.virtual_ip MyIngress.is_virtual_ip {vip} 80 => 1"]
    cmds += [
        f"table_add MyIngress.vip_to_backend MyIngress.update_backend_info {p} => "
        f"{lab.backend_addr(0, p - 2, len(PEER_BACKEND_PORTS))} 8000 {lab.port_mac(p)}"
        for p in PEER_BACKEND_PORTS
    ]
    cmds.append(
        "table_add MyIngress.backend_to_vip MyIngress.backend_to_vip_conversion "
        f"10.2.0.0/16 => {vip} 80 {lab.VIP_MAC}"
    )
    lab.thrift_cli(cmds)


def ipv4_ends(i: int, direct: bool) -> tuple[Any, Any, int]:
    """Connection i's headers up to IP toward the switch and back from the backend, and the
    port it goes to; `direct` addresses the server (the baseline). The reply comes from the
    first backend (whichever one served the connection: the reverse NAT of every program
    here matches the backend, not the connection)."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    client, _ = traffic.client_of(i)
    server = lab.backend_addr(0, i % 3, 3)
    dst, dport = (server, 8000) if direct else (lab.vip_addr(0), 80)
    up = Ether(src=lab.port_mac(1), dst=lab.VIP_MAC) / IP(src=client, dst=dst)
    back = IP(src=lab.backend_addr(0, 0, 3), dst=client)
    return up, Ether(src=lab.port_mac(2), dst=lab.SWITCH_MAC) / back, dport


ENDS = ipv4_ends  # bench.peers_ipv6 puts IPv6's here


def flow_paths(i: int, direct: bool) -> dict[str, list[bytes]]:
    """Connection i's packets by path (its ends from ENDS)."""
    from scapy.layers.inet import TCP
    from scapy.packet import Raw

    _, sport = traffic.client_of(i)
    up, down, dport = ENDS(i, direct)
    a, b = 1000, 5000
    data = [
        up
        / TCP(sport=sport, dport=dport, flags="PA", seq=a + 1 + k * DATA_BYTES, ack=b + 1)
        / Raw(b"d" * DATA_BYTES)
        for k in range(DATA_SEGMENTS)
    ]
    end = a + 1 + DATA_SEGMENTS * DATA_BYTES
    reply = (
        down / TCP(sport=8000, dport=sport, flags="A", seq=b + 1, ack=end) / Raw(b"r" * DATA_BYTES)
    )
    return {
        "syn": [bytes(up / TCP(sport=sport, dport=dport, flags="S", seq=a))],
        "data": [bytes(p) for p in data],
        "reply": [bytes(reply)],
        "fin": [bytes(up / TCP(sport=sport, dport=dport, flags="FA", seq=end, ack=b + 1))],
    }


def interleaved(flows: list[list[bytes]]) -> list[bytes]:
    """Step k of 50 connections, then step k + 1 (as bench.traffic.traffic)."""
    out: list[bytes] = []
    for g in range(0, len(flows), 50):
        group = flows[g : g + 50]
        for step in range(len(group[0])):
            out += [f[step] for f in group]
    return out


def client_traffic(flows: int, direct: bool) -> list[bytes]:
    per_flow = [flow_paths(i, direct) for i in range(flows)]
    return interleaved([p["syn"] + p["data"] + p["fin"] for p in per_flow])


def pcap(workdir: Path, name: str, packets: list[bytes]) -> Path:
    path = workdir / f"{name}.pcap"
    if not path.exists():
        traffic.write_pcap(packets, path)
    return path


def programs(args: argparse.Namespace, workdir: Path, shape: lab.Shape) -> list[lab.Program]:
    out = [lab.Program("baseline", shape)]
    if args.floor:
        json_path = floor_program.compile_floor(floor_program.LEVELS["floor-state"], workdir)
        out.append(lab.Program("floor-state", shape, json_path, floor_program.program_floor))
    if args.peer:
        out.append(
            lab.Program("peer", shape, compile_peer(args.peer, workdir, False), program_peer)
        )
        peer_lf = compile_peer(args.peer, workdir, True)
        out.append(lab.Program("peer-log-free", shape, peer_lf, program_peer))
    out += [lab.Program(a, shape) for a in args.algorithms]
    return out


def program_names(args: argparse.Namespace) -> list[str]:
    peer = ["peer", "peer-log-free"] if args.peer else []
    return ["baseline", *(["floor-state"] if args.floor else []), *peer, *args.algorithms]
