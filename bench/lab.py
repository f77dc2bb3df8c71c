"""The switch benches' lab: five veth pairs and a simple_switch_grpc on them, bound to
127.0.0.1, programmed with lb.p4 (through `p4lb apply`) or with plain forwarding (through
BMv2's Thrift CLI); the addresses the traffic uses, and the packet counters of the host
ends. The one lab of bench-switch, bench-floor, bench-peers, bench-cookie and bench-choices."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.outdir import ROOT
from topology import thrift_guard
from topology.bmv2 import terminate, wait_listening

COMPILED = ROOT / "p4src" / "compiled"


# Port 1: the clients; 2..4: the backends (BACKEND_PORTS of them); 5: idle but for a peer
# program with four backends on ports 2..5 (bench/peers.py).
N_PORTS = 5


BACKEND_PORTS = 3


GRPC_PORT = 39559


THRIFT_PORT = 39090


SWITCH_MAC = "00:00:00:00:01:00"


VIP_MAC = "00:00:00:00:01:64"


CLIENT_NET = "10.1.0.0"


SETTLE_S = 0.4  # the counters are final once they stay still this long


SETTLE_MAX_S = 15.0


PREFIX = "p4lbb"  # the veths' names: p4lbb-h1 (the host's end), p4lbb-s1 (the switch's)


def host_if(port: int, prefix: str = PREFIX) -> str:
    return f"{prefix}-h{port}"


def switch_if(port: int, prefix: str = PREFIX) -> str:
    return f"{prefix}-s{port}"


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


def run_quietly(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@contextmanager
def veths(ports: int = N_PORTS, prefix: str = PREFIX) -> Iterator[None]:
    """Veth pairs 1..`ports` named by `prefix` (another prefix: a lab beside this one),
    IPv6 off (no stray router solicitations), removed at the end."""
    remove_veths(ports, prefix)
    try:
        for p in range(1, ports + 1):
            h, s = host_if(p, prefix), switch_if(p, prefix)
            run_quietly("ip", "link", "add", h, "type", "veth", "peer", "name", s)
            for ifc in (h, s):
                run_quietly("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1")
                run_quietly("ip", "link", "set", ifc, "up")
        yield
    finally:
        remove_veths(ports, prefix)


def remove_veths(ports: int = N_PORTS, prefix: str = PREFIX) -> None:
    for p in range(1, ports + 1):
        if Path(f"/sys/class/net/{host_if(p, prefix)}").exists():
            subprocess.run(["ip", "link", "del", host_if(p, prefix)], capture_output=True)


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


def p4lb_stats(workdir: Path) -> dict[str, Any]:
    """`p4lb stats --json --lifetime` on the lab's config (workdir/lb.toml), read."""
    p4lb = shutil.which("p4lb") or str(Path(sys.executable).with_name("p4lb"))
    r = subprocess.run(
        [p4lb, "-c", str(workdir / "lb.toml"), "stats", "--json", "--lifetime"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        raise RuntimeError(f"p4lb stats failed: {r.stdout} {r.stderr}")
    out: dict[str, Any] = json.loads(r.stdout)
    return out
