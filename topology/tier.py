"""A tier of p4lb balancers behind ECMP and BGP (`make run TOPO=scaleout`), in network
namespaces on this host, on the engines people deploy: FRR (zebra, bgpd, bfdd) as the front
router, GoBGP as each balancer's BGP speaker, FRR's bfdd beside it, the kernel's ECMP.

    client c1 ── r0 (FRR) ── br-lb ──┬─ port 1 [BMv2 lb1] port 2 ── speaker lb1 (GoBGP + bfdd)
     10.1.0.2   10.1.0.1  10.10.0.1  │            port 3 ─┐        10.10.0.11
                                     ├─ port 1 [BMv2 lb2] ... ─── speaker lb2  10.10.0.12
                   r1 (FRR) ─────────┤  ...               │
                 10.10.0.2           │                    │
                  10.2.0.1 ── br-srv ┴────────────────────┴── servers s1..s3 10.2.0.11..

- Each speaker sits *behind* its switch (port 2): its BGP sessions and BFD packets cross the
  switch's data plane, so they die with the switch (BFD, 100 ms x 3) and prove it forwards.
  Its address is the next hop it announces; ARP for it is flooded through the switch.
- Forward path: r0 spreads the VIP (learned from every speaker, default VRF) over the
  balancers with the kernel's ECMP (hash policy 3, fields 0x37: the 5-tuple); a balancer
  NATs to a backend on br-srv (its port 3).
- Return path: a server's default gateway is r1 (the servers' router, FRR), to which the
  speakers announce 0.0.0.0/0: a reply goes to any live balancer (ECMP again), whose reverse
  NAT is stateless (a table of backends), then to r0 and the client. No reply depends on one
  balancer. (One router with a VRF for the return path would do too; this kernel has no VRF.)
- ARP floods only between ports 1 and 2 (the config's `ports`): br-lb and br-srv are never
  bridged through a switch.

`python -m topology.tier up|down` builds or removes it; tests and `topology.tier_run` use the
Tier class. Everything it starts is recorded by PID in run/tier/state.json and stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4lb.intent.model import (
    Backend,
    Balancer,
    Config,
    HealthSettings,
    Host,
    SwitchConfig,
    TlsSettings,
    Vip,
)
from topology import thrift_guard
from topology.bmv2 import grpc_tls_args, log_args, switch_binary, wait_listening
from topology.pki import make_pki

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "run" / "tier"
NS = "p4t-"  # every namespace of the tier: p4t-fab, p4t-r0, p4t-r1, p4t-c1, p4t-lb1.., p4t-s1..
VIP = "10.0.0.100"
VIP_PORT = 80
SERVER_PORT = 8000
# The tier's VIPs (one address): name, port, algorithm. Round robin keeps state the
# balancers share; Maglev needs none (the same table on every balancer).
VIPS = (("web", 80, "wrr"), ("web-maglev", 81, "maglev"))
ROUTER_AS = 65000
SPEAKER_AS = 65100
CLIENT_NET = "10.1.0.0/24"
ROUTER_CLIENT = "10.1.0.1"
ROUTER_LB = "10.10.0.1"  # r0: learns the VIP
ROUTER_RET = "10.10.0.2"  # r1: learns the return path's default route
ROUTER_SRV = "10.2.0.1"  # r1: the servers' gateway
GRPC_BASE = 9560  # balancer i: P4Runtime on 127.0.0.1:GRPC_BASE+i
THRIFT_BASE = 9090  # and Thrift on THRIFT_BASE+i
BFD_MS = 100
BFD_MULT = 3
PKI = RUN / "pki"  # the tier's throwaway CA: one server pair for every switch, the controller's
BGP_SECRET = RUN / "bgp-password"  # TCP MD5 key of every BGP session, made per tier
MAX_BALANCERS = 16  # the router's ECMP width; one inbound filter entry per possible balancer
# GTSM (RFC 5082): a speaker's BGP packets cross its switch, which routes them (TTL - 1), so
# each side sends TTL 255 and accepts >= 254. GoBGP does it itself (ttl-security). On the
# routers a packet filter does it (router_filter): FRR 8.4's `ttl-security hops 2` makes
# bgpd ask bfdd for single-hop BFD, which a routed hop breaks (failover fell back to the BGP
# hold time: 2.3 s instead of 0.23 s); with `ebgp-multihop 255` BFD stays multihop.
GTSM_HOPS = 2


def bgp_password() -> str:
    """The tier's BGP MD5 key (made once per tier, owner-only)."""
    if not BGP_SECRET.exists():
        RUN.mkdir(parents=True, exist_ok=True)
        fd = os.open(BGP_SECRET, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(16))
    return BGP_SECRET.read_text().strip()


