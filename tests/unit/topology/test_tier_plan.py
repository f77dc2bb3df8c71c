"""The tier's plan in each mode: the config `make run TOPO=tier [MODE=dsr] [ROUTERS=2]`
writes is one p4lb reads back as written, and the servers listen where that config sends
each VIP's packets; a router pair's VRRP groups and peerings."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from p4lb.intent import reader, writer
from topology import tier_plan as plan


@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("mode", plan.MODES)
def test_the_tiers_config_reads_back_as_written(
    mode: str, pair: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan, "PKI", tmp_path)  # the reader checks the TLS files exist
    for name in ("ca.crt", "p4lb.crt", "p4lb.key"):
        (tmp_path / name).write_text("")
    written = plan.p4lb_config(3, 3, "maglev", mode, pair)
    path = tmp_path / "lb.toml"
    writer.save(written, path)
    read = reader.load(path)  # validated: a dsr VIP's backends on its port, none a router
    assert [(v.name, v.algorithm, v.mode) for v in read.vips] == [
        ("web", "maglev", mode),
        ("web-maglev", "maglev", "nat"),
    ] + ([] if pair else [("web6", "maglev", mode), ("web6-rr", "wrr", "nat")])
    assert read.vips == written.vips
    assert read.tier == written.tier


@pytest.mark.parametrize("mode", plan.MODES)
def test_the_servers_listen_where_the_config_sends_each_vip(mode: str) -> None:
    cfg = plan.p4lb_config(3, 3, "wrr", mode)
    ports = plan.server_ports(mode)
    ipv4 = [v for v in cfg.vips if ":" not in v.address]
    for v, port in zip(ipv4, ports, strict=True):
        assert {b.port for b in v.backends} == {port}
    # The IPv6 VIPs' backends: the same servers (their twins) on a port they listen on.
    ipv6 = [v for v in cfg.vips if ":" in v.address]
    assert [v.name for v in ipv6] == ["web6", "web6-rr"]
    for v in ipv6:
        assert [b.address for b in v.backends] == ["fd00:2::11", "fd00:2::12", "fd00:2::13"]
        assert {b.port for b in v.backends} < set(ports)
    # A NAT backend's (address, port) names its VIP to the reverse NAT: no two VIPs share
    # one (of a family); a dsr VIP's backends listen on the VIP's own port.
    assert len(set(ports)) == len(ports)
    assert len({b.port for v in ipv6 for b in v.backends}) == len(ipv6)
    dsr = [v for v in cfg.vips if v.mode == "dsr"]
    assert all(b.port == v.port for v in dsr for b in v.backends)
    # The port-80 VIPs (web, and web6 of a dual-stack tier) have the run's mode.
    assert [v.name for v in dsr] == (["web", "web6"] if mode == "dsr" else [])


def test_r1_sends_what_comes_from_the_vip_to_every_client_through_r0() -> None:
    rule, route, neigh, rule6, route6, neigh6 = plan.dsr_return_routes()
    # IPv6 (a dual-stack tier's): the same three for the IPv6 VIP, the front's IPv6 twin.
    assert rule6[:2] == route6[:2] == neigh6[:2] == ["ip", "-6"]
    assert rule6[rule6.index("from") + 1] == f"{plan.VIP6}/128"
    assert route6[route6.index("table") + 1] == rule6[rule6.index("lookup") + 1]
    assert route6[4:7] == [plan.CLIENT_NET6, "via", plan.ipv6_twin(plan.ROUTER_LB)]
    assert neigh6[4:7] == [plan.ipv6_twin(plan.ROUTER_LB), "lladdr", plan.ROUTER_MACS["r0-lb"]]
    assert rule[rule.index("from") + 1] == f"{plan.VIP}/32"
    table = rule[rule.index("lookup") + 1]
    assert route[route.index("table") + 1] == table
    assert route[route.index("via") + 1] == plan.ROUTER_LB
    clients = ipaddress.ip_network(route[3])
    assert all(ipaddress.ip_address(plan.client_addr(k)) in clients for k in (1, 2))
    assert neigh[3:6] == [plan.ROUTER_LB, "lladdr", plan.ROUTER_MACS["r0-lb"]]
    # The balancers route the clients the same way (their `clients` host).
    host = next(h for h in plan.p4lb_config(1, 1).hosts if h.name == "clients")
    assert ipaddress.ip_network(f"{host.address}/{host.prefix_len}") == clients


def test_the_reply_counters_tell_each_vips_replies_by_where_they_reach_r0() -> None:
    rules = plan.reply_counter_rules()
    vips = [("ip", plan.VIP, v) for v in plan.VIPS] + [("ip6", plan.VIP6, v) for v in plan.VIPS6]
    for family, address, (name, port, _) in vips:
        key = name.replace("-", "_")
        for way, iif in (("from_r1", '"r1-lb-f"'), ("from_balancers", '"t*"')):
            line = next(ln for ln in rules.splitlines() if f'"{key}_{way}"' in ln)
            assert f"sport {port} " in line and f"iifname {iif}" in line
            assert f"{family} saddr {address} " in line and 'oifname "r0-lb-f"' in line


def test_a_pair_sends_the_clients_replies_to_the_front_pairs_shared_mac() -> None:
    one = {h.name: h.mac for h in plan.p4lb_config(3, 3).hosts}
    two = {h.name: h.mac for h in plan.p4lb_config(3, 3, pair=True).hosts}
    assert one["clients"] == plan.ROUTER_MACS["r0-lb"]
    assert two["clients"] == plan.vrrp_mac(plan.VRRP_FRONT_LB) == "00:00:5e:00:01:01"
    # The switches route nothing to the routers themselves: a flooded frame for a dead
    # router would go round br-lb through every switch.
    assert set(one) == {"clients", "clients6"} and set(two) == {"clients"}


def test_every_speaker_peers_with_every_router_of_the_pair() -> None:
    for pair, n in ((False, 2), (True, 4)):
        conf = plan.speaker_conf(1, "key", pair)
        bfd = plan.speaker_bfd_conf(1, pair)
        addrs = set(plan.routers(pair).values())
        assert len(addrs) == n
        assert conf.count("[[neighbors]]") == n and bfd.count(" peer ") == n
        assert all(f'neighbor-address = "{a}"' in conf and f"peer {a} " in bfd for a in addrs)


def test_the_pairs_vrrp_groups_share_the_single_routers_gateways() -> None:
    """The hosts' gateways are the same with one router or two: a pair shares them."""
    front = plan.vrrp_groups("r0", clients=2)
    assert front == [
        ("r0-lb", 1, plan.FRONT_GATEWAY),
        ("r0-c1", 11, "10.1.0.1"),
        ("r0-c2", 12, "10.1.1.1"),
    ]
    assert [g[1:] for g in plan.vrrp_groups("r0b", 2)] == [g[1:] for g in front]
    assert plan.vrrp_groups("r1", 2) == [("r1-srv", plan.VRRP_SERVERS, plan.ROUTER_SRV)]
    a, b = plan.vrrp_conf("r1", 1), plan.vrrp_conf("r1b", 1)
    assert "vrrp 2 priority 200" in a and "vrrp 2 priority 100" in b
    assert "no vrrp 2 preempt" in a and "no vrrp 2 preempt" in b
    assert "vrrp 2 ip 10.2.0.1" in a and "interface r1b-srv" in b
    # The macvlans vrrpd drives carry each group's virtual MAC and shared address.
    links = [" ".join(c) for c in plan.vrrp_links("r1", 1)]
    assert "ip link set vrrp2 address 00:00:5e:00:01:02" in links
    assert "ip addr add 10.2.0.1/32 dev vrrp2" in links


