"""The `[tier]` config: parsing, errors as one line, the per-balancer view, the writer
keeping it (and its comments) through runtime changes, and the tier's desired entries."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
import tomlkit

from p4lb.intent import reader, writer
from p4lb.intent.model import ConfigError, member_config, switch_configs
from p4lb.pipeline.desired import desired_entries

ROOT = Path(__file__).resolve().parents[3]
BASE = (ROOT / "configs" / "default.toml").read_text()
TIER = """
[tier]
announce = ["0.0.0.0/0"]
[[tier.balancer]]
name = "lb1"   # the first balancer
address = "127.0.0.1:9561"
device_id = 1
mac = "02:00:00:00:01:01"
ports = [1, 2]
nexthop = "10.10.0.11"
speaker_netns = "p4t-lb1"
[[tier.balancer.host]]
name = "lb1-speaker"
address = "10.10.0.11"
mac = "02:00:00:00:04:01"
switch_port = 2
[[tier.balancer]]
name = "lb2"
address = "127.0.0.1:9562"
device_id = 2
mac = "02:00:00:00:01:02"
"""


def parse(text: str):  # type: ignore[no-untyped-def]
    return reader.parse(tomllib.loads(text), "t.toml")


def test_balancers_parse() -> None:
    cfg = parse(BASE + TIER)
    lb1, lb2 = cfg.tier
    assert (lb1.name, lb1.device_id, lb1.ports, lb1.nexthop) == ("lb1", 1, (1, 2), "10.10.0.11")
    assert [h.address for h in lb1.hosts] == ["10.10.0.11"]
    assert lb2.nexthop == "" and not lb2.drain
    assert cfg.tier_announce == ("0.0.0.0/0",)
    assert parse(BASE).tier == ()  # a single switch stays as it is


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('"127.0.0.1:9562"', '"127.0.0.1:9561"'), "two balancers have address '127.0.0.1:9561'"),
        (('name = "lb2"', 'name = "lb1"'), "two balancers have name 'lb1'"),
        (
            ('"0.0.0.0/0"', '"0.0.0.0/40"'),
            "tier.announce: '0.0.0.0/40' is not an IPv4 or IPv6 prefix",
        ),
        (('nexthop = "10.10.0.11"', 'nexthop = "speaker"'), "tier.balancer[0].nexthop"),
        (("device_id = 2", "device_id = 2\ncolour = 1"), "tier.balancer[1]"),
    ],
)
def test_bad_tier_is_one_line(change: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(BASE + TIER.replace(*change))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_member_view_is_the_tier_intent_with_its_own_switch() -> None:
    cfg = parse(BASE + TIER)
    names = [n for n, _ in switch_configs(cfg)]
    assert names == ["lb1", "lb2"]
    v1 = member_config(cfg, cfg.tier[0])
    assert (v1.switch.address, v1.switch.device_id, v1.switch.ports) == (
        "127.0.0.1:9561",
        1,
        (1, 2),
    )
    assert v1.switch.election_id == cfg.switch.election_id
    assert v1.hosts[-1].name == "lb1-speaker" and v1.shared
    assert v1.vips == cfg.vips


def test_writer_keeps_the_tier_and_its_comments() -> None:
    text = BASE + TIER
    cfg = parse(text)
    drained = dataclasses.replace(
        cfg, tier=(dataclasses.replace(cfg.tier[0], drain=True), cfg.tier[1])
    )
    doc = tomlkit.parse(text)
    writer.update(doc, drained)
    out = tomlkit.dumps(doc)
    assert "# the first balancer" in out
    assert parse(out) == drained
    # A runtime change elsewhere (a weight) leaves [tier] as written.
    doc = tomlkit.parse(text)
    writer.update(doc, cfg.with_vip(dataclasses.replace(cfg.vips[0], algorithm="maglev")))
    out = tomlkit.dumps(doc)
    assert out[out.index("[tier]") :] == text[text.index("[tier]") :].lstrip("\n")


def test_a_tier_shares_only_its_stateful_vips() -> None:
    cfg = parse(BASE + TIER)
    for algorithm, shared in (("wrr", 1), ("leastconn", 1), ("maglev", 0), ("iphash", 0)):
        vip = dataclasses.replace(cfg.vips[0], algorithm=algorithm)
        one = member_config(cfg.with_vip(vip), cfg.tier[0])
        _, entries = desired_entries(one, [])
        (flip,) = [e for e in entries if e.table == "vip_table"]
        share = [e for e in entries if e.table == "conn_share_table"]
        assert flip.p("shared") == shared
        assert len(share) == shared
        # A shared VIP's replies carry their backend's cookie, and each cookie names that
        # backend for this VIP only.
        reverse = [e for e in entries if e.table == "reverse_nat_table"]
        cookies = [e for e in entries if e.table == "cookie_table"]
        assert {e.p("cookie") for e in reverse} == {shared}
        assert sorted((e.m("cookie"), e.p("backend_id")) for e in cookies) == (
            sorted((e.p("backend_id"), e.p("backend_id")) for e in reverse) if shared else []
        )
        assert {e.m("service_id") for e in cookies} <= {flip.p("service_id")}
    # A single switch shares nothing.
    _, entries = desired_entries(cfg, [])
    assert [e for e in entries if e.table == "vip_table"][0].p("shared") == 0
    assert not [e for e in entries if e.table in ("conn_share_table", "cookie_table")]
    assert not [e for e in entries if e.table == "reverse_nat_table" and e.p("cookie")]


def test_a_tier_refuses_queueing_disciplines_in_one_line_saying_why() -> None:
    """A discipline's queue rates go over one switch's Thrift port, which [qos] names once:
    applied to every balancer it would shape one switch's queues and leave the others' as
    they are, with the admission entries and meters of a discipline they do not run."""
    qos = '\n[qos]\nthrift_port = 9090\n[qos.port.2]\ndiscipline = "fifo"\nrate_pps = 1000\n'
    assert parse(BASE + qos).qos is not None  # one switch: fine
    with pytest.raises(ConfigError) as e:
        parse(BASE + qos + TIER)
    assert "not a [tier]" in str(e.value) and "Thrift port" in str(e.value)
    assert "\n" not in str(e.value)
    # [qos] without a port shapes nothing: a tier may keep it.
    assert parse(BASE + "\n[qos]\nthrift_port = 9090\n" + TIER).tier