def controller_tls() -> TlsSettings:
    """How the controller reaches the tier's switches: TLS, our CA, its client certificate."""
    return TlsSettings(str(PKI / "ca.crt"), str(PKI / "p4lb.crt"), str(PKI / "p4lb.key"))


def speaker_addr(i: int) -> str:
    return f"10.10.0.{10 + i}"


def server_addr(j: int) -> str:
    return f"10.2.0.{10 + j}"


def client_addr(k: int) -> str:
    return f"10.1.0.{1 + k}"


def mac(kind: int, n: int) -> str:
    """Locally administered MACs: kind 1 switches, 2 servers, 3 router, 4 speakers, 5 clients."""
    return f"02:00:00:00:{kind:02x}:{n:02x}"


ROUTER_MACS = {"r0-lb": mac(3, 2), "r1-lb": mac(3, 3), "r1-srv": mac(3, 4)}


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60)


def in_ns(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *args, check=check)


def no_offload(ns: str | None, dev: str) -> None:
    """Real checksums and no segment coalescing: BMv2 sees every frame as sent, and GRO on a
    forwarding hop would hand it frames larger than the MTU."""
    cmd = ["ethtool", "-K", dev, "tx", "off", "rx", "off", "gso", "off", "gro", "off", "tso", "off"]
    if ns:
        in_ns(ns, *cmd, check=False)
    else:
        sh(*cmd, check=False)


def missing_tools() -> list[str]:
    """What the tier needs that this machine lacks (names a user can install)."""
    need = {
        "simple_switch_grpc": switch_binary(),
        "frr (zebra, bgpd, bfdd)": "/usr/lib/frr/bgpd",
        "gobgpd": "gobgpd",
        "gobgp": "gobgp",
        "vtysh": "vtysh",
        "ethtool": "ethtool",
        "nftables (nft)": "nft",
    }
    out = [name for name, exe in need.items() if not (shutil.which(exe) or Path(exe).exists())]
    if os.geteuid() != 0:
        out.append("root")
    return out


def router_conf(name: str, router_id: str, prefixes: list[str], password: str) -> str:
    """FRR for a router of the tier: BGP with dynamic neighbours on 10.10.0.0/24, each
    session with the tier's TCP MD5 key and GTSM (TTL >= 254: one routed hop, the switch);
    from each balancer's address only `prefixes` (a prefix another address announces, or
    one not in the list, is dropped); BFD multihop (the sessions cross a switch); ECMP over
    up to 16 balancers. TTL 255 out; router_filter drops a BGP packet below 254 in."""
    plist = "\n".join(
        f"ip prefix-list TIER seq {5 * (k + 1)} permit {p}" for k, p in enumerate(prefixes)
    )
    plist += "\n" + "\n".join(
        f"route-map TIER-IN permit {i}\n match peer {speaker_addr(i)}\n"
        " match ip address prefix-list TIER\nexit"
        for i in range(1, MAX_BALANCERS + 1)
    )
    return f"""frr defaults traditional
hostname {name}
log file {RUN}/{name}/frr.log
!
bfd
 profile tier
  detect-multiplier {BFD_MULT}
  receive-interval {BFD_MS}
  transmit-interval {BFD_MS}
 exit
exit
!
{plist}
route-map NOTHING deny 10
exit
!
router bgp {ROUTER_AS}
 bgp router-id {router_id}
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 timers bgp 1 3
 bgp bestpath as-path multipath-relax
 neighbor SPEAKERS peer-group
 neighbor SPEAKERS remote-as {SPEAKER_AS}
 neighbor SPEAKERS ebgp-multihop 255
 neighbor SPEAKERS password {password}
 neighbor SPEAKERS timers connect 1
 neighbor SPEAKERS bfd profile tier
 bgp listen range 10.10.0.0/24 peer-group SPEAKERS
 address-family ipv4 unicast
  maximum-paths 16
  neighbor SPEAKERS activate
  neighbor SPEAKERS soft-reconfiguration inbound
  neighbor SPEAKERS route-map TIER-IN in
  neighbor SPEAKERS route-map NOTHING out
 exit-address-family
exit
"""


