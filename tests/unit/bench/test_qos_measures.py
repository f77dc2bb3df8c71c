"""bench-qos's figures of one run from what the hosts saw: goodput per flow and host,
the VoIP flow's delay and loss, ping's round trips and loss."""

import pytest

from bench.qos_metrics import measures

SINK = {
    "window_s": 2.0,
    "bytes": {"10.0.0.1:1": 250_000, "10.0.0.1:2": 250_000, "10.0.0.2:3": 500_000},
}
# (sequence, one-way delay ms), as they arrived: 3 of 4 sent, 2 before 1.
VOIP = [[0, 10.0], [2, 30.0], [1, 20.0]]
PING = "64 bytes: time=4.0 ms\n64 bytes: time=6.0 ms\n"


def test_goodput_is_counted_per_flow_and_summed_per_host() -> None:
    r = measures(SINK, VOIP, PING, sent=4, pings=4)
    assert r["flows_mbps"] == {"10.0.0.1:1": 1.0, "10.0.0.1:2": 1.0, "10.0.0.2:3": 2.0}
    assert r["hosts_mbps"] == {"10.0.0.1": 2.0, "10.0.0.2": 2.0}
    assert r["goodput_mbps"] == 4.0
    assert r["jain_hosts"] == pytest.approx(1.0)
    assert r["jain_flows"] == pytest.approx(16 / 18)


def test_delay_loss_and_ping_come_from_the_packets_that_arrived() -> None:
    r = measures(SINK, VOIP, PING, sent=4, pings=4)
    assert r["voip_p50_ms"] == 20.0
    assert r["voip_mean_ms"] == 20.0
    assert r["voip_loss"] == 0.25
    assert r["ping_mean_ms"] == 5.0
    assert r["ping_loss"] == 0.5
    # RFC 3550 jitter over the arrival order (10, 30, 20): differences 20 and 10.
    assert r["voip_jitter_ms"] == pytest.approx(20 / 16 + (10 - 20 / 16) / 16)


def test_the_keys_keep_the_order_of_runs_csv() -> None:
    keys = list(measures(SINK, VOIP, PING, sent=4, pings=4))
    assert keys.index("voip_loss") < keys.index("ping_mean_ms") < keys.index("ping_loss")
