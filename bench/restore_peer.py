"""`make bench-restore-peer`: the operator's leastconn restore scenario on
HAProxy, the public balancer whose `leastconn` operators know, beside what p4lb's exact
mode does in the same scenario (tests/e2e/test_leastconn.py).

In a network namespace of its own (loopback only): three TCP servers that hold every
connection, HAProxy (Debian's) in TCP mode with `balance leastconn` over them at weight 1,
its admin socket owner-only. s3 goes to weight 0 (no new connections); 20 connections are
opened one after another and held; s3 back at weight 1; 12 more opened one after another.
HAProxy's current sessions per server (`show stat`, scur) are read after each step. Each
repetition starts a fresh HAProxy. Writes results/algorithms/restore.json.
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import outdir, provenance, runner
from topology.procs import poll_until

NETNS = "p4lb-restore"
PORTS = {"s1": 9001, "s2": 9002, "s3": 9003}
FRONT = 9000

# A server that holds every connection: the kernel completes the handshakes (backlog 256)
# and nothing is read or closed until it exits.
SERVER = """import socket, sys, time
s = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=256)
time.sleep(float(sys.argv[2]))
"""

# Opens `count` connections to the front one after another, each after the last's
# handshake, writes "ok", then holds them (bounded).
CLIENT = """
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
        for _ in range(int(sys.argv[2]))]
print("ok", flush=True)
time.sleep(float(sys.argv[3]))
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
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(sock))
        s.sendall(command.encode() + b"\n")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out.decode()


def sessions(sock: Path) -> dict[str, int]:
    text = admin(sock, "show stat").lstrip("# ")
    rows = csv.DictReader(io.StringIO(text))
    return {r["svname"]: int(r["scur"]) for r in rows if r["svname"] in PORTS}


def wait_sessions(sock: Path, total: int, timeout_s: float = 10) -> dict[str, int]:
    def held() -> dict[str, int]:  # the sessions once they are `total`, else none
        got = sessions(sock)
        return got if sum(got.values()) == total else {}

    if not (got := poll_until(held, timeout_s, every=0.05)):
        raise RuntimeError(f"HAProxy holds {sessions(sock)}, not {total} sessions")
    return got


def open_held(count: int, hold_s: float) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        ns(sys.executable, "-c", CLIENT, str(FRONT), str(count), str(hold_s)),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    if p.stdout.readline().strip() != "ok":
        raise RuntimeError("client could not open its connections")
    return p


def one_run(workdir: Path) -> dict[str, Any]:
    sock = workdir / "admin.sock"
    servers = "\n".join(f"    server {n} 127.0.0.1:{p} weight 1" for n, p in PORTS.items())
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(CONFIG.format(sock=sock, front=FRONT, servers=servers))
    procs = [
        subprocess.Popen(ns(sys.executable, "-c", SERVER, str(p), "60")) for p in PORTS.values()
    ]
    hap = subprocess.Popen(ns("haproxy", "-db", "-f", str(cfg)))
    try:
        poll_until(lambda: sock.exists() or hap.poll() is not None, 10, every=0.05)
        if not sock.exists():
            raise RuntimeError("HAProxy did not start")
        admin(sock, "set server b/s3 weight 0")
        procs.append(open_held(20, 30))
        before = wait_sessions(sock, 20)
        admin(sock, "set server b/s3 weight 1")
        procs.append(open_held(12, 30))
        after = wait_sessions(sock, 32)
        return {"before": before, "after": after, "new": {n: after[n] - before[n] for n in after}}
    finally:
        for p in [hap, *procs]:
            p.terminate()
        for p in [hap, *procs]:
            p.wait(10)


def main(argv: list[str] | None = None) -> int:
    args = runner.command_line(
        "bench-restore-peer", __doc__, "algorithms", argv, lambda ap: None, [], reps=5
    )
    if os.geteuid() != 0 or runner.missing(["haproxy"]):
        print(
            "bench-restore-peer: needs root and haproxy (apt-get install haproxy)", file=sys.stderr
        )
        return 2
    run = runner.start_run("bench-restore-peer", None, argv)
    if run is None:
        return 2
    version = provenance.version_line(["haproxy", "-v"]) or ""
    subprocess.run(["ip", "netns", "add", NETNS], check=True)
    runs = []
    try:
        subprocess.run(ns("ip", "link", "set", "lo", "up"), check=True)
        for rep in range(args.reps):
            with tempfile.TemporaryDirectory(prefix="p4lb-restore-") as tmp:
                os.chmod(tmp, 0o700)
                runs.append(one_run(Path(tmp)))
            print(f"rep {rep + 1}: 12 new connections went {runs[-1]['new']}", flush=True)
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], check=False)
    result = {
        "provenance": run.finish(args.reps, order="one scenario, repeated")
        | {"haproxy": version.splitlines()[0] if version else "?"},
        "method": __doc__,
        "reps": args.reps,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "restore.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
