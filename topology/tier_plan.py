"""The tier's plan: a tier of p4lb balancers behind ECMP and BGP (`make run TOPO=tier`), in network
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
- Direct server return (`run --mode dsr`: the port-80 VIP's `mode = "dsr"`): a balancer
  rewrites only the frame, so the request reaches the server still addressed to the VIP,
  which each server holds on its loopback (answering no ARP for it: arp_ignore=1,
  arp_announce=2) and listens on the VIP's port. Its replies come from the VIP, and r1
  sends what comes from the VIP straight to r0 (a policy rule, dsr_return_routes): they
  never cross a balancer. NAT replies, from the servers' own addresses, keep the path
  above.
- A switch floods ARP only to port 1 (the config's `ports`): nothing from br-lb crosses it;
  a server's ARP for r1 reaches br-lb that way, where only r1 answers, and only on br-srv
  (arp_ignore). No other frame is bridged between br-lb and br-srv.
- Dual stack (with one router of each kind): every address above, 10.A.B.C, has an IPv6
  twin fd00:A:B::C on the same link (ipv6_twin: r0 fd00:10::1, balancer i's data address
  fd00:10::4i, the servers fd00:2::1j, the client fd00:1::2), and two IPv6 VIPs, web6
  (Maglev, port 80) and web6-rr (round robin, port 81), live at the VIP's twin,
  fd00::100. The speakers keep their one IPv4 session to
  each router, which carries IPv6 routes too (the VIP's /128 and the return path's ::/0,
  each via the balancer's IPv6 data address); the routers hash IPv6 flows on the 5-tuple
  as well (fields 0x37, never the flow label, which a Linux client changes after a
  retransmission timeout). A router pair's VRRP addresses are IPv4 only: with
  `--routers 2` the tier is IPv4 only.

This module is the plan: every address, name, port and config file of the tier, computed
here and nowhere else; nothing in it starts a process or touches the network.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

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

# The run directory and the files in it: the other tier modules read these through this
# module (`plan.RUN`), so a test moves them all by setting them here.
ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "run" / "tier"
STATE = RUN / "state.json"  # what runs: the one record every process changes under its lock
NS = "p4t-"  # every namespace of the tier: p4t-fab, p4t-r0, p4t-r1, p4t-c1, p4t-lb1.., p4t-s1..
VIP = "10.0.0.100"
VIP_PORT = 80
SERVER_PORT = 8000
# The tier's VIPs (one address): name, port, algorithm. Round robin keeps state the
# balancers share; Maglev needs none (the same table on every balancer). The first one's
# algorithm and mode are the run's (`--algorithm`, `--mode`); the others are NAT.
VIPS = (("web", 80, "wrr"), ("web-maglev", 81, "maglev"))
MODES = ("nat", "dsr")
# The IPv6 VIPs (at VIP6, the VIP's twin): Maglev, whose choice every balancer recomputes
# from the packet, and round robin, whose connections the balancers share. Each is served
# as VIPS' VIP of its rank: the first has the run's mode (the others are NAT), and its
# backends are the servers' IPv6 addresses on that VIP's servers' port (backend_port),
# since the servers listen on IPv4 and IPv6 alike: no server runs for an IPv6 VIP alone.
VIPS6 = (("web6", 80, "maglev"), ("web6-rr", 81, "wrr"))
ROUTER_AS = 65000
SPEAKER_AS = 65100
CLIENT_NET = "10.1.0.0/16"  # every client: client k on 10.1.(k-1).0/24 behind r0
DSR_TABLE = 100  # r1's routing table for what comes from a dsr VIP: straight to r0
ROUTER_CLIENT = "10.1.0.1"
ROUTER_LB = "10.10.0.1"  # r0: learns the VIP
ROUTER_RET = "10.10.0.2"  # r1: learns the return path's default route
ROUTER_SRV = "10.2.0.1"  # r1: the servers' gateway
# A router pair (`run --routers 2`): r0b beside r0, r1b beside r1, each on the same links
# as its twin with the same BGP, BFD and ECMP. Where hosts need one gateway (the clients,
# the servers, the balancers' way back to the clients), the pair shares a VRRP address
# (version 3, FRR's vrrpd): the first router is master, the other takes over when it hears
# no advertisement for 3 intervals, and keeps the role when the first comes back (no
# preemption: one move per failure). The shared addresses are the single routers' own
# gateway addresses, so a host's configuration is the same with one router or two; the
# routers' own addresses on those links move to REAL_A / REAL_B.
ROUTER_LB_B = "10.10.0.3"  # r0b
ROUTER_RET_B = "10.10.0.4"  # r1b
FRONT_GATEWAY = "10.10.0.5"  # r0's and r0b's shared address on br-lb: the balancers' way out
REAL_A, REAL_B = 252, 253  # the last byte of r0's (r1's) and r0b's (r1b's) own address
VRRP_MS = 100  # the advertisement interval: a master is replaced ~3.4 intervals after its death
VRRP_FRONT_LB, VRRP_SERVERS, VRRP_CLIENTS = 1, 2, 10  # VRIDs; client k's net: 10 + k
# Every router hashes a flow the same way (the 5-tuple, one seed): with the same next hops,
# r0 and r0b send a flow to the same balancer.
ECMP_SEED = 0x70346C62
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


def ipv6_twin(addr: str) -> str:
    """The IPv6 twin of a tier address 10.A.B.C: fd00:A:B::C (its digits kept as written),
    on the same link; a /24 there is a /64 here, CLIENT_NET's /16 a /48."""
    _, a, b, c = addr.split(".")
    return str(ipaddress.IPv6Address(f"fd00:{a}:{b}::{c}"))