def p4lb_config(balancers: int, servers: int, algorithm: str = "wrr") -> Config:
    """The p4lb config of the tier: the VIPs over the servers (port 3 of every switch), the
    routes every balancer has (clients and both routers: port 1), and per balancer its
    address, id, MAC, its speaker (port 2) and how the controller reaches the speaker."""
    hosts = (
        Host("clients", "10.1.0.0", ROUTER_MACS["r0-lb"], 1, prefix_len=16),
        Host("r0", ROUTER_LB, ROUTER_MACS["r0-lb"], 1),
        Host("r1", ROUTER_RET, ROUTER_MACS["r1-lb"], 1),
    )
    vips = []
    for k, (name, port, alg) in enumerate(VIPS):
        backends = tuple(
            Backend(f"s{j}", server_addr(j), SERVER_PORT + k, 1, mac(2, j), 3)
            for j in range(1, servers + 1)
        )
        health = HealthSettings(http_path="/", namespace=NS + "{backend}")
        vips.append(
            Vip(
                name, VIP, "tcp", port, algorithm if k == 0 else alg, mac(1, 0xFF), backends, health
            )
        )
    tier = tuple(
        Balancer(
            name=f"lb{i}",
            address=f"127.0.0.1:{GRPC_BASE + i}",
            device_id=i,
            mac=mac(1, i),
            ports=(1, 2),
            hosts=(Host(f"lb{i}-speaker", speaker_addr(i), mac(4, i), 2),),
            speaker_netns=NS + f"lb{i}",
            speaker_api="127.0.0.1:50051",
            nexthop=speaker_addr(i),
        )
        for i in range(1, balancers + 1)
    )
    return Config(
        switch=SwitchConfig(
            address=f"127.0.0.1:{GRPC_BASE + 1}",
            election_id=10,
            mac=mac(1, 1),
            tls=controller_tls(),
        ),
        hosts=hosts,
        vips=tuple(vips),
        source=str(RUN / "lb.toml"),
        tier=tier,
        tier_announce=("0.0.0.0/0",),
    )


def router_filter(lb_side: str) -> str:
    """nftables for a router's namespace: BGP only on its balancers' side (`lb_side`), and
    GTSM there (a BGP packet that crossed more than the balancer's switch is dropped)."""
    return f"""table inet p4lb_bgp {{
  chain input {{
    type filter hook input priority 0; policy accept;
    tcp dport 179 iifname != "{lb_side}" drop
    tcp sport 179 iifname != "{lb_side}" drop
    tcp dport 179 ip ttl < {256 - GTSM_HOPS} drop
    tcp sport 179 ip ttl < {256 - GTSM_HOPS} drop
  }}
}}
"""


def speaker_conf(i: int, password: str) -> str:
    """GoBGP for balancer i: eBGP to both routers from its own address, with the tier's TCP
    MD5 key and GTSM (it sends TTL 255 and accepts >= 254: the switch routes in between)."""
    neighbours = "".join(
        f"""
[[neighbors]]
  [neighbors.config]
    neighbor-address = "{peer}"
    peer-as = {ROUTER_AS}
    auth-password = "{password}"
  [neighbors.timers.config]
    connect-retry = 1
    hold-time = 3
    keepalive-interval = 1
  [neighbors.ttl-security.config]
    enabled = true
    ttl-min = {256 - GTSM_HOPS}
  [neighbors.transport.config]
    local-address = "{speaker_addr(i)}"
"""
        for peer in (ROUTER_LB, ROUTER_RET)
    )
    return f"""[global.config]
  as = {SPEAKER_AS}
  router-id = "{speaker_addr(i)}"
  port = -1
{neighbours}"""


