"""Long-lived keep-alive HTTP connections through a VIP, each asking again every `interval`
seconds, to see what an event in the network does to open connections: whether one broke
(reset, closed, or no answer within `timeout` s), whether its answers came from another
backend (moved), and the longest wait for an answer (a stall while the router converges).

Run in the client's namespace until `--stop-file` appears (or `--duration` passes, a bound):
    python -m topology.holder --vip 10.0.0.100 --ports 80 81 --connections 60 --out r.json
It writes `--ready-file` once every connection has its first answer, and `--out` at the end:
one record per connection (port, local port, whether it uses TCP timestamps, backend,
opened, requests, broken, moved, the longest wait and when it ended) and every failure with
its time (monotonic clock).

`--without-timestamps N`: the first N connections of each port open with the namespace's
net.ipv4.tcp_timestamps at 0 (a client that sends none: needs root), the rest with it at
1; the sysctl is read at each SYN, so each connection keeps what it negotiated."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

BACKEND = re.compile(rb"p4lb backend (\S+?)<")
TIMESTAMPS_SYSCTL = Path("/proc/sys/net/ipv4/tcp_timestamps")
TCPI_OPT_TIMESTAMPS = 1  # linux/tcp.h: tcp_info's tcpi_options (its sixth byte)


def uses_timestamps(sock: socket.socket) -> bool:
    """Whether the connection negotiated TCP timestamps (TCP_INFO)."""
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[5] & TCPI_OPT_TIMESTAMPS)


def ask(sock: socket.socket, host: str) -> bytes:
    """One GET on a keep-alive connection; the whole response."""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the other end")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)
    need = int(m.group(1)) if m else 0
    while len(body) < need:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-answer")
        body += chunk
    return body


class Conn(threading.Thread):
    def __init__(self, vip: str, port: int, interval: float, timeout: float, stop: threading.Event):
        super().__init__(daemon=True)
        self.vip, self.port, self.interval, self.timeout, self.stop = (
            vip,
            port,
            interval,
            timeout,
            stop,
        )
        self.rec: dict[str, Any] = {"port": port, "requests": 0, "broken": None, "moved": []}
        self.first = threading.Event()
        self.longest = (0.0, 0.0)  # (wait, when it ended)

    def run(self) -> None:
        try:
            sock = socket.create_connection((self.vip, self.port), timeout=self.timeout)
        except OSError as e:
            self.rec["broken"] = {"at": time.monotonic(), "error": f"connect: {e}"}
            self.first.set()
            return
        sock.settimeout(self.timeout)
        self.rec["local_port"] = sock.getsockname()[1]
        self.rec["timestamps"] = uses_timestamps(sock)
        self.rec["opened"] = time.monotonic()
        try:
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    body = ask(sock, self.vip)
                except OSError as e:
                    self.rec["broken"] = {"at": time.monotonic(), "error": str(e) or repr(e)}
                    return
                t1 = time.monotonic()
                if t1 - t0 > self.longest[0]:
                    self.longest = (t1 - t0, t1)
                m = BACKEND.search(body)
                name = m.group(1).decode() if m else "?"
                if "backend" not in self.rec:
                    self.rec["backend"] = name
                    self.first.set()
                elif name != self.rec["backend"]:
                    self.rec["moved"].append({"at": t1, "to": name})
                self.rec["requests"] += 1
                self.stop.wait(self.interval)
        finally:
            self.first.set()
            sock.close()
            self.rec["longest_wait_s"], self.rec["longest_wait_ended"] = self.longest


def write_whole(path: Path, doc: dict[str, Any]) -> None:
    """Write `doc` so a reader polling for `path` never sees it half written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="holder")
    p.add_argument("--vip", required=True)
    p.add_argument("--ports", type=int, nargs="+", required=True)
    p.add_argument("--connections", type=int, default=50, help="per port")
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("--timeout", type=float, default=15.0)
    p.add_argument("--duration", type=float, default=300.0, help="at most this long")
    p.add_argument("--stop-file", type=Path, required=True)
    p.add_argument("--ready-file", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--without-timestamps", type=int, default=0, metavar="N", help="per port")
    a = p.parse_args(argv)
    stop = threading.Event()
    conns = []
    try:
        for port in a.ports:
            for k in range(a.connections):
                if a.without_timestamps:
                    TIMESTAMPS_SYSCTL.write_text("0" if k < a.without_timestamps else "1")
                c = Conn(a.vip, port, a.interval, a.timeout, stop)
                c.start()
                c.first.wait(a.timeout)
                conns.append(c)
    finally:
        if a.without_timestamps:
            TIMESTAMPS_SYSCTL.write_text("1")
    write_whole(a.ready_file, {"at": time.monotonic(), "connections": len(conns)})
    deadline = time.monotonic() + a.duration
    while time.monotonic() < deadline and not a.stop_file.exists():
        time.sleep(0.05)
    stop.set()
    for c in conns:
        c.join(a.timeout + 1)
    write_whole(a.out, {"connections": [c.rec for c in conns]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