VIP6 = ipv6_twin(VIP)  # fd00::100
CLIENT_NET6 = f"{ipv6_twin(CLIENT_NET.split('/')[0])}/48"  # fd00:1::/48


def dual_stack(pair: bool) -> bool:
    """Whether the tier carries IPv6: with one router of each kind (a pair's shared
    gateways are IPv4 VRRP groups)."""
    return not pair


def url(vip: str, port: int) -> str:
    """http://VIP:PORT/, an IPv6 VIP in brackets."""
    host = f"[{vip}]" if ":" in vip else vip
    return f"http://{host}:{port}/"


def config_file() -> Path:
    """The tier's p4lb config, as `make run TOPO=tier` writes it."""
    return RUN / "lb.toml"


def controller_tls() -> TlsSettings:
    """How the controller reaches the tier's switches: TLS, our CA, its client certificate."""
    return TlsSettings(str(PKI / "ca.crt"), str(PKI / "p4lb.crt"), str(PKI / "p4lb.key"))


def speaker_addr(i: int) -> str:
    """Balancer i's speaker on the control link: its BGP sessions and BFD."""
    return f"10.10.0.{10 + i}"


def nexthop_addr(i: int) -> str:
    """Balancer i's data address: the next hop its speaker announces, its switch's port 1."""
    return f"10.10.0.{40 + i}"


def nexthop6_addr(i: int) -> str:
    """Balancer i's IPv6 data address: the next hop of its speaker's IPv6 routes."""
    return ipv6_twin(nexthop_addr(i))


def server_addr(j: int) -> str:
    return f"10.2.0.{10 + j}"


def client_addr(k: int) -> str:
    return f"10.1.0.{1 + k}"


def mac(kind: int, n: int) -> str:
    """Locally administered MACs: kind 1 switches, 2 servers, 3 router, 4 speakers, 5 clients."""
    return f"02:00:00:00:{kind:02x}:{n:02x}"


ROUTER_MACS = {
    "r0-lb": mac(3, 2),
    "r1-lb": mac(3, 3),
    "r1-srv": mac(3, 4),
    "r0b-lb": mac(3, 5),
    "r1b-lb": mac(3, 6),
    "r1b-srv": mac(3, 7),
}


