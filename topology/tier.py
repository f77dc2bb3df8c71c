"""A tier of p4lb balancers behind ECMP and BGP (`make run TOPO=tier`), in network
namespaces on this host, on the engines people deploy: FRR (zebra, bgpd, bfdd) as the front
router, GoBGP as each balancer's BGP speaker, FRR's bfdd beside it, the kernel's ECMP.

    client c1 ── r0 (FRR) ── br-lb ──┬─ port 1 [BMv2 lb1] port 3 ─┐   data: 10.10.0.41
     10.1.0.2   10.1.0.1  10.10.0.1  ├─ speaker lb1 (GoBGP + bfdd) │   control: 10.10.0.11
                                     ├─ port 1 [BMv2 lb2] ...      │   10.10.0.42 / .12
                   r1 (FRR) ─────────┤  ...                        │
                 10.10.0.2           │                             │
                  10.2.0.1 ── br-srv ┴─────────────────────────────┴── servers s1..s3 10.2.0.11..

- Control and data take separate links. Each speaker has its own port on br-lb (its
  address, 10.10.0.1i, carries its BGP sessions and BFD) and announces the balancer's data
  address (10.10.0.4i: the next hop) for the switch. Overload is not failure: a busy switch
  queues its traffic ahead of its P4 program (each port's capture ring, then one shared
  1,024-packet FIFO, BMv2's input buffer), where no priority can reach, so control packets
  crossing it would be late or lost exactly when it is busy, and a live balancer would look
  dead. The speaker dies with its switch instead: its bond (topology.bond) kills it the
  moment the switch's process ends, and the kernel closes its sessions (the routers drop
  its routes in about 0.1 s); `p4lb run` withdraws a balancer whose switch is gone, or one
  that stays silent, but never below a floor (p4lb.service.announce).
- The routers hold each balancer's data address at its switch's MAC (a permanent neighbour
  entry) and the fabric's bridge holds that MAC behind the switch's port 1 (a static
  entry): no ARP crosses a switch, and no frame for a quiet switch is flooded to the others.
- The control plane's daemons (FRR, GoBGP, bfdd) run at a higher CPU priority than anything
  else (nice -10, CONTROL_NICE), the switches at a lower one (nice 5, SWITCH_NICE): on a host
  the switches keep busy, BFD is still sent on time, and the controller and an operator's
  command still get the CPU they need.
- Forward path: r0 spreads the VIP (learned from every speaker, default VRF) over the
  balancers with the kernel's ECMP (hash policy 3, fields 0x37: the 5-tuple); a balancer
  NATs to a backend on br-srv (its port 3).
- Return path: a server's default gateway is r1 (the servers' router, FRR), to which the
  speakers announce 0.0.0.0/0: a reply goes to any live balancer (ECMP again), whose reverse
  NAT is stateless (a table of backends), then to r0 and the client. No reply depends on one
  balancer. (One router with a VRF for the return path would do too; this kernel has no VRF.)
- A switch floods ARP only to port 1 (the config's `ports`): nothing from br-lb crosses it;
  a server's ARP for r1 reaches br-lb that way, where only r1 answers, and only on br-srv
  (arp_ignore). No other frame is bridged between br-lb and br-srv.

`python -m topology.tier run|up|down` runs, builds or removes it (`make run TOPO=tier`,
`make stop`); `restart|add|remove` are the operator's verbs on a running tier
(topology.tier_ops); tests and `topology.tier_load` use the Tier class. Everything it starts is
recorded by PID in run/tier/state.json and stopped by PID; every process is started in a
session of its own, so `run --detach` can return and leave the tier running.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
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
from p4lb.intent.running import clear_pointer, pointer_path, write_pointer
from topology import thrift_guard
from topology.bmv2 import grpc_tls_args, log_args, switch_binary, wait_listening
from topology.pki import make_pki
from topology.procs import alive, gone_by, set_group_nice, stop_pids

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "run" / "tier"
STATE = RUN / "state.json"  # what runs: the one record every process changes under its lock
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
# BFD between each speaker and the routers. Its packets never cross a switch (the control
# link), so the detection time (interval x multiplier) need only outlast the control
# plane's own delays: bfdd's scheduling on a busy host (it runs at CONTROL_NICE) and the
# bridge. A switch's death is not left to BFD: the bond closes the speaker's sessions.
# (Were BFD to cross a switch, the detection time would have to exceed the switch's worst
# queueing delay: its capture ring plus 1,024 packets at its slowest rate under load,
# seconds on BMv2, and no loss of `multiplier` packets in a row, which tail drops break.)
BFD_MS = 100
BFD_MULT = 5
CONTROL_NICE = -10  # FRR, GoBGP, bfdd: ahead of everything else on the host
# How long a server keeps an idle keep-alive connection (nginx's default is 75 s). Under
# overload a held connection's next request can wait seconds in the switches' queues; a short
# timeout (the servers' own default is Apache's 5 s) would close it at the server, a close that
# says nothing about the balancers.
SERVER_IDLE_S = 60
# The switches behind everything else: under overload the data plane slows down, not the
# controller (its copies and announcements), an operator's command or the routers. With
# the CPU busy either way, a switch forwards as much as before (it gets what the others
# leave, which is most of it); it only waits when they have work.
SWITCH_NICE = 5
PKI = RUN / "pki"  # the tier's throwaway CA: one server pair for every switch, the controller's
BGP_SECRET = RUN / "bgp-password"  # TCP MD5 key of every BGP session, made per tier
MAX_BALANCERS = 16  # the router's ECMP width; one inbound filter entry per possible balancer
# GTSM (RFC 5082): a speaker is on the routers' link (the control link), so each side sends
# TTL 255 and accepts only 255. GoBGP does it itself (ttl-security). On the routers a packet
# filter does it (router_filter): FRR 8.4's `ttl-security` makes bgpd ask bfdd for
# single-hop BFD, which the tier's multihop profile does not give (failover fell back to the
# BGP hold time once: 2.3 s instead of 0.23 s); with `ebgp-multihop 255` BFD stays multihop.
GTSM_HOPS = 1


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
    """Balancer i's speaker on the control link: its BGP sessions and BFD."""
    return f"10.10.0.{10 + i}"


