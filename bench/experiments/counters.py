"""What a run counts, read before and after it: the hosts' TCP counters, the packets the
switch's ports received, the servers' access logs, and the switch's own counters."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from p4lb.intent import reader
from p4lb.service import operations
from topology.net import Lab, access_log


def tcp_counters(host: Any) -> dict[str, int]:
    """The host namespace's TCP counters (RetransSegs, OutSegs, PassiveOpens, ...)."""
    lines = [
        ln.split() for ln in host.cmd("cat /proc/net/snmp").splitlines() if ln.startswith("Tcp:")
    ]
    return dict(zip(lines[0][1:], map(int, lines[1][1:]), strict=False)) if len(lines) > 1 else {}


def switch_packets(lab: Lab) -> int:
    """Packets the switch received on all its ports (the veths' counters, root namespace)."""
    names = [i.name for i in lab.net.switches[0].intfList() if i.name != "lo"]
    counts = [Path(f"/sys/class/net/{n}/statistics/rx_packets") for n in names]
    return sum(int(p.read_text()) for p in counts if p.exists())


def line_count(log: Path) -> int:
    """Lines in an access log so far (where log_tail starts)."""
    with open(log) as f:
        return sum(1 for _ in f)


def log_lines(lab: Lab) -> dict[str, int]:
    """line_count of each server's access log."""
    return {s.name: line_count(access_log(s)) for s in lab.servers}


def log_tail(log: Path, start: int) -> list[list[str]]:
    """An access log's entries (fields, the last the status) after its first `start` lines,
    one a connection the server accepted; blank lines left out."""
    with open(log) as f:
        return [ln.split() for ln in f.readlines()[start:] if ln.strip()]


def requests(entries: list[list[str]]) -> int:
    """Requests served (status 200) among log_tail's entries."""
    return sum(1 for x in entries if x[-1] == "200")


def log_since(
    lab: Lab, start: dict[str, int]
) -> tuple[dict[str, int], dict[str, int], dict[str, dict[str, int]]]:
    """Since `start` (line counts): requests served per server, connections accepted per
    server, and requests per (source address, server)."""
    served: dict[str, int] = {}
    conns: dict[str, int] = {}
    by_source: dict[str, Counter[str]] = {}
    for s in lab.servers:
        lines = log_tail(access_log(s), start[s.name])
        conns[s.name], served[s.name] = len(lines), requests(lines)
        for x in lines:
            if x[-1] == "200":
                by_source.setdefault(x[0], Counter())[s.name] += 1
    return served, conns, {a: dict(c) for a, c in sorted(by_source.items())}


def switch_view(lab: Lab) -> tuple[dict[str, int], dict[str, int]]:
    """(new connections per backend, drops per reason) from the switch's counters, as a reader."""
    cfg = reader.load(lab.config_path)
    with operations.connect_reader(cfg) as sw:
        st = operations.read_stats(sw, cfg)
    conns = {b.name: b.connections for b in st.vips[0].backends}
    drops = Counter(st.drops)
    for v in st.vips:
        drops.update(v.drops)
    return conns, dict(drops)


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """Each counter of `after` less its value in `before` (0 when it was not there)."""
    return {k: v - before.get(k, 0) for k, v in after.items()}


def busiest() -> list[str]:
    """The processes using most CPU right now (what else runs on the machine)."""
    r = subprocess.run(
        ["ps", "-eo", "pcpu,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=10
    )
    return [" ".join(x.split())[:120] for x in r.stdout.splitlines()[1:9]]