def vrrp_mac(vrid: int) -> str:
    """The VRRP virtual router's MAC (RFC 5798: 00-00-5E-00-01-{VRID})."""
    return f"00:00:5e:00:01:{vrid:02x}"


def routers(pair: bool) -> dict[str, str]:
    """The routers on br-lb and their addresses there: r0 (front) and r1 (return), with
    their twins for a pair."""
    one = {"r0": ROUTER_LB, "r1": ROUTER_RET}
    return one | ({"r0b": ROUTER_LB_B, "r1b": ROUTER_RET_B} if pair else {})


def front_mac(pair: bool) -> str:
    """Where a balancer sends what goes to the clients: r0, or the front pair's VRRP MAC."""
    return vrrp_mac(VRRP_FRONT_LB) if pair else ROUTER_MACS["r0-lb"]


def vrrp_groups(name: str, clients: int) -> list[tuple[str, int, str]]:
    """Router `name`'s VRRP groups in a pair: (its interface, VRID, shared address)."""
    if name in ("r0", "r0b"):
        out = [(f"{name}-lb", VRRP_FRONT_LB, FRONT_GATEWAY)]
        out += [
            (f"{name}-c{k}", VRRP_CLIENTS + k, f"10.1.{k - 1}.1") for k in range(1, clients + 1)
        ]
        return out
    return [(f"{name}-srv", VRRP_SERVERS, ROUTER_SRV)]


def vrrp_links(name: str, clients: int) -> list[list[str]]:
    """The commands (in router `name`'s namespace) that give each VRRP group of it the
    macvlan vrrpd drives: the virtual MAC, the shared address (/32: the link's own route
    stays the parent's), up; vrrpd keeps it down while the router is a backup."""
    out = []
    for dev, vrid, addr in vrrp_groups(name, clients):
        vdev = f"vrrp{vrid}"
        out += [
            ["ip", "link", "add", vdev, "link", dev, "type", "macvlan", "mode", "bridge"],
            ["ip", "link", "set", vdev, "address", vrrp_mac(vrid)],
            ["ip", "addr", "add", f"{addr}/32", "dev", vdev],
            ["ip", "link", "set", vdev, "up"],
        ]
    return out


def vrrp_conf(name: str, clients: int) -> str:
    """FRR's vrrpd for router `name` of a pair: its groups, the first router of the pair
    ahead (priority 200 against 100), no preemption."""
    prio = 100 if name.endswith("b") else 200
    return "".join(
        f"""interface {dev}
 vrrp {vrid} version 3
 vrrp {vrid} priority {prio}
 vrrp {vrid} advertisement-interval {VRRP_MS}
 no vrrp {vrid} preempt
 vrrp {vrid} ip {addr}
exit
"""
        for dev, vrid, addr in vrrp_groups(name, clients)
    )


