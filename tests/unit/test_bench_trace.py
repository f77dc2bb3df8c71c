"""bench-switch's traced work per packet: what it counts from a BMv2 log, and where."""

from __future__ import annotations

from pathlib import Path

from bench.switch import traced_counts

# The shape of simple_switch's debug/trace lines; packet 7 crosses both pipelines.
LOG = """\
[12:00:00.000] [bmv2] [D] [thread 10] [7.0] [cxt 0] Processing packet received on port 1
[12:00:00.001] [bmv2] [D] [thread 10] [7.0] [cxt 0] Pipeline 'ingress': start
[12:00:00.002] [bmv2] [T] [thread 10] [7.0] [cxt 0] lb.p4(41) Condition "x" (node_2) is true
[12:00:00.003] [bmv2] [T] [thread 10] [7.0] [cxt 0] Applying table 'vip_table'
[12:00:00.004] [bmv2] [T] [thread 10] [7.0] [cxt 0] vip.p4(20) Primitive meta.to_vip = 1
[12:00:00.005] [bmv2] [T] [thread 10] [7.0] [cxt 0] vip.p4(21) Primitive hash(...)
[12:00:00.006] [bmv2] [D] [thread 10] [7.0] [cxt 0] Pipeline 'ingress': end
[12:00:00.007] [bmv2] [D] [thread 11] [7.0] [cxt 0] Pipeline 'egress': start
[12:00:00.008] [bmv2] [T] [thread 11] [7.0] [cxt 0] Applying table 'backend_table'
[12:00:00.009] [bmv2] [T] [thread 11] [7.0] [cxt 0] nat.p4(9) Primitive hdr.ipv4.dst_addr = addr
[12:00:00.010] [bmv2] [T] [thread 11] [7.0] [cxt 0] Condition "y" (node_9) is false
[12:00:00.011] [bmv2] [D] [thread 10] [8.0] [cxt 0] Pipeline 'ingress': start
[12:00:00.012] [bmv2] [T] [thread 10] [8.0] [cxt 0] Applying table 'ipv4_route_table'
"""


def test_counts_each_packet_in_all_and_in_the_ingress_alone(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    log.write_text(LOG)
    counts = traced_counts(log)
    assert counts[7] == {
        "tables": 2,
        "conditions": 2,
        "primitives": 3,
        "ingress_tables": 1,
        "ingress_conditions": 1,
        "ingress_primitives": 2,
    }
    assert counts[8]["tables"] == counts[8]["ingress_tables"] == 1
    assert counts[8]["primitives"] == 0
