"""End to end: the operator's leastconn restore scenario (issue 28) on real BMv2, Mininet
and real TCP connections. 20 long-lived connections open while h4 is drained (they split
10 and 10 over h2 and h3), h4 is back at weight 1, then 12 more are opened one by one.
Compared over every backend (choices = "all", the default), every new connection goes to
h4 until it holds as many as the others (10), and the last two go to whichever of the
then equally loaded backends the flow's hash names: no backend ends more than one
connection ahead. What the switch decided is read from `p4lb stats --json` (its count of
open connections per backend)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.lab import running_lab
from topology.net import RUN_DIR, VIP_ADDR, VIP_PORT, Lab, Options, p4lb_cmd

HOLD_MAX_S = 120.0  # a holder closes its connections by itself after this

# Opens `count` connections one after another (each handshake done before the next SYN),
# writes how many it holds, and keeps them open until the stop file exists (bounded).
HOLDER = """
import os, socket, sys, time
host, port, count, out, stop_file, max_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    sys.argv[4], sys.argv[5], float(sys.argv[6])
held = [socket.create_connection((host, port), timeout=5) for _ in range(count)]
with open(out + ".tmp", "w") as f:
    f.write(str(len(held)))
os.rename(out + ".tmp", out)
end = time.monotonic() + max_s
while time.monotonic() < end and not os.path.exists(stop_file):
    time.sleep(0.05)
for s in held:
    s.close()
"""


@pytest.fixture
def lab() -> Iterator[Lab]:
    with running_lab(Options(), threaded=True) as built:
        yield built


def p4lb(lab: Lab, *args: str) -> str:
    r = subprocess.run(p4lb_cmd(lab, *args), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def active(lab: Lab) -> dict[str, int]:
    doc = json.loads(p4lb(lab, "stats", "--json"))
    return {b["name"]: b["active"] for b in doc["vips"][0]["backends"]}


def counted(lab: Lab, total: int) -> dict[str, int] | None:
    """Open connections per backend once the switch counts `total` in all."""
    got = active(lab)
    return got if sum(got.values()) == total else None


def wait_until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` (bounded) until it returns something true; fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)
    return got


def hold(lab: Lab, count: int, name: str, stop_file: Path) -> Any:
    """A holder in h1 with `count` open connections to the VIP, once they are all open."""
    out = RUN_DIR / f"leastconn-{name}.count"
    out.unlink(missing_ok=True)
    proc = lab.clients[0].popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            VIP_ADDR,
            str(VIP_PORT),
            str(count),
            str(out),
            str(stop_file),
            str(HOLD_MAX_S),
        ]
    )
    wait_until(out.exists, 30, f"{count} connections open ({name})")
    assert out.read_text() == str(count)
    return proc


def test_restored_backend_takes_new_connections_until_the_counts_meet(lab: Lab) -> None:
    p4lb(lab, "algorithm", "set", "web", "leastconn")
    p4lb(lab, "weight", "set", "web", "h4", "0")
    stop_file = RUN_DIR / "leastconn.stop"
    stop_file.unlink(missing_ok=True)
    procs = []
    try:
        procs.append(hold(lab, 20, "first", stop_file))
        # Open means counted: the switch counts a connection at the client's first ACK.
        before = wait_until(lambda: counted(lab, 20), 15, "20 connections counted")
        assert before == {"h2": 10, "h3": 10, "h4": 0}, before
        p4lb(lab, "weight", "set", "web", "h4", "1")
        procs.append(hold(lab, 12, "second", stop_file))
        after = wait_until(lambda: counted(lab, 32), 15, "32 connections counted")
        new = {name: after[name] - before[name] for name in after}
        print(f"12 new connections went {new}")
        assert new["h4"] >= 10, new
        assert max(after.values()) - min(after.values()) <= 1, after
    finally:
        stop_file.touch()
        for proc in procs:
            proc.wait(30)
        stop_file.unlink(missing_ok=True)
