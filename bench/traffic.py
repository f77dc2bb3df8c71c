"""The switch benches' traffic, built with scapy: ten-packet TCP connections and UDP
request/response pairs from many clients, interleaved 50 at a time, written to pcap files."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bench.lab import SWITCH_MAC, VIP_MAC, Shape, backend_addr, backend_port_of, port_mac, vip_addr

FLOW_PACKETS = 10
# Paths measured by difference (--path-instructions): the mix, then the mix with PATH_EXTRA
# more copies of one step (flow_packets' order) of every TCP connection.
PATH_STEPS = {"established ACK": 6, "client data": 3, "reply": 4}
PATH_EXTRA = 5


def client_of(i: int) -> tuple[str, int]:
    """Many clients (250 x 40 addresses), many source ports each."""
    host = i % 10_000
    return f"10.1.{host // 250}.{1 + host % 250}", 1024 + (i * 7919) % 60_000


def is_udp(i: int, shape: Shape) -> bool:
    return bool(shape.udp_every) and i % shape.udp_every == shape.udp_every - 1


def flow_packets(i: int, shape: Shape, direct: bool) -> list[bytes]:
    """One connection's packets; `direct` addresses the server itself (the baseline)."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    udp = is_udp(i, shape)
    v = 0 if udp else i % shape.vips
    k = (i // shape.vips) % shape.backends
    client, sport = client_of(i)
    server = backend_addr(v, k, shape.backends)
    vport, bport = (53, 5353) if udp else (80, 8000)
    dst, dport = (server, bport) if direct else (vip_addr(v), vport)
    to_server = Ether(src=port_mac(1), dst=VIP_MAC) / IP(src=client, dst=dst)
    to_client = Ether(src=port_mac(backend_port_of(k)), dst=SWITCH_MAC) / IP(src=server, dst=client)
    if udp:
        req = to_server / UDP(sport=sport, dport=dport) / Raw(b"q" * 40)
        rsp = to_client / UDP(sport=bport, dport=sport) / Raw(b"r" * 120)
        return [bytes(p) for p in (req, rsp) * (FLOW_PACKETS // 2)]

    clock = [7_000_000, 9_000_000]  # client's, server's TSval

    def options(flags: str, mine: int) -> list[Any]:
        """Linux's layout (MSS, SACK-permitted, timestamp, NOP, window scale on a SYN; NOP NOP
        timestamp after); each side's clock ticks, the other's is echoed."""
        if not shape.timestamps:
            return []
        clock[mine] += 1
        ts = ("Timestamp", (clock[mine], clock[1 - mine] if flags != "S" else 0))
        if "S" in flags:
            return [("MSS", 1460), ("SAckOK", b""), ts, ("NOP", None), ("WScale", 7)]
        return [("NOP", None), ("NOP", None), ts]

    def c(flags: str, seq: int, ack: int, data: bytes = b"") -> Any:
        p = to_server / TCP(
            sport=sport, dport=dport, flags=flags, seq=seq, ack=ack, options=options(flags, 0)
        )
        return p / Raw(data) if data else p

    def s(flags: str, seq: int, ack: int, data: bytes = b"") -> Any:
        p = to_client / TCP(
            sport=bport, dport=sport, flags=flags, seq=seq, ack=ack, options=options(flags, 1)
        )
        return p / Raw(data) if data else p

    a, b = 1000, 5000
    pkts = [
        c("S", a, 0),
        s("SA", b, a + 1),
        c("A", a + 1, b + 1),
        c("PA", a + 1, b + 1, b"GET / HTTP/1.1\r\nHost: vip\r\n\r\n"),
        s("A", b + 1, a + 31, b"x" * 600),
        s("PA", b + 601, a + 31, b"y" * 400),
        c("A", a + 31, b + 1001),
        c("FA", a + 31, b + 1001),
        s("FA", b + 1001, a + 32),
        c("A", a + 32, b + 1002),
    ]
    return [bytes(p) for p in pkts]


def traffic(shape: Shape, direct: bool, repeat: int | None = None) -> list[bytes]:
    """All flows, interleaved 50 at a time; step `repeat` of every TCP connection sent
    PATH_EXTRA more times."""
    flows = [flow_packets(i, shape, direct) for i in range(shape.flows)]
    tcp = [not is_udp(i, shape) for i in range(shape.flows)]
    out: list[bytes] = []
    for g in range(0, len(flows), 50):
        group = flows[g : g + 50]
        for step in range(FLOW_PACKETS):
            for i, f in enumerate(group, start=g):
                out += [f[step]] * (1 + PATH_EXTRA * (step == repeat and tcp[i]))
    return out


def write_pcap(packets: list[bytes], path: Path) -> None:
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(str(path), [Ether(p) for p in packets])


def with_sport(frame: bytes, sport: int) -> bytes:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    p = Ether(frame)
    if p[TCP].dport in (80, 8000):
        p[TCP].sport = sport
    else:
        p[TCP].dport = sport
    del p[IP].chksum, p[TCP].chksum
    return bytes(p)


def path_packets(shape: Shape, direct: bool) -> list[tuple[str, bytes]]:
    """One TCP connection's packets named by the path each takes through the LB."""
    pk = flow_packets(0, shape, direct)
    steps = {"new": 0, "reply": 1, "handshake": 2, "established": 3, "fin": 7}
    return [(path, pk[i]) for path, i in steps.items()]


def pcap_for(shape: Shape, direct: bool, workdir: Path, repeat: int | None = None) -> Path:
    kind = "direct" if direct else "vip"
    more = "" if repeat is None else f"-x{repeat}"
    more += "-ts" if shape.timestamps else ""
    path = workdir / f"{kind}-{shape.vips}-{shape.backends}-{shape.flows}{more}.pcap"
    if not path.exists():
        write_pcap(traffic(shape, direct, repeat), path)
    return path


def syn_ack(client: str, sport: int, vip: str = "10.0.1.1") -> list[bytes]:
    """A connection's SYN, then the client's ACK (an open connection to port 80 of `vip`)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    base = Ether(src=port_mac(1), dst=VIP_MAC) / IP(src=client, dst=vip)
    return [
        bytes(base / TCP(sport=sport, dport=80, flags="S", seq=1)),
        bytes(base / TCP(sport=sport, dport=80, flags="A", seq=2, ack=1)),
    ]


def spoofed_syns(n: int, seed: int) -> list[bytes]:
    """`n` SYNs to 10.0.1.1:80 from random sources (never ACKed), drawn from `seed`."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ip = IP(src=f"10.1.{rng.randrange(2, 256)}.{rng.randrange(1, 255)}", dst="10.0.1.1")
        tcp = TCP(sport=rng.randrange(1024, 65536), dport=80, flags="S", seq=rng.randrange(2**32))
        out.append(bytes(Ether(src=port_mac(1), dst=VIP_MAC) / ip / tcp))
    return out


def preload_packets(n: int, shape: Shape) -> list[bytes]:
    """SYN then ACK of `n` connections that stay open, from client addresses and ports the
    measured traffic does not use."""
    out = []
    for i in range(n):
        client = f"10.1.{64 + (i // 250) % 190}.{1 + i % 250}"
        sport = 1024 + (i // 47_500) * 13 + (i % 64_000)
        out += syn_ack(client, sport, vip_addr(i % shape.vips))
    return out