def speaker_bfd_conf(i: int) -> str:
    peers = "".join(
        f""" peer {peer} multihop local-address {speaker_addr(i)}
  detect-multiplier {BFD_MULT}
  receive-interval {BFD_MS}
  transmit-interval {BFD_MS}
 exit
"""
        for peer in (ROUTER_LB, ROUTER_RET)
    )
    return f"bfd\n{peers}exit\n"


@dataclass
class Tier:
    """The tier's namespaces, links and processes. `pids` maps a name to a PID we started."""

    balancers: int = 3
    servers: int = 3
    clients: int = 1
    vips: list[str] = field(default_factory=lambda: [VIP])
    pids: dict[str, int] = field(default_factory=dict)
    root_links: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    thrift_ports: list[int] = field(default_factory=list)  # guarded (topology.thrift_guard)

    # --- state for `make stop` ------------------------------------------------------------

    def save(self) -> None:
        RUN.mkdir(parents=True, exist_ok=True)
        (RUN / "state.json").write_text(
            json.dumps(
                {
                    "pids": self.pids,
                    "links": self.root_links,
                    "netns": self.namespaces,
                    "thrift_ports": self.thrift_ports,
                    "balancers": self.balancers,
                    "servers": self.servers,
                    "clients": self.clients,
                }
            )
        )

    # --- plumbing -------------------------------------------------------------------------

    def netns(self, name: str) -> str:
        ns = NS + name
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        in_ns(ns, "ip", "link", "set", "lo", "up")
        in_ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        return ns

    def veth(self, a: str, a_ns: str | None, b: str, b_ns: str | None) -> None:
        """A veth pair a <-> b, each end in its namespace (None: the root one) under its
        name there, up. Made under temporary names: `b` may be a name (eth0) that each
        namespace has."""
        tmp_a, tmp_b = f"p4tmp{os.getpid() % 10000}a", f"p4tmp{os.getpid() % 10000}b"
        if a_ns is None:
            sh("ip", "link", "del", a, check=False)
        sh("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        for tmp, dev, ns in ((tmp_a, a, a_ns), (tmp_b, b, b_ns)):
            if ns:
                sh("ip", "link", "set", tmp, "netns", ns)
                in_ns(ns, "ip", "link", "set", tmp, "name", dev)
                in_ns(ns, "ip", "link", "set", dev, "up")
            else:
                sh("ip", "link", "set", tmp, "name", dev)
                sh("ip", "link", "set", dev, "up")
                self.root_links.append(dev)
            no_offload(ns, dev)

    def addr(self, ns: str, dev: str, cidr: str, mac_addr: str | None = None) -> None:
        if mac_addr:
            in_ns(ns, "ip", "link", "set", dev, "address", mac_addr)
        in_ns(ns, "ip", "addr", "add", cidr, "dev", dev)

    def start(self, name: str, args: list[str], ns: str | None, log: Path) -> int:
        """A process in `ns` (`ip netns exec` execs it: the PID is the process's own)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = (["ip", "netns", "exec", ns] if ns else []) + args
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.pids[name] = proc.pid
        self.save()
        return proc.pid

    def frr_daemon(self, ns: str, state: Path, daemon: str, extra: list[str]) -> None:
        """An FRR daemon daemonized in `ns`, its sockets and pid file under `state`."""
        pidfile = state / f"{daemon}.pid"
        pidfile.unlink(missing_ok=True)
        args = ["ip", "netns", "exec", ns, f"/usr/lib/frr/{daemon}", "-d", "-u", "root"]
        args += ["-g", "frrvty", "-P", "0", "--vty_socket", str(state), "-z", f"{state}/zserv.api"]
        args += ["-i", str(pidfile), "--log", f"file:{state}/{daemon}.log", *extra]
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"{daemon} in {ns}: {(r.stdout + r.stderr).strip()[-300:]}")
        for _ in range(100):  # bounded: the pid file appears once it runs
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.05)
        self.pids[f"{ns}-{daemon}"] = int(pidfile.read_text().strip())
        self.save()

    # --- the pieces -----------------------------------------------------------------------

    def build_network(self) -> None:
        RUN.mkdir(parents=True, exist_ok=True)
        fab = self.netns("fab")
        for br in ("br-lb", "br-srv"):
            in_ns(fab, "ip", "link", "add", br, "type", "bridge")
            in_ns(fab, "ip", "link", "set", br, "up")
        r0, r1 = self.netns("r0"), self.netns("r1")
        for ns in (r0, r1):
            for key in (
                "net.ipv4.ip_forward=1",
                "net.ipv4.fib_multipath_hash_policy=3",
                "net.ipv4.fib_multipath_hash_fields=0x37",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
                # Answer ARP only for the address on the asking interface: a server's ARP
                # for r1 also reaches br-lb, flooded through the switches.
                "net.ipv4.conf.all.arp_ignore=1",
            ):
                in_ns(ns, "sysctl", "-qw", key)
        # r0 and r1 on the balancers' bridge, r1 on the servers' too.
        for ns, dev, br, cidr in (
            (r0, "r0-lb", "br-lb", f"{ROUTER_LB}/24"),
            (r1, "r1-lb", "br-lb", f"{ROUTER_RET}/24"),
            (r1, "r1-srv", "br-srv", f"{ROUTER_SRV}/24"),
        ):
            self.veth(dev, ns, f"{dev}-f", fab)
            in_ns(fab, "ip", "link", "set", f"{dev}-f", "master", br)
            self.addr(ns, dev, cidr, ROUTER_MACS[dev])
        # Clients on r0's far side.
        for k in range(1, self.clients + 1):
            c = self.netns(f"c{k}")
            dev = f"r0-c{k}"
            self.veth(dev, r0, "eth0", c)
            net = f"10.1.{k - 1}"
            self.addr(r0, dev, f"{net}.1/24", mac(3, 16 + k))
            self.addr(c, "eth0", f"{net}.2/24", mac(5, k))
            in_ns(c, "ip", "route", "add", "default", "via", f"{net}.1")
        # Servers on br-srv, their gateway r0 (VRF ret).
        for j in range(1, self.servers + 1):
            s = self.netns(f"s{j}")
            self.veth(f"s{j}-f", fab, "eth0", s)
            in_ns(fab, "ip", "link", "set", f"s{j}-f", "master", "br-srv")
            self.addr(s, "eth0", f"{server_addr(j)}/24", mac(2, j))
            in_ns(s, "ip", "route", "add", "default", "via", ROUTER_SRV)
        self.save()

    def start_router(self, name: str, router_id: str, prefixes: list[str]) -> None:
        """zebra, bfdd and bgpd in router `name`'s namespace, configured through vtysh."""
        ns = NS + name
        state = RUN / name
        state.mkdir(parents=True, exist_ok=True)
        self.frr_daemon(ns, state, "zebra", [])
        self.frr_daemon(ns, state, "bfdd", ["--bfdctl", f"{state}/bfdd.sock"])
        self.frr_daemon(ns, state, "bgpd", [])
        conf = state / "frr.conf"
        conf.touch(mode=0o600)
        conf.chmod(0o600)  # it holds the BGP key
        conf.write_text(router_conf(name, router_id, prefixes, bgp_password()))
        for _ in range(50):  # the daemons' vty sockets may not listen yet: bounded retries
            r = subprocess.run(
                ["ip", "netns", "exec", ns, "vtysh", "--vty_socket", str(state), "-f", str(conf)],
                capture_output=True,
                text=True,
                timeout=30,
            )
            shown = in_ns(
                ns, "vtysh", "--vty_socket", str(state), "-c", "show running-config", check=False
            ).stdout
            if r.returncode == 0 and "bgp listen range" in shown and "profile tier" in shown:
                return
            time.sleep(0.1)
        raise RuntimeError(f"vtysh -f {conf}: {(r.stdout + r.stderr).strip()[-400:]}")

    def start_routers(self) -> None:
        self.start_router("r0", ROUTER_LB, [f"{v}/32" for v in self.vips])
        self.start_router("r1", ROUTER_RET, ["0.0.0.0/0"])
        # The filters live in the routers' namespaces and go with them.
        for name, lb_side in (("r0", "r0-lb"), ("r1", "r1-lb")):
            rules = RUN / name / "bgp.nft"
            rules.write_text(router_filter(lb_side))
            in_ns(NS + name, "nft", "-f", str(rules))

    def balancer_links(self, i: int) -> None:
        """Balancer i's three switch ports (root-namespace veth ends) and its speaker's
        namespace behind port 2."""
        fab = NS + "fab"
        self.veth(f"t{i}p1", None, f"t{i}p1-f", fab)
        in_ns(fab, "ip", "link", "set", f"t{i}p1-f", "master", "br-lb")
        self.veth(f"t{i}p3", None, f"t{i}p3-f", fab)
        in_ns(fab, "ip", "link", "set", f"t{i}p3-f", "master", "br-srv")
        spk = self.netns(f"lb{i}")
        self.veth(f"t{i}p2", None, "eth0", spk)
        self.addr(spk, "eth0", f"{speaker_addr(i)}/24", mac(4, i))
        self.save()

    def start_switch(self, i: int, binary: str | None = None, log: bool = False) -> int:
        """Balancer i's BMv2 (no pipeline until p4lb pushes one), P4Runtime on 127.0.0.1 over
        TLS with client certificates of the tier's CA, Thrift reachable from this host only."""
        out = RUN / f"lb{i}" / "switch.out"
        args = [binary or switch_binary(), "--device-id", str(i), "--no-p4"]
        args += ["--thrift-port", str(THRIFT_BASE + i)]
        args += log_args(RUN / f"lb{i}" / "switch.log" if log else None)
        for port in (1, 2, 3):
            args += ["-i", f"{port}@t{i}p{port}"]
        args += ["--", "--grpc-server-addr", f"127.0.0.1:{GRPC_BASE + i}"]
        args += grpc_tls_args(PKI / "ca.crt", PKI / "switch.crt", PKI / "switch.key")
        thrift_guard.confine(THRIFT_BASE + i)
        if THRIFT_BASE + i not in self.thrift_ports:
            self.thrift_ports.append(THRIFT_BASE + i)
        pid = self.start(f"switch-lb{i}", args, None, out)
        wait_listening(GRPC_BASE + i, 20.0)
        return pid

    def start_speaker(self, i: int) -> None:
        """Balancer i's GoBGP (announcing nothing yet: p4lb announces once the switch holds
        the tier's state) and bfdd for its two sessions."""
        spk = NS + f"lb{i}"
        state = RUN / f"lb{i}"
        state.mkdir(parents=True, exist_ok=True)
        conf = state / "gobgpd.toml"
        conf.touch(mode=0o600)
        conf.chmod(0o600)  # it holds the BGP key
        conf.write_text(speaker_conf(i, bgp_password()))
        self.start(
            f"gobgpd-lb{i}",
            ["gobgpd", "-f", str(conf), "-p", "--api-hosts", "127.0.0.1:50051", "--pprof-disable"],
            spk,
            state / "gobgpd.log",
        )
        bfdd = self.pids.get(f"{spk}-bfdd")
        if bfdd is not None and alive(bfdd):
            return  # the speaker alone restarted: its bfdd runs on, configured
        self.frr_daemon(spk, state, "bfdd", ["--bfdctl", f"{state}/bfdd.sock"])
        bfd = state / "bfdd.conf"
        bfd.write_text(speaker_bfd_conf(i))
        # bfdd writes its pid file before its vty socket listens: retry until it took the
        # config (bounded).
        for _ in range(50):
            in_ns(spk, "vtysh", "--vty_socket", str(state), "-f", str(bfd), check=False)
            shown = in_ns(
                spk, "vtysh", "--vty_socket", str(state), "-c", "show bfd peers brief", check=False
            ).stdout
            if ROUTER_LB in shown and ROUTER_RET in shown:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"bfdd in {spk} did not take {bfd}")

    def start_servers(self) -> None:
        """An HTTP server per backend host and VIP (port SERVER_PORT + the VIP's index: a
        backend's address and port name its VIP to the reverse NAT)."""
        for j in range(1, self.servers + 1):
            for k, _ in enumerate(VIPS):
                port = SERVER_PORT + k
                log = RUN / "access" / f"s{j}-{port}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("")
                args = [sys.executable, "-m", "topology.server", "--name", f"s{j}"]
                args += ["--port", str(port), "--log", str(log), "--threaded", "--keep-alive"]
                self.start(f"server-s{j}-{port}", args, NS + f"s{j}", log.with_suffix(".out"))
        for j in range(1, self.servers + 1):
            for k, _ in enumerate(VIPS):
                in_ns(
                    NS + f"s{j}",
                    "sh",
                    "-c",
                    f"for i in $(seq 100); do ss -Hltn 'sport = :{SERVER_PORT + k}' | grep -q . "
                    "&& exit 0; sleep 0.05; done; exit 1",
                )

    def up(self) -> None:
        BGP_SECRET.unlink(missing_ok=True)  # a new key and CA for every tier
        make_pki(PKI, ["switch"])
        self.build_network()
        self.start_routers()
        self.start_servers()
        for i in range(1, self.balancers + 1):
            self.balancer_links(i)
            self.start_switch(i)
            self.start_speaker(i)

    # --- events ---------------------------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process we started, by its PID."""
        pid = self.pids.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        gone_by(pid, time.monotonic() + 2)
        self.save()

    def ecmp_next_hops(self, vip: str = VIP) -> list[str]:
        """The next hops r0's kernel has for the VIP now."""
        route = in_ns(NS + "r0", "ip", "route", "show", f"{vip}/32", check=False).stdout
        return sorted(w.split()[0] for w in route.split("via ")[1:])

    # --- teardown -------------------------------------------------------------------------

    def down(self) -> None:
        stop_recorded(self.pids, self.root_links, self.namespaces, self.thrift_ports)
        (RUN / "state.json").unlink(missing_ok=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone_by(pid: int, deadline: float) -> bool:
    """Wait (until `deadline`) for a process we started to be gone, reaping it if it is our
    child; whether it is."""
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)
    return False


