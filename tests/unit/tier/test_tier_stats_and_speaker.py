"""The tier's total over its balancers' stats (and `p4lb stats --json` with a balancer down),
and the speaker driver against a stand-in `gobgp` client that keeps its RIB in a file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.service.speaker import Speaker, SpeakerError
from p4lb.stats.counters import BackendStats, Stats, VipStats, tier_total
from tests.unit.fake_switch import FakeSwitch


def backend(name: str, conns: int, weight: int = 1, active: int = 0) -> BackendStats:
    return BackendStats(name, "10.2.0.1", 8000, weight, conns, conns * 5, 0, 0, 0, active=active)


def vip(rows: list[BackendStats], drops: dict[str, int] | None = None) -> VipStats:
    return VipStats("web", "10.0.0.100", 80, "tcp", "wrr", tuple(rows), 1.0, 1.0, 0, drops or {})


def test_tier_total_sums_and_recomputes_fairness() -> None:
    lb1 = Stats((vip([backend("s1", 10), backend("s2", 0)], {"no_state": 2}),), {"ttl_expired": 1})
    lb2 = Stats((vip([backend("s1", 0, active=3), backend("s2", 10)]),), {})
    total = tier_total([lb1, lb2])
    (v,) = total.vips
    assert [b.connections for b in v.backends] == [10, 10]
    assert [b.active for b in v.backends] == [3, 0]
    assert [b.share for b in v.backends] == [0.5, 0.5]
    # Each balancer alone is as unfair as can be; the tier is even.
    assert tier_total([lb1]).vips[0].jain == pytest.approx(0.5)
    assert v.jain == pytest.approx(1.0)
    assert v.drops == {"no_state": 2} and total.drops == {"ttl_expired": 1}


GOBGP = """#!/usr/bin/env python3
import json, os, sys
rib_path = os.environ["STANDIN_RIB"]
rib = json.load(open(rib_path)) if os.path.exists(rib_path) else {}
args = sys.argv[1:]
open(os.environ["STANDIN_CALLS"], "a").write(" ".join(args) + "\\n")
if os.environ.get("STANDIN_DOWN"):
    print("failed to connect to gobgpd: connection refused", file=sys.stderr); sys.exit(1)
cmd = args[4:]  # after -u HOST -p PORT
if cmd[:1] == ["-j"]:  # -j global rib -a FAMILY: that family's prefixes
    v6 = cmd[-1] == "ipv6"
    print(json.dumps({p: r for p, r in rib.items() if (":" in p) == v6})); sys.exit(0)
prefix = cmd[5]
if cmd[4] == "add":
    hop, origin = cmd[cmd.index("nexthop") + 1], cmd[cmd.index("origin") + 1]
    rib[prefix] = [{"nexthop": hop, "origin": origin}]
else:
    rib.pop(prefix, None)
json.dump(rib, open(rib_path, "w"))
"""


@pytest.fixture
def speaker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Speaker:
    exe = tmp_path / "gobgp"
    exe.write_text(GOBGP)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_RIB", str(tmp_path / "rib.json"))
    monkeypatch.setenv("STANDIN_CALLS", str(tmp_path / "calls"))
    return Speaker("", "127.0.0.1:50051", "10.10.0.11")


def test_announce_adds_what_is_missing_with_origin_igp(speaker: Speaker, tmp_path: Path) -> None:
    speaker.announce(["10.0.0.100/32", "0.0.0.0/0"])
    speaker.announce(["10.0.0.100/32", "0.0.0.0/0"])  # again: nothing new
    rib = json.loads((tmp_path / "rib.json").read_text())
    assert rib == {
        "10.0.0.100/32": [{"nexthop": "10.10.0.11", "origin": "igp"}],
        "0.0.0.0/0": [{"nexthop": "10.10.0.11", "origin": "igp"}],
    }
    adds = [c for c in (tmp_path / "calls").read_text().splitlines() if " add " in c]
    assert len(adds) == 2
    speaker.withdraw(["10.0.0.100/32"])
    assert speaker.announced() == {"0.0.0.0/0"}


def test_a_dead_speaker_is_one_line(speaker: Speaker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDIN_DOWN", "1")
    with pytest.raises(SpeakerError) as e:
        speaker.announce(["10.0.0.100/32"])
    assert "connection refused" in str(e.value) and "\n" not in str(e.value)


def test_stats_json_is_one_document_naming_an_unreachable_balancer(
    fake_cfg: Path, fake: FakeSwitch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`p4lb stats --json` on a tier with lb2 down: one JSON document (lb1's counts and the
    total over what could be read, lb2 named unreachable), and exit 1."""
    tier = f"""
[tier]
[[tier.balancer]]
name = "lb1"
address = "{fake.address}"
device_id = 0
mac = "02:00:00:00:01:01"
[[tier.balancer]]
name = "lb2"
address = "127.0.0.1:9"
device_id = 2
mac = "02:00:00:00:01:02"
"""
    fake_cfg.write_text(fake_cfg.read_text() + tier)
    main(["-c", str(fake_cfg), "apply"])  # lb1 takes it; lb2 cannot
    capsys.readouterr()
    assert main(["-c", str(fake_cfg), "stats", "--json"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    doc = json.loads(line)
    assert set(doc["balancers"]) == {"lb1"}
    assert set(doc["unreachable"]) == {"lb2"} and "127.0.0.1:9" in doc["unreachable"]["lb2"]
    assert doc["tier"]["vips"] == doc["balancers"]["lb1"]["vips"]
