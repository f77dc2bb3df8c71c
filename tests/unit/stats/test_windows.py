"""Windows over lifetime counts: the counts since a VIP's last runtime change (its baseline),
a baseline voided by a counter reset, and connection rates between two reads. Pure."""

from __future__ import annotations

import pytest

from p4lb.cli.output import render_stats
from p4lb.stats.counters import BackendStats, Stats, VipStats, with_shares
from p4lb.stats.windows import baseline_of, since, with_rates
from tests.unit.support import default_config


def lifetime(conns: list[int], weights: list[int]) -> VipStats:
    cfg = default_config()
    rows = tuple(
        BackendStats(b.name, b.address, b.port, w, c, c * 10, c * 1000, c * 9, c * 900)
        for b, c, w in zip(cfg.vip("web").backends, conns, weights, strict=True)
    )
    base = VipStats("web", "10.0.0.100", 80, "tcp", "wrr", (), 1.0, 1.0, 4, {"fragment": 2})
    return with_shares(base, list(rows))


def test_the_window_since_a_weight_change_shows_the_new_weights() -> None:
    # 10 connections each at 1:1:1, then `weight set web h2 3`, then 10 more at 3:1:1.
    at_change = lifetime([10, 10, 10], [1, 1, 1])
    baseline = baseline_of(at_change, at=1000.0)
    now = lifetime([16, 12, 12], [3, 1, 1])
    assert [round(r.share, 2) for r in now.backends] == [0.4, 0.3, 0.3]
    assert now.weighted_jain < 0.95  # what lifetime counts say although the switch is right
    window = since(now, baseline)
    assert [r.connections for r in window.backends] == [6, 2, 2]
    assert [r.packets for r in window.backends] == [60, 20, 20]
    assert [round(r.share, 2) for r in window.backends] == [0.6, 0.2, 0.2]
    assert window.weighted_jain == pytest.approx(1.0)
    assert (window.since, window.collisions, window.drops) == (1000.0, 0, {})


def test_a_reset_counter_voids_the_baseline() -> None:
    baseline = baseline_of(lifetime([10, 10, 10], [1, 1, 1]), at=1000.0)
    after_restart = lifetime([3, 1, 1], [3, 1, 1])
    assert since(after_restart, baseline) == after_restart


def test_a_backend_added_after_the_baseline_counts_from_zero() -> None:
    baseline = baseline_of(lifetime([10, 10, 10], [1, 1, 1]), at=5.0)
    baseline["backends"] = dict(list(baseline["backends"].items())[:2])
    window = since(lifetime([12, 12, 4], [1, 1, 1]), baseline)
    assert [r.connections for r in window.backends] == [2, 2, 4]


def test_rates_are_new_connections_per_second() -> None:
    before, now = lifetime([10, 10, 10], [1, 1, 1]), lifetime([30, 20, 10], [1, 1, 1])
    rated = with_rates(now, before, 2.0)
    assert [r.connections_per_s for r in rated.backends] == [10.0, 5.0, 0.0]
    assert "conns/s" in render_stats(Stats((rated,), {}))
