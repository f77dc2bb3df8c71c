"""IPv6 hosts: the reader takes an IPv6 address (and its prefix up to 128) wherever a host's
address goes, and the controller routes it in the IPv6 table. IPv6 VIPs:
test_ipv6_vips.py."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from typing import Any

import pytest

from p4lb.intent import reader, writer
from p4lb.intent.model import ConfigError, Host
from p4lb.pipeline import capacity
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.entries import mac
from p4lb.pipeline.p4info import compiled_limits
from tests.unit.support import DEFAULT_CONFIG


def with_hosts(*hosts: dict[str, Any]) -> dict[str, Any]:
    data = tomllib.loads(DEFAULT_CONFIG.read_text())
    data.setdefault("host", []).extend(hosts)
    return data


CLIENT6 = {"name": "c6", "address": "2001:DB8:0::1", "mac": "00:00:00:00:00:0a", "switch_port": 1}
NET6 = CLIENT6 | {"name": "r6", "address": "2001:db8:f::", "prefix_len": 48}


def test_an_ipv6_host_is_read_in_canonical_form_with_the_whole_address_as_prefix() -> None:
    cfg = reader.parse(with_hosts(CLIENT6, NET6), "lb.toml")
    c6, r6 = cfg.hosts[-2:]
    assert (c6.address, c6.prefix_len) == ("2001:db8::1", 128)
    assert (r6.address, r6.prefix_len) == ("2001:db8:f::", 48)
    # Built in code, a host's default prefix is its address's width too.
    assert Host("x", "2001:db8::2", "00:00:00:00:00:0b", 2).prefix_len == 128
    assert Host("y", "10.0.0.9", "00:00:00:00:00:0b", 2).prefix_len == 32


def test_an_ipv6_host_round_trips_without_its_default_prefix() -> None:
    cfg = reader.parse(with_hosts(CLIENT6, NET6), "lb.toml")
    text = writer.dumps(cfg)
    assert reader.parse(tomllib.loads(text), cfg.source) == cfg
    written = {h["name"]: h for h in tomllib.loads(text)["host"]}
    assert "prefix_len" not in written["c6"] and written["r6"]["prefix_len"] == 48


def test_ipv6_hosts_are_routed_in_the_ipv6_table() -> None:
    cfg = reader.parse(with_hosts(CLIENT6, NET6), "lb.toml")
    _, entries = desired_entries(cfg, [])
    routes = {e.m("dst_addr"): e for e in entries if e.table == "ipv6_route_table"}
    assert set(routes) == {
        (0x20010DB8000000000000000000000001, 128),
        (0x20010DB8000F00000000000000000000, 48),
    }
    one = routes[(0x20010DB8000000000000000000000001, 128)]
    assert one.action == "forward_ipv6"
    assert dict(one.params) == {
        "port": 1,
        "src_mac": mac(cfg.switch.mac),
        "dst_mac": mac("00:00:00:00:00:0a"),
    }
    # The IPv4 routes are where they were.
    ipv4 = [e for e in entries if e.table == "ipv4_route_table"]
    assert ipv4 and all(isinstance(e.m("dst_addr"), tuple) for e in ipv4)
    assert all(e.m("dst_addr")[0] < 1 << 32 for e in ipv4)  # type: ignore[index]


BAD = [
    ("prefix longer than 128", NET6 | {"prefix_len": 129}, "host[1].prefix_len"),
    (
        "IPv4 prefix longer than 32",
        CLIENT6 | {"address": "10.0.9.1", "prefix_len": 33},
        "host[1].prefix_len",
    ),
    ("not an address", CLIENT6 | {"address": "2001:db8::g"}, "not an IPv4 or IPv6 address"),
]


@pytest.mark.parametrize(("desc", "host", "needle"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_host_address_or_prefix_is_one_line(
    desc: str, host: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ConfigError) as err:
        reader.parse(with_hosts(host), "lb.toml")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_ipv6_routes_count_against_the_ipv6_table() -> None:
    cfg = reader.parse(with_hosts(CLIENT6, NET6), "lb.toml")
    limits = compiled_limits()
    capacity.check(cfg, replace(limits, ipv6_route_table_size=2))
    with pytest.raises(ConfigError, match="2 IPv6 routes, the switch holds 1"):
        capacity.check(cfg, replace(limits, ipv6_route_table_size=1))


def test_the_dual_stack_example_in_the_docs_is_read_as_two_routes() -> None:
    design = (DEFAULT_CONFIG.parents[1] / "docs" / "design.md").read_text()
    block = design.split("A dual-stack client", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    example = tomllib.loads(block)["host"]
    data = tomllib.loads(DEFAULT_CONFIG.read_text())
    data["host"] = example
    cfg = reader.parse(data, "lb.toml")
    _, entries = desired_entries(cfg, [])
    ports = {
        (e.table, e.m("dst_addr")): e.p("port")
        for e in entries
        if e.table.endswith("route_table") and e.action.startswith("forward")
    }
    assert ports[("ipv4_route_table", (0x0A000001, 32))] == 1
    assert ports[("ipv6_route_table", (0x20010DB8000000000000000000000001, 128))] == 1
