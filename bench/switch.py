"""`make bench-switch`: the switch alone, lb.p4 against plain forwarding (baseline.p4) on the
same BMv2 binary, side by side in one run.

Traffic is built once with scapy: realistic TCP connections (SYN, SYN-ACK, ACK, request,
two response segments, ACK, FIN both ways, last ACK — ten packets) from many client
addresses and source ports, and UDP request/response pairs, interleaved 50 connections at
a time. The baseline gets the same packets addressed straight to the servers. Every packet
is injected on port 1 (replies too: the switch does not look at the ingress port of a
routed packet) with tcpreplay, and what comes out of every port is counted from the
kernel's veth counters.

Figures, per BMv2 build (P4LB_SIMPLE_SWITCH or --build NAME=PATH) and program:
  - zero-loss packet rate: the highest tcpreplay rate (binary search) at which every
    packet comes out (a loss of at most LOSS_TOLERANCE of the packets is counted as none,
    for the odd packet the kernel drops under load; a rate fails only if a second replay
    at it loses too);
  - per-packet latency p50/p99 through the idle switch, one packet in flight, per path;
  - tables, conditions and primitives per packet on each path, from a traced run (the
    standard build, which has logging macros);
  - CPU per packet: the CPU time BMv2's busiest thread (its single ingress thread, for
    every program here) spends per packet while the trace is replayed at CPU_PPS, well
    below every program's zero-loss rate; read from /proc/PID/task/*/stat. Steadier
    than the loss threshold, and the busiest thread is what bounds the zero-loss rate,
    so baseline us / program us is the program's capacity relative to the baseline;
  - instructions per packet (busiest thread, all threads) with the switch under
    valgrind's callgrind, counting only while a short replay runs: a count, not a time,
    so a ratio to the baseline that the machine's noise does not move (when valgrind is
    installed; it leaves out cache misses, the kernel and waits, so it complements the
    CPU time rather than replacing it);
  - the LB's saturation rate as live connections, VIPs and backends per VIP grow.
Each figure is the median of --reps repetitions with min and max. Programs take turns
within each repetition (baseline, then each algorithm, then the next repetition), so a
drift of the machine's speed falls on all of them alike, and each ratio to the baseline
is also given per repetition.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import outdir, profiles, provenance, stats
from topology import thrift_guard
from topology.bmv2 import terminate, wait_listening

ROOT = Path(__file__).resolve().parents[1]
COMPILED = ROOT / "p4src" / "compiled"
OUT = ROOT / "results" / "switch"
# Port 1: the clients; 2..4: the backends (BACKEND_PORTS of them); 5: idle but for a peer
# program with four backends on ports 2..5 (bench/peers.py).
N_PORTS = 5
BACKEND_PORTS = 3
GRPC_PORT = 39559
THRIFT_PORT = 39090
SWITCH_MAC = "00:00:00:00:01:00"
VIP_MAC = "00:00:00:00:01:64"
CLIENT_NET = "10.1.0.0"
LOSS_TOLERANCE = 0.001
SEARCH_STEPS = 5
START_PPS = 1000
MAX_PPS = 128_000
SETTLE_S = 0.4  # the counters are final once they stay still this long
SETTLE_MAX_S = 15.0
FLOW_PACKETS = 10
CPU_PPS = 2000  # below every program's zero-loss rate on either build
CPU_REPLAYS = 3
INSTR_PPS = 40  # under callgrind BMv2 runs some 50x slower, slower still on new code
# Paths whose instructions per packet are measured by difference (--path-instructions):
# the mix, then the mix with PATH_EXTRA more copies of one step of every TCP connection
# (flow_packets' order); the copies take the same path as the original.
PATH_STEPS = {"established ACK": 6, "client data": 3, "reply": 4}
PATH_EXTRA = 5


def host_if(port: int) -> str:
    return f"p4lbb-h{port}"


def switch_if(port: int) -> str:
    return f"p4lbb-s{port}"


def port_mac(port: int) -> str:
    return f"00:00:00:00:00:{port:02x}"


def vip_addr(i: int) -> str:
    return f"10.0.{1 + i // 250}.{1 + i % 250}"


def backend_addr(v: int, k: int, n_backends: int) -> str:
    n = v * n_backends + k
    return f"10.2.{n // 250}.{1 + n % 250}"


def backend_port_of(k: int) -> int:
    return 2 + k % BACKEND_PORTS


@dataclass(frozen=True)
class Shape:
    """What the switch holds: VIPs, backends per VIP, and how many flows the traffic has."""

    vips: int = 1
    backends: int = 3
    flows: int = 1500
    udp_every: int = 10  # one flow in ten is UDP
    timestamps: bool = False  # TCP options as Linux sends them (RFC 7323 timestamps on)


def lb_config(algorithm: str, shape: Shape) -> str:
    """A p4lb config for `shape`: the client network on port 1, backends on ports 2..4."""
    lines = [
        "[switch]",
        f'address = "127.0.0.1:{GRPC_PORT}"',
        "device_id = 0",
        "election_id = 10",
        f'mac = "{SWITCH_MAC}"',
        "",
        "[[host]]",
        'name = "clients"',
        f'address = "{CLIENT_NET}"',
        "prefix_len = 16",
        f'mac = "{port_mac(1)}"',
        "switch_port = 1",
    ]
    for v in range(shape.vips):
        # Every VIP serves TCP; the first also serves UDP (the table holds 255 services).
        for proto, port, bport in (("tcp", 80, 8000), ("udp", 53, 5353))[: 2 if v == 0 else 1]:
            name = f"v{v}{proto}"
            lines += [
                "",
                f"[vip.{name}]",
                f'address = "{vip_addr(v)}"',
                f'protocol = "{proto}"',
                f"port = {port}",
                f'algorithm = "{algorithm}"',
                f'mac = "{VIP_MAC}"',
            ]
            for k in range(shape.backends):
                sp = backend_port_of(k)
                lines += [
                    "",
                    f"[[vip.{name}.backend]]",
                    f'name = "b{k}"',
                    f'address = "{backend_addr(v, k, shape.backends)}"',
                    f"port = {bport}",
                    "weight = 1",
                    f'mac = "{port_mac(sp)}"',
                    f"switch_port = {sp}",
                ]
    return "\n".join(lines) + "\n"


def client_of(i: int) -> tuple[str, int]:
    """Many clients (250 x 40 addresses), many source ports each."""
    host = i % 10_000
    return f"10.1.{host // 250}.{1 + host % 250}", 1024 + (i * 7919) % 60_000


def is_udp(i: int, shape: Shape) -> bool:
    return bool(shape.udp_every) and i % shape.udp_every == shape.udp_every - 1


def flow_packets(i: int, shape: Shape, direct: bool) -> list[bytes]:
    """One connection's packets; `direct` addresses the server itself (the baseline)."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    udp = is_udp(i, shape)
    v = 0 if udp else i % shape.vips
    k = (i // shape.vips) % shape.backends
    client, sport = client_of(i)
    server = backend_addr(v, k, shape.backends)
    vport, bport = (53, 5353) if udp else (80, 8000)
    dst, dport = (server, bport) if direct else (vip_addr(v), vport)
    to_server = Ether(src=port_mac(1), dst=VIP_MAC) / IP(src=client, dst=dst)
    to_client = Ether(src=port_mac(backend_port_of(k)), dst=SWITCH_MAC) / IP(src=server, dst=client)
    if udp:
        req = to_server / UDP(sport=sport, dport=dport) / Raw(b"q" * 40)
        rsp = to_client / UDP(sport=bport, dport=sport) / Raw(b"r" * 120)
        return [bytes(p) for p in (req, rsp) * (FLOW_PACKETS // 2)]

    clock = [7_000_000, 9_000_000]  # client's, server's TSval

    def options(flags: str, mine: int) -> list[Any]:
        """Linux's layout: MSS, SACK-permitted, timestamp, NOP, window scale on a SYN;
        NOP NOP timestamp after it. Each side's clock ticks, the other's is echoed."""
        if not shape.timestamps:
            return []
        clock[mine] += 1
        ts = ("Timestamp", (clock[mine], clock[1 - mine] if flags != "S" else 0))
        if "S" in flags:
            return [("MSS", 1460), ("SAckOK", b""), ts, ("NOP", None), ("WScale", 7)]
        return [("NOP", None), ("NOP", None), ts]

    def c(flags: str, seq: int, ack: int, data: bytes = b"") -> Any:
        p = to_server / TCP(
            sport=sport, dport=dport, flags=flags, seq=seq, ack=ack, options=options(flags, 0)
        )
        return p / Raw(data) if data else p

    def s(flags: str, seq: int, ack: int, data: bytes = b"") -> Any:
        p = to_client / TCP(
            sport=bport, dport=sport, flags=flags, seq=seq, ack=ack, options=options(flags, 1)
        )
        return p / Raw(data) if data else p

    a, b = 1000, 5000
    pkts = [
        c("S", a, 0),
        s("SA", b, a + 1),
        c("A", a + 1, b + 1),
        c("PA", a + 1, b + 1, b"GET / HTTP/1.1\r\nHost: vip\r\n\r\n"),
        s("A", b + 1, a + 31, b"x" * 600),
        s("PA", b + 601, a + 31, b"y" * 400),
        c("A", a + 31, b + 1001),
        c("FA", a + 31, b + 1001),
        s("FA", b + 1001, a + 32),
        c("A", a + 32, b + 1002),
    ]
    return [bytes(p) for p in pkts]


def traffic(shape: Shape, direct: bool, repeat: int | None = None) -> list[bytes]:
    """All flows, interleaved 50 at a time (step k of each flow in a group, then k + 1).
    `repeat`: step `repeat` of every TCP connection is sent PATH_EXTRA more times."""
    flows = [flow_packets(i, shape, direct) for i in range(shape.flows)]
    tcp = [not is_udp(i, shape) for i in range(shape.flows)]
    out: list[bytes] = []
    for g in range(0, len(flows), 50):
        group = flows[g : g + 50]
        for step in range(FLOW_PACKETS):
            for i, f in enumerate(group, start=g):
                out += [f[step]] * (1 + PATH_EXTRA * (step == repeat and tcp[i]))
    return out


def write_pcap(packets: list[bytes], path: Path) -> None:
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    wrpcap(str(path), [Ether(p) for p in packets])


# --- the switch -------------------------------------------------------------------


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@contextmanager
def veths() -> Iterator[None]:
    remove_veths()
    try:
        for p in range(1, N_PORTS + 1):
            _run("ip", "link", "add", host_if(p), "type", "veth", "peer", "name", switch_if(p))
            for ifc in (host_if(p), switch_if(p)):
                _run("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1")
                _run("ip", "link", "set", ifc, "up")
        yield
    finally:
        remove_veths()


def remove_veths() -> None:
    for p in range(1, N_PORTS + 1):
        if Path(f"/sys/class/net/{host_if(p)}").exists():
            subprocess.run(["ip", "link", "del", host_if(p)], capture_output=True)


@contextmanager
def switch(
    binary: str, json_path: Path | None, log: Path | None, wrap: list[str] | None = None
) -> Iterator[int]:
    """simple_switch_grpc on our veths, bound to 127.0.0.1; its PID; stopped by it.
    `wrap` runs it under another program (valgrind), which keeps the PID."""
    args = [*(wrap or []), binary, "--device-id", "0", "--thrift-port", str(THRIFT_PORT)]
    args += ["--log-file", str(log), "--log-flush"] if log else ["--log-level", "off"]
    for p in range(1, N_PORTS + 1):
        args += ["-i", f"{p}@{switch_if(p)}"]
    args += [str(json_path)] if json_path else ["--no-p4"]
    args += ["--", "--grpc-server-addr", f"127.0.0.1:{GRPC_PORT}"]
    thrift_guard.confine(THRIFT_PORT)  # released by terminate()
    try:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except BaseException:
        thrift_guard.release(THRIFT_PORT)
        raise
    try:
        wait_listening(GRPC_PORT, 120 if wrap else 20)
        wait_listening(THRIFT_PORT, 120 if wrap else 20)
        yield proc.pid
    finally:
        terminate(proc)


def program_lb(cfg_text: str, workdir: Path) -> None:
    cfg = workdir / "lb.toml"
    cfg.write_text(cfg_text)
    p4lb = shutil.which("p4lb") or str(Path(sys.executable).with_name("p4lb"))
    r = subprocess.run([p4lb, "-c", str(cfg), "apply"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"p4lb apply failed: {r.stdout.strip()} {r.stderr.strip()}")


def program_baseline(shape: Shape) -> None:
    """Routes for the client network and every server, through BMv2's Thrift CLI."""
    cmds = [f"table_add ipv4_route_table forward {CLIENT_NET}/16 => 1 {SWITCH_MAC} {port_mac(1)}"]
    for v in range(shape.vips):
        for k in range(shape.backends):
            sp = backend_port_of(k)
            cmds.append(
                f"table_add ipv4_route_table forward {backend_addr(v, k, shape.backends)}/32 "
                f"=> {sp} {SWITCH_MAC} {port_mac(sp)}"
            )
    thrift_cli(cmds)


def thrift_cli(cmds: list[str]) -> str:
    """Run simple_switch_CLI commands against the switch; its output. Any error raises."""
    cli = shutil.which("simple_switch_CLI") or "simple_switch_CLI"
    # BMv2's CLI needs the thrift module of the Python it was installed for.
    py = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    r = subprocess.run(
        [py, cli, "--thrift-port", str(THRIFT_PORT)],
        input="\n".join(cmds) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0 or "Error" in r.stdout:
        raise RuntimeError(f"simple_switch_CLI failed: {r.stdout[-300:]} {r.stderr[-300:]}")
    return r.stdout


# --- measuring ----------------------------------------------------------------------


def rx_total() -> int:
    return sum(
        int(Path(f"/sys/class/net/{host_if(p)}/statistics/rx_packets").read_text())
        for p in range(1, N_PORTS + 1)
    )


def settled_rx(start: int) -> int:
    """Packets out of the switch since `start`, once the counters stay still."""
    deadline = time.monotonic() + SETTLE_MAX_S
    last, still_since = rx_total(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = rx_total()
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= SETTLE_S:
            break
    return last - start


def replay(pcap: Path, pps: int | None, port: int = 1) -> tuple[int, float]:
    """Send the pcap on `port`; returns (packets sent, seconds)."""
    rate = ["--pps", str(pps)] if pps else ["--topspeed"]
    r = subprocess.run(
        ["tcpreplay", "-q", "--preload-pcap", *rate, "-i", host_if(port), str(pcap)],
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


def thread_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of process `pid`."""
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(stat[11]) + int(stat[12])) / hz
    return out


def cpu_per_packet(pid: int, pcap: Path) -> tuple[float, float]:
    """(busiest thread, all threads) CPU microseconds per packet the switch received,
    replaying `pcap` CPU_REPLAYS times at CPU_PPS."""
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
    """Whether the switch forwards a replay at `pps` without loss. A loss must repeat in a
    second replay: on a shared VM a stray drop (another process taking the CPU for a few
    milliseconds) otherwise ends the search at a rate far below the switch's."""
    return trial(pcap, pps)[0] <= LOSS_TOLERANCE or trial(pcap, pps)[0] <= LOSS_TOLERANCE


def zero_loss_rate(pcap: Path) -> tuple[float, float]:
    """(zero-loss pps, delivered pps at top speed). The rate doubles from START_PPS until
    a replay loses packets, then a binary search narrows the last doubling. (BMv2
    overloaded at top speed delivers far less than its zero-loss rate, so that figure
    cannot bound the search.)"""
    _, top = trial(pcap, None)
    lo, hi = 0.0, float(START_PPS)
    while hi <= MAX_PPS and holds(pcap, int(hi)):
        lo, hi = hi, hi * 2
    for _ in range(SEARCH_STEPS):
        mid = (lo + hi) / 2
        if holds(pcap, int(mid)):
            lo = mid
        else:
            hi = mid
    return lo, top


def latencies(packets: list[tuple[str, bytes]], rounds: int) -> dict[str, list[float]]:
    """Per path, microseconds from send on port 1 to arrival on any port, one packet in
    flight; `packets` is one flow's sequence of (path, frame), sent `rounds` times with a
    different source port each round."""
    rx = []
    for p in range(1, N_PORTS + 1):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((host_if(p), 0))
        s.setblocking(False)
        rx.append(s)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((host_if(1), 0))
    out: dict[str, list[float]] = {}
    try:
        for r in range(rounds):
            for path, frame in packets:
                frame = _with_sport(frame, 20_000 + r)
                for s in rx:  # drain
                    while True:
                        try:
                            s.recv(65535)
                        except BlockingIOError:
                            break
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


def _with_sport(frame: bytes, sport: int) -> bytes:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    p = Ether(frame)
    if p[TCP].dport in (80, 8000):
        p[TCP].sport = sport
    else:
        p[TCP].dport = sport
    del p[IP].chksum, p[TCP].chksum
    return bytes(p)


def path_packets(shape: Shape, direct: bool) -> list[tuple[str, bytes]]:
    """One TCP connection's packets named by the path each takes through the LB."""
    pk = flow_packets(0, shape, direct)
    return [
        ("new", pk[0]),
        ("reply", pk[1]),
        ("handshake", pk[2]),
        ("established", pk[3]),
        ("fin", pk[7]),
    ]


def traced_counts(log: Path) -> dict[int, dict[str, int]]:
    """Per packet id in a BMv2 trace: tables applied, conditions, primitives, in all and
    in the ingress pipeline alone (BMv2 runs the egress in other threads)."""
    counts: dict[int, dict[str, int]] = {}
    pipeline: dict[int, str] = {}
    # A message may start with its source location, "file.p4(12) ".
    kind_re = re.compile(r"^(?:\S+\(\d+\) )?(Applying table|Condition|Primitive|Action) ")
    start_re = re.compile(r"^Pipeline '(\w+)': start")
    kinds = {
        "Applying table": "tables",
        "Condition": "conditions",
        "Primitive": "primitives",
        "Action": "actions",
    }
    for line in log.read_text(errors="replace").splitlines():
        m = re.search(r"\[(\d+)\.\d+\] \[cxt \d+\] (.*)", line)
        if not m:
            continue
        pkt, msg = int(m.group(1)), m.group(2)
        if p := start_re.match(msg):
            pipeline[pkt] = p.group(1)
            continue
        k = kind_re.match(msg)
        if k:
            c = counts.setdefault(
                pkt,
                {
                    f"{w}{k}": 0
                    for w in ("", "ingress_")
                    for k in ("tables", "conditions", "primitives")
                },
            )
            kind = kinds[k.group(1)]
            c[kind] = c.get(kind, 0) + 1
            if pipeline.get(pkt) == "ingress":
                c[f"ingress_{kind}"] = c.get(f"ingress_{kind}", 0) + 1
    return counts


def summary(values: list[float]) -> dict[str, Any]:
    """Median, min, max, n and every repetition's value (bench.stats.summary)."""
    return stats.summary(values)


# --- the run ------------------------------------------------------------------------


@dataclass
class Program:
    name: str  # baseline | iphash | wrr | ... (lb.p4's algorithms)
    shape: Shape
    # Another program than baseline.p4 or lb.p4 (bench/floor.py): its BMv2 JSON, and
    # what programs it once the switch runs.
    json: Path | None = None
    setup: Callable[[Shape], None] | None = None


def start_program(
    prog: Program, binary: str, workdir: Path, log: Path | None, wrap: list[str] | None = None
) -> tuple[Any, int]:
    """A switch running `prog`, programmed, and its PID; the caller ends it with
    __exit__. A switch that cannot be programmed is stopped here (by its PID) before the
    error goes on."""
    baseline = prog.name == "baseline"
    json_path = COMPILED / "baseline.json" if baseline else prog.json
    cm = switch(binary, json_path, log, wrap)
    pid = cm.__enter__()
    try:
        if prog.setup:
            prog.setup(prog.shape)
        elif baseline:
            program_baseline(prog.shape)
        else:
            program_lb(lb_config(prog.name, prog.shape), workdir)
    except BaseException:
        cm.__exit__(None, None, None)
        raise
    return cm, pid


def pcap_for(shape: Shape, direct: bool, workdir: Path, repeat: int | None = None) -> Path:
    kind = "direct" if direct else "vip"
    more = "" if repeat is None else f"-x{repeat}"
    more += "-ts" if shape.timestamps else ""
    path = workdir / f"{kind}-{shape.vips}-{shape.backends}-{shape.flows}{more}.pcap"
    if not path.exists():
        write_pcap(traffic(shape, direct, repeat), path)
    return path


def measure_build(
    build: str, binary: str, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    shape = Shape(flows=args.flows)
    res: dict[str, Any] = {"binary": binary, "programs": {}}
    programs = ["baseline", *args.algorithms]
    zl: dict[str, list[float]] = {n: [] for n in programs}
    sat: dict[str, list[float]] = {n: [] for n in programs}
    busiest: dict[str, list[float]] = {n: [] for n in programs}
    total: dict[str, list[float]] = {n: [] for n in programs}
    lat: dict[str, dict[str, list[float]]] = {n: {} for n in programs}
    orders = provenance.interleaved(programs, args.reps, args.order_seed, build)
    res["order"] = orders
    for rep, order in enumerate(orders):
        for name in order:
            direct = name == "baseline"
            pcap = pcap_for(shape, direct, workdir)
            progress(f"{build} rep {rep + 1}/{args.reps} {name}")
            cm, pid = start_program(Program(name, shape), binary, workdir, None)
            try:
                b, t = cpu_per_packet(pid, pcap)
                busiest[name].append(b)
                total[name].append(t)
                z, s = zero_loss_rate(pcap)
                zl[name].append(z)
                sat[name].append(s)
                for path, v in latencies(path_packets(shape, direct), args.latency_rounds).items():
                    lat[name].setdefault(path, []).append(statistics.median(v))
                    lat[name].setdefault(path + "_p99", []).append(stats.percentile_index(v, 0.99))
            finally:
                cm.__exit__(None, None, None)
    for name in programs:
        direct = name == "baseline"
        res["programs"][name] = {
            "zero_loss_pps": summary(zl[name]),
            "saturation_pps": summary(sat[name]),
            "busiest_thread_us_per_packet": summary(busiest[name]),
            "all_threads_us_per_packet": summary(total[name]),
            "latency_us": {k: summary(v) for k, v in lat[name].items()},
            "packets_per_replay": len(traffic(shape, direct)),
        }
    base = res["programs"]["baseline"]["zero_loss_pps"]["median"]
    for name in args.algorithms:
        p = res["programs"][name]
        p["zero_loss_vs_baseline"] = p["zero_loss_pps"]["median"] / base if base else 0.0
        # Side by side within each repetition.
        p["zero_loss_vs_baseline_per_rep"] = summary(
            [z / b for z, b in zip(zl[name], zl["baseline"], strict=True) if b]
        )
        p["cpu_capacity_vs_baseline_per_rep"] = summary(
            [b / u for u, b in zip(busiest[name], busiest["baseline"], strict=True) if u]
        )
    return res


def callgrind_totals(files: list[Path]) -> list[int]:
    """The instruction total of each callgrind dump file (one per thread)."""
    totals = []
    for f in files:
        # "summary:" heads a dump and may be 0 in a dump on request; "totals:" ends it.
        m = re.search(r"^totals: (\d+)", f.read_text(errors="replace"), re.M)
        if m:
            totals.append(int(m.group(1)))
    return totals


def callgrind_wrap(out: Path) -> list[str]:
    """The command that runs a switch under callgrind, counting nothing until told
    (callgrind_control -i on), one output file per thread named after `out`; any earlier
    run's files of that name are removed first."""
    for old in out.parent.glob(f"{out.name}*"):
        old.unlink()
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={out}",
    ]


def instructions_once(
    name: str,
    binary: str,
    args: argparse.Namespace,
    workdir: Path,
    pcap: Path,
    prog: Program | None = None,
) -> tuple[float, float]:
    """(busiest thread, all threads) instructions per packet while `pcap` is replayed at
    INSTR_PPS through a switch under callgrind, which counts only while the replay runs.
    Every packet must come out, or the figure would be per packet of another mix."""
    out = workdir / f"cg-{name}"
    wrap = callgrind_wrap(out)
    prog = prog or Program(name, Shape(flows=args.instr_flows))
    cm, pid = start_program(prog, binary, workdir, None, wrap)
    try:
        _run("callgrind_control", "-i", "on", str(pid))
        start = rx_total()
        sent, _ = replay(pcap, INSTR_PPS)
        delivered = settled_rx(start)
        _run("callgrind_control", "-i", "off", str(pid))
        _run("callgrind_control", "-d", str(pid))
    finally:
        cm.__exit__(None, None, None)
    if delivered < sent * (1 - LOSS_TOLERANCE):
        raise RuntimeError(f"instructions: {name} lost {sent - delivered} of {sent} packets")
    # The dump on request is part 1 of each thread's output; the dump at exit (part 2,
    # or the unnumbered file) counted nothing, instrumentation being off by then.
    totals = callgrind_totals(sorted(workdir.glob(f"cg-{name}.1-*")))
    if not totals:
        raise RuntimeError(f"instructions: no callgrind dump for {name} in {workdir}")
    return max(totals) / sent, sum(totals) / sent


def measure_instructions(
    build: str, binary: str, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """Instructions per packet, per program: a count, not a time, so the same binary,
    program and packets give the same figure whatever else the machine does."""
    programs = ["baseline", *args.algorithms]
    busiest: dict[str, list[float]] = {n: [] for n in programs}
    total: dict[str, list[float]] = {n: [] for n in programs}
    shape = Shape(flows=args.instr_flows)
    orders = provenance.interleaved(programs, args.instr_reps, args.order_seed, f"{build}/i")
    for rep, order in enumerate(orders):
        for name in order:
            progress(f"{build} instructions rep {rep + 1}/{args.instr_reps} {name}")
            pcap = pcap_for(shape, name == "baseline", workdir)
            b, t = instructions_once(name, binary, args, workdir, pcap)
            busiest[name].append(b)
            total[name].append(t)
    res: dict[str, Any] = {
        "pps": INSTR_PPS,
        "flows": args.instr_flows,
        "order": orders,
        "programs": {},
    }
    for name in programs:
        res["programs"][name] = {
            "busiest_thread_per_packet": summary(busiest[name]),
            "all_threads_per_packet": summary(total[name]),
        }
    for name in args.algorithms:
        res["programs"][name]["capacity_vs_baseline_per_rep"] = summary(
            [b / u for u, b in zip(busiest[name], busiest["baseline"], strict=True) if u]
        )
    return res


def measure_path_instructions(
    build: str, binary: str, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """Instructions one more packet of each path costs (all threads, and the busiest),
    per program: the mix, and the mix with PATH_EXTRA more copies of that path's packet
    per TCP connection; the difference over the copies. Programs and mixes take turns
    within each repetition."""
    programs = ["baseline", *(getattr(args, "path_algorithms", None) or args.algorithms)]
    shape = Shape(flows=args.path_flows)
    kinds: dict[str, int | None] = {"mix": None, **PATH_STEPS}
    extra = PATH_EXTRA * sum(not is_udp(i, shape) for i in range(shape.flows))
    cost: dict[str, dict[str, list[tuple[float, float]]]] = {
        n: {k: [] for k in PATH_STEPS} for n in programs
    }
    orders = provenance.interleaved(programs, args.instr_reps, args.order_seed, f"{build}/p")
    for rep, order in enumerate(orders):
        for name in order:
            direct = name == "baseline"
            totals: dict[str, tuple[float, float]] = {}
            for kind, step in kinds.items():
                progress(f"{build} path instructions rep {rep + 1} {name} {kind}")
                pcap = pcap_for(shape, direct, workdir, step)
                n = len(traffic(shape, direct, step))
                b, t = instructions_once(name, binary, args, workdir, pcap)
                totals[kind] = (t * n, b * n)
            mix_all, mix_busiest = totals["mix"]
            for kind in PATH_STEPS:
                all_, busiest = totals[kind]
                cost[name][kind].append(((all_ - mix_all) / extra, (busiest - mix_busiest) / extra))
    res: dict[str, Any] = {
        "flows": args.path_flows,
        "extra_per_connection": PATH_EXTRA,
        "order": orders,
    }
    res["programs"] = {
        name: {
            kind: {
                "all_threads": summary([a for a, _ in v]),
                "busiest_thread": summary([b for _, b in v]),
            }
            for kind, v in by_kind.items()
        }
        for name, by_kind in cost.items()
    }
    return res


def measure_trace(binary: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One packet per path through a logging switch; counts per packet."""
    shape = Shape()
    out: dict[str, Any] = {}
    for name in ["baseline", *args.algorithms]:
        direct = name == "baseline"
        log = workdir / f"trace-{name}.log"
        if log.exists():
            log.unlink()
        cm, _ = start_program(Program(name, shape), binary, workdir, log)
        try:
            packets = path_packets(shape, direct)
            latencies(packets, 1)
            settled_rx(rx_total())
        finally:
            cm.__exit__(None, None, None)
        # BMv2 names its log file NAME.txt.
        counts = traced_counts(log if log.exists() else log.with_name(log.name + ".txt"))
        ids = sorted(counts)[-len(packets) :]
        out[name] = {path: counts[i] for (path, _), i in zip(packets, ids, strict=False)}
    return out


def preload_packets(n: int, shape: Shape) -> list[bytes]:
    """SYN then ACK of `n` connections that stay open (established, idle timeout ~2 min),
    from client addresses and ports the measured traffic does not use."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    out = []
    for i in range(n):
        client = f"10.1.{64 + (i // 250) % 190}.{1 + i % 250}"
        sport = 1024 + (i // 47_500) * 13 + (i % 64_000)
        v = i % shape.vips
        base = Ether(src=port_mac(1), dst=VIP_MAC) / IP(src=client, dst=vip_addr(v))
        out.append(bytes(base / TCP(sport=sport, dport=80, flags="S", seq=1)))
        out.append(bytes(base / TCP(sport=sport, dport=80, flags="A", seq=2, ack=1)))
    return out


def collisions_on_switch(workdir: Path) -> int:
    """The collision counters of every VIP, through `p4lb stats --json`."""
    p4lb = shutil.which("p4lb") or str(Path(sys.executable).with_name("p4lb"))
    r = subprocess.run(
        [p4lb, "-c", str(workdir / "lb.toml"), "stats", "--json", "--lifetime"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        r = subprocess.run(
            [p4lb, "-c", str(workdir / "lb.toml"), "stats", "--json"],
            capture_output=True,
            text=True,
        )
    return _sum_key(json.loads(r.stdout), "collisions")


def _sum_key(obj: Any, key: str) -> int:
    if isinstance(obj, dict):
        return sum(
            (v if k == key and isinstance(v, int) else _sum_key(v, key)) for k, v in obj.items()
        )
    if isinstance(obj, list):
        return sum(_sum_key(v, key) for v in obj)
    return 0


def measure_growth(binary: str, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    """The LB's (WRR) saturation rate on the standard traffic as the switch holds more
    live connections (preloaded, established), VIPs and backends per VIP; with live
    connections also the collisions counted while preloading them."""
    rows = []
    points = [("live", n, Shape()) for n in args.live]
    points += [("vips", n, Shape(vips=n)) for n in args.vips]
    points += [("backends", n, Shape(backends=n)) for n in args.backends]
    for kind, n, shape in points:
        pcap = pcap_for(shape, False, workdir)
        preload = None
        if kind == "live":
            preload = workdir / f"preload-{n}.pcap"
            if not preload.exists():
                write_pcap(preload_packets(n, shape), preload)
        sat, coll = [], []
        for rep in range(args.reps):
            progress(f"growth {kind}={n} rep {rep + 1}/{args.reps}")
            cm, _ = start_program(Program("wrr", shape), binary, workdir, None)
            try:
                if preload is not None:
                    # Slowly enough that the switch loses nothing: every SYN is stored.
                    start = rx_total()
                    sent, _ = replay(preload, args.preload_pps)
                    coll.append(collisions_on_switch(workdir))
                    if settled_rx(start) < sent * (1 - LOSS_TOLERANCE):
                        progress(f"  preload lost packets at {args.preload_pps} pps")
                sat.append(trial(pcap, None)[1])
            finally:
                cm.__exit__(None, None, None)
        row: dict[str, Any] = {"dimension": kind, "value": n, "saturation_pps": summary(sat)}
        if coll:
            row["collisions"] = summary([float(c) for c in coll])
            row["collision_rate"] = statistics.median(coll) / n
        rows.append(row)
    return rows


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def builds_to_measure(prog: str, values: list[str], tools: list[str]) -> dict[str, str] | None:
    """The builds to measure (--build NAME=PATH; else P4LB_SIMPLE_SWITCH or the
    simple_switch_grpc on PATH, as "standard"), or None once stderr says what is missing:
    root, one of `tools`, a switch."""
    default = os.environ.get("P4LB_SIMPLE_SWITCH") or shutil.which("simple_switch_grpc")
    builds = parse_builds(prog, values) or ({"standard": default} if default else {})
    missing = [t for t in tools if not shutil.which(t)]
    if not builds or missing or os.geteuid() != 0:
        what = ", ".join(missing + ([] if builds else ["simple_switch_grpc"]))
        print(f"{prog}: needs root and {what or 'nothing else'}", file=sys.stderr)
        return None
    return builds


def parse_builds(prog: str, values: list[str]) -> dict[str, str]:
    builds = {}
    for v in values:
        name, _, path = v.partition("=")
        if not path or not Path(path).exists():
            raise SystemExit(f"{prog}: --build {v!r}: want NAME=PATH to simple_switch_grpc")
        builds[name] = path
    return builds


def add_common(ap: argparse.ArgumentParser) -> None:
    """The options every bench shares: the seed of its variants' order."""
    ap.add_argument(
        "--order-seed",
        type=int,
        default=None,
        help="seed of the variants' shuffled order per repetition (default: from the clock; "
        "recorded in the results file)",
    )


def start_run(
    prog: str, builds: dict[str, str] | None, argv: list[str] | None
) -> provenance.Run | None:
    """bench.provenance.start, or None once stderr says the machine is too busy."""
    try:
        return provenance.start(prog, builds, sys.argv if argv is None else [prog, *argv])
    except (provenance.BusyMachine, ValueError) as e:
        print(str(e), file=sys.stderr)
        return None


def order_seed(args: argparse.Namespace) -> int:
    if args.order_seed is None:
        args.order_seed = int(time.time()) % 1_000_000
    return int(args.order_seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-switch", description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    # Five: programs are compared, and bench.stats' "differs" test needs five a side.
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument(
        "--algorithms", nargs="+", default=None, help="default: every algorithm in the P4Info"
    )
    ap.add_argument("--latency-rounds", type=int, default=200)
    ap.add_argument("--live", type=int, nargs="*", default=[1000, 10_000, 60_000])
    ap.add_argument("--vips", type=int, nargs="*", default=[1, 100, 250])
    ap.add_argument("--backends", type=int, nargs="*", default=[3, 64, 256])
    ap.add_argument("--preload-pps", type=int, default=1500)
    ap.add_argument("--no-growth", action="store_true")
    ap.add_argument("--growth-builds", nargs="*", default=[], help="builds to grow (all)")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument(
        "--instructions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="instructions per packet under callgrind (default: when valgrind is installed)",
    )
    ap.add_argument("--instr-flows", type=int, default=100)
    ap.add_argument("--instr-reps", type=int, default=None, help="default: --reps")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--only-instructions", action="store_true", help="skip the timed figures")
    only.add_argument(
        "--only-growth",
        action="store_true",
        help="only the growth figures, added to the last full run's (in --out)",
    )
    ap.add_argument(
        "--path-instructions",
        action="store_true",
        help="also each path's instructions per packet, by difference (with --instructions)",
    )
    ap.add_argument("--path-flows", type=int, default=50)
    ap.add_argument("--path-algorithms", nargs="*", default=None, help="default: --algorithms")
    ap.add_argument("--path-builds", nargs="*", default=None, help="builds to measure (all)")
    add_common(ap)
    ap.add_argument("--out", type=Path, default=None, help=f"default: {OUT} or the scratch tree")
    profiles.add_argument(ap)
    args = ap.parse_args(profiles.expand("bench-switch", argv))
    committed = outdir.is_committed_profile(
        ap,
        args,
        ["flows", "latency_rounds", "live", "vips", "backends", "instr_flows", "instr_reps"]
        + ["algorithms", "no_growth", "no_trace", "only_instructions", "only_growth"],
    )
    args.out = outdir.destination("switch", committed, args.out)
    if args.instructions is None:
        args.instructions = bool(shutil.which("valgrind") and shutil.which("callgrind_control"))
    if args.instr_reps is None:
        args.instr_reps = args.reps
    if args.algorithms is None:
        from p4lb.pipeline.p4info import schema

        codes = schema().algorithms()
        args.algorithms = sorted(codes, key=codes.__getitem__)
    builds = builds_to_measure("bench-switch", args.build, ["tcpreplay", "simple_switch_CLI"])
    if builds is None:
        return 2
    order_seed(args)
    run = start_run("bench-switch", builds, argv)
    if run is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "method": __doc__,
        "loss_tolerance": LOSS_TOLERANCE,
        "reps": args.reps,
        "order_seed": args.order_seed,
        "builds": {},
    }
    out = args.out / "switch.json"
    if args.only_instructions and out.exists():
        result = {**json.loads(out.read_text()), "instructions_when": result["when"]}
    if args.only_growth:
        if not out.exists():
            print(f"bench-switch: --only-growth: no {out} to add to", file=sys.stderr)
            return 2
        result = {**json.loads(out.read_text()), "growth_when": result["when"]}
    with veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-switch-") as tmp:
        workdir = Path(tmp)  # traffic, configs, callgrind dumps: removed at the end
        for build, binary in builds.items():
            if args.only_growth:
                if not args.growth_builds or build in args.growth_builds:
                    result["builds"].setdefault(build, {"binary": binary, "programs": {}})
                    result["builds"][build]["growth"] = measure_growth(binary, args, workdir)
                    out.write_text(json.dumps(result, indent=2) + "\n")
                continue
            if args.only_instructions:  # added to the figures of the last full run
                result["builds"].setdefault(build, {"binary": binary, "programs": {}})
            else:
                result["builds"][build] = measure_build(build, binary, args, workdir)
            if args.instructions:
                result["builds"][build]["instructions"] = measure_instructions(
                    build, binary, args, workdir
                )
                if args.path_instructions and build in (args.path_builds or [build]):
                    result["builds"][build]["path_instructions"] = measure_path_instructions(
                        build, binary, args, workdir
                    )
            out.write_text(json.dumps(result, indent=2) + "\n")
            if args.only_instructions:
                continue
            if not args.no_growth and (not args.growth_builds or build in args.growth_builds):
                result["builds"][build]["growth"] = measure_growth(binary, args, workdir)
            out.write_text(json.dumps(result, indent=2) + "\n")  # what is done so far
        if not args.no_trace and not args.only_instructions and not args.only_growth:
            first = next(iter(builds.values()))
            result["trace"] = {"binary": first, "counts": measure_trace(first, args, workdir)}
    if not (args.only_instructions or args.only_growth):  # else the full run's stays
        result["machine"]["loadavg_at_end"] = os.getloadavg()
    key = (
        "provenance"
        if not (args.only_instructions or args.only_growth)
        else ("provenance_instructions" if args.only_instructions else "provenance_growth")
    )
    result[key] = run.finish(
        {"timed": args.reps, "instructions": args.instr_reps},
        order="each build's `order` (and its instructions' and paths'): the programs of each "
        "repetition, in the order they ran",
        order_seed=args.order_seed,
    )
    out.write_text(json.dumps(result, indent=2) + "\n")
    progress(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