def test_a_pairs_return_routers_send_dsr_replies_to_the_front_pairs_address() -> None:
    cmds = [" ".join(c) for c in plan.dsr_return_routes("r1b", pair=True)]
    assert f"ip route add {plan.CLIENT_NET} via {plan.FRONT_GATEWAY} dev r1b-lb table 100" in cmds
    assert any(
        c.startswith(f"ip neigh replace {plan.FRONT_GATEWAY} lladdr 00:00:5e:00:01:01")
        for c in cmds
    )


def test_a_pair_takes_vrrp_only_from_its_own_routers() -> None:
    assert "vrrp" not in plan.router_filter("r0-lb")
    peers = plan.pair_addresses("r0b", clients=1)
    assert set(peers) == {plan.ROUTER_LB, plan.ROUTER_LB_B, "10.1.0.252", "10.1.0.253"}
    rule = plan.router_filter("r0b-lb", peers)
    assert (
        "ip protocol vrrp ip saddr != { 10.10.0.1, 10.10.0.3, 10.1.0.252, 10.1.0.253 } drop" in rule
    )
    assert set(plan.pair_addresses("r1", 1)) == {"10.2.0.252", "10.2.0.253"}


def test_ha_is_the_router_pair_and_the_standby_controller() -> None:
    from topology.tier import options

    one = options([])
    assert (one.routers, one.standby_controller) == (1, False)
    ha = options(["--ha"])
    assert (ha.routers, ha.standby_controller) == (2, True)
    assert options(["--routers", "2"]).standby_controller is False


