"""`p4lb stats` shows shares since each VIP's last runtime change (a baseline stored at the
change), lifetime totals on request, and connection rates when watching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from p4lb import config as cfgmod
from p4lb import stats
from p4lb.cli import main
from p4lb.entries import ids_on_switch
from p4lb.p4info import schema
from tests.unit.fake_switch import FakeSwitch

ROOT = Path(__file__).resolve().parents[2]


def lifetime(conns: list[int], weights: list[int]) -> stats.VipStats:
    cfg = cfgmod.load(ROOT / "configs" / "default.toml")
    rows = tuple(
        stats.BackendStats(b.name, b.address, b.port, w, c, c * 10, c * 1000, c * 9, c * 900)
        for b, c, w in zip(cfg.vip("web").backends, conns, weights, strict=True)
    )
    base = stats.VipStats("web", "10.0.0.100", 80, "tcp", "wrr", (), 1.0, 1.0, 4, {"fragment": 2})
    return stats._fair(base, list(rows))


def test_the_window_since_a_weight_change_shows_the_new_weights() -> None:
    # 10 connections each at 1:1:1, then `weight set web h2 3`, then 10 more at 3:1:1.
    at_change = lifetime([10, 10, 10], [1, 1, 1])
    baseline = stats.baseline_of(at_change, at=1000.0)
    now = lifetime([16, 12, 12], [3, 1, 1])
    assert [round(r.share, 2) for r in now.backends] == [0.4, 0.3, 0.3]
    assert now.weighted_jain < 0.95  # what lifetime counts say although the switch is right
    window = stats.since(now, baseline)
    assert [r.connections for r in window.backends] == [6, 2, 2]
    assert [r.packets for r in window.backends] == [60, 20, 20]
    assert [round(r.share, 2) for r in window.backends] == [0.6, 0.2, 0.2]
    assert window.weighted_jain == pytest.approx(1.0)
    assert (window.since, window.collisions, window.drops) == (1000.0, 0, {})


def test_a_reset_counter_voids_the_baseline() -> None:
    baseline = stats.baseline_of(lifetime([10, 10, 10], [1, 1, 1]), at=1000.0)
    after_restart = lifetime([3, 1, 1], [3, 1, 1])
    assert stats.since(after_restart, baseline) == after_restart


def test_a_backend_added_after_the_baseline_counts_from_zero() -> None:
    baseline = stats.baseline_of(lifetime([10, 10, 10], [1, 1, 1]), at=5.0)
    baseline["backends"] = dict(list(baseline["backends"].items())[:2])
    window = stats.since(lifetime([12, 12, 4], [1, 1, 1]), baseline)
    assert [r.connections for r in window.backends] == [2, 2, 4]


def test_rates_are_new_connections_per_second() -> None:
    before, now = lifetime([10, 10, 10], [1, 1, 1]), lifetime([30, 20, 10], [1, 1, 1])
    rated = stats.with_rates(now, before, 2.0)
    assert [r.connections_per_s for r in rated.backends] == [10.0, 5.0, 0.0]
    assert "conns/s" in stats.render(stats.Stats((rated,), {}))


def _set_conns(fake: FakeSwitch, counts: dict[str, int]) -> None:
    """Set backend_conns by backend address (ids as the switch holds them)."""
    held = [schema().decode(te) for te in fake.all_entries()]
    ids = ids_on_switch(held)
    for (_, addr, _), bid in ids.backends.items():
        name = f"h{addr & 0xFF}"
        fake.set_counter("backend_conns", bid, counts[name], counts[name] * 100)


def _stats(cfg: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["-c", str(cfg), "stats", "--json", *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_stats_after_a_weight_change_over_grpc(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    _set_conns(fake, {"h2": 10, "h3": 10, "h4": 10})
    assert main(["-c", str(fake_cfg), "weight", "set", "web", "h2", "3"]) == 0
    assert stats.state_path(fake_cfg).exists()
    _set_conns(fake, {"h2": 16, "h3": 12, "h4": 12})
    capsys.readouterr()

    (window,) = _stats(fake_cfg, capsys=capsys)
    web = window["vips"][0]
    assert [b["connections"] for b in web["backends"]] == [6, 2, 2]
    assert [b["share"] for b in web["backends"]] == pytest.approx([0.6, 0.2, 0.2])
    assert [b["wanted_share"] for b in web["backends"]] == pytest.approx([0.6, 0.2, 0.2])
    assert web["weighted_jain"] == pytest.approx(1.0) and web["since"] is not None

    (total,) = _stats(fake_cfg, "--lifetime", capsys=capsys)
    web = total["vips"][0]
    assert [b["connections"] for b in web["backends"]] == [16, 12, 12]
    assert web["since"] is None and web["weighted_jain"] < 0.95

    first, second = _stats(fake_cfg, "--watch", "0.01", "--count", "2", capsys=capsys)
    assert first["vips"][0]["backends"][0]["connections_per_s"] is None
    assert second["vips"][0]["backends"][0]["connections_per_s"] == 0.0


def test_stats_reads_without_taking_the_switch(fake: FakeSwitch, fake_cfg: Path) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    before = fake.arbitrations
    assert main(["-c", str(fake_cfg), "stats"]) == 0
    assert fake.arbitrations == before
