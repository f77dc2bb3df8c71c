"""The dataplane layer's drop tests (IPv4's, and toward an IPv6 VIP) cover every drop
reason the P4Info declares: a reason added to lb.p4 without a packet that causes it fails
here, on any machine."""

from __future__ import annotations

from p4lb.pipeline.p4info import schema
from tests.dataplane.test_ipv6_vip import DROP_CASES as IPV6_VIP_DROP_CASES
from tests.dataplane.test_packets import DROP_CASES

# Reasons whose packets need a connection set up first: tests of their own in
# tests/dataplane (test_packets.py's removed backend and missing state; test_qos.py: the
# queueing disciplines' tail, AQM and meter drops, which need a congested port).
TESTED_APART = {"no_backend", "no_state", "qos_tail", "qos_aqm", "qos_meter"}


def test_every_drop_reason_has_a_packet_that_causes_it() -> None:
    declared = set(schema().drop_reasons().values()) - {"none"}
    cases = DROP_CASES + IPV6_VIP_DROP_CASES
    assert {reason for _, _, reason, _ in cases} | TESTED_APART == declared