def nexthop_addr(i: int) -> str:
    """Balancer i's data address: the next hop its speaker announces, its switch's port 1."""
    return f"10.10.0.{40 + i}"


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
    session with the tier's TCP MD5 key and GTSM (TTL 255: the routers' own link); from
    each speaker's address only `prefixes` with that balancer's own data address as next
    hop (a prefix another address announces, one not in the list, or another balancer's
    next hop is dropped); BFD multihop; ECMP over up to 16 balancers. TTL 255 out;
    router_filter drops a BGP packet below 255 in."""
    plist = "\n".join(
        f"ip prefix-list TIER seq {5 * (k + 1)} permit {p}" for k, p in enumerate(prefixes)
    )
    plist += "\n" + "\n".join(
        f"ip prefix-list NEXTHOP-{i} seq 5 permit {nexthop_addr(i)}/32\n"
        f"route-map TIER-IN permit {i}\n match peer {speaker_addr(i)}\n"
        f" match ip address prefix-list TIER\n match ip next-hop prefix-list NEXTHOP-{i}\nexit"
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


def tier_balancer(i: int) -> Balancer:
    """Balancer i as the tier's config names it: its switch's address, id and MAC, its one
    flooding port (port 1, so a switch floods nothing), its data address as the next hop
    its speaker announces, and where the controller reaches that speaker."""
    return Balancer(
        name=f"lb{i}",
        address=f"127.0.0.1:{GRPC_BASE + i}",
        device_id=i,
        mac=mac(1, i),
        ports=(1,),
        speaker_netns=NS + f"lb{i}",
        speaker_api="127.0.0.1:50051",
        nexthop=nexthop_addr(i),
    )


def p4lb_config(balancers: int, servers: int, algorithm: str = "wrr") -> Config:
    """The p4lb config of the tier: the VIPs over the servers (port 3 of every switch), the
    routes every balancer has (clients and both routers: port 1), and per balancer its
    address, id, MAC, its data address (the next hop its speaker announces) and how the
    controller reaches its speaker."""
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
    tier = tuple(tier_balancer(i) for i in range(1, balancers + 1))
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
    GTSM there (a BGP packet that crossed any router on its way, TTL below 255, is dropped)."""
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
    MD5 key and GTSM (it sends TTL 255 and accepts only 255: the routers' own link)."""
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


@contextlib.contextmanager
def state_lock() -> Iterator[None]:
    """Hold the lock every change to state.json takes (the tier's run, an operator's
    `restart`/`add`/`remove`, a test), so none of them loses another's record."""
    RUN.mkdir(parents=True, exist_ok=True)
    fd = os.open(RUN / ".state.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def balancer_records(i: int) -> tuple[set[str], set[str], str, int]:
    """What balancer i owns in state.json: its processes' names, its root-namespace links,
    its speaker's namespace and its switch's Thrift port (`remove` takes exactly these)."""
    ns = NS + f"lb{i}"
    procs = {f"switch-lb{i}", f"gobgpd-lb{i}", f"bond-lb{i}", f"{ns}-bfdd"}
    return procs, {f"t{i}p1", f"t{i}p3"}, ns, THRIFT_BASE + i


@dataclass
class Tier:
    """The tier's namespaces, links and processes. `pids` maps a name to a PID we started;
    `lbs` are the balancers' indexes (lb1 is 1). state.json is the record: every change
    goes through `edit()`, which reads it first (another process may have changed it)."""

    balancers: int = 3
    servers: int = 3
    clients: int = 1
    vips: list[str] = field(default_factory=lambda: [VIP])
    pids: dict[str, int] = field(default_factory=dict)
    root_links: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    thrift_ports: list[int] = field(default_factory=list)  # guarded (topology.thrift_guard)
    lbs: list[int] = field(default_factory=list)
    _editing: int = field(default=0, repr=False, compare=False)

    # --- state for `make stop` ------------------------------------------------------------

    @classmethod
    def load(cls) -> Tier:
        """The tier state.json records (empty if none is)."""
        t = cls()
        t.reload()
        return t

    def reload(self) -> None:
        """Take what state.json records now (nothing changes if there is no file)."""
        if not STATE.exists():
            return
        s = json.loads(STATE.read_text())
        self.pids = {k: int(v) for k, v in s["pids"].items()}
        self.root_links = list(s["links"])
        self.namespaces = list(s["netns"])
        self.thrift_ports = list(s.get("thrift_ports", []))
        self.balancers = int(s.get("balancers", self.balancers))
        self.servers = int(s.get("servers", self.servers))
        self.clients = int(s.get("clients", self.clients))
        self.lbs = list(s.get("balancer_ids", range(1, self.balancers + 1)))

    def save(self) -> None:
        """Write the record whole (a reader never sees half of it)."""
        RUN.mkdir(parents=True, exist_ok=True)
        doc = {
            "pids": self.pids,
            "links": self.root_links,
            "netns": self.namespaces,
            "thrift_ports": self.thrift_ports,
            "balancers": self.balancers,
            "servers": self.servers,
            "clients": self.clients,
            "balancer_ids": self.lbs,
        }
        tmp = STATE.with_name(f".{STATE.name}.{os.getpid()}")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, STATE)

    @contextlib.contextmanager
    def edit(self) -> Iterator[None]:
        """Change the record: under the state lock, from the file as it is, written back at
        the end. Nested edits share the outer one."""
        if self._editing:
            yield
            self.save()
            return
        with state_lock():
            self._editing += 1
            try:
                self.reload()
                yield
                self.save()
            finally:
                self._editing -= 1

    # --- plumbing -------------------------------------------------------------------------

    def netns(self, name: str) -> str:
        ns = NS + name
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "netns", "add", ns)
        with self.edit():
            if ns not in self.namespaces:
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
                with self.edit():
                    if dev not in self.root_links:
                        self.root_links.append(dev)
            no_offload(ns, dev)

    def addr(self, ns: str, dev: str, cidr: str, mac_addr: str | None = None) -> None:
        if mac_addr:
            in_ns(ns, "ip", "link", "set", dev, "address", mac_addr)
        in_ns(ns, "ip", "addr", "add", cidr, "dev", dev)

    def start(self, name: str, args: list[str], ns: str | None, log: Path, nice: int = 0) -> int:
        """A process in `ns` (`ip netns exec` and `nice` exec it: the PID is the process's
        own), at niceness `nice`."""
        log.parent.mkdir(parents=True, exist_ok=True)
        if nice:
            args = ["nice", "-n", str(nice), *args]
        cmd = (["ip", "netns", "exec", ns] if ns else []) + args
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if nice:
            set_group_nice(proc.pid, nice)
        with self.edit():
            self.pids[name] = proc.pid
        return proc.pid

    def frr_daemon(self, ns: str, state: Path, daemon: str, extra: list[str]) -> None:
        """An FRR daemon daemonized in `ns`, its sockets and pid file under `state`."""
        pidfile = state / f"{daemon}.pid"
        pidfile.unlink(missing_ok=True)
        # The control plane runs ahead of the switches on the CPU (CONTROL_NICE).
        args = ["ip", "netns", "exec", ns, "nice", "-n", str(CONTROL_NICE)]
        args += [f"/usr/lib/frr/{daemon}", "-d", "-u", "root"]
        args += ["-g", "frrvty", "-P", "0", "--vty_socket", str(state), "-z", f"{state}/zserv.api"]
        args += ["-i", str(pidfile), "--log", f"file:{state}/{daemon}.log", *extra]
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"{daemon} in {ns}: {(r.stdout + r.stderr).strip()[-300:]}")
        for _ in range(100):  # bounded: the pid file appears once it runs
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.05)
        pid = int(pidfile.read_text().strip())
        set_group_nice(pid, CONTROL_NICE)  # it daemonized: a session, an autogroup of its own
        with self.edit():
            self.pids[f"{ns}-{daemon}"] = pid

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
        """Balancer i's two switch ports (root-namespace veth ends: port 1 on br-lb, port 3
        on br-srv), its speaker's namespace on br-lb (the control link), and the routers'
        and the bridge's fixed entries for its data address."""
        fab = NS + "fab"
        self.veth(f"t{i}p1", None, f"t{i}p1-f", fab)
        in_ns(fab, "ip", "link", "set", f"t{i}p1-f", "master", "br-lb")
        # The switch's MAC lives behind its port 1 for good: a frame for a quiet switch is
        # never flooded to the others (which would balance it too).
        in_ns(fab, "bridge", "fdb", "replace", mac(1, i), "dev", f"t{i}p1-f", "master", "static")
        self.veth(f"t{i}p3", None, f"t{i}p3-f", fab)
        in_ns(fab, "ip", "link", "set", f"t{i}p3-f", "master", "br-srv")
        spk = self.netns(f"lb{i}")
        self.veth(f"lb{i}-f", fab, "eth0", spk)
        in_ns(fab, "ip", "link", "set", f"lb{i}-f", "master", "br-lb")
        self.addr(spk, "eth0", f"{speaker_addr(i)}/24", mac(4, i))
        # The routers reach the data address at the switch's MAC without asking: an ARP
        # request would queue in the switch like the traffic (no ARP crosses a switch).
        for ns, dev in ((NS + "r0", "r0-lb"), (NS + "r1", "r1-lb")):
            in_ns(
                ns,
                "ip",
                "neigh",
                "replace",
                nexthop_addr(i),
                "lladdr",
                mac(1, i),
                "dev",
                dev,
                "nud",
                "permanent",
            )
        with self.edit():
            if i not in self.lbs:
                self.lbs.append(i)

    def start_switch(self, i: int, binary: str | None = None, log: bool = False) -> int:
        """Balancer i's BMv2 (no pipeline until p4lb pushes one), P4Runtime on 127.0.0.1 over
        TLS with client certificates of the tier's CA, Thrift reachable from this host only."""
        out = RUN / f"lb{i}" / "switch.out"
        args = [binary or switch_binary(), "--device-id", str(i), "--no-p4"]
        args += ["--thrift-port", str(THRIFT_BASE + i)]
        args += log_args(RUN / f"lb{i}" / "switch.log" if log else None)
        for port in (1, 3):
            args += ["-i", f"{port}@t{i}p{port}"]
        args += ["--", "--grpc-server-addr", f"127.0.0.1:{GRPC_BASE + i}"]
        args += grpc_tls_args(PKI / "ca.crt", PKI / "switch.crt", PKI / "switch.key")
        thrift_guard.confine(THRIFT_BASE + i)
        with self.edit():
            if THRIFT_BASE + i not in self.thrift_ports:
                self.thrift_ports.append(THRIFT_BASE + i)
        pid = self.start(f"switch-lb{i}", args, None, out, nice=SWITCH_NICE)
        wait_listening(GRPC_BASE + i, 20.0)
        return pid

    def start_bond(self, i: int) -> int:
        """Balancer i's bond (topology.bond): its speaker dies with its switch process."""
        return self.start(
            f"bond-lb{i}",
            [
                sys.executable,
                "-m",
                "topology.bond",
                "--switch",
                f"switch-lb{i}",
                "--speaker",
                f"gobgpd-lb{i}",
                "--state",
                str(STATE),
            ],
            None,
            RUN / f"lb{i}" / "bond.out",
        )

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
            nice=CONTROL_NICE,
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
                args += ["--idle-timeout", str(SERVER_IDLE_S)]
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
        if STATE.exists():
            raise RuntimeError(f"a tier is recorded as running ({STATE}): sudo make stop first")
        BGP_SECRET.unlink(missing_ok=True)  # a new key and CA for every tier
        make_pki(PKI, ["switch"])
        self.build_network()
        self.start_routers()
        self.start_servers()
        for i in range(1, self.balancers + 1):
            self.add_balancer(i)

    def add_balancer(self, i: int) -> None:
        """Balancer i whole: links, switch, speaker, bond (the controller does the rest)."""
        self.balancer_links(i)
        self.start_switch(i)
        self.start_speaker(i)
        self.start_bond(i)

    # --- events ---------------------------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process we started, by its PID (the event of a test: no restart)."""
        with self.edit():
            pid = self.pids.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        gone_by(pid, time.monotonic() + 2)

    def ecmp_next_hops(self, vip: str = VIP) -> list[str]:
        """The next hops r0's kernel has for the VIP now."""
        route = in_ns(NS + "r0", "ip", "route", "show", f"{vip}/32", check=False).stdout
        return sorted(w.split()[0] for w in route.split("via ")[1:])

    # --- teardown -------------------------------------------------------------------------

    def down(self) -> None:
        """Stop everything recorded, whoever started it (the run, an operator's verb)."""
        with state_lock():
            self.reload()
            stop_recorded(self.pids, self.root_links, self.namespaces, self.thrift_ports)
            STATE.unlink(missing_ok=True)