def router_conf(name: str, router_id: str, prefixes: list[str], password: str) -> str:
    """FRR for a router of the tier: BGP with dynamic neighbours on 10.10.0.0/24, each
    session with the tier's TCP MD5 key and GTSM (TTL 255: the routers' own link); from
    each speaker's address only `prefixes` with that balancer's own data address as next
    hop (a prefix another address announces, one not in the list, or another balancer's
    next hop is dropped); BFD multihop; ECMP over up to 16 balancers. TTL 255 out;
    router_filter drops a BGP packet below 255 in. IPv6 `prefixes` come over the same
    sessions (address-family ipv6 unicast), filtered the same way against each balancer's
    IPv6 data address."""
    v4 = [p for p in prefixes if ":" not in p]
    v6 = [p for p in prefixes if ":" in p]
    plist = "\n".join(f"ip prefix-list TIER seq {5 * (k + 1)} permit {p}" for k, p in enumerate(v4))
    plist += "\n" + "\n".join(
        f"ip prefix-list NEXTHOP-{i} seq 5 permit {nexthop_addr(i)}/32\n"
        f"route-map TIER-IN permit {i}\n match peer {speaker_addr(i)}\n"
        f" match ip address prefix-list TIER\n match ip next-hop prefix-list NEXTHOP-{i}\nexit"
        for i in range(1, MAX_BALANCERS + 1)
    )
    family6 = ""
    if v6:
        plist += "\n" + "\n".join(
            f"ipv6 prefix-list TIER6 seq {5 * (k + 1)} permit {p}" for k, p in enumerate(v6)
        )
        plist += "\n" + "\n".join(
            f"route-map TIER6-IN permit {i}\n match peer {speaker_addr(i)}\n"
            f" match ipv6 address prefix-list TIER6\n"
            f" match ipv6 next-hop address {nexthop6_addr(i)}\nexit"
            for i in range(1, MAX_BALANCERS + 1)
        )
        family6 = """ address-family ipv6 unicast
  maximum-paths 16
  neighbor SPEAKERS activate
  neighbor SPEAKERS soft-reconfiguration inbound
  neighbor SPEAKERS route-map TIER6-IN in
  neighbor SPEAKERS route-map NOTHING out
 exit-address-family
"""
    return f"""frr defaults traditional
hostname {name}
log file {RUN}/{name}/frr.log
debug bfd peer
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
 bgp log-neighbor-changes
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
{family6}exit
"""


def tier_balancer(i: int, ipv6: bool = True) -> Balancer:
    """Balancer i as the tier's config names it: its switch's address, id and MAC, its one
    flooding port (port 1, so a switch floods nothing), its data addresses as the next hops
    its speaker announces (IPv6 too with `ipv6`), and where the controller reaches that
    speaker."""
    return Balancer(
        name=f"lb{i}",
        address=f"127.0.0.1:{GRPC_BASE + i}",
        device_id=i,
        mac=mac(1, i),
        ports=(1,),
        speaker_netns=NS + f"lb{i}",
        speaker_api="127.0.0.1:50051",
        nexthop=nexthop_addr(i),
        nexthop6=nexthop6_addr(i) if ipv6 else "",
    )


def vip_modes(mode: str, vips: tuple[tuple[str, int, str], ...] = VIPS) -> tuple[str, ...]:
    """Each VIP's mode (`vips`' order: VIPS, or VIPS6) in a tier run with `mode`: the first
    VIP's."""
    return tuple(mode if k == 0 else "nat" for k in range(len(vips)))


def backend_port(k: int, mode: str) -> int:
    """Where the servers listen for VIP k (VIPS' order): a NAT VIP on a port of its own
    (SERVER_PORT + k: a backend's address and port name its VIP to the reverse NAT), a dsr
    VIP on its own port (nothing rewrites it)."""
    return VIPS[k][1] if mode == "dsr" else SERVER_PORT + k


def server_ports(mode: str = "nat") -> tuple[int, ...]:
    """The ports every server listens on, one per VIP, in a tier run with `mode`."""
    return tuple(backend_port(k, m) for k, m in enumerate(vip_modes(mode)))


def dsr_return_routes(name: str = "r1", pair: bool = False) -> list[list[str]]:
    """The commands (in return router `name`'s namespace) that send what comes from the
    VIP, a dsr VIP's replies, to the clients through r0 (or the front pair's shared
    address) and past the balancers: a policy rule for the VIP as source, a table with the
    clients' route via the front, and its MAC fixed (no ARP on br-lb); in a dual-stack
    tier the same for the IPv6 VIP (the front's IPv6 twin, no neighbour solicitation).
    Kernel rules and routes beside FRR's: zebra leaves routes it did not make alone, and
    no BGP route comes from the VIP's address."""
    table, dev = str(DSR_TABLE), f"{name}-lb"
    front = FRONT_GATEWAY if pair else ROUTER_LB
    families = [(["ip"], f"{VIP}/32", CLIENT_NET, front)]
    if dual_stack(pair):
        families.append((["ip", "-6"], f"{VIP6}/128", CLIENT_NET6, ipv6_twin(front)))
    return [
        cmd
        for ip, vip, clients, via in families
        for cmd in (
            [*ip, "rule", "add", "from", vip, "lookup", table, "priority", table],
            [*ip, "route", "add", clients, "via", via, "dev", dev, "table", table],
            [*ip, "neigh", "replace", via, "lladdr", front_mac(pair), "dev", dev]
            + ["nud", "permanent"],
        )
    ]


