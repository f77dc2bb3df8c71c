"""The single-switch lab (`make run`): its topology as a Mininet Topo (SingleSwitchTopo), the
network built from it with its hosts configured, the p4lb config that matches it, its HTTP
servers, and its stop; `running` holds all of it for a measurement or a test.

With `mode="dsr"` (`make run MODE=dsr`) the VIP is a direct-server-return one and the lab
gains a return path beside the switch: a bridge b1 that joins a second interface of every
host, on 10.0.9.0/24 (host hN at 10.0.9.N). A server's replies, from the VIP, go to the
clients over b1, as a site's own routers would carry them, and never cross the switch;
each server holds the VIP on its loopback and answers no ARP for it (arp_ignore=1,
arp_announce=2), as IPVS's direct routing asks of its real servers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.link import Link, TCLink
from mininet.net import Mininet
from mininet.node import Host
from mininet.topo import Topo

from p4lb.intent import writer
from p4lb.intent.model import Backend, Config, SwitchConfig, TlsSettings, Vip
from p4lb.intent.model import Host as CfgHost
from p4lb.intent.validate import validate
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import compiled_limits
from topology.bmv2 import GRPC_PORT, THRIFT_PORT, Bmv2Switch, grpc_tls_args
from topology.pki import make_pki
from topology.procs import stop_pids

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "run"
VIP_ADDR = "10.0.0.100"
VIP_PORT = 80
SERVER_PORT = 8000
RETURN_NET = "10.0.9"  # dsr: the return path's /24, host hN at RETURN_NET.N
RETURN_NET6 = "fd00:9:"  # and its IPv6 /64, host hN at RETURN_NET6::N
SWITCH_MAC = "00:00:00:00:01:00"
VIP_MAC = "00:00:00:00:01:64"
# `ipv6`: the IPv6 VIP web6 beside web, host hN also at host6(N) in NET6::/64.
VIP6_ADDR = "fd00::100"
VIP6_MAC = "00:00:00:00:01:66"
NET6 = "fd00:"


QDISCS = ("tbf", "htb", "netem", "fq_codel", "cake", "sfq")


@dataclass(frozen=True)
class Capacity:
    """What one server can do: `workers` requests at a time, each taking `service_ms`, and
    optionally its link's rate towards the switch (a tc rate such as "20mbit", shaped with
    tbf). workers=0 keeps the plain server (one request at a time, or threaded)."""

    workers: int = 0
    service_ms: float = 0.0
    rate: str | None = None

    @property
    def requests_per_s(self) -> float | None:
        """The most requests per second it answers, when it has a service time."""
        return self.workers * 1000 / self.service_ms if self.workers and self.service_ms else None


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
    capacities: list[Capacity] = field(default_factory=list)  # per server; empty: plain
    # Source addresses per client: 1 is its own address only; more adds secondary addresses
    # on its interface, in 10.<client index>.0.0/16 (client_addresses() lists them).
    addresses_per_client: int = 1
    # P4Runtime over TLS with client certificates from a throwaway CA (run/pki/).
    tls: bool = True
    # BMv2 egress queues per port (`--priority-queues`; 0: its default, one). The QoS
    # disciplines that put sparse flows first need them (bench/qos.py: 8).
    priority_queues: int = 0
    # Seconds a server keeps a connection that sends no request (None: its default, 5).
    server_idle_timeout_s: float | None = None
    # The VIP's mode: "nat", or "dsr" (direct server return, with the return path b1).
    mode: str = "nat"
    # Bytes of each response's body (0: the servers' short page).
    body_bytes: int = 0
    # HTTP/1.1 servers: a client may keep its connection for many requests (topology.holder).
    keep_alive: bool = False
    # The IPv6 VIP web6 (VIP6_ADDR, port VIP_PORT, with web's algorithm and mode) over the
    # same servers, every host with an IPv6 address too (host6).
    ipv6: bool = False

    @property
    def server_port(self) -> int:
        """Where the servers listen: a dsr VIP does not rewrite ports, so on the VIP's."""
        return VIP_PORT if self.mode == "dsr" else SERVER_PORT


@dataclass
class Lab:
    net: Any
    clients: list[Any]
    servers: list[Any]
    config: Config
    config_path: Path
    pids: dict[str, int] = field(default_factory=dict)
    options: Options = field(default_factory=Options)
    sources: dict[str, list[str]] = field(default_factory=dict)  # client -> source addresses
    qdiscs: dict[str, bool] = field(default_factory=dict)  # which tc qdiscs this kernel has
    netns: list[str] = field(default_factory=list)  # namespace names given to hosts

    def save_state(self) -> None:
        """What `make stop` needs: PIDs we started, interfaces and namespace names we made."""
        state = {
            "pids": self.pids,
            "interfaces": [i.name for i in self.net.switches[0].intfList() if i.name != "lo"],
            "netns": self.netns,
            "thrift_ports": [THRIFT_PORT],
        }
        (RUN_DIR / "state.json").write_text(json.dumps(state))


