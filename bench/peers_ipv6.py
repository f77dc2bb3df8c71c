"""`python -m bench.peers_ipv6 --breakdown ...`: bench.peers's instruction breakdown with the
balanced flows over IPv6 (an IPv6 VIP and backends, IPv6 clients, the same packets
otherwise), to set an IPv6 VIP's work per packet beside an IPv4 VIP's. Plain forwarding
(the baseline) stays IPv4. Arguments as bench.peers's."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from bench import lab, peer_program, peers
from p4lb.intent import writer

VIP6 = "2001:db8::100"
CLIENTS6 = "2001:db8:1::"  # /64, one client address per connection, as IPv4's


def backend6(k: int) -> str:
    return f"2001:db8:2::{k + 1:x}"


def lb_config6(algorithm: str, shape: lab.Shape) -> str:
    """lab.lb_model's first TCP VIP, over IPv6."""
    cfg = lab.lb_model(algorithm, shape)
    tcp = cfg.vips[0]
    backends = tuple(replace(b, address=backend6(k)) for k, b in enumerate(tcp.backends))
    clients = replace(cfg.hosts[0], address=CLIENTS6, prefix_len=64)
    vip = replace(tcp, address=VIP6, backends=backends)
    return writer.dumps(replace(cfg, hosts=(clients,), vips=(vip,)))


def ends6(i: int, direct: bool) -> tuple[Any, Any, int]:
    """peer_program.ipv4_ends over IPv6 (the baseline's, `direct`, stay IPv4)."""
    if direct:
        return peer_program.ipv4_ends(i, direct)
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    client = f"{CLIENTS6}{1 + i % 10000:x}"
    up = Ether(src=lab.port_mac(1), dst=lab.VIP_MAC) / IPv6(src=client, dst=VIP6)
    down = Ether(src=lab.port_mac(2), dst=lab.SWITCH_MAC) / IPv6(src=backend6(0), dst=client)
    return up, down, 80


if __name__ == "__main__":
    lab.lb_config = lb_config6
    peer_program.ENDS = ends6
    sys.exit(peers.main(sys.argv[1:]))