def test_each_tier_address_has_its_ipv6_twin_on_the_same_link() -> None:
    assert plan.ipv6_twin(plan.VIP) == plan.VIP6 == "fd00::100"
    assert plan.nexthop6_addr(2) == plan.ipv6_twin(plan.nexthop_addr(2)) == "fd00:10::42"
    assert plan.ipv6_twin(plan.ROUTER_SRV) == "fd00:2::1"
    clients6 = ipaddress.ip_network(plan.CLIENT_NET6)
    assert all(
        ipaddress.ip_address(plan.ipv6_twin(plan.client_addr(k))) in clients6 for k in (1, 2)
    )
    cfg = plan.p4lb_config(3, 3)
    assert [b.nexthop6 for b in cfg.tier] == ["fd00:10::41", "fd00:10::42", "fd00:10::43"]
    assert cfg.tier_announce == ("0.0.0.0/0", "::/0")
    host = next(h for h in cfg.hosts if h.name == "clients6")
    assert f"{host.address}/{host.prefix_len}" == plan.CLIENT_NET6 == "fd00:1::/48"
    # A router pair's gateways are IPv4 VRRP groups: no IPv6 there.
    two = plan.p4lb_config(3, 3, pair=True)
    assert all(":" not in v.address for v in two.vips) and not any(b.nexthop6 for b in two.tier)
    assert two.tier_announce == ("0.0.0.0/0",)
    assert plan.tier_balancer(4, ipv6=False).nexthop6 == ""


def route_map(conf: str, name: str, seq: int) -> list[str]:
    """The match lines of route-map `name` entry `seq` in an FRR config."""
    lines = conf.splitlines()
    start = lines.index(f"route-map {name} permit {seq}")
    return lines[start + 1 : lines.index("exit", start)]


def test_the_routers_take_ipv6_routes_filtered_as_the_ipv4_ones() -> None:
    """From speaker i, only the listed prefixes with balancer i's own data address as next
    hop, in each family; IPv6 over the same sessions, ECMP over up to 16 balancers."""
    conf = plan.router_conf("r0", plan.ROUTER_LB, [f"{plan.VIP}/32", f"{plan.VIP6}/128"], "k")
    assert "ip prefix-list TIER seq 5 permit 10.0.0.100/32" in conf
    assert "ipv6 prefix-list TIER6 seq 5 permit fd00::100/128" in conf
    assert "fd00::100" not in conf.split("ipv6 prefix-list")[0]  # not in the IPv4 list
    for i in (1, plan.MAX_BALANCERS):
        assert route_map(conf, "TIER6-IN", i) == [
            f" match peer {plan.speaker_addr(i)}",
            " match ipv6 address prefix-list TIER6",
            f" match ipv6 next-hop address {plan.nexthop6_addr(i)}",
        ]
        assert f" match peer {plan.speaker_addr(i)}" in route_map(conf, "TIER-IN", i)
    family = conf[conf.index(" address-family ipv6 unicast") :]
    family = family[: family.index(" exit-address-family")]
    for line in (
        "maximum-paths 16",
        "neighbor SPEAKERS activate",
        "neighbor SPEAKERS route-map TIER6-IN in",
        "neighbor SPEAKERS route-map NOTHING out",
    ):
        assert f"  {line}\n" in family
    # One session each (MD5, GTSM's multihop, BFD): the peer group's, for both families.
    assert conf.count("neighbor SPEAKERS password k") == 1
    # An IPv4-only router (a pair's) has no IPv6 family.
    only4 = plan.router_conf("r1", plan.ROUTER_RET, ["0.0.0.0/0"], "k")
    assert "ipv6" not in only4 and "TIER-IN permit 1" in only4


def test_each_speaker_offers_both_families_on_each_session() -> None:
    conf = plan.speaker_conf(2, "k")
    neighbours = conf.split("[[neighbors]]")[1:]
    assert len(neighbours) == 2
    for n in neighbours:
        assert n.count("[[neighbors.afi-safis]]") == 2
        assert 'afi-safi-name = "ipv4-unicast"' in n and 'afi-safi-name = "ipv6-unicast"' in n
        assert 'auth-password = "k"' in n and "ttl-min = 255" in n
