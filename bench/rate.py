"""Timed measures on a running switch: tcpreplay at a rate, the zero-loss rate search, CPU
time per packet, per-packet latency with one packet in flight."""

from __future__ import annotations

import contextlib
import re
import select
import socket
import subprocess
import time
from pathlib import Path

import psutil

from bench.lab import LAB, SETTLE_S, rx_total, settled_rx
from bench.traffic import with_sport

LOSS_TOLERANCE = 0.001
SEARCH_STEPS = 5
START_PPS = 1000
MAX_PPS = 128_000
CPU_PPS = 2000  # below every program's zero-loss rate on either build
CPU_REPLAYS = 3


def replay(pcap: Path, pps: int | None, port: int = 1) -> tuple[int, float]:
    """Send the pcap on `port`; returns (packets sent, seconds)."""
    rate = ["--pps", str(pps)] if pps else ["--topspeed"]
    r = subprocess.run(
        ["tcpreplay", "-q", "--preload-pcap", *rate, "-i", LAB.host_if(port), str(pcap)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    m = re.search(r"Actual: (\d+) packets .* sent in ([\d.]+) seconds", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"tcpreplay failed: {r.stdout[-300:]} {r.stderr[-300:]}")
    return int(m.group(1)), float(m.group(2))


def trial(pcap: Path, pps: int | None) -> tuple[float, float]:
    """(loss fraction, delivered packets per second) for one replay."""
    start = rx_total()
    t0 = time.monotonic()
    sent, _ = replay(pcap, pps)
    out = settled_rx(start)
    elapsed = max(time.monotonic() - t0 - SETTLE_S, 1e-3)
    return (sent - out) / sent, out / elapsed


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    return sum(psutil.Process(pid).cpu_times()[:2])


def thread_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of process `pid`."""
    return {t.id: t.user_time + t.system_time for t in psutil.Process(pid).threads()}


def cpu_per_packet(pid: int, pcap: Path) -> tuple[float, float]:
    """(busiest thread, all threads) CPU microseconds per packet, `pcap` replayed CPU_REPLAYS
    times at CPU_PPS."""
    before = thread_cpu_s(pid)
    sent = 0
    for _ in range(CPU_REPLAYS):
        start = rx_total()
        n, _ = replay(pcap, CPU_PPS)
        settled_rx(start)
        sent += n
    after = thread_cpu_s(pid)
    used = [after[t] - before.get(t, 0.0) for t in after]
    return max(used) * 1e6 / sent, sum(used) * 1e6 / sent


def holds(pcap: Path, pps: int) -> bool:
    """Whether the switch forwards a replay at `pps` without loss; a loss must repeat in a
    second replay (a stray drop on a shared VM would end the search far too low)."""
    return trial(pcap, pps)[0] <= LOSS_TOLERANCE or trial(pcap, pps)[0] <= LOSS_TOLERANCE


def zero_loss_rate(pcap: Path) -> tuple[float, float]:
    """(zero-loss pps, delivered pps at top speed): the rate doubles from START_PPS until a
    replay loses packets, then a binary search narrows the last doubling."""
    _, top = trial(pcap, None)
    lo, hi = 0.0, float(START_PPS)
    while hi <= MAX_PPS and holds(pcap, int(hi)):
        lo, hi = hi, hi * 2
    for _ in range(SEARCH_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if holds(pcap, int(mid)) else (lo, mid)
    return lo, top


def latencies(packets: list[tuple[str, bytes]], rounds: int) -> dict[str, list[float]]:
    """Per path, microseconds from send on port 1 to arrival on any port, one packet in
    flight; `packets` (one flow's (path, frame)) sent `rounds` times, a source port each."""
    rx = []
    for h in LAB.host_ifs():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((h, 0))
        s.setblocking(False)
        rx.append(s)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((LAB.host_if(1), 0))
    out: dict[str, list[float]] = {}
    try:
        for r in range(rounds):
            for path, frame in packets:
                frame = with_sport(frame, 20_000 + r)
                for s in rx:  # drain
                    with contextlib.suppress(BlockingIOError):
                        while True:
                            s.recv(65535)
                t0 = time.perf_counter()
                tx.send(frame)
                got = _await_output(rx, t0 + 0.5)
                if got is not None:
                    out.setdefault(path, []).append((got - t0) * 1e6)
    finally:
        tx.close()
        for s in rx:
            s.close()
    return out


def _await_output(rx: list[socket.socket], deadline: float) -> float | None:
    """Time the first frame arrives on a port other than 1's own transmission."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        ready, _, _ = select.select(rx, [], [], left)
        for s in ready:
            try:
                _, addr = s.recvfrom(65535)
            except BlockingIOError:
                continue
            if addr[2] != socket.PACKET_OUTGOING:
                return time.perf_counter()
