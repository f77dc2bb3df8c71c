"""`python -m bench.peers_ipv6 --breakdown ...`: bench.peers's instruction breakdown with the
balanced flows over IPv6 (an IPv6 VIP and backends, IPv6 clients, the same packets
otherwise), to set an IPv6 VIP's work per packet beside an IPv4 VIP's. Plain forwarding
(the baseline) stays IPv4. Arguments as bench.peers's."""

from __future__ import annotations

import sys
from typing import Any

from bench import lab, peers

VIP6 = "2001:db8::100"
CLIENTS6 = "2001:db8:1::"  # /64, one client address per connection, as IPv4's


def backend6(k: int) -> str:
    return f"2001:db8:2::{k + 1:x}"


def lb_config6(algorithm: str, shape: lab.Shape) -> str:
    """lab.lb_config's first TCP VIP, over IPv6."""
    lines = [
        "[switch]",
        f'address = "127.0.0.1:{lab.LAB.grpc_port}"',
        "device_id = 0",
        "election_id = 10",
        f'mac = "{lab.SWITCH_MAC}"',
        "",
        "[[host]]",
        'name = "clients"',
        f'address = "{CLIENTS6}"',
        "prefix_len = 64",
        f'mac = "{lab.port_mac(1)}"',
        "switch_port = 1",
        "",
        "[vip.v0tcp]",
        f'address = "{VIP6}"',
        'protocol = "tcp"',
        "port = 80",
        f'algorithm = "{algorithm}"',
        f'mac = "{lab.VIP_MAC}"',
    ]
    for k in range(shape.backends):
        sp = lab.backend_port_of(k)
        lines += ["", "[[vip.v0tcp.backend]]", f'name = "b{k}"', f'address = "{backend6(k)}"']
        lines += ["port = 8000", "weight = 1", f'mac = "{lab.port_mac(sp)}"', f"switch_port = {sp}"]
    return "\n".join(lines) + "\n"


IPV4_PATHS = peers.flow_paths


def flow_paths6(i: int, direct: bool) -> dict[str, list[bytes]]:
    """peers.flow_paths's packets over IPv6 (the baseline's, `direct`, stay IPv4)."""
    if direct:
        return IPV4_PATHS(i, direct)
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    _, sport = peers.traffic.client_of(i)
    client = f"{CLIENTS6}{1 + i % 10000:x}"
    up = Ether(src=lab.port_mac(1), dst=lab.VIP_MAC) / IPv6(src=client, dst=VIP6)
    down = Ether(src=lab.port_mac(2), dst=lab.SWITCH_MAC) / IPv6(src=backend6(0), dst=client)
    a, b, n = 1000, 5000, peers.DATA_BYTES
    data: list[Any] = [
        up / TCP(sport=sport, dport=80, flags="PA", seq=a + 1 + k * n, ack=b + 1) / Raw(b"d" * n)
        for k in range(peers.DATA_SEGMENTS)
    ]
    end = a + 1 + peers.DATA_SEGMENTS * n
    reply = down / TCP(sport=8000, dport=sport, flags="A", seq=b + 1, ack=end) / Raw(b"r" * n)
    return {
        "syn": [bytes(up / TCP(sport=sport, dport=80, flags="S", seq=a))],
        "data": [bytes(p) for p in data],
        "reply": [bytes(reply)],
        "fin": [bytes(up / TCP(sport=sport, dport=80, flags="FA", seq=end, ack=b + 1))],
    }


if __name__ == "__main__":
    lab.lb_config = lb_config6
    peers.flow_paths = flow_paths6
    sys.exit(peers.main(sys.argv[1:]))
