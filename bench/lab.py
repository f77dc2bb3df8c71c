"""The switch benches' lab (topology.wire): five veth pairs and a simple_switch_grpc on
them, programmed with lb.p4 (`p4lb apply`) or plain forwarding (BMv2's Thrift CLI); the
addresses the traffic uses, and when what the switch sent has all come out."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.outdir import ROOT
from p4lb.intent import writer
from p4lb.intent.model import Backend, Config, Host, SwitchConfig, Vip
from topology.wire import VethLab

COMPILED = ROOT / "p4src" / "compiled"


# Port 1: the clients; 2..4: the backends; 5: a peer program's fourth backend
# (bench/peer_program.py). Its ports apart from the packet tests' and the controller
# bench's, so they can run at once.
LAB = VethLab("p4lbb", ports=5, grpc_port=39559, thrift_port=39090)
BACKEND_PORTS = 3
SWITCH_MAC = "00:00:00:00:01:00"
VIP_MAC = "00:00:00:00:01:64"
CLIENT_NET = "10.1.0.0"
SETTLE_S = 0.4  # the counters are final once they stay still this long
SETTLE_MAX_S = 15.0


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


def lb_model(algorithm: str, shape: Shape, weights: list[int] | None = None) -> Config:
    """A p4lb config for `shape`: the client network on port 1, backends on ports 2..4
    (the first TCP VIP's at `weights`, else 1 each)."""
    switch = SwitchConfig(f"127.0.0.1:{LAB.grpc_port}", 0, 10, mac=SWITCH_MAC)
    clients = Host("clients", CLIENT_NET, port_mac(1), 1, prefix_len=16)
    vips = []
    for v in range(shape.vips):
        # Every VIP serves TCP; the first also serves UDP (the table holds 255 services).
        for proto, port, bport in (("tcp", 80, 8000), ("udp", 53, 5353))[: 2 if v == 0 else 1]:
            ws = weights if weights and (v, proto) == (0, "tcp") else [1] * shape.backends
            backends = tuple(
                Backend(
                    f"b{k}",
                    backend_addr(v, k, shape.backends),
                    bport,
                    ws[k],
                    port_mac(backend_port_of(k)),
                    backend_port_of(k),
                )
                for k in range(shape.backends)
            )
            vips.append(Vip(f"v{v}{proto}", vip_addr(v), proto, port, algorithm, VIP_MAC, backends))
    return Config(switch, (clients,), tuple(vips))


def lb_config(algorithm: str, shape: Shape, weights: list[int] | None = None) -> str:
    """lb_model's config as the file p4lb reads."""
    return writer.dumps(lb_model(algorithm, shape, weights))


def run_quietly(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


veths = LAB.veths  # the veth pairs every switch bench runs on (bench.runner)


def p4lb(workdir: Path, *args: str, timeout: float | None = None) -> str:
    """`p4lb -c workdir/lb.toml ARGS`'s output; a failure raises with what it said."""
    exe = shutil.which("p4lb") or str(Path(sys.executable).with_name("p4lb"))
    cmd = [exe, "-c", str(workdir / "lb.toml"), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"p4lb {args[0]} failed: {r.stdout.strip()} {r.stderr.strip()}")
    return r.stdout


def program_lb(cfg_text: str, workdir: Path) -> None:
    (workdir / "lb.toml").write_text(cfg_text)
    p4lb(workdir, "apply")


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
    """simple_switch_CLI commands against the lab's switch; its output. Any error raises."""
    return LAB.thrift(cmds)


def rx_total() -> int:
    return LAB.rx_packets()


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
    # Another program (bench/floor.py): its BMv2 JSON, and what programs it once it runs.
    json: Path | None = None
    setup: Callable[[Shape], None] | None = None


@contextmanager
def running(
    prog: Program,
    binary: str,
    workdir: Path,
    log: Path | None = None,
    wrap: Sequence[str] = (),
) -> Iterator[int]:
    """A switch running `prog`, programmed; its PID (stopped at the end, or on an error)."""
    baseline = prog.name == "baseline"
    json_path = COMPILED / "baseline.json" if baseline else prog.json
    with LAB.switch(binary=binary, program=json_path, log_file=log, wrap=wrap) as proc:
        if prog.setup:
            prog.setup(prog.shape)
        elif baseline:
            program_baseline(prog.shape)
        else:
            program_lb(lb_config(prog.name, prog.shape), workdir)
        yield proc.pid


def p4lb_stats(workdir: Path) -> dict[str, Any]:
    """`p4lb stats --json --lifetime` on the lab's config (workdir/lb.toml), read."""
    out: dict[str, Any] = json.loads(p4lb(workdir, "stats", "--json", "--lifetime", timeout=60))
    return out
