"""End to end: the operator's leastconn restore scenario (issue 28) on real BMv2, Mininet
and real TCP connections. 20 long-lived connections open while h4 is drained (they split
10 and 10 over h2 and h3), h4 is back at weight 1, then 12 more are opened one by one.
Compared over every backend (choices = "all", the default), every new connection goes to
h4 until it holds as many as the others (10), and the last two go to whichever of the
then equally loaded backends the flow's hash names: no backend ends more than one
connection ahead. What the switch decided is read from `p4lb stats --json` (its count of
open connections per backend).

Each connection opens once the switch counts the one before: it counts a connection at the
client's last handshake ACK in the egress, a thread of its own in BMv2, so a SYN right
behind that ACK can still compare the count without it (README, "Known limits"). A
full suite on this 2-core machine saw it: the 12th connection joined the 11th's backend
({h2: 12, h3: 10, h4: 10}); waiting for the count tests the choice, not the threads' race."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import running_lab
from tests.support import poll_until
from topology.net import RUN_DIR, VIP_ADDR, VIP_PORT, Lab, Options, p4lb_cmd

HOLD_MAX_S = 120.0  # a holder closes its connections by itself after this

# Opens `count` connections one after another: after each it writes how many it holds and
# waits for the go file of that number (the test's: the switch counted it) before the next;
# then keeps them open until the stop file exists. Every wait is bounded by max_s.
HOLDER = """
import os, socket, sys, time
host, port, count, out, stop_file, max_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    sys.argv[4], sys.argv[5], float(sys.argv[6])
end = time.monotonic() + max_s
held = []
for i in range(1, count + 1):
    held.append(socket.create_connection((host, port), timeout=5))
    with open(out + ".tmp", "w") as f:
        f.write(str(len(held)))
    os.rename(out + ".tmp", out)
    while i < count and not os.path.exists(f"{out}.go{i}") and time.monotonic() < end:
        time.sleep(0.01)
while time.monotonic() < end and not os.path.exists(stop_file):
    time.sleep(0.05)
for s in held:
    s.close()
"""


@pytest.fixture
def lab() -> Iterator[Lab]:
    # The servers keep idle connections while the holders do: each connection waits for
    # the switch to count the one before, longer in all than a server's default 5 s.
    with running_lab(Options(server_idle_timeout_s=HOLD_MAX_S), threaded=True) as built:
        yield built


def p4lb(lab: Lab, *args: str) -> str:
    r = subprocess.run(p4lb_cmd(lab, *args), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def active(lab: Lab) -> dict[str, int]:
    doc = json.loads(p4lb(lab, "stats", "--json"))
    return {b["name"]: b["active"] for b in doc["vips"][0]["backends"]}


def wait_counted(lab: Lab, total: int, what: str, timeout_s: float = 15.0) -> None:
    """Poll (bounded) until the switch counts `total` open connections in all; fail with
    its last count."""
    if not poll_until(lambda: sum(active(lab).values()) == total, timeout_s, every=0.1):
        got = active(lab)
        pytest.fail(f"{what}: the switch counts {got} after {timeout_s:g} s, not {total}")


def hold(lab: Lab, count: int, name: str, stop_file: Path, counted_before: int) -> Any:
    """A holder in h1 with `count` open connections to the VIP, each opened once the switch
    counted the one before (`counted_before` + those it opened)."""
    out = RUN_DIR / f"leastconn-{name}.count"
    for old in RUN_DIR.glob(f"leastconn-{name}.count*"):
        old.unlink()
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
    for i in range(1, count + 1):
        poll_until(
            lambda n=str(i): out.exists() and out.read_text() == n,
            30,
            f"connection {i} open ({name})",
            every=0.1,
        )
        wait_counted(lab, counted_before + i, f"connection {i} ({name})")
        (RUN_DIR / f"leastconn-{name}.count.go{i}").touch()
    return proc


def test_restored_backend_takes_new_connections_until_the_counts_meet(lab: Lab) -> None:
    p4lb(lab, "algorithm", "set", "web", "leastconn")
    p4lb(lab, "weight", "set", "web", "h4", "0")
    stop_file = RUN_DIR / "leastconn.stop"
    stop_file.unlink(missing_ok=True)
    procs = []
    try:
        procs.append(hold(lab, 20, "first", stop_file, 0))
        before = active(lab)
        assert before == {"h2": 10, "h3": 10, "h4": 0}, before
        p4lb(lab, "weight", "set", "web", "h4", "1")
        procs.append(hold(lab, 12, "second", stop_file, 20))
        after = active(lab)
        new = {name: after[name] - before[name] for name in after}
        print(f"12 new connections went {new}")
        assert new["h4"] >= 10, new
        assert max(after.values()) - min(after.values()) <= 1, after
    finally:
        stop_file.touch()
        for proc in procs:
            proc.wait(30)
        stop_file.unlink(missing_ok=True)
        for f in RUN_DIR.glob("leastconn-*.count*"):
            f.unlink()
