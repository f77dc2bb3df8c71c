"""End to end over IPv6: `make run`'s lab with its IPv6 VIP web6 ([fd00::100]:80, smooth
weighted round robin) beside the IPv4 VIP web, real TCP stacks on both sides. ab over
IPv6 loses nothing and spreads exactly, the switch counts the connections the servers
saw, both families run at once each through its own VIP, and connections held through
runtime changes (a weight, the algorithm and back) or through a flood of 64k SYNs from
spoofed IPv6 sources keep their backend."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent import reader
from p4lb.service import operations
from tests.e2e.support import running_lab
from tests.support import poll_until
from topology import ab
from topology.net import (
    ROOT,
    VIP6_ADDR,
    VIP6_MAC,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    access_log,
    mac,
    p4lb_cmd,
    wait_servers_idle,
)

URL = f"http://{VIP_ADDR}:{VIP_PORT}/"
URL6 = f"http://[{VIP6_ADDR}]:{VIP_PORT}/"
HELD = 30
READY_S = 60  # the holder's connections all answered once


@pytest.fixture
def lab() -> Iterator[Lab]:
    # Threaded keep-alive servers: a held connection must not hold up the others.
    with running_lab(Options(ipv6=True, keep_alive=True), threaded=True) as lab:
        yield lab


def connections_by_family(lab: Lab) -> dict[str, Counter[str]]:
    """Per server, the connections it accepted from IPv4 and from IPv6 clients (its access
    log's first column), once it has handled every one it was sent."""
    wait_servers_idle(lab)
    out: dict[str, Counter[str]] = {}
    for s in lab.servers:
        lines = access_log(s).read_text().splitlines()
        out[s.name] = Counter("ipv6" if ":" in ln.split()[0] else "ipv4" for ln in lines)
    return out


def switch_counts(lab: Lab) -> dict[str, dict[str, int]]:
    """Per VIP, the connections the switch counted for each backend."""
    cfg = reader.load(lab.config_path)
    with operations.connect(cfg) as sw:
        st = operations.read_stats(sw, cfg)
    return {v.name: {b.name: b.connections for b in v.backends} for v in st.vips}


SPOOFED = "fd00:1::/64"  # the flood's sources


def count_spoofed_syns(lab: Lab) -> None:
    """In each server's namespace, an nftables counter of the SYNs from SPOOFED it receives."""
    for s in lab.servers:
        out = s.cmd(
            "nft add table inet p4lbtest && nft add counter inet p4lbtest flood && "
            "nft add chain inet p4lbtest in '{ type filter hook prerouting priority 0; }' && "
            f"nft add rule inet p4lbtest in ip6 saddr {SPOOFED} tcp flags syn counter name flood"
            " 2>&1; echo rc=$?"
        )
        assert out.strip().endswith("rc=0"), out


def spoofed_syns_received(lab: Lab) -> int:
    total = 0
    for s in lab.servers:
        out = s.cmd("nft list counter inet p4lbtest flood")
        m = re.search(r"packets (\d+)", out)
        assert m, out
        total += int(m.group(1))
    return total


def cli(lab: Lab, *args: str) -> None:
    subprocess.run(p4lb_cmd(lab, *args), check=True, capture_output=True, timeout=90)


def test_ab_over_ipv6_loses_nothing_and_spreads_fairly(lab: Lab) -> None:
    n = 3000
    r = ab.run(lab.clients[0], URL6, n, 10)
    assert (r.complete, r.failed, r.non_2xx) == (n, 0, 0)
    seen = connections_by_family(lab)
    assert all(c["ipv4"] == 0 for c in seen.values()), seen
    per_server = {name: c["ipv6"] for name, c in seen.items()}
    # Round robin over connections: exact, within one connection of each other.
    assert max(per_server.values()) - min(per_server.values()) <= 1, per_server
    counts = switch_counts(lab)
    assert counts["web6"] == per_server
    assert set(counts["web"].values()) == {0}


def test_both_families_at_once_each_through_its_vip(lab: Lab) -> None:
    n = 1500
    # One ab in the client's shell, the other beside it in the same namespace.
    beside = lab.clients[0].popen(ab.command(URL, n, 5), stdout=subprocess.PIPE, text=True)
    r6 = ab.run(lab.clients[0], URL6, n, 5)
    out, _ = beside.communicate(timeout=300)
    r4 = ab.parse(out)
    assert [(r.complete, r.failed) for r in (r4, r6)] == [(n, 0), (n, 0)]
    seen = connections_by_family(lab)
    counts = switch_counts(lab)
    assert counts["web"] == {name: c["ipv4"] for name, c in seen.items()}
    assert counts["web6"] == {name: c["ipv6"] for name, c in seen.items()}


@contextmanager
def holding(lab: Lab, work: Path) -> Iterator[list[dict[str, Any]]]:
    """HELD keep-alive connections to web6 from the client (topology.holder), each asking
    every 0.2 s, open before the body runs; the list is filled with their records after."""
    ready, stop, out = work / "ready", work / "stop", work / "held.json"
    holder = lab.clients[0].popen(
        [sys.executable, "-m", "topology.holder", "--vip", VIP6_ADDR, "--ports", str(VIP_PORT)]
        + ["--connections", str(HELD), "--duration", "240"]
        + ["--stop-file", str(stop), "--ready-file", str(ready), "--out", str(out)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    held: list[dict[str, Any]] = []
    try:
        poll_until(lambda: ready.exists() or holder.poll() is not None, READY_S, every=0.1)
        assert ready.exists(), "the holder did not open its connections"
        yield held
    finally:
        stop.touch()
        holder.wait(60)
    held += json.loads(out.read_text())["connections"]


def assert_all_held(held: list[dict[str, Any]]) -> None:
    assert len(held) == HELD
    assert {c["backend"] for c in held} <= {"h2", "h3", "h4"}
    assert [
        (c["backend"], c["broken"], c["moved"]) for c in held if c["broken"] or c["moved"]
    ] == []
    assert all(c["requests"] >= 5 for c in held)  # they were asking throughout


def test_connections_held_over_ipv6_keep_their_backend_through_changes(
    lab: Lab, tmp_path: Path
) -> None:
    with holding(lab, tmp_path) as held:
        # Each change rewrites web6's lookup table; a new connection after each follows it.
        for change in (
            ("weight", "set", "web6", "h2", "3"),
            ("algorithm", "set", "web6", "maglev"),
            ("algorithm", "set", "web6", "wrr"),
        ):
            cli(lab, *change)
            r = ab.run(lab.clients[0], URL6, 300, 5)
            assert (r.complete, r.failed) == (300, 0), change
    assert_all_held(held)


FLOOD = 65536
# What BMv2 takes on a busy 2-core machine; faster, its input queue drops much of the flood.
FLOOD_PPS = 2500


def settled(read: Callable[[], int], quiet_s: float = 1.0, timeout_s: float = 60.0) -> int:
    """`read()` once it has not changed for `quiet_s` (bounded by `timeout_s`)."""
    last = [read(), time.monotonic()]

    def quiet() -> bool:
        now = read()
        if now != last[0]:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] >= quiet_s

    poll_until(quiet, timeout_s, every=0.1)
    return int(last[0])


def spoofed_syns(n: int) -> list[Any]:
    """`n` SYNs to web6 from random addresses of fd00:1::/64 (never answered: no route
    leads back to them), as fast as tcpreplay sends them."""
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    rng = random.Random(FLOOD)
    base = Ether(src=mac(1), dst=VIP6_MAC)
    return [
        base
        / IPv6(src=f"fd00:1::{rng.randrange(1, 2**16):x}:{rng.randrange(2**16):x}", dst=VIP6_ADDR)
        / TCP(sport=rng.randrange(1024, 65536), dport=VIP_PORT, flags="S", seq=rng.randrange(2**32))
        for _ in range(n)
    ]


@pytest.mark.skipif(
    shutil.which("tcpreplay") is None or shutil.which("nft") is None,
    reason="e2e layer: missing tcpreplay or nft",
)
def test_a_64k_syn_flood_over_ipv6_breaks_no_established_connection(
    lab: Lab, tmp_path: Path
) -> None:
    from scapy.utils import wrpcap

    pcap = tmp_path / "flood.pcap"
    wrpcap(str(pcap), spoofed_syns(FLOOD))
    count_spoofed_syns(lab)
    with holding(lab, tmp_path) as held:
        client = lab.clients[0]
        out = client.cmd(
            f"tcpreplay -q --preload-pcap --pps {FLOOD_PPS} -i {client.defaultIntf()} {pcap}"
        )
        assert f"Actual: {FLOOD} packets" in out, out
        # The flood went through the switch's connection state to the servers: the switch
        # balanced its SYNs (nearly all of them on an idle machine; on a busy one BMv2's
        # input queue drops a part, as a switch's does beyond what it can take).
        reached = settled(lambda: spoofed_syns_received(lab))
        print(f"flood: {reached} of {FLOOD} SYNs reached the servers")
        assert reached >= FLOOD // 2
        r = ab.run(lab.clients[0], URL6, 300, 5)  # new connections after it
        assert (r.complete, r.failed) == (300, 0)
    assert_all_held(held)
