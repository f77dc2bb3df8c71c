"""The tier's processes: its namespaces, links and daemons (FRR, GoBGP, bfdd, the BMv2
switches, the bonds, the HTTP servers), started in sessions of their own and recorded by PID
in run/tier/state.json under its lock, stopped by PID. What they are is the plan's
(topology.tier_plan); this module makes it so."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from p4lb.intent.running import clear_pointer
from topology import thrift_guard
from topology import tier_plan as plan
from topology.bmv2 import command, grpc_tls_args, listening, switch_binary, wait_listening
from topology.pki import make_pki
from topology.procs import alive, gone, gone_by, poll_until, set_group_nice, stop_pids
from topology.tier_plan import (
    CONTROL_NICE,
    ECMP_SEED,
    GRPC_BASE,
    NS,
    REAL_A,
    REAL_B,
    ROUTER_MACS,
    ROUTER_SRV,
    SERVER_IDLE_S,
    SWITCH_NICE,
    THRIFT_BASE,
    VIP,
    VIP6,
    dsr_return_routes,
    dual_stack,
    ipv6_twin,
    mac,
    nexthop6_addr,
    nexthop_addr,
    pair_addresses,
    router_conf,
    router_filter,
    routers,
    server_addr,
    server_ports,
    speaker_addr,
    speaker_bfd_conf,
    speaker_conf,
    vrrp_conf,
    vrrp_links,
)


def bgp_password() -> str:
    """The tier's BGP MD5 key (made once per tier, owner-only)."""
    if not plan.BGP_SECRET.exists():
        plan.RUN.mkdir(parents=True, exist_ok=True)
        fd = os.open(plan.BGP_SECRET, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(16))
    return plan.BGP_SECRET.read_text().strip()


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60)


def in_ns(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *args, check=check)


def next_hops(router: str, prefix: str) -> list[str]:
    """The next hops router `router`'s kernel has for `prefix` now (r0: the VIP's /32 or
    /128; r1: the default route of the return path)."""
    family = "-6" if ":" in prefix else "-4"
    route = in_ns(NS + router, "ip", family, "route", "show", prefix, check=False).stdout
    return sorted(w.split()[0] for w in route.split("via ")[1:])


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


