"""End to end under direct server return: `make run MODE=dsr`'s lab (the return path b1
beside the switch), BMv2, the controller's runtime commands, HTTP servers holding the VIP
on their loopback, and ab."""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from p4lb.intent import reader
from p4lb.service import operations
from p4lb.stats.counters import Stats
from tests.e2e.support import running_lab
from topology import ab
from topology.net import (
    RUN_DIR,
    VIP6_ADDR,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    p4lb_cmd,
    wait_servers_idle,
)

URL = f"http://{VIP_ADDR}:{VIP_PORT}/"
URL6 = f"http://[{VIP6_ADDR}]:{VIP_PORT}/"


@pytest.fixture
def lab() -> Iterator[Lab]:
    with running_lab(Options(mode="dsr"), threaded=False) as lab:
        yield lab


@pytest.fixture
def lab6() -> Iterator[Lab]:
    """`make run MODE=dsr`'s lab: the IPv6 VIP web6 in dsr mode beside web."""
    with running_lab(Options(mode="dsr", ipv6=True), threaded=False) as lab:
        yield lab


def stats(lab: Lab) -> Stats:
    cfg = reader.load(lab.config_path)
    with operations.connect(cfg) as sw:
        return operations.read_stats(sw, cfg)


def served_so_far(lab: Lab, connections: bool = False) -> dict[str, int]:
    """Requests each server answered so far, or (connections=True) connections it accepted."""
    return ab.access_counts(
        {s.name: str(RUN_DIR / "access" / f"{s.name}.log") for s in lab.servers}, connections
    )


def served(lab: Lab, connections: bool = False) -> dict[str, int]:
    """Like served_so_far(), once every connection a server was sent is handled."""
    wait_servers_idle(lab)
    return served_so_far(lab, connections)


def cli(lab: Lab, *args: str) -> str:
    return subprocess.run(
        p4lb_cmd(lab, *args), check=True, capture_output=True, text=True, timeout=90
    ).stdout


def count_replies(host: Any) -> None:
    """An nftables counter per interface of the host: the VIP's TCP replies it receives."""
    out = host.cmd(
        "nft add table inet p4lbtest && "
        "nft add chain inet p4lbtest in '{ type filter hook prerouting priority 0; }' && "
        + " && ".join(
            f"nft add counter inet p4lbtest {i} && "
            f"nft add rule inet p4lbtest in iifname {host.name}-{i} tcp sport {VIP_PORT} "
            f"counter name {i}"
            for i in ("eth0", "eth1")
        )
        + " 2>&1; echo rc=$?"
    )
    assert out.strip().endswith("rc=0"), out


def replies(host: Any, intf: str) -> int:
    """The VIP's TCP replies the host received on `intf` (count_replies)."""
    m = re.search(r"packets (\d+)", host.cmd(f"nft list counter inet p4lbtest {intf}"))
    assert m, intf
    return int(m.group(1))


def test_curl_and_ab_through_a_dsr_vip_replies_beside_the_switch(lab: Lab) -> None:
    client = lab.clients[0]
    body = client.cmd(f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' {URL}")
    assert body.strip() == "200"
    n = 600
    count_replies(client)
    r = ab.run(client, URL, n, 10)
    assert (r.complete, r.failed, r.non_2xx) == (n, 0, 0)
    # Every response (a SYN-ACK, data, a FIN at least) reached the client over b1, none
    # by the switch's port.
    assert replies(client, "eth0") == 0 and replies(client, "eth1") >= 3 * n
    counts = served(lab)
    assert sum(counts.values()) == n + 1, counts
    # Round robin spreads connections, and ab opens a few at its end that never send a
    # request: over connections the cycle is exact, over requests within those few.
    conns = served(lab, connections=True)
    assert max(conns.values()) - min(conns.values()) <= 1, conns
    unused = sum(conns.values()) - (n + 1)
    assert all(abs(c - (n + 1) / 3) <= 1 + unused for c in counts.values()), (counts, conns)
    web = stats(lab).vip("web")
    # The switch counted the very connections the servers accepted, and no reply.
    assert {b.name: b.connections for b in web.backends} == conns, web
    assert all(b.packets > 0 for b in web.backends), web
    assert sum(b.reply_packets for b in web.backends) == 0, web
    assert web.jain >= 0.9999


def test_curl_and_ab_through_an_ipv6_dsr_vip_reply_beside_the_switch(lab6: Lab) -> None:
    client = lab6.clients[0]
    body = client.cmd(f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' {URL6}")
    assert body.strip() == "200"
    n = 600
    count_replies(client)
    r = ab.run(client, URL6, n, 10)
    assert (r.complete, r.failed, r.non_2xx) == (n, 0, 0)
    # The servers answered from the IPv6 VIP over b1, none by the switch's port.
    assert replies(client, "eth0") == 0 and replies(client, "eth1") >= 3 * n
    web6 = stats(lab6).vip("web6")
    assert sum(b.connections for b in web6.backends) >= n
    assert all(b.packets > 0 for b in web6.backends), web6
    assert sum(b.reply_packets for b in web6.backends) == 0, web6
    assert web6.jain >= 0.9999  # round robin: exact


def test_weights_and_affinity_through_a_change_under_dsr(lab: Lab) -> None:
    client = lab.clients[0]
    cli(lab, "weight", "set", "web", "h2", "3")
    before = served(lab)
    n = 500
    r = ab.run(client, URL, n, 1)
    assert (r.complete, r.failed) == (n, 0)
    after = served(lab)
    got = {k: after[k] - before[k] for k in after}
    assert got == {"h2": 300, "h3": 100, "h4": 100}, got
    # Connections open through a weight change and a drain, mid-run: none breaks.
    n = 12000
    result: list[ab.AbResult] = []
    runner = threading.Thread(target=lambda: result.append(ab.run(client, URL, n, 10)))
    runner.start()
    for _ in range(600):  # bounded: until the servers have seen a tenth of it
        if sum(served_so_far(lab).values()) - sum(after.values()) >= n // 10:
            break
        runner.join(0.05)
    cli(lab, "weight", "set", "web", "h2", "1")
    cli(lab, "backend", "drain", "web", "h3")
    assert runner.is_alive() and not result, "the changes did not land mid-run"
    runner.join(300)
    assert result, "ab did not finish"
    assert (result[0].complete, result[0].failed, result[0].non_2xx) == (n, 0, 0)


def test_drain_wait_under_dsr_sees_the_clients_close(lab: Lab) -> None:
    """The backend's FIN never crosses the switch: its connections end on the client's FIN
    (or the idle timeout), and drain --wait returns once they have."""
    client = lab.clients[0]
    r = ab.run(client, URL, 300, 10)
    assert r.failed == 0
    out = cli(lab, "backend", "drain", "web", "h3", "--wait", "--timeout", "60")
    assert "drained (0 active connections)" in out, out
    assert next(b for b in stats(lab).vip("web").backends if b.name == "h3").active == 0
