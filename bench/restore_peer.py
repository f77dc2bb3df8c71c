"""`make bench-restore-peer`: the operator's leastconn restore scenario on
HAProxy, the public balancer whose `leastconn` operators know, beside what p4lb's exact
mode does in the same scenario (tests/e2e/test_leastconn.py).

In a network namespace of its own (loopback only): three TCP servers that hold every
connection, HAProxy (Debian's) in TCP mode with `balance leastconn` over them at weight 1,
its admin socket owner-only. s3 goes to weight 0 (no new connections); 20 connections are
opened one after another and held; s3 back at weight 1; 12 more opened one after another.
HAProxy's current sessions per server (`show stat`, scur) are read after each step. Each
repetition starts a fresh HAProxy. Writes results/algorithms/restore.json (the runner's
layout: every repetition's sessions under `builds`).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE
from typing import Any

from bench import provenance, runner
from topology.procs import poll_until

NETNS = "p4lb-restore"
PORTS = {"s1": 9001, "s2": 9002, "s3": 9003}
FRONT = 9000

# Held connections, in the namespace: with N 0 a server on PORT (the kernel completes the
# handshakes, backlog 256), else N connections to PORT opened one after another, each after
# the last's handshake. It says "ok" once ready and holds everything for a minute.
HOLD = """import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
if n == 0: s = socket.create_server(("127.0.0.1", port), backlog=256)
held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
print("ok", flush=True)
time.sleep(60)
"""

CONFIG = """
global
    stats socket {sock} mode 600 level admin
    maxconn 1000
defaults
    mode tcp
    timeout connect 5s
    timeout client 120s
    timeout server 120s
frontend f
    bind 127.0.0.1:{front}
    default_backend b
backend b
    balance leastconn
{servers}
"""


def ns(*cmd: str) -> list[str]:
    return ["ip", "netns", "exec", NETNS, *cmd]


def admin(sock: Path, command: str) -> str:
    """One command to HAProxy's admin socket (inside the namespace: the socket is a file)."""
    with socket.socket(socket.AF_UNIX) as s, s.makefile("r") as answer:
        s.settimeout(5)
        s.connect(str(sock))
        s.sendall(command.encode() + b"\n")
        return answer.read()  # HAProxy closes the connection once it has answered


def sessions(sock: Path) -> dict[str, int]:
    text = admin(sock, "show stat").lstrip("# ")
    rows = csv.DictReader(io.StringIO(text))
    return {r["svname"]: int(r["scur"]) for r in rows if r["svname"] in PORTS}


def wait_sessions(sock: Path, total: int, timeout_s: float = 10) -> dict[str, int]:
    """The sessions per server once they are `total`."""
    if not poll_until(lambda: sum(sessions(sock).values()) == total, timeout_s, every=0.05):
        raise RuntimeError(f"HAProxy holds {sessions(sock)}, not {total} sessions")
    return sessions(sock)


def hold(port: int, n: int) -> subprocess.Popen[str]:
    p = subprocess.Popen(ns(sys.executable, "-c", HOLD, str(port), str(n)), stdout=PIPE, text=True)
    if p.stdout is None or p.stdout.readline().strip() != "ok":
        raise RuntimeError(f"could not hold {n or 'a server'} on port {port}")
    return p


def one_run(t: runner.Trial, variant: str) -> dict[str, Any]:
    """One scenario on a fresh HAProxy, in a scratch directory of its own (owner-only)."""
    workdir = Path(tempfile.mkdtemp(dir=t.workdir))
    sock = workdir / "admin.sock"
    servers = "\n".join(f"    server {n} 127.0.0.1:{p} weight 1" for n, p in PORTS.items())
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(CONFIG.format(sock=sock, front=FRONT, servers=servers))
    procs = [hold(p, 0) for p in PORTS.values()]
    hap = subprocess.Popen(ns(t.binary, "-db", "-f", str(cfg)), text=True)
    try:
        poll_until(lambda: sock.exists() or hap.poll() is not None, 10, every=0.05)
        if not sock.exists():
            raise RuntimeError("HAProxy did not start")
        admin(sock, "set server b/s3 weight 0")
        procs.append(hold(FRONT, 20))
        before = wait_sessions(sock, 20)
        admin(sock, "set server b/s3 weight 1")
        procs.append(hold(FRONT, 12))
        after = wait_sessions(sock, 32)
        new = {n: after[n] - before[n] for n in after}
        runner.progress(f"12 new connections went {new}")
        return {"before": before, "after": after, "new": new}
    finally:
        for p in [hap, *procs]:
            p.terminate()
        for p in [hap, *procs]:
            p.wait(10)


@contextlib.contextmanager
def namespace(args: argparse.Namespace) -> Iterator[str]:
    """The namespace every repetition runs in: loopback only."""
    subprocess.run(["ip", "netns", "add", NETNS], check=True)
    try:
        subprocess.run(ns("ip", "link", "set", "lo", "up"), check=True)
        yield NETNS
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], check=False)


SPEC = runner.Spec(
    prog="bench-restore-peer",
    doc=__doc__ or "",
    subdir="algorithms",
    filename="restore.json",
    reps=5,
    tools=("haproxy",),
    options=lambda ap: None,
    committed=(),
    variants=lambda args: ["restore"],
    measure=one_run,
    figures=lambda args, values: {"runs": values["restore"]},
    head=lambda args: {"haproxy": provenance.version_line(["haproxy", "-v"]) or "?"},
    lab=namespace,
    subject=lambda: {"haproxy": str(shutil.which("haproxy"))},
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