def mac(n: int) -> str:
    return f"00:00:00:00:00:{n:02x}"


def host6(n: int) -> str:
    """Host hN's IPv6 address (the `ipv6` lab's)."""
    return f"{NET6}:{n:x}"


def client_net(index: int) -> str:
    """The /16 that holds the secondary addresses of the client with this 1-based index."""
    return f"10.{index}.0.0"


def client_addresses(index: int, count: int) -> list[str]:
    """`count` secondary source addresses of client `index` (1-based), inside client_net."""
    return [f"10.{index}.{k // 250}.{k % 250 + 1}" for k in range(count)]


def detect_qdiscs(host: Any) -> dict[str, bool]:
    """Which queueing disciplines tc can attach here: each is tried on the host's loopback
    (in its own namespace) and removed again."""
    found = {}
    for q in QDISCS:
        args = {"tbf": "rate 1mbit burst 32kbit latency 50ms", "htb": "default 1"}.get(q, "")
        out = host.cmd(f"tc qdisc add dev lo root {q} {args} 2>&1; echo rc=$?")
        found[q] = out.strip().endswith("rc=0")
        host.cmd("tc qdisc del dev lo root 2>/dev/null")
    return found


def shape(host: Any, rate: str) -> None:
    """Limit the host's sending rate to `rate` with tbf (present on every kernel we met)."""
    out = host.cmd(
        f"tc qdisc replace dev {host.defaultIntf()} root tbf rate {rate} burst 32kbit "
        "latency 100ms 2>&1; echo rc=$?"
    )
    if not out.strip().endswith("rc=0"):
        raise RuntimeError(f"tc tbf rate {rate} on {host.name}: {out.strip()}")


class SingleSwitchTopo(Topo):  # type: ignore[misc]  # Mininet has no type hints
    """The single-switch lab: one BMv2 switch s1, then `clients` client hosts and `servers`
    server hosts, host hN at 10.0.0.N with MAC mac(N) on the switch's port N. `link_opts`
    (TCLink's bw, delay) shape every link; `switch_opts` go to the Bmv2Switch."""

    def build(
        self,
        clients: int = 1,
        servers: int = 3,
        link_opts: dict[str, Any] | None = None,
        return_path: bool = False,
        **switch_opts: Any,
    ) -> None:
        s1 = self.addSwitch("s1", cls=Bmv2Switch, **switch_opts)
        # The return path's bridge lives in a host's namespace of its own (Mininet's
        # LinuxBridge needs brctl, which Debian no longer installs): b1 bridges its ports.
        b1 = self.addHost("b1", cls=Host, ip=None) if return_path else None
        for i in range(1, clients + servers + 1):
            h = self.addHost(f"h{i}", cls=Host, ip=f"10.0.0.{i}/24", mac=mac(i))
            self.addLink(h, s1, port2=i, **(link_opts or {}))
            if b1 is not None:
                self.addLink(h, b1, params1={"ip": f"{RETURN_NET}.{i}/24"}, **(link_opts or {}))


