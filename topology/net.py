"""Builds the Mininet network and the p4lb config that matches it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.link import Link, TCLink
from mininet.net import Mininet
from mininet.node import Host

from p4lb import config as cfgmod
from p4lb.config import Backend, Config, SwitchConfig, Vip
from p4lb.config import Host as CfgHost
from p4lb.validate import validate
from topology.bmv2 import GRPC_PORT, Bmv2Switch

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "run"
VIP_ADDR = "10.0.0.100"
VIP_PORT = 80
SERVER_PORT = 8000
SWITCH_MAC = "00:00:00:00:01:00"
VIP_MAC = "00:00:00:00:01:64"


@dataclass
class Options:
    servers: int = 3
    clients: int = 1
    bw: float | None = None  # Mbit/s on every link (TCLink); None = unshaped
    delay: str | None = None  # e.g. "1ms"
    algorithm: str = "wrr"
    weights: list[int] = field(default_factory=list)
    threaded: bool = False
    switch_log: bool = False


@dataclass
class Lab:
    net: Any
    clients: list[Any]
    servers: list[Any]
    config: Config
    config_path: Path
    pids: dict[str, int] = field(default_factory=dict)

    def save_state(self) -> None:
        """What `make stop` needs: PIDs we started and interfaces we made."""
        state = {
            "pids": self.pids,
            "interfaces": [i.name for i in self.net.switches[0].intfList() if i.name != "lo"],
        }
        (RUN_DIR / "state.json").write_text(json.dumps(state))


def mac(n: int) -> str:
    return f"00:00:00:00:00:{n:02x}"


def build(opts: Options) -> Lab:
    RUN_DIR.mkdir(exist_ok=True)
    link_opts: dict[str, Any] = {}
    if opts.bw:
        link_opts["bw"] = opts.bw
    if opts.delay:
        link_opts["delay"] = opts.delay
    net = Mininet(
        controller=None, link=TCLink if link_opts else Link, autoSetMacs=False, build=False
    )
    log_dir = str(RUN_DIR / "logs") if opts.switch_log else None
    s1 = net.addSwitch("s1", cls=Bmv2Switch, log_dir=log_dir)
    hosts = []
    n = opts.clients + opts.servers
    for i in range(1, n + 1):
        h = net.addHost(f"h{i}", cls=Host, ip=f"10.0.0.{i}/24", mac=mac(i))
        net.addLink(h, s1, port2=i, **link_opts)
        hosts.append(h)
    net.build()
    net.start()
    for h in hosts:
        # Rewritten packets must carry real checksums, not offload placeholders.
        h.cmd(f"ethtool -K {h.defaultIntf()} tx off rx off >/dev/null 2>&1")
        h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
    clients, servers = hosts[: opts.clients], hosts[opts.clients :]
    weights = opts.weights or [1] * opts.servers
    cfg = Config(
        switch=SwitchConfig(
            address=f"127.0.0.1:{GRPC_PORT}", device_id=0, election_id=10, mac=SWITCH_MAC
        ),
        hosts=tuple(CfgHost(c.name, c.IP(), mac(i + 1), i + 1) for i, c in enumerate(clients)),
        vips=(
            Vip(
                name="web",
                address=VIP_ADDR,
                protocol="tcp",
                port=VIP_PORT,
                algorithm=opts.algorithm,
                mac=VIP_MAC,
                backends=tuple(
                    Backend(
                        s.name,
                        s.IP(),
                        SERVER_PORT,
                        w,
                        mac(opts.clients + j + 1),
                        opts.clients + j + 1,
                    )
                    for j, (s, w) in enumerate(zip(servers, weights, strict=True))
                ),
            ),
        ),
        source=str(RUN_DIR / "lb.toml"),
    )
    validate(cfg, cfgmod.compiled_limits())
    path = RUN_DIR / "lb.toml"
    cfgmod.save(cfg, path)
    lab = Lab(net, clients, servers, cfg, path)
    lab.pids["switch"] = s1.switch_pid or 0
    return lab


def start_servers(lab: Lab, threaded: bool) -> None:
    logs = RUN_DIR / "access"
    logs.mkdir(exist_ok=True)
    for s in lab.servers:
        log = logs / f"{s.name}.log"
        log.write_text("")
        cmd = (
            f"{sys.executable} -m topology.server --name {s.name} --port {SERVER_PORT} "
            f"--log {log}" + (" --threaded" if threaded else "")
        )
        # One simple command in the background, so $! is the server's own PID (with
        # `cd ... && cmd &` it would be a subshell's, and stopping it would orphan the server).
        out = s.cmd(f"PYTHONPATH={ROOT} {cmd} > /dev/null 2>&1 & echo $!")
        lab.pids[f"server-{s.name}"] = int(out.strip().split()[-1])
    for s in lab.servers:  # bounded wait until each server listens (without connecting:
        # a probe connection would be one more line in the access log than the switch saw)
        s.cmd(
            f"for i in $(seq 100); do ss -Hltn 'sport = :{SERVER_PORT}' | grep -q . "
            "&& break; sleep 0.05; done"
        )


def wait_servers_idle(lab: Lab, timeout_s: float = 10.0) -> None:
    """Bounded wait until no server holds an unhandled connection, so that the access logs
    are complete: ab returns once its n requests are answered, while connections it opened
    and closed unused may still wait in a server's accept queue."""
    states = "state syn-recv state established state close-wait"
    loops = max(1, int(timeout_s / 0.05))
    for s in lab.servers:
        s.cmd(
            f"for i in $(seq {loops}); do ss -Htn {states} 'sport = :{SERVER_PORT}' "
            "| grep -q . || break; sleep 0.05; done"
        )


def p4lb_cmd(lab: Lab, *args: str) -> list[str]:
    exe = Path(sys.executable).with_name("p4lb")
    return [str(exe) if exe.exists() else "p4lb", "-c", str(lab.config_path), *args]


def stop(lab: Lab) -> None:
    for name, pid in lab.pids.items():
        if name.startswith("switch") or not pid:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 15)
    lab.net.stop()
    (RUN_DIR / "state.json").unlink(missing_ok=True)