def p4lb_config(
    balancers: int, servers: int, algorithm: str = "wrr", mode: str = "nat", pair: bool = False
) -> Config:
    """The p4lb config of the tier: the VIPs over the servers (port 3 of every switch), the
    first with `algorithm` and `mode`, the one route every balancer has (the clients,
    through r0 or the front pair's shared address: port 1), and per balancer its address,
    id, MAC, its data address (the next hop its speaker announces) and how the controller
    reaches its speaker. No route to the routers themselves: nothing of the tier's control
    crosses a switch, and a frame for a router that br-lb floods (a dead router's MAC, the
    speakers still calling it) must be dropped by the switches, not routed back onto br-lb,
    where each of them would receive the others' copies again until the TTL ran out.
    Dual stack (dual_stack): the IPv6 VIPs too, the clients' IPv6 network, ::/0 for the
    return path, and each balancer's IPv6 next hop."""
    ipv6 = dual_stack(pair)
    hosts = tuple(
        Host(name, net.split("/")[0], front_mac(pair), 1, prefix_len=int(net.split("/")[1]))
        for name, net in (("clients", CLIENT_NET), ("clients6", CLIENT_NET6))
        if ipv6 or ":" not in net
    )
    vips = []
    for k, ((name, port, alg), vip_mode) in enumerate(zip(VIPS, vip_modes(mode), strict=True)):
        backends = tuple(
            Backend(f"s{j}", server_addr(j), backend_port(k, vip_mode), 1, mac(2, j), 3)
            for j in range(1, servers + 1)
        )
        health = HealthSettings(http_path="/", namespace=NS + "{backend}")
        vips.append(
            Vip(
                name,
                VIP,
                "tcp",
                port,
                algorithm if k == 0 else alg,
                mac(1, 0xFF),
                backends,
                health,
                mode=vip_mode,
            )
        )
    if ipv6:
        for k, ((name, port, alg), mode6) in enumerate(
            zip(VIPS6, vip_modes(mode, VIPS6), strict=True)
        ):
            port6 = backend_port(k, mode6)
            backends = tuple(
                Backend(f"s{j}", ipv6_twin(server_addr(j)), port6, 1, mac(2, j), 3)
                for j in range(1, servers + 1)
            )
            health = HealthSettings(http_path="/", namespace=NS + "{backend}")
            vips.append(
                Vip(name, VIP6, "tcp", port, alg, mac(1, 0xFF), backends, health, mode=mode6)
            )
    tier = tuple(tier_balancer(i, ipv6) for i in range(1, balancers + 1))
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
        tier_announce=("0.0.0.0/0", "::/0") if ipv6 else ("0.0.0.0/0",),
    )


def router_filter(lb_side: str, vrrp_peers: tuple[str, ...] = ()) -> str:
    """nftables for a router's namespace: BGP only on its balancers' side (`lb_side`), and
    GTSM there (a BGP packet that crossed any router on its way, TTL below 255, is dropped);
    in a pair, VRRP only from the pair's own addresses (`vrrp_peers`: VRRP version 3 has no
    authentication, so a host on a link could otherwise claim the shared address)."""
    vrrp = ""
    if vrrp_peers:
        vrrp = f"\n    ip protocol vrrp ip saddr != {{ {', '.join(vrrp_peers)} }} drop"
    return f"""table inet p4lb_bgp {{
  chain input {{
    type filter hook input priority 0; policy accept;
    tcp dport 179 iifname != "{lb_side}" drop
    tcp sport 179 iifname != "{lb_side}" drop
    tcp dport 179 ip ttl < {256 - GTSM_HOPS} drop
    tcp sport 179 ip ttl < {256 - GTSM_HOPS} drop{vrrp}
  }}
}}
"""