@contextlib.contextmanager
def state_lock() -> Iterator[None]:
    """Hold the lock every change to state.json takes (the tier's run, an operator's
    `restart`/`add`/`remove`, a test), so none of them loses another's record."""
    plan.RUN.mkdir(parents=True, exist_ok=True)
    fd = os.open(plan.RUN / ".state.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@dataclass
class Tier:
    """The tier's namespaces, links and processes. `pids` maps a name to a PID we started;
    `lbs` are the balancers' indexes (lb1 is 1). state.json is the record: every change
    goes through `edit()`, which reads it first (another process may have changed it).
    `mode` is the first VIP's (tier_plan.VIPS): "dsr" gives the servers the VIP and r1 the
    return path past the balancers."""

    balancers: int = 3
    servers: int = 3
    clients: int = 1
    mode: str = "nat"
    pair: bool = False  # a router pair: r0b beside r0, r1b beside r1 (tier_plan.routers)
    body_bytes: int = 0  # the servers' answer (0: the short page naming the server)
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
        if not plan.STATE.exists():
            return
        s = json.loads(plan.STATE.read_text())
        self.pids = {k: int(v) for k, v in s["pids"].items()}
        self.root_links = list(s["links"])
        self.namespaces = list(s["netns"])
        self.thrift_ports = list(s.get("thrift_ports", []))
        self.balancers = int(s.get("balancers", self.balancers))
        self.servers = int(s.get("servers", self.servers))
        self.clients = int(s.get("clients", self.clients))
        self.mode = str(s.get("mode", self.mode))
        self.body_bytes = int(s.get("body_bytes", self.body_bytes))
        self.pair = bool(s.get("pair", self.pair))
        self.lbs = list(s.get("balancer_ids", range(1, self.balancers + 1)))

    def save(self) -> None:
        """Write the record whole (a reader never sees half of it)."""
        plan.RUN.mkdir(parents=True, exist_ok=True)
        doc = {
            "pids": self.pids,
            "links": self.root_links,
            "netns": self.namespaces,
            "thrift_ports": self.thrift_ports,
            "balancers": self.balancers,
            "servers": self.servers,
            "clients": self.clients,
            "mode": self.mode,
            "body_bytes": self.body_bytes,
            "pair": self.pair,
            "balancer_ids": self.lbs,
        }
        tmp = plan.STATE.with_name(f".{plan.STATE.name}.{os.getpid()}")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, plan.STATE)

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

    @property
    def ipv6(self) -> bool:
        """Whether this tier carries IPv6 (tier_plan.dual_stack)."""
        return dual_stack(self.pair)

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

    def addr(
        self, ns: str, dev: str, cidr: str, mac_addr: str | None = None, twin: bool = True
    ) -> None:
        """`cidr` (10.A.B.C/24) on `dev`; in a dual-stack tier, with `twin`, its IPv6 twin
        (/64) too."""
        if mac_addr:
            in_ns(ns, "ip", "link", "set", dev, "address", mac_addr)
        in_ns(ns, "ip", "addr", "add", cidr, "dev", dev)
        if self.ipv6 and twin:
            twin = ipv6_twin(cidr.split("/")[0])
            in_ns(ns, "ip", "-6", "addr", "add", f"{twin}/64", "dev", dev, "nodad")

    def quiet_ipv6(self, ns: str) -> None:
        """IPv6 on in `ns`, announced to nobody: no duplicate address detection (the tier
        gives each address once), no router solicitation or advertisement taken. Set
        before its links arrive: a link moved in takes the namespace's defaults."""
        for key in ("accept_dad=0", "dad_transmits=0", "router_solicitations=0", "accept_ra=0"):
            for scope in ("all", "default"):
                in_ns(ns, "sysctl", "-qw", f"net.ipv6.conf.{scope}.{key}")
        in_ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0")  # and the default

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
        plan.RUN.mkdir(parents=True, exist_ok=True)
        fab = self.netns("fab")
        for br in ("br-lb", "br-srv"):
            in_ns(fab, "ip", "link", "add", br, "type", "bridge")
            in_ns(fab, "ip", "link", "set", br, "up")
        names = routers(self.pair)
        for name in names:
            ns = self.netns(name)
            for key in (
                "net.ipv4.ip_forward=1",
                "net.ipv4.fib_multipath_hash_policy=3",
                "net.ipv4.fib_multipath_hash_fields=0x37",
                f"net.ipv4.fib_multipath_hash_seed={ECMP_SEED}",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
                # Answer ARP only for the address on the asking interface: a server's ARP
                # for r1 also reaches br-lb, flooded through the switches.
                "net.ipv4.conf.all.arp_ignore=1",
            ):
                in_ns(ns, "sysctl", "-qw", key)
            if self.ipv6:
                # IPv6 hashed on the 5-tuple too (the seed is IPv4's, shared): policy 0 or
                # 2 would hash the flow label, which a Linux client changes after a
                # retransmission timeout, moving an established flow to another balancer.
                self.quiet_ipv6(ns)
                for key in (
                    "net.ipv6.conf.all.forwarding=1",
                    "net.ipv6.fib_multipath_hash_policy=3",
                    "net.ipv6.fib_multipath_hash_fields=0x37",
                ):
                    in_ns(ns, "sysctl", "-qw", key)
        # Every router on the balancers' bridge, the return ones on the servers' too (a
        # pair's own addresses there: REAL_A, REAL_B; the gateway is their VRRP address).
        links = [(name, f"{name}-lb", "br-lb", f"{addr}/24") for name, addr in names.items()]
        srv = self.pair_addr(ROUTER_SRV)
        links += [(name, f"{name}-srv", "br-srv", f"{srv[name]}/24") for name in srv]
        for name, dev, br, cidr in links:
            self.veth(dev, NS + name, f"{dev}-f", fab)
            in_ns(fab, "ip", "link", "set", f"{dev}-f", "master", br)
            self.addr(NS + name, dev, cidr, ROUTER_MACS[dev])
        # Clients on r0's far side (a link of their own; a LAN, br-cK, with a pair).
        for k in range(1, self.clients + 1):
            c = self.netns(f"c{k}")
            if self.ipv6:
                self.quiet_ipv6(c)
            net = f"10.1.{k - 1}"
            front = self.pair_addr(f"{net}.1")
            if self.pair:
                in_ns(fab, "ip", "link", "add", f"br-c{k}", "type", "bridge")
                in_ns(fab, "ip", "link", "set", f"br-c{k}", "up")
                self.veth(f"c{k}-f", fab, "eth0", c)
                in_ns(fab, "ip", "link", "set", f"c{k}-f", "master", f"br-c{k}")
            for n, (name, addr) in enumerate(front.items()):
                dev = f"{name}-c{k}"
                if self.pair:
                    self.veth(dev, NS + name, f"{dev}-f", fab)
                    in_ns(fab, "ip", "link", "set", f"{dev}-f", "master", f"br-c{k}")
                else:
                    self.veth(dev, NS + name, "eth0", c)
                self.addr(NS + name, dev, f"{addr}/24", mac(3, 16 * (n + 1) + k))
            self.addr(c, "eth0", f"{net}.2/24", mac(5, k))
            in_ns(c, "ip", "route", "add", "default", "via", f"{net}.1")
            if self.ipv6:
                in_ns(c, "ip", "-6", "route", "add", "default", "via", ipv6_twin(f"{net}.1"))
        # Servers on br-srv, their gateway r0 (VRF ret).
        for j in range(1, self.servers + 1):
            s = self.netns(f"s{j}")
            if self.ipv6:
                self.quiet_ipv6(s)
            self.veth(f"s{j}-f", fab, "eth0", s)
            in_ns(fab, "ip", "link", "set", f"s{j}-f", "master", "br-srv")
            self.addr(s, "eth0", f"{server_addr(j)}/24", mac(2, j))
            in_ns(s, "ip", "route", "add", "default", "via", ROUTER_SRV)
            if self.ipv6:
                in_ns(s, "ip", "-6", "route", "add", "default", "via", ipv6_twin(ROUTER_SRV))
            if self.mode == "dsr":
                # The VIP is the server's own (its replies come from it), but only the
                # balancers answer for it: no ARP reply, no ARP request from it.
                in_ns(s, "ip", "addr", "add", f"{VIP}/32", "dev", "lo")
                for dev in ("all", "eth0"):
                    in_ns(s, "sysctl", "-qw", f"net.ipv4.conf.{dev}.arp_ignore=1")
                    in_ns(s, "sysctl", "-qw", f"net.ipv4.conf.{dev}.arp_announce=2")
                if self.ipv6:
                    # IPv6's neighbour discovery answers only for the receiving link's
                    # own addresses, and solicits from them: nothing to turn off.
                    in_ns(s, "ip", "-6", "addr", "add", f"{VIP6}/128", "dev", "lo")
        self.save()

    def start_router(self, name: str, router_id: str, prefixes: list[str]) -> None:
        """zebra, bfdd and bgpd in router `name`'s namespace, configured through vtysh."""
        ns = NS + name
        state = plan.RUN / name
        state.mkdir(parents=True, exist_ok=True)
        self.frr_daemon(ns, state, "zebra", [])
        self.frr_daemon(ns, state, "bfdd", ["--bfdctl", f"{state}/bfdd.sock"])
        self.frr_daemon(ns, state, "bgpd", [])
        conf = state / "frr.conf"
        conf.touch(mode=0o600)
        conf.chmod(0o600)  # it holds the BGP key
        text = router_conf(name, router_id, prefixes, bgp_password())
        if self.pair:
            for cmd in vrrp_links(name, self.clients):
                in_ns(ns, *cmd)
            self.frr_daemon(ns, state, "vrrpd", [])
            text += vrrp_conf(name, self.clients)
        conf.write_text(text)
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
            vrrp = not self.pair or " vrrp " in shown
            if (
                r.returncode == 0
                and "bgp listen range" in shown
                and "profile tier" in shown
                and vrrp
            ):
                return
            time.sleep(0.1)
        raise RuntimeError(f"vtysh -f {conf}: {(r.stdout + r.stderr).strip()[-400:]}")

    def pair_addr(self, gateway: str) -> dict[str, str]:
        """The routers' own addresses on a link whose gateway is `gateway` (r0's or r1's
        side): the gateway itself for one router; REAL_A and REAL_B of its net for a pair,
        which shares the gateway by VRRP."""
        first = "r1" if gateway == ROUTER_SRV else "r0"
        if not self.pair:
            return {first: gateway}
        net = gateway.rsplit(".", 1)[0]
        return {first: f"{net}.{REAL_A}", f"{first}b": f"{net}.{REAL_B}"}

    def start_routers(self) -> None:
        for name, addr in routers(self.pair).items():
            self.start_router_named(name, addr)

    def start_router_named(self, name: str, addr: str) -> None:
        """Router `name` whole: FRR (and vrrpd in a pair), its DSR return routes (a return
        router, a dsr VIP), and its BGP filter (which lives in its namespace)."""
        front = name.startswith("r0")
        prefixes = [f"{v}/32" for v in self.vips] if front else ["0.0.0.0/0"]
        if self.ipv6:
            prefixes += [f"{VIP6}/128"] if front else ["::/0"]
        self.start_router(name, addr, prefixes)
        if self.mode == "dsr" and not front:  # a dsr VIP's replies: past the balancers
            for cmd in dsr_return_routes(name, self.pair):
                in_ns(NS + name, *cmd)
        rules = plan.RUN / name / "bgp.nft"
        peers = pair_addresses(name, self.clients) if self.pair else ()
        rules.write_text(router_filter(f"{name}-lb", peers))
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
        # The control link stays IPv4 (its namespace too): one session carries both families.
        self.addr(spk, "eth0", f"{speaker_addr(i)}/24", mac(4, i), twin=False)
        for name in routers(self.pair):
            self.router_neigh(name, i)
        with self.edit():
            if i not in self.lbs:
                self.lbs.append(i)

    def router_neigh(self, name: str, i: int) -> None:
        """Router `name` reaches balancer i's data addresses (IPv4, and IPv6 in a dual-stack
        tier) at its switch's MAC without asking: an ARP request or neighbour solicitation
        would queue in the switch like the traffic (none crosses a switch)."""
        dev = f"{name}-lb"
        addrs = [nexthop_addr(i)] + ([nexthop6_addr(i)] if self.ipv6 else [])
        for addr in addrs:
            in_ns(
                NS + name,
                "ip",
                "neigh",
                "replace",
                addr,
                "lladdr",
                mac(1, i),
                "dev",
                dev,
                "nud",
                "permanent",
            )

    def start_switch(self, i: int, binary: str | None = None, log: bool = False) -> int:
        """Balancer i's BMv2 (no pipeline until p4lb pushes one), P4Runtime on 127.0.0.1 over
        TLS with client certificates of the tier's CA, Thrift reachable from this host only."""
        out = plan.RUN / f"lb{i}" / "switch.out"
        args = command(
            {port: f"t{i}p{port}" for port in (1, 3)},
            GRPC_BASE + i,
            THRIFT_BASE + i,
            device_id=i,
            binary=binary,
            log_file=plan.RUN / f"lb{i}" / "switch.log" if log else None,
            grpc_args=grpc_tls_args(
                plan.PKI / "ca.crt", plan.PKI / "switch.crt", plan.PKI / "switch.key"
            ),
        )
        thrift_guard.confine(THRIFT_BASE + i)
        with self.edit():
            if THRIFT_BASE + i not in self.thrift_ports:
                self.thrift_ports.append(THRIFT_BASE + i)
        # A switch stopped a moment ago may hold its port a little longer (bounded).
        if not poll_until(lambda: not listening(GRPC_BASE + i), 5.0, every=0.05):
            raise RuntimeError(f"127.0.0.1:{GRPC_BASE + i}, lb{i}'s P4Runtime port, is taken")
        pid = self.start(f"switch-lb{i}", args, None, out, nice=SWITCH_NICE)
        wait_listening(GRPC_BASE + i, 20.0)
        if gone(pid):
            raise RuntimeError(f"lb{i}'s switch (pid {pid}) exited at start: {out.read_text()}")
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
                str(plan.STATE),
            ],
            None,
            plan.RUN / f"lb{i}" / "bond.out",
        )

    def start_speaker(self, i: int) -> None:
        """Balancer i's GoBGP (announcing nothing yet: p4lb announces once the switch holds
        the tier's state) and bfdd for its two sessions."""
        spk = NS + f"lb{i}"
        state = plan.RUN / f"lb{i}"
        state.mkdir(parents=True, exist_ok=True)
        conf = state / "gobgpd.toml"
        conf.touch(mode=0o600)
        conf.chmod(0o600)  # it holds the BGP key
        conf.write_text(speaker_conf(i, bgp_password(), self.pair))
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
        bfd.write_text(speaker_bfd_conf(i, self.pair))
        # bfdd writes its pid file before its vty socket listens: retry until it took the
        # config (bounded).
        for _ in range(50):
            in_ns(spk, "vtysh", "--vty_socket", str(state), "-f", str(bfd), check=False)
            shown = in_ns(
                spk, "vtysh", "--vty_socket", str(state), "-c", "show bfd peers brief", check=False
            ).stdout
            if all(addr in shown for addr in routers(self.pair).values()):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"bfdd in {spk} did not take {bfd}")

    def start_servers(self) -> None:
        """An HTTP server per backend host and VIP, on the port the plan gives that VIP's
        backends (tier_plan.backend_port)."""
        for j in range(1, self.servers + 1):
            for port in server_ports(self.mode):
                log = plan.RUN / "access" / f"s{j}-{port}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("")
                args = [sys.executable, "-m", "topology.server", "--name", f"s{j}"]
                args += ["--port", str(port), "--log", str(log), "--threaded", "--keep-alive"]
                args += ["--idle-timeout", str(SERVER_IDLE_S)]
                if self.body_bytes:
                    args += ["--body-bytes", str(self.body_bytes)]
                self.start(f"server-s{j}-{port}", args, NS + f"s{j}", log.with_suffix(".out"))
        for j in range(1, self.servers + 1):
            for port in server_ports(self.mode):
                in_ns(
                    NS + f"s{j}",
                    "sh",
                    "-c",
                    f"for i in $(seq 100); do ss -Hltn 'sport = :{port}' | grep -q . "
                    "&& exit 0; sleep 0.05; done; exit 1",
                )

    def up(self) -> None:
        if plan.STATE.exists():
            raise RuntimeError(
                f"a tier is recorded as running ({plan.STATE}): sudo make stop first"
            )
        plan.BGP_SECRET.unlink(missing_ok=True)  # a new key and CA for every tier
        make_pki(plan.PKI, ["switch"])
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

    def ecmp_next_hops(self, vip: str = VIP, router: str = "r0") -> list[str]:
        """The next hops `router`'s kernel has for the VIP (IPv4 or IPv6) now."""
        return next_hops(router, f"{vip}/{128 if ':' in vip else 32}")

    def vrrp_masters(self, name: str) -> set[int]:
        """The VRRP groups router `name` is master of (FRR's `show vrrp json`); none if its
        vrrpd does not answer (a dead router)."""
        state = str(plan.RUN / name)
        out = in_ns(NS + name, "vtysh", "--vty_socket", state, "-c", "show vrrp json", check=False)
        if out.returncode != 0 or not out.stdout.strip():
            return set()
        return {g["vrid"] for g in json.loads(out.stdout) if g["v4"]["status"] == "Master"}

    def router_down(self, name: str) -> None:
        """Router `name` dies as a box does: its daemons killed (by PID) and its links down,
        so its kernel forwards nothing either (zebra killed leaves its routes behind)."""
        for key in [k for k in self.pids if k.startswith(f"{NS}{name}-")]:
            self.kill(key)
        for dev in self.router_links(name):
            in_ns(NS + name, "ip", "link", "set", dev, "down")

    def router_up(self, name: str) -> None:
        """Router `name` back: its links up, its daemons started and configured anew (what
        start_router_named adds beside FRR removed first, so it adds it again whole)."""
        ns = NS + name
        for dev in self.router_links(name):
            in_ns(ns, "ip", "link", "set", dev, "up")
        for vdev in self.router_links(name, vrrp=True):
            in_ns(ns, "ip", "link", "del", vdev)
        in_ns(ns, "ip", "rule", "del", "priority", str(plan.DSR_TABLE), check=False)
        in_ns(ns, "ip", "route", "flush", "table", str(plan.DSR_TABLE), check=False)
        in_ns(ns, "nft", "delete", "table", "inet", "p4lb_bgp", check=False)
        self.start_router_named(name, routers(self.pair)[name])
        for i in self.lbs:
            self.router_neigh(name, i)

    def router_links(self, name: str, vrrp: bool = False) -> list[str]:
        """Router `name`'s own interfaces (not lo), or with `vrrp` its VRRP macvlans."""
        out = in_ns(NS + name, "ip", "-o", "link", "show", check=False).stdout
        devs = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]
        return [d for d in devs if d != "lo" and d.startswith("vrrp") == vrrp]

    # --- teardown -------------------------------------------------------------------------

    def down(self) -> None:
        """Stop everything recorded, whoever started it (the run, an operator's verb)."""
        with state_lock():
            self.reload()
            stop_recorded(self.pids, self.root_links, self.namespaces, self.thrift_ports)
            plan.STATE.unlink(missing_ok=True)


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
