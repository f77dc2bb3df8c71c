"""The traffic of the queueing experiment, run inside the Mininet hosts (python -m
bench.qos_traffic ROLE ...): bulk TCP senders, a TCP sink counting each connection's bytes,
a VoIP-like UDP sender (sequence number + send time) and its receiver. The hosts share the
machine's clock, so the receiver's time minus the sender's is the one-way delay."""

from __future__ import annotations

import argparse
import json
import socket
import struct
import threading
import time
from pathlib import Path

VOIP = struct.Struct("!IQ")  # sequence number, send time (ns, CLOCK_REALTIME)
CHUNK = 64 * 1024


def tcp_sink(port: int, duration: float, skip: float, out: Path) -> None:
    """Accept connections for `duration` s; per connection, the bytes received after the
    first `skip` s (warm-up) and the time they span."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    srv.settimeout(0.5)
    t0 = time.monotonic()
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def serve(conn: socket.socket, peer: str) -> None:
        conn.settimeout(1.0)
        with conn:
            while time.monotonic() - t0 < duration:
                try:
                    data = conn.recv(CHUNK)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                if time.monotonic() - t0 >= skip:
                    with lock:
                        counts[peer] = counts.get(peer, 0) + len(data)

    threads = []
    while time.monotonic() - t0 < duration:
        try:
            conn, (addr, p) = srv.accept()
        except TimeoutError:
            continue
        th = threading.Thread(target=serve, args=(conn, f"{addr}:{p}"), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(timeout=2)
    out.write_text(json.dumps({"window_s": duration - skip, "bytes": counts}))


def bound(kind: socket.SocketKind, sport: int | None) -> socket.socket:
    """A socket, bound to source port `sport` when one is given (else the kernel picks)."""
    s = socket.socket(socket.AF_INET, kind)
    if sport is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", sport))
    return s


def bulk(dst: str, port: int, flows: int, duration: float, sports: list[int] | None) -> None:
    """`flows` TCP connections sending as fast as the network takes for `duration` s, from
    the source ports `sports` (one per flow) when given."""
    if sports is not None and len(sports) != flows:
        raise SystemExit(f"bench.qos_traffic: {flows} flows need {flows} source ports")
    payload = bytes(CHUNK)
    end = time.monotonic() + duration

    def one(sport: int | None) -> None:
        try:
            with bound(socket.SOCK_STREAM, sport) as s:
                s.settimeout(5)
                s.connect((dst, port))
                s.settimeout(1.0)
                while time.monotonic() < end:
                    try:
                        s.send(payload)
                    except TimeoutError:
                        continue
        except OSError:
            return

    threads = [
        threading.Thread(target=one, args=(sports[i] if sports else None,), daemon=True)
        for i in range(flows)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=duration + 5)


def voip_send(dst: str, port: int, pps: int, size: int, duration: float, sport: int | None) -> None:
    """`pps` UDP packets of `size` payload bytes per second, paced on the monotonic clock,
    from source port `sport` when given."""
    s = bound(socket.SOCK_DGRAM, sport)
    pad = bytes(max(0, size - VOIP.size))
    start = time.monotonic()
    seq = 0
    while True:
        due = start + seq / pps
        if due - start >= duration:
            break
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        s.sendto(VOIP.pack(seq, time.time_ns()) + pad, (dst, port))
        seq += 1
    s.close()


def voip_recv(port: int, duration: float, out: Path) -> None:
    """(sequence, one-way delay in ms) of every packet received within `duration` s."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.5)
    end = time.monotonic() + duration
    got: list[tuple[int, float]] = []
    while time.monotonic() < end:
        try:
            data = s.recv(2048)
        except TimeoutError:
            continue
        now = time.time_ns()
        seq, sent = VOIP.unpack_from(data)
        got.append((seq, (now - sent) / 1e6))
    out.write_text(json.dumps(got))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.qos_traffic")
    sub = p.add_subparsers(dest="role", required=True)
    # Each role's arguments are its function's parameters: the port, the duration, and where
    # a sink writes or where a sender sends, then its own.
    roles = {"tcp-sink": (tcp_sink, "--out"), "bulk": (bulk, "--dst")}
    roles |= {"voip-send": (voip_send, "--dst"), "voip-recv": (voip_recv, "--out")}
    a = {}
    for role, (run, end) in roles.items():
        a[role] = sub.add_parser(role)
        a[role].set_defaults(run=run)
        a[role].add_argument("--port", type=int, required=True)
        a[role].add_argument("--duration", type=float, required=True)
        a[role].add_argument(end, type=Path if end == "--out" else str, required=True)
    a["tcp-sink"].add_argument("--skip", type=float, default=0.0)
    a["bulk"].add_argument("--flows", type=int, default=1)
    a["bulk"].add_argument("--sports", type=lambda v: [int(x) for x in v.split(",")], default=None)
    a["voip-send"].add_argument("--pps", type=int, default=50)
    a["voip-send"].add_argument("--size", type=int, default=160)
    a["voip-send"].add_argument("--sport", type=int, default=None)
    args = vars(p.parse_args(argv))
    del args["role"]
    args.pop("run")(**args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