def return_path(
    net: Any,
    clients: list[Any],
    servers: list[Any],
    sources: dict[str, list[str]],
    ipv6: bool = False,
) -> None:
    """dsr: b1 bridges its ports; each server holds the VIP on its loopback, answers no ARP
    for it, and sends what it has for a client (its own address and any secondary ones)
    over b1 to that client's address there; a client takes a packet from the VIP on its
    second interface (loose reverse-path filter). With `ipv6` the same for the IPv6 VIP
    (host hN at RETURN_NET6::N on b1; IPv6 answers no neighbour solicitation for an
    address of another interface, and has no reverse-path filter to loosen)."""
    b1 = net.get("b1")
    b1.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
    b1.cmd("ip link add br0 type bridge && ip link set br0 up")
    for intf in b1.intfList():
        if intf.name != "lo":
            b1.cmd(f"ip link set {intf} master br0 && ip link set {intf} up")
    for c in clients:
        c.cmd("sysctl -qw net.ipv4.conf.all.rp_filter=2")
        c.cmd(f"sysctl -qw net.ipv4.conf.{c.name}-eth1.rp_filter=2")
    for s in servers:
        s.cmd(f"ip addr add {VIP_ADDR}/32 dev lo")
        for key, value in (("arp_ignore", 1), ("arp_announce", 2)):
            s.cmd(f"sysctl -qw net.ipv4.conf.all.{key}={value}")
            s.cmd(f"sysctl -qw net.ipv4.conf.{s.defaultIntf()}.{key}={value}")
        for c in clients:
            gateway = c.intf(f"{c.name}-eth1").IP()
            for prefix in [f"{c.IP()}/32", *(f"{a}/32" for a in sources[c.name] if a != c.IP())]:
                s.cmd(f"ip route replace {prefix} via {gateway} dev {s.name}-eth1")
    if not ipv6:
        return
    for h in [*clients, *servers]:
        quiet_ipv6(h, return_address6(h), h.intf(f"{h.name}-eth1"))
    for s in servers:
        s.cmd(f"ip -6 addr add {VIP6_ADDR}/128 dev lo")
        for c in clients:
            own = host6(int(c.name[1:]))
            s.cmd(f"ip -6 route replace {own}/128 via {return_address6(c)} dev {s.name}-eth1")


def return_address6(host: Any) -> str:
    """Host hN's IPv6 address on the dsr return path."""
    return f"{RETURN_NET6}:{int(host.name[1:]):x}"


def checksum_offload_off(host: Any) -> None:
    """Every packet must carry real checksums, not offload placeholders: the switch
    recomputes them only on the packets it rewrites. Without the ethtool program the same
    ioctls are made from Python (topology.offload)."""
    if shutil.which("ethtool"):
        host.cmd(f"ethtool -K {host.defaultIntf()} tx off rx off >/dev/null 2>&1")
        return
    out = host.cmd(f"PYTHONPATH={ROOT} {sys.executable} -m topology.offload {host.defaultIntf()}")
    if "tx-checksumming off, rx-checksumming off" not in out:
        raise RuntimeError(f"{host.name}: could not turn checksum offload off: {out.strip()}")


def quiet_ipv6(host: Any, address: str, intf: Any = None) -> None:
    """`address`/64 on the host's switch interface (or `intf`), announced to nobody: no
    duplicate address detection (the lab gives each address once), no router solicitation
    or advertisement (the switch is no IPv6 router that sends them)."""
    intf = intf or host.defaultIntf()
    for key, value in (
        ("accept_dad", 0),
        ("dad_transmits", 0),
        ("router_solicitations", 0),
        ("accept_ra", 0),
    ):
        for scope in ("all", "default", str(intf)):
            host.cmd(f"sysctl -qw net.ipv6.conf.{scope}.{key}={value}")
    out = host.cmd(f"ip -6 addr add {address}/64 dev {intf} nodad 2>&1; echo rc=$?")
    if not out.strip().endswith("rc=0"):
        raise RuntimeError(f"{host.name}: ip -6 addr add {address}/64: {out.strip()}")


def lab_config(
    opts: Options, clients: list[Any], servers: list[Any], tls: TlsSettings | None
) -> tuple[Config, dict[str, list[str]]]:
    """The p4lb config that matches the network (the VIP web over the server hosts, with
    `ipv6` the VIP web6 too; a route to each client), checked against the compiled
    program's limits, and each client's source addresses (its secondary ones added to its
    interface when it has more than one)."""
    weights = opts.weights or [1] * opts.servers
    sources = {c.name: [c.IP()] for c in clients}
    cfg_hosts = [CfgHost(c.name, c.IP(), mac(i + 1), i + 1) for i, c in enumerate(clients)]
    if opts.addresses_per_client > 1:
        for i, c in enumerate(clients, start=1):
            sources[c.name] = client_addresses(i, opts.addresses_per_client)
            for a in sources[c.name]:
                c.cmd(f"ip addr add {a}/16 dev {c.defaultIntf()}")
            cfg_hosts.append(CfgHost(f"{c.name}-net", client_net(i), mac(i), i, prefix_len=16))
        for s in servers:  # replies to those addresses: on-link, the switch floods the ARP
            s.cmd(f"ip route add 10.0.0.0/8 dev {s.defaultIntf()}")
    backends = [
        (s.name, s.IP(), host6(opts.clients + j + 1), w, opts.clients + j + 1)
        for j, (s, w) in enumerate(zip(servers, weights, strict=True))
    ]
    vips = [
        Vip(
            name="web",
            address=VIP_ADDR,
            protocol="tcp",
            port=VIP_PORT,
            algorithm=opts.algorithm,
            mac=VIP_MAC,
            mode=opts.mode,
            backends=tuple(
                Backend(name, v4, opts.server_port, w, mac(n), n) for name, v4, _, w, n in backends
            ),
        )
    ]
    if opts.ipv6:
        cfg_hosts += [
            CfgHost(f"{c.name}-v6", host6(i + 1), mac(i + 1), i + 1) for i, c in enumerate(clients)
        ]
        vips.append(
            Vip(
                name="web6",
                address=VIP6_ADDR,
                protocol="tcp",
                port=VIP_PORT,
                algorithm=opts.algorithm,
                mac=VIP6_MAC,
                mode=opts.mode,
                backends=tuple(
                    Backend(name, v6, opts.server_port, w, mac(n), n)
                    for name, _, v6, w, n in backends
                ),
            )
        )
    cfg = Config(
        switch=SwitchConfig(
            address=f"127.0.0.1:{GRPC_PORT}", device_id=0, election_id=10, mac=SWITCH_MAC, tls=tls
        ),
        hosts=tuple(cfg_hosts),
        vips=tuple(vips),
        source=str(RUN_DIR / "lb.toml"),
    )
    validate(cfg)
    capacity.check(cfg, compiled_limits())
    return cfg, sources