def stop_recorded(
    pids: dict[str, int], links: list[str], namespaces: list[str], thrift_ports: list[int]
) -> None:
    """Stop what a tier started (by PID: TERM, then KILL after 3 s), remove its links,
    namespaces and Thrift guards. Servers and speakers first, switches last."""
    order = sorted(pids.items(), key=lambda kv: kv[0].startswith("switch"))
    stop_pids(pid for _, pid in order)
    for link in links:
        sh("ip", "link", "del", link, check=False)
    for ns in namespaces:
        sh("ip", "netns", "del", ns, check=False)
    for port in thrift_ports:
        thrift_guard.release(port)


BANNER = """
p4lb tier is running: {n} balancers behind r0 (FRR, ECMP), VIP {vip}:80 (wrr) and :81 (maglev)
over {servers} servers. Each balancer's GoBGP speaker announces the VIP while its switch holds
the tier's state. p4lb finds the tier's config through {pointer}.
  sudo ip netns exec p4t-c1 curl -s http://{vip}/ | head -c 80   # one request
  sudo ip netns exec p4t-c1 ab -n 1000 -c 20 http://{vip}/        # load
  sudo ip netns exec p4t-r0 ip route show {vip}                   # the ECMP next hops
  sudo p4lb stats                                                 # per balancer + tier
  sudo p4lb tier drain lb1                                        # withdraw one
  {kill_line}   # a balancer dies
Controller log: {log}.  {how_to_stop}
"""