def stop_recorded(
    pids: dict[str, int], links: list[str], namespaces: list[str], thrift_ports: list[int]
) -> None:
    """Stop what a tier started (by PID: TERM, then KILL after 3 s), remove its links,
    namespaces and Thrift guards. Servers and speakers first, switches last."""
    order = sorted(pids.items(), key=lambda kv: kv[0].startswith("switch"))
    for _, pid in order:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    for _, pid in order:
        if not gone_by(pid, deadline):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for link in links:
        sh("ip", "link", "del", link, check=False)
    for ns in namespaces:
        sh("ip", "netns", "del", ns, check=False)
    for port in thrift_ports:
        thrift_guard.release(port)


BANNER = """
p4lb tier is running: {n} balancers behind r0 (FRR, ECMP), VIP {vip}:80 (wrr) and :81 (maglev)
over {servers} servers. Each balancer's GoBGP speaker announces the VIP while its switch holds
the tier's state.
  ip netns exec p4t-c1 curl -s http://{vip}/ | head -c 80          # one request
  ip netns exec p4t-c1 ab -n 1000 -c 20 http://{vip}/               # load
  ip netns exec p4t-r0 ip route show {vip}                          # the ECMP next hops
  .venv/bin/p4lb -c {config} stats                                  # per balancer + tier
  .venv/bin/p4lb -c {config} tier drain lb1                         # withdraw one
  kill -9 $(jq .pids[\"switch-lb2\"] {state})                        # a balancer dies
Controller log: {log}.  Ctrl-C (or `make stop`) stops everything.
"""


