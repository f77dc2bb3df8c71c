"""The tier's plan in each mode: the config `make run TOPO=tier [MODE=dsr]` writes is one p4lb
reads back as written, and the servers listen where that config sends each VIP's packets."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from p4lb.intent import reader, writer
from topology import tier_plan as plan


@pytest.mark.parametrize("mode", plan.MODES)
def test_the_tiers_config_reads_back_as_written(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan, "PKI", tmp_path)  # the reader checks the TLS files exist
    for name in ("ca.crt", "p4lb.crt", "p4lb.key"):
        (tmp_path / name).write_text("")
    written = plan.p4lb_config(3, 3, "maglev", mode)
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