def pair_addresses(name: str, clients: int) -> tuple[str, ...]:
    """The own addresses of router `name` and its twin on the links they share a VRRP
    group on (where each one's advertisements come from)."""
    out = []
    for dev, _, shared in vrrp_groups(name, clients):
        if dev.endswith("-lb"):
            out += [ROUTER_LB, ROUTER_LB_B]
        else:
            net = shared.rsplit(".", 1)[0]
            out += [f"{net}.{REAL_A}", f"{net}.{REAL_B}"]
    return tuple(out)


REPLY_TABLE = "p4lb_replies"  # the fabric's nftables table counting the replies' ways


def reply_counter_rules() -> str:
    """nftables for the fabric's bridges (namespace p4t-fab) counting, per VIP, the replies
    that reach r0 (their source the VIP and its port, whatever the mode) by where they come
    from: r1 directly (`NAME_from_r1`, a dsr VIP's way) or a balancer's port 1
    (`NAME_from_balancers`, the reverse NAT's); the IPv6 VIPs' too (a dual-stack tier's).
    A reply's way, not a flow's: each counts frames. Names with `_` for `-` (nftables'
    object names)."""
    counters, rules = [], []
    vips = [("ip", VIP, v) for v in VIPS] + [("ip6", VIP6, v) for v in VIPS6]
    for family, address, (name, port, _) in vips:
        key = name.replace("-", "_")
        for way, iif in (("from_r1", "r1-lb-f"), ("from_balancers", "t*")):
            counters.append(f"  counter {key}_{way} {{ }}")
            rules.append(
                f'    {family} saddr {address} tcp sport {port} iifname "{iif}" '
                f'oifname "r0-lb-f" counter name "{key}_{way}"'
            )
    body = "\n".join(counters)
    chain = "\n".join(rules)
    return f"""table bridge {REPLY_TABLE} {{
{body}
  chain forward {{
    type filter hook forward priority 0; policy accept;
{chain}
  }}
}}
"""


def speaker_conf(i: int, password: str, pair: bool = False) -> str:
    """GoBGP for balancer i: eBGP to every router from its own address, with the tier's TCP
    MD5 key and GTSM (it sends TTL 255 and accepts only 255: the routers' own link), each
    session carrying IPv4 and IPv6 routes (a router that takes no IPv6 leaves that family
    out when the session opens)."""
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
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"""
        for peer in routers(pair).values()
    )
    return f"""[global.config]
  as = {SPEAKER_AS}
  router-id = "{speaker_addr(i)}"
  port = -1
{neighbours}"""


def speaker_bfd_conf(i: int, pair: bool = False) -> str:
    peers = "".join(
        f""" peer {peer} multihop local-address {speaker_addr(i)}
  detect-multiplier {BFD_MULT}
  receive-interval {BFD_MS}
  transmit-interval {BFD_MS}
 exit
"""
        for peer in routers(pair).values()
    )
    return f"bfd\n{peers}exit\n"


def balancer_records(i: int) -> tuple[set[str], set[str], str, int]:
    """What balancer i owns in state.json: its processes' names, its root-namespace links,
    its speaker's namespace and its switch's Thrift port (`remove` takes exactly these)."""
    ns = NS + f"lb{i}"
    procs = {f"switch-lb{i}", f"gobgpd-lb{i}", f"bond-lb{i}", f"{ns}-bfdd"}
    return procs, {f"t{i}p1", f"t{i}p3"}, ns, THRIFT_BASE + i
