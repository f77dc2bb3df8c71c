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
    ]
    assert read.vips == written.vips


@pytest.mark.parametrize("mode", plan.MODES)
def test_the_servers_listen_where_the_config_sends_each_vip(mode: str) -> None:
    cfg = plan.p4lb_config(3, 3, "wrr", mode)
    ports = plan.server_ports(mode)
    for v, port in zip(cfg.vips, ports, strict=True):
        assert {b.port for b in v.backends} == {port}
    # A NAT backend's (address, port) names its VIP to the reverse NAT: no two VIPs share
    # one; a dsr VIP's backends listen on the VIP's own port.
    assert len(set(ports)) == len(ports)
    dsr = [v for v in cfg.vips if v.mode == "dsr"]
    assert all(b.port == v.port for v in dsr for b in v.backends)
    assert len(dsr) == (mode == "dsr")


def test_r1_sends_what_comes_from_the_vip_to_every_client_through_r0() -> None:
    rule, route, neigh = plan.dsr_return_routes()
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
    for name, port, _ in plan.VIPS:
        key = name.replace("-", "_")
        for way, iif in (("from_r1", '"r1-lb-f"'), ("from_balancers", '"t*"')):
            line = next(ln for ln in rules.splitlines() if f'"{key}_{way}"' in ln)
            assert f"sport {port} " in line and f"iifname {iif}" in line
            assert f"ip saddr {plan.VIP} " in line and 'oifname "r0-lb-f"' in line


def test_a_pair_sends_the_clients_replies_to_the_front_pairs_shared_mac() -> None:
    one = {h.name: h.mac for h in plan.p4lb_config(3, 3).hosts}
    two = {h.name: h.mac for h in plan.p4lb_config(3, 3, pair=True).hosts}
    assert one["clients"] == plan.ROUTER_MACS["r0-lb"]
    assert two["clients"] == plan.vrrp_mac(plan.VRRP_FRONT_LB) == "00:00:5e:00:01:01"
    # The switches route nothing to the routers themselves: a flooded frame for a dead
    # router would go round br-lb through every switch.
    assert set(one) == set(two) == {"clients"}


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
