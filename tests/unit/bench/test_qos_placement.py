"""bench-qos's flow placement: the source ports it picks give each flow a queue bucket of
its own (by the model of qos.p4's hash that the e2e test checks against the switch), or put
the VoIP flow in a chosen bulk flow's bucket, and never reuse a port."""

from __future__ import annotations

import random

import pytest

from bench import qos_metrics
from p4lb.models.hashing import QOS_BUCKETS, qos_flow_bucket

SRCS = ["10.0.0.1"] * 3 + ["10.0.0.2"]
VOIP, DST = "10.0.0.3", "10.0.0.4"


def bulk_buckets(ports: list[int]) -> list[int]:
    return [
        qos_flow_bucket(a, DST, 6, s, qos_metrics.TCP_PORT)
        for a, s in zip(SRCS, ports, strict=True)
    ]


@pytest.fixture(autouse=True)
def _fresh_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qos_metrics, "_spent", set())


def test_every_flow_gets_a_bucket_of_its_own() -> None:
    rng = random.Random(1)
    for _ in range(200):
        p = qos_metrics.place_flows(rng, SRCS, VOIP, DST)
        # Recomputed from the ports, not taken from what place_flows says.
        bulk = bulk_buckets(p["bulk_ports"])
        voip = qos_flow_bucket(VOIP, DST, 17, p["voip_port"], qos_metrics.VOIP_PORT)
        assert len(set(bulk + [voip])) == len(SRCS) + 1, p
        assert all(s in qos_metrics.SPORTS for s in p["bulk_ports"] + [p["voip_port"]])


def test_the_voip_flow_can_be_put_in_a_bulk_flows_bucket() -> None:
    rng = random.Random(2)
    for i in range(len(SRCS)):
        p = qos_metrics.place_flows(rng, SRCS, VOIP, DST, voip_with=i)
        voip = qos_flow_bucket(VOIP, DST, 17, p["voip_port"], qos_metrics.VOIP_PORT)
        bulk = bulk_buckets(p["bulk_ports"])
        assert voip == bulk[i]
        assert len(set(bulk)) == len(SRCS)


def test_no_port_is_used_twice_in_a_process() -> None:
    rng = random.Random(3)
    seen: list[int] = []
    for _ in range(300):
        p = qos_metrics.place_flows(rng, SRCS, VOIP, DST)
        seen += p["bulk_ports"] + [p["voip_port"]]
    assert len(seen) == len(set(seen))


def test_the_port_range_reaches_every_bucket() -> None:
    # CRC-16 is linear: a range of ports whose high bits barely vary reaches a subspace of
    # the buckets only (20000-31999 misses 8 of them).
    buckets = {
        qos_flow_bucket("10.0.0.1", DST, 6, p, qos_metrics.TCP_PORT) for p in qos_metrics.SPORTS
    }
    assert buckets == set(range(QOS_BUCKETS))


def test_a_placement_that_cannot_exist_is_refused_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 65 flows in 64 buckets.
    monkeypatch.setattr(qos_metrics, "SPORTS", range(1024, 4096))
    with pytest.raises(RuntimeError, match="no placement"):
        qos_metrics.place_flows(random.Random(4), ["10.0.0.1"] * 64, VOIP, DST)
