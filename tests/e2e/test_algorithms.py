"""End to end: real TCP connections through BMv2 stay up while `p4lb algorithm set` walks
the VIP through every algorithm the program has, and each algorithm serves new ones.

Mininet hosts, BMv2, the controller's CLI (a process per change, as users run it), HTTP
backends, and a client in h1 whose connections each stay open ~1.5 s: it sends its request
headers a line at a time, so every algorithm change lands while several connections are
mid-request. A connection the switch sent elsewhere, or dropped, ends in an RST, a timeout
or a wrong answer: any of them fails the test."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4lb.pipeline.p4info import schema
from tests.e2e.support import running_lab
from tests.support import poll_until
from topology.net import (
    RUN_DIR,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    p4lb_cmd,
)

CLIENT_MAX_S = 180.0  # the client stops by itself after this, whatever happens to the test
PARALLEL = 6

# PARALLEL threads, each opening one connection after another until the stop file exists:
# request line, 15 header lines 0.1 s apart, then the answer. One JSON line per connection.
CLIENT = """
import json, os, socket, sys, threading, time
host, port, out, stop_file, max_s, parallel = sys.argv[1], int(sys.argv[2]), sys.argv[3], \\
    sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
end = time.monotonic() + max_s
lock = threading.Lock()
f = open(out, "w", buffering=1)

def one():
    start = time.time()
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.settimeout(5)
            s.sendall(b"GET / HTTP/1.0\\r\\n")
            for i in range(15):
                time.sleep(0.1)
                s.sendall(b"X-Trickle: %d\\r\\n" % i)
            s.sendall(b"\\r\\n")
            data = b""
            while len(data) < 1 << 20:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        ok, why = data.startswith(b"HTTP/1.0 200") and b"\\r\\n\\r\\n" in data, data[:40].decode()
    except Exception as e:
        ok, why = False, f"{type(e).__name__}: {e}"
    with lock:
        f.write(json.dumps({"start": start, "end": time.time(), "ok": ok, "why": why}) + "\\n")

def loop():
    while time.monotonic() < end and not os.path.exists(stop_file):
        one()

threads = [threading.Thread(target=loop) for _ in range(parallel)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def connections(path: Path) -> list[dict[str, object]]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def wait_for(path: Path, n: int, timeout_s: float) -> None:
    """Poll (bounded) until `n` connections have finished."""
    poll_until(lambda: len(connections(path)) >= n, timeout_s, f"{n} connections", every=0.05)


@pytest.fixture
def lab() -> Iterator[Lab]:
    with running_lab(Options(), threaded=True) as built:
        yield built


def test_changing_algorithm_during_traffic_breaks_no_connection(lab: Lab) -> None:
    names = sorted(schema().algorithms())
    walk = [*names, names[0]]  # wrr is the start; every algorithm once, then back
    out, stop_file = RUN_DIR / "algorithms-client.jsonl", RUN_DIR / "algorithms-client.stop"
    stop_file.unlink(missing_ok=True)
    out.unlink(missing_ok=True)  # a previous run's file would look like progress
    proc = lab.clients[0].popen(
        [
            sys.executable,
            "-c",
            CLIENT,
            VIP_ADDR,
            str(VIP_PORT),
            str(out),
            str(stop_file),
            str(CLIENT_MAX_S),
            str(PARALLEL),
        ]
    )
    changes: list[tuple[str, float]] = []
    try:
        wait_for(out, PARALLEL, 30)
        for algorithm in walk:
            done = len(connections(out))
            subprocess.run(
                p4lb_cmd(lab, "algorithm", "set", "web", algorithm),
                check=True,
                capture_output=True,
                timeout=60,
            )
            changes.append((algorithm, time.time()))
            wait_for(out, done + PARALLEL, 30)  # a round of connections under this one
    finally:
        stop_file.touch()
        proc.wait(30)
        stop_file.unlink(missing_ok=True)

    conns = connections(out)
    failed = [c for c in conns if not c["ok"]]
    assert failed == [], failed[:5]
    # Connections were open across every change (else this proves nothing).
    for algorithm, at in changes:
        spanning = [c for c in conns if float(c["start"]) < at < float(c["end"])]  # type: ignore[arg-type]
        assert len(spanning) >= 2, f"no connection open while switching to {algorithm}"
    assert len(conns) >= PARALLEL * (len(walk) + 1)
