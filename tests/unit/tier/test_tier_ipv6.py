"""IPv6 VIPs in a tier: every algorithm, a stateful one's connections shared as an IPv4 VIP's,
each speaker given an IPv6 next hop (`nexthop6`) to announce them; what the tier cannot do
(DSR) refused in one line; the speaker announcing and withdrawing IPv6 routes
beside IPv4 ones; the balancers' entries for an IPv6 VIP those of one switch."""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from pathlib import Path

import pytest
import tomlkit

from p4lb.intent import reader, writer
from p4lb.intent.model import Config, ConfigError, member_config
from p4lb.pipeline.desired import desired_entries
from p4lb.service.speaker import Speaker
from p4lb.service.tier import TierController
from tests.unit.tier.test_tier_config import BASE
from tests.unit.tier.test_tier_stats_and_speaker import GOBGP

WEB6 = """
[vip.web6]
address = "FD00::100"
port = 80
algorithm = "maglev"
mac = "02:00:00:00:01:ff"
[[vip.web6.backend]]
name = "s1"
address = "fd00:2::11"
port = 8001
mac = "02:00:00:00:02:01"
switch_port = 3
[[vip.web6.backend]]
name = "s2"
address = "fd00:2::12"
port = 8001
mac = "02:00:00:00:02:02"
switch_port = 3
"""
TIER6 = """
[tier]
announce = ["0.0.0.0/0", "0::0/0"]
[[tier.balancer]]
name = "lb1"
address = "127.0.0.1:9561"
device_id = 1
mac = "02:00:00:00:01:01"
nexthop = "10.10.0.41"
nexthop6 = "FD00:10:0::41"
[[tier.balancer]]
name = "lb2"
address = "127.0.0.1:9562"
device_id = 2
mac = "02:00:00:00:01:02"
nexthop = "10.10.0.42"
nexthop6 = "fd00:10::42"
"""


def parse(text: str) -> Config:
    return reader.parse(tomllib.loads(text), "t.toml")


def test_a_tier_takes_an_ipv6_maglev_or_iphash_vip_and_its_next_hops() -> None:
    for algorithm in ("maglev", "iphash"):
        cfg = parse(BASE + WEB6.replace('"maglev"', f'"{algorithm}"') + TIER6)
        assert cfg.vip("web6").algorithm == algorithm
    lb1, lb2 = cfg.tier
    # Canonical text, as GoBGP lists what it announces.
    assert (lb1.nexthop6, lb2.nexthop6) == ("fd00:10::41", "fd00:10::42")
    assert cfg.tier_announce == ("0.0.0.0/0", "::/0")


def test_the_writer_keeps_nexthop6() -> None:
    text = BASE + WEB6 + TIER6
    cfg = parse(text)
    drained = dataclasses.replace(
        cfg, tier=(dataclasses.replace(cfg.tier[0], drain=True), cfg.tier[1])
    )
    doc = tomlkit.parse(text)
    writer.update(doc, drained)
    assert parse(tomlkit.dumps(doc)) == drained


