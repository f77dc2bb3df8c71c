"""IPv6 VIPs in the config: read beside IPv4 ones, their backends of their own family,
what they may ask for (any algorithm, either mode, one switch) refused in one line
otherwise, and the entries the controller derives (the IPv6 tables, the checksum
deltas)."""

from __future__ import annotations

import ipaddress
import tomllib
from typing import Any

import pytest

from p4lb.intent import reader
from p4lb.intent.model import ConfigError
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.entries import l4_checksum_delta
from tests.unit.support import DEFAULT_CONFIG

VIP6 = "2001:db8::100"


def with_vip6(**changes: Any) -> dict[str, Any]:
    """The default config plus an IPv6 VIP `web6` (maglev, two IPv6 backends)."""
    data = tomllib.loads(DEFAULT_CONFIG.read_text())
    backends = [
        {
            "name": f"b{i}",
            "address": f"2001:DB8::{i}",
            "port": 8080,
            "mac": f"00:00:00:00:00:0{i}",
            "switch_port": i,
        }
        for i in (2, 3)
    ]
    web6: dict[str, Any] = {"address": VIP6, "port": 80, "algorithm": "maglev"}
    web6 |= {"backend": backends} | changes
    data["vip"]["web6"] = web6
    return data


def test_an_ipv6_vip_is_read_beside_the_ipv4_ones_in_canonical_form() -> None:
    cfg = reader.parse(with_vip6(), "lb.toml")
    v = cfg.vip("web6")
    assert (v.address, [b.address for b in v.backends]) == (VIP6, ["2001:db8::2", "2001:db8::3"])
    assert any(":" not in v.address for v in cfg.vips)


def _ipv4_backend(data: dict[str, Any]) -> dict[str, Any]:
    data["vip"]["web6"]["backend"][0]["address"] = "10.0.0.2"
    return data


def _ipv6_backend_of_ipv4_vip(data: dict[str, Any]) -> dict[str, Any]:
    web = next(v for k, v in data["vip"].items() if k != "web6")
    web["backend"][0]["address"] = "2001:db8::9"
    return data


BAD = [
    ("an IPv4 backend", _ipv4_backend, "10.0.0.2 is IPv4, the VIP 2001:db8::100 IPv6"),
    (
        "an IPv6 backend of an IPv4 VIP",
        _ipv6_backend_of_ipv4_vip,
        "2001:db8::9 is IPv6, the VIP",
    ),
    (
        "dsr with a backend on another port",
        lambda d: with_vip6(mode="dsr"),
        "vip.web6.backend 'b2': port 8080 differs from the VIP's 80",
    ),
]


@pytest.mark.parametrize(("desc", "change", "needle"), BAD, ids=[b[0] for b in BAD])
def test_what_an_ipv6_vip_cannot_do_is_one_line(desc: str, change: Any, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        reader.parse(change(with_vip6()), "lb.toml")
    msg = str(err.value)
    assert msg.startswith("lb.toml: vip.") and needle in msg and "\n" not in msg


ALGORITHMS = ("iphash", "wrr", "srchash", "maglev", "leastconn", "leasttime", "leastpkt")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_an_ipv6_vip_takes_every_algorithm_and_times_replies_for_leasttime(
    algorithm: str,
) -> None:
    cfg = reader.parse(with_vip6(algorithm=algorithm), "lb.toml")
    _, desired = desired_entries(cfg, [])
    nat = [e for e in desired if e.table == "reverse_nat6_table"]
    assert [e.p("track_time") for e in nat] == [int(algorithm == "leasttime")] * 2


def _ones_complement_sum(data: bytes) -> int:
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ((VIP6, 80), ("2001:db8::2", 8080)),
        (("2001:db8::2", 8080), (VIP6, 80)),
        ((VIP6, 80), (VIP6, 80)),
        (("::", 0), ("ffff::ffff", 65535)),
    ],
)
def test_the_checksum_delta_turns_one_sum_into_the_other(
    old: tuple[str, int], new: tuple[str, int]
) -> None:
    """Added to a sum over the old address and port, the delta gives the sum over the
    new ones (in ones'-complement arithmetic, where 0 and 0xffff are both zero)."""

    def words(addr: str, port: int) -> bytes:
        return ipaddress.IPv6Address(addr).packed + port.to_bytes(2, "big")

    rest = b"\x12\x34\xab\xcd"  # the rest of a packet the rewrite leaves alone
    before = _ones_complement_sum(words(*old) + rest)
    after = _ones_complement_sum(words(*new) + rest)
    got = _ones_complement_sum((before + l4_checksum_delta(*old, *new)).to_bytes(4, "big"))
    assert got % 0xFFFF == after % 0xFFFF