def kill_line(name: str, state: Path) -> str:
    """The shell command that kills one process of the tier by the PID state.json holds."""
    return f"sudo kill -9 $(jq -r '.pids[\"{name}\"]' {state})"


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


NEEDS_ROOT = "make stop: needs root: sudo make stop"


def run(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="make run TOPO=tier")
    p.add_argument("--balancers", type=int, default=3)
    p.add_argument("--servers", type=int, default=3)
    p.add_argument("--algorithm", default="wrr", help="the port-80 VIP's algorithm")
    p.add_argument("--no-cli", action="store_true", help="start, check one request, stop")
    p.add_argument(
        "--detach",
        action="store_true",
        help="start, print the banner and return, the tier left running (sudo make stop)",
    )
    a = p.parse_args(argv)
    if missing := missing_tools():
        print(f"make run TOPO=tier: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    from topology.tier_load import start_tier

    try:
        t = start_tier(a.balancers, a.servers, a.algorithm)
    except (RuntimeError, TimeoutError) as e:
        print(f"tier: {e}", file=sys.stderr)
        return 1
    config = RUN / "lb.toml"
    state = RUN / "state.json"
    left_running = False
    try:
        if a.no_cli:
            print(f"tier: the VIP answers; r0's next hops: {', '.join(t.ecmp_next_hops())}")
            return 0
        write_pointer(config)  # `sudo p4lb stats` from anywhere finds the tier's config
        print(
            BANNER.format(
                n=a.balancers,
                vip=VIP,
                servers=a.servers,
                pointer=pointer_path(),
                log=RUN / "controller.log",
                kill_line=kill_line("switch-lb2", state),
                how_to_stop="`sudo make stop` stops everything."
                if a.detach
                else "Ctrl-C (or `sudo make stop` in another terminal) stops everything.",
            ),
            flush=True,
        )
        if a.detach:  # every process runs in a session of its own, recorded in state.json
            left_running = True
            return 0
        with contextlib.suppress(KeyboardInterrupt):
            while state.exists():  # `make stop` removes it
                time.sleep(0.5)
        return 0
    finally:
        if not left_running:
            clear_pointer(config)
            t.down()


def stop_from_state(state: Path) -> bool:
    """Stop the tier `state` (its state.json) records, by PID, and remove the pointer when it
    names the tier's config; whether a tier was recorded."""
    if not state.exists():
        return False
    s = json.loads(state.read_text())
    stop_recorded(s["pids"], s["links"], s["netns"], s.get("thrift_ports", []))
    state.unlink()
    clear_pointer(state.parent / "lb.toml")
    return True


def down() -> int:
    """`python -m topology.tier down`: stop the recorded tier. Needs root."""
    if os.geteuid() != 0:
        print(NEEDS_ROOT, file=sys.stderr)
        return 1
    try:
        stopped = stop_from_state(RUN / "state.json")
    except PermissionError:
        print(NEEDS_ROOT, file=sys.stderr)
        return 1
    print("tier: stopped" if stopped else "tier: nothing recorded as running")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["down"]:
        return down()
    if args[:1] == ["run"]:
        return run(args[1:])
    if args[:1] in (["restart"], ["add"], ["remove"]):  # the operator's verbs
        from topology.tier_ops import main as verbs

        return verbs(args)
    if args[:1] == ["up"]:
        if missing := missing_tools():
            print(f"tier: needs {', '.join(missing)}", file=sys.stderr)
            return 2
        t = Tier()
        t.up()
        print(f"tier: up, state in {RUN}/state.json")
        return 0
    print(
        "usage: python -m topology.tier run [--balancers N ... --detach] | up | down"
        " | restart lbN [--switch|--speaker] | add | remove lbN",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