def ab(requests: int, concurrency: int, seconds: int | None = None) -> dict[str, Any]:
    """ab from the client through the VIP (no keep-alive, 5 s timeout, going on after
    errors): requests/s, complete and failed; an ab that gave up (a request unanswered for
    5 s) counts every request as failed and says why."""
    args = ["ab", "-q", "-r", "-s", "5", "-n", str(requests), "-c", str(concurrency)]
    if seconds:
        args += ["-t", str(seconds)]
    r = in_ns(NS + "c1", *args, f"http://{VIP}/", check=False)
    rps = re.search(r"Requests per second:\s+([\d.]+)", r.stdout)
    done = re.search(r"Complete requests:\s+(\d+)", r.stdout)
    failed = re.search(r"Failed requests:\s+(\d+)", r.stdout)
    return {
        "rps": float(rps.group(1)) if rps else 0.0,
        "complete": int(done.group(1)) if done else 0,
        "failed": int(failed.group(1)) if failed else requests,
        "error": "" if done else (r.stderr or r.stdout)[-200:],
    }


def wait_for_vip(timeout_s: float = 60.0, port: int = VIP_PORT) -> bool:
    """Bounded wait until a request from the client through the VIP gets an answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = in_ns(NS + "c1", "curl", "-s", "-m", "1", f"http://{VIP}:{port}/", check=False)
        if "p4lb" in r.stdout:
            return True
        time.sleep(0.2)
    return False


def start_controller(t: Tier, config: Path) -> int:
    exe = Path(sys.executable).with_name("p4lb")
    return t.start(
        "controller",
        [str(exe) if exe.exists() else "p4lb", "-c", str(config), "run"],
        None,
        RUN / "controller.log",
    )


def run(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="make run TOPO=scaleout")
    p.add_argument("--balancers", type=int, default=3)
    p.add_argument("--servers", type=int, default=3)
    p.add_argument("--algorithm", default="wrr", help="the port-80 VIP's algorithm")
    p.add_argument("--no-cli", action="store_true", help="start, check one request, stop")
    a = p.parse_args(argv)
    if missing := missing_tools():
        print(f"make run TOPO=scaleout: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    from topology.tier_load import start_tier

    try:
        t = start_tier(a.balancers, a.servers, a.algorithm)
    except (RuntimeError, TimeoutError) as e:
        print(f"tier: {e}", file=sys.stderr)
        return 1
    config = RUN / "lb.toml"
    try:
        if a.no_cli:
            print(f"tier: the VIP answers; r0's next hops: {', '.join(t.ecmp_next_hops())}")
            return 0
        print(
            BANNER.format(
                n=a.balancers,
                vip=VIP,
                servers=a.servers,
                config=config,
                log=RUN / "controller.log",
                state=RUN / "state.json",
            )
        )
        with contextlib.suppress(KeyboardInterrupt):
            while (RUN / "state.json").exists():  # `make stop` removes it
                time.sleep(0.5)
        return 0
    finally:
        t.down()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["down"]:
        state = RUN / "state.json"
        if not state.exists():
            print("tier: nothing recorded as running")
            return 0
        s = json.loads(state.read_text())
        stop_recorded(s["pids"], s["links"], s["netns"], s.get("thrift_ports", []))
        state.unlink()
        print("tier: stopped")
        return 0
    if args[:1] == ["run"]:
        return run(args[1:])
    if args[:1] == ["up"]:
        if missing := missing_tools():
            print(f"tier: needs {', '.join(missing)}", file=sys.stderr)
            return 2
        t = Tier()
        t.up()
        print(f"tier: up, state in {RUN}/state.json")
        return 0
    print("usage: python -m topology.tier run [--balancers N ...] | up | down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