def test_an_ipv6_vip_is_written_to_the_ipv6_tables() -> None:
    cfg = reader.parse(with_vip6(), "lb.toml")
    _, entries = desired_entries(cfg, [])
    vip = int(ipaddress.IPv6Address(VIP6))
    by_table: dict[str, list[Any]] = {}
    for e in entries:
        by_table.setdefault(e.table, []).append(e)
    [flip] = by_table["vip6_table"]
    assert (flip.m("addr"), flip.m("protocol"), flip.m("port"), flip.action) == (
        vip,
        6,
        80,
        "set_vip6",
    )
    assert [e.p("vip_addr") for e in by_table["reverse_nat6_table"]] == [vip, vip]
    assert [e.m("addr") for e in by_table["vip6_source_table"]] == [vip]
    routes = {e.m("dst_addr"): e.action for e in by_table["ipv6_route_table"]}
    assert routes[(vip, 128)] == "refuse_vip6_packet"
    assert routes[(int(ipaddress.IPv6Address("2001:db8::2")), 128)] == "forward_ipv6"
    nat = [e for e in by_table["backend_table"] if e.action == "set_backend_ipv6"]
    assert sorted(e.p("csum_delta") for e in nat) == sorted(
        l4_checksum_delta(VIP6, 80, f"2001:db8::{i}", 8080) for i in (2, 3)
    )
    # Neighbour discovery is answered for it; ARP stays the IPv4 VIPs'.
    assert [(e.m("addr"), e.action) for e in by_table["vip6_address_table"]] == [
        (vip, "vip6_address")
    ]
    assert all(e.m("addr") != vip for e in by_table["vip_address_table"])


def test_an_ipv6_dsr_vip_changes_frames_only() -> None:
    data = with_vip6(mode="dsr")
    for b in data["vip"]["web6"]["backend"]:
        b["port"] = 80
    _, entries = desired_entries(reader.parse(data, "lb.toml"), [])
    actions = [e.action for e in entries if e.table == "backend_table"]
    # The IPv4 VIPs' backends are NAT ones; web6's two change the frame only. Their
    # reverse NAT entries stay, as an IPv4 dsr VIP's: they hold the backends' ids, and a
    # reply from the VIP (as a dsr backend sends it) matches none.
    assert actions.count("set_backend_dsr") == 2 and "set_backend_ipv6" not in actions
    assert len([e for e in entries if e.table == "reverse_nat6_table"]) == 2


def test_stats_show_an_ipv6_vip_as_an_ipv4_one_its_addresses_bracketed() -> None:
    from p4lb.cli.output import render_stats
    from p4lb.stats.counters import BackendStats, Stats, VipStats, with_shares

    rows = [BackendStats(f"b{i}", f"2001:db8::{i}", 8080, 1, 5, 50, 5000, 40, 4000) for i in (2, 3)]
    v = with_shares(VipStats("web6", VIP6, 80, "tcp", "maglev", (), 1.0, 1.0, 0, {}), rows)
    lines = render_stats(Stats((v,), {})).splitlines()
    assert lines[0].startswith("VIP web6 [2001:db8::100]:80/tcp algorithm=maglev jain=1.0000")
    assert lines[2].split()[:3] == ["b2", "[2001:db8::2]:8080", "1"]
    assert lines[3].split()[5:7] == ["50.00%", "50.00%"]


def test_an_ipv6_vips_routes_count_against_the_ipv6_table() -> None:
    """The VIP's address and its two backends: three IPv6 routes."""
    from dataclasses import replace

    from p4lb.pipeline import capacity
    from p4lb.pipeline.p4info import compiled_limits

    cfg = reader.parse(with_vip6(), "lb.toml")
    limits = compiled_limits()
    capacity.check(cfg, replace(limits, ipv6_route_table_size=3))
    with pytest.raises(ConfigError, match="3 IPv6 routes, the switch holds 2"):
        capacity.check(cfg, replace(limits, ipv6_route_table_size=2))


def test_run_time_changes_to_an_ipv6_vip_are_checked_as_the_file_is() -> None:
    """`p4lb algorithm set` and `p4lb backend add` go through the same checks."""
    from p4lb.intent import edits
    from p4lb.intent.model import Backend

    cfg = reader.parse(with_vip6(), "lb.toml")
    for algorithm in ALGORITHMS:
        assert edits.set_algorithm(cfg, "web6", algorithm).vip("web6").algorithm == algorithm
    v4 = Backend("b9", "10.0.0.9", 8080, 1, "00:00:00:00:00:09", 4)
    with pytest.raises(ConfigError, match="10.0.0.9 is IPv4, the VIP 2001:db8::100 IPv6"):
        edits.add_backend(cfg, "web6", v4)