@pytest.mark.parametrize(
    ("desc", "change", "message"),
    [
        (
            "a balancer announcing IPv4 with no IPv6 next hop",
            ('nexthop6 = "fd00:10::42"\n', ""),
            "t.toml: tier.balancer 'lb2': nexthop6: needed to announce fd00::100/128 "
            "(its speaker announces IPv6 routes via its IPv6 data address)",
        ),
        (
            "a balancer announcing IPv6 with no IPv4 next hop",
            ('nexthop = "10.10.0.42"\n', ""),
            "t.toml: tier.balancer 'lb2': nexthop: needed to announce 10.0.0.100/32",
        ),
        (
            "an IPv4 address as nexthop6",
            ('"fd00:10::42"', '"10.10.0.42"'),
            "t.toml: tier.balancer[1].nexthop6: not an IPv6 address: '10.10.0.42'",
        ),
        (
            "a bad IPv6 prefix to announce",
            ('"0::0/0"', '"fd00::1/64"'),
            "t.toml: tier.announce: 'fd00::1/64' is not an IPv4 or IPv6 prefix",
        ),
    ],
)
def test_what_a_tier_cannot_announce_is_one_line(
    desc: str, change: tuple[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as e:
        parse(BASE + WEB6 + TIER6.replace(*change))
    assert message in str(e.value) and "\n" not in str(e.value), desc


def test_an_ipv6_announce_needs_nexthop6_without_any_ipv6_vip() -> None:
    text = BASE + TIER6.replace('nexthop6 = "fd00:10::42"\n', "")
    with pytest.raises(ConfigError, match=r"'lb2': nexthop6: needed to announce ::/0"):
        parse(text)
    # Without IPv6 to announce, an IPv4 tier needs none (as before).
    parse(text.replace(', "0::0/0"', ""))


@pytest.mark.parametrize("algorithm", ["wrr", "leastconn", "srchash"])
def test_a_stateful_ipv6_vip_in_a_tier_shares_its_connections(algorithm: str) -> None:
    """Every algorithm on an IPv6 VIP in a tier. A stateful one shares its connections as an
    IPv4 VIP's: its flip entry reports a client's FIN or RST (shared), its new connections
    are reported (conn_share_table), its backends' replies carry the cookie and the cookie
    names the backend on every balancer; a hashing one (source hash) shares nothing."""
    cfg = parse(BASE + WEB6.replace('"maglev"', f'"{algorithm}"') + TIER6)
    _, entries = desired_entries(member_config(cfg, cfg.tier[0]), [])
    (vip6,) = [e for e in entries if e.table == "vip6_table"]
    sid = vip6.p("service_id")
    stateful = algorithm != "srchash"
    assert vip6.p("shared") == int(stateful)
    shares = [e for e in entries if e.table == "conn_share_table" and e.exact("service_id") == sid]
    assert len(shares) == int(stateful)
    replies = [e for e in entries if e.table == "reverse_nat6_table"]
    assert len(replies) == 2 and {e.p("cookie") for e in replies} == {int(stateful)}
    cookies = {
        e.exact("cookie"): e.p("backend_id")
        for e in entries
        if e.table == "cookie_table" and e.exact("service_id") == sid
    }
    assert cookies == ({e.p("backend_id"): e.p("backend_id") for e in replies} if stateful else {})
    # The same VIP on one switch shares nothing.
    one = dataclasses.replace(cfg, tier=(), tier_announce=())
    _, alone = desired_entries(one, [])
    assert next(e for e in alone if e.table == "vip6_table").p("shared") == 0


def test_each_balancer_holds_the_ipv6_vip_as_one_switch_does() -> None:
    """A hashing VIP's entries do not depend on the tier (nothing shared): each balancer's
    IPv6 entries are a single switch's, with its own MAC as the frames' source."""
    cfg = parse(BASE + WEB6 + TIER6)
    one = dataclasses.replace(cfg, tier=(), tier_announce=())
    _, alone = desired_entries(one, [])
    for b in cfg.tier:
        _, entries = desired_entries(member_config(cfg, b), [])
        v6 = [e for e in entries if "6" in e.table or e.action == "set_backend_ipv6"]
        want = [e for e in alone if "6" in e.table or e.action == "set_backend_ipv6"]
        assert len(v6) == len(want) > 0
        (vip6,) = [e for e in entries if e.table == "vip6_table"]
        assert vip6.p("service_id") == next(e for e in want if e.table == "vip6_table").p(
            "service_id"
        )
        src = {e.p("src_mac") for e in v6 if e.action == "set_backend_ipv6"}
        assert src == {int(b.mac.replace(":", ""), 16)}


def test_the_tier_announces_an_ipv6_vip_as_a_128() -> None:
    cfg = parse(BASE + WEB6 + TIER6)
    ctl = TierController(lambda: cfg)
    ctl.config()
    assert ctl.speakers.prefixes() == ["10.0.0.100/32", "fd00::100/128", "0.0.0.0/0", "::/0"]


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "gobgp"
    exe.write_text(GOBGP)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_RIB", str(tmp_path / "rib.json"))
    monkeypatch.setenv("STANDIN_CALLS", str(tmp_path / "calls"))
    return tmp_path / "calls"


def test_the_speaker_announces_each_family_via_its_next_hop(calls: Path) -> None:
    sp = Speaker("", "127.0.0.1:50051", "10.10.0.41", "fd00:10::41")
    prefixes = ["10.0.0.100/32", "fd00::100/128", "0.0.0.0/0", "::/0"]
    sp.announce(prefixes)
    sp.announce(prefixes)  # again: nothing new
    adds = [c.split(" ", 4)[4] for c in calls.read_text().splitlines() if " add " in c]
    assert adds == [
        "global rib -a ipv4 add 10.0.0.100/32 origin igp nexthop 10.10.0.41",
        "global rib -a ipv6 add fd00::100/128 origin igp nexthop fd00:10::41",
        "global rib -a ipv4 add 0.0.0.0/0 origin igp nexthop 10.10.0.41",
        "global rib -a ipv6 add ::/0 origin igp nexthop fd00:10::41",
    ]
    rib = json.loads(calls.with_name("rib.json").read_text())
    assert rib["fd00::100/128"] == [{"nexthop": "fd00:10::41", "origin": "igp"}]
    # A drain withdraws both families.
    sp.withdraw(prefixes)
    assert sp.announced() == set()
    dels = [c.split(" ", 4)[4] for c in calls.read_text().splitlines() if " del " in c]
    assert "global rib -a ipv6 del fd00::100/128" in dels and len(dels) == 4


def test_a_speaker_without_an_ipv6_next_hop_never_asks_for_ipv6(calls: Path) -> None:
    sp = Speaker("", "127.0.0.1:50051", "10.10.0.41")
    sp.announce(["10.0.0.100/32"])
    sp.withdraw(["10.0.0.100/32"])
    assert "ipv6" not in calls.read_text()


@pytest.mark.parametrize("algorithm", ["maglev", "wrr"])
def test_an_ipv6_dsr_vip_in_a_tier_changes_only_the_frame(algorithm: str) -> None:
    """DSR for an IPv6 VIP in a tier, as for an IPv4 one: each balancer's backend entries
    change only the frame, no reply is stamped (none crosses a balancer: no reverse NAT's
    cookie), and a round-robin VIP's connections are still reported and copied."""
    dsr = WEB6.replace("port = 8001", "port = 80").replace(
        'algorithm = "maglev"', f'algorithm = "{algorithm}"\nmode = "dsr"'
    )
    cfg = parse(BASE + dsr + TIER6)
    assert cfg.vip("web6").mode == "dsr"
    _, entries = desired_entries(member_config(cfg, cfg.tier[0]), [])
    (vip6,) = [e for e in entries if e.table == "vip6_table"]
    sid = vip6.p("service_id")
    ids = {e.p("backend_id") for e in entries if e.table == "reverse_nat6_table"}
    backends = [e for e in entries if e.table == "backend_table" and e.exact("backend_id") in ids]
    assert len(backends) == 2 and {e.action for e in backends} == {"set_backend_dsr"}
    assert not [e for e in entries if e.table == "cookie_table" and e.exact("service_id") == sid]
    stateful = algorithm == "wrr"
    assert vip6.p("shared") == int(stateful)
    shares = [e for e in entries if e.table == "conn_share_table" and e.exact("service_id") == sid]
    assert len(shares) == int(stateful)