def build(opts: Options) -> Lab:
    """The network of `opts` started (SingleSwitchTopo), its hosts configured (no checksum
    offload, IPv6 off unless `ipv6`, shaped servers) and its p4lb config written to run/lb.toml."""
    RUN_DIR.mkdir(exist_ok=True)
    link_opts: dict[str, Any] = {}
    if opts.bw:
        link_opts["bw"] = opts.bw
    if opts.delay:
        link_opts["delay"] = opts.delay
    tls, grpc_args = None, []
    if opts.tls:
        pki = make_pki(RUN_DIR / "pki", ["s1"])
        tls = TlsSettings(str(pki.ca), str(pki.client.cert), str(pki.client.key))
        grpc_args = grpc_tls_args(pki.ca, pki.servers["s1"].cert, pki.servers["s1"].key)
    topo = SingleSwitchTopo(
        clients=opts.clients,
        servers=opts.servers,
        link_opts=link_opts,
        log_dir=str(RUN_DIR / "logs") if opts.switch_log else None,
        grpc_args=grpc_args,
        priority_queues=opts.priority_queues,
        return_path=opts.mode == "dsr",
    )
    net = Mininet(topo=topo, controller=None, link=TCLink if link_opts else Link, autoSetMacs=False)
    net.start()
    hosts = [net.get(f"h{i}") for i in range(1, opts.clients + opts.servers + 1)]
    for n, h in enumerate(hosts, start=1):
        checksum_offload_off(h)
        if opts.ipv6:
            quiet_ipv6(h, host6(n))
        else:
            h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
    clients, servers = hosts[: opts.clients], hosts[opts.clients :]
    cfg, sources = lab_config(opts, clients, servers, tls)
    if opts.mode == "dsr":
        return_path(net, clients, servers, sources, opts.ipv6)
    qdiscs = detect_qdiscs(servers[0]) if opts.capacities else {}
    for s, cap in zip(servers, opts.capacities, strict=False):
        if cap.rate:
            shape(s, cap.rate)
    path = RUN_DIR / "lb.toml"
    # A new network gets a new file: saving over an old one keeps that file's order and
    # comments, so a previous network's backends would set the order of this one's.
    path.unlink(missing_ok=True)
    writer.save(cfg, path)
    lab = Lab(net, clients, servers, cfg, path, options=opts, sources=sources, qdiscs=qdiscs)
    lab.pids["switch"] = net.get("s1").switch_pid or 0
    return lab


def access_log(server: Any) -> Path:
    """The access log start_servers gives this server."""
    return RUN_DIR / "access" / f"{server.name}.log"


def start_server(
    lab: Lab,
    host: Any,
    cap: Capacity,
    port: int,
    log: Path,
    threaded: bool = False,
    idle_timeout_s: float | None = None,
) -> None:
    """One HTTP server on `host`:`port` with capacity `cap`, logging to `log`; its PID is
    kept in the lab (stop() ends it). Returns once it listens (bounded wait)."""
    log.parent.mkdir(exist_ok=True)
    log.write_text("")
    cmd = (
        f"{sys.executable} -m topology.server --name {host.name} --port {port} "
        f"--log {log}"
        + (" --threaded" if threaded else "")
        + (f" --workers {cap.workers} --service-ms {cap.service_ms:g}" if cap.workers else "")
        + (f" --idle-timeout {idle_timeout_s:g}" if idle_timeout_s is not None else "")
        + (f" --body-bytes {lab.options.body_bytes}" if lab.options.body_bytes else "")
        + (" --keep-alive" if lab.options.keep_alive else "")
    )
    # One simple command in the background, so $! is the server's own PID (with
    # `cd ... && cmd &` it would be a subshell's, and stopping it would orphan the server).
    out = host.cmd(f"PYTHONPATH={ROOT} {cmd} > /dev/null 2>&1 & echo $!")
    key = f"server-{host.name}" if port == lab.options.server_port else f"server-{host.name}-{port}"
    lab.pids[key] = int(out.strip().split()[-1])
    # Bounded wait until it listens (without connecting: a probe connection would be one
    # more line in the access log than the switch saw).
    host.cmd(
        f"for i in $(seq 100); do ss -Hltn 'sport = :{port}' | grep -q . && break; sleep 0.05; done"
    )


def start_servers(lab: Lab, threaded: bool) -> None:
    """One HTTP server per backend host, with its capacity from the lab's options."""
    caps = lab.options.capacities or [Capacity()] * len(lab.servers)
    for s, cap in zip(lab.servers, caps, strict=True):
        start_server(
            lab,
            s,
            cap,
            lab.options.server_port,
            access_log(s),
            threaded,
            lab.options.server_idle_timeout_s,
        )


def wait_servers_idle(lab: Lab, timeout_s: float = 10.0) -> None:
    """Bounded wait until no server holds an unhandled connection, so that the access logs
    are complete: ab returns once its n requests are answered, while connections it opened
    and closed unused may still wait in a server's accept queue."""
    states = "state syn-recv state established state close-wait"
    loops = max(1, int(timeout_s / 0.05))
    for s in lab.servers:
        s.cmd(
            f"for i in $(seq {loops}); do ss -Htn {states} 'sport = :{lab.options.server_port}' "
            "| grep -q . || break; sleep 0.05; done"
        )


def p4lb_cmd(lab: Lab, *args: str) -> list[str]:
    exe = Path(sys.executable).with_name("p4lb")
    return [str(exe) if exe.exists() else "p4lb", "-c", str(lab.config_path), *args]


HEALTH_NETNS = "p4lb-"  # + host name: a name for each server host's namespace


def name_server_namespaces(lab: Lab) -> str:
    """Give each server host's network namespace a name (`ip netns attach`), so health
    probes can run in it; returns the config's namespace setting for them. Only the names
    are removed at stop: the namespaces are the Mininet hosts'."""
    for s in lab.servers:
        name = HEALTH_NETNS + s.name
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
        subprocess.run(["ip", "netns", "attach", name, str(s.pid)], check=True)
        lab.netns.append(name)
    return HEALTH_NETNS + "{backend}"


SHELL_DRAIN_TRIES = 20  # x 100 ms: how long stop waits for an interrupted command's shell


def release_shells(nodes: list[Any]) -> None:
    """Free the shells of nodes left mid-command, as a KeyboardInterrupt (Ctrl-C, or the
    benchmarks' SIGTERM) inside `node.cmd` leaves them: Mininet's own stop runs commands on
    them and asserts they are idle. The command is interrupted and its output read to the
    sentinel, within a bound; a shell that still does not answer is marked idle anyway, as
    it is about to be killed."""
    for node in nodes:
        if not getattr(node, "waiting", False):
            continue
        node.sendInt()
        for _ in range(SHELL_DRAIN_TRIES):
            node.monitor(timeoutms=100)
            if not node.waiting:
                break
        node.waiting = False


def stop(lab: Lab) -> None:
    release_shells([*lab.net.hosts, *lab.net.switches])
    for name in lab.netns:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    stop_pids(pid for name, pid in lab.pids.items() if not name.startswith("switch"))
    lab.net.stop()
    (RUN_DIR / "state.json").unlink(missing_ok=True)


@contextmanager
def running(
    opts: Options, threaded: bool, apply: bool = True, apply_timeout_s: float = 120
) -> Iterator[Lab]:
    """The lab built from `opts`, programmed with `p4lb apply` (unless `apply` is False: the
    caller programs the switch itself), its servers started; stopped however the block ends."""
    lab = build(opts)
    try:
        if apply:
            subprocess.run(
                p4lb_cmd(lab, "apply"), check=True, capture_output=True, timeout=apply_timeout_s
            )
        start_servers(lab, threaded=threaded)
        yield lab
    finally:
        stop(lab)
