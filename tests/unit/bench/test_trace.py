"""bench-switch's traced work per packet: what it counts from a BMv2 log, and where."""

from __future__ import annotations

from pathlib import Path

from bench.instructions import callgrind_totals, traced_counts
from bench.lab import Shape
from bench.traffic import FLOW_PACKETS, PATH_EXTRA, flow_packets, traffic

# The shape of simple_switch's debug/trace lines; packet 7 crosses both pipelines.
LOG = """\
[12:00:00.000] [bmv2] [D] [thread 10] [7.0] [cxt 0] Processing packet received on port 1
[12:00:00.001] [bmv2] [D] [thread 10] [7.0] [cxt 0] Pipeline 'ingress': start
[12:00:00.002] [bmv2] [T] [thread 10] [7.0] [cxt 0] lb.p4(41) Condition "x" (node_2) is true
[12:00:00.003] [bmv2] [T] [thread 10] [7.0] [cxt 0] Applying table 'vip_table'
[12:00:00.004] [bmv2] [T] [thread 10] [7.0] [cxt 0] vip.p4(20) Primitive meta.service_id = id
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


# The head and tail of a callgrind dump, as valgrind 3.19 writes them per thread.
CALLGRIND = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  simple_switch_grpc --device-id 0
part: 1
thread: {thread}

events: Ir
summary: 0

fn=(1) 0x0000000000012345
0 12
totals: {total}
"""


def test_callgrind_totals_one_per_thread_file(tmp_path: Path) -> None:
    files = []
    for thread, total in ((1, 900), (2, 123456789), (3, 0)):
        f = tmp_path / f"cg-x.1-0{thread}"
        f.write_text(CALLGRIND.format(thread=thread, total=total))
        files.append(f)
    (tmp_path / "cg-x.1-04").write_text("# callgrind format\nversion: 1\n")  # cut short
    files.append(tmp_path / "cg-x.1-04")
    assert sorted(callgrind_totals(files)) == [0, 900, 123456789]


def test_a_path_mix_repeats_one_step_of_every_tcp_connection_only() -> None:
    shape = Shape(flows=20)  # flows 9 and 19 are UDP
    step = 4
    mix = traffic(shape, direct=False)
    more = traffic(shape, direct=False, repeat=step)
    assert len(mix) == 20 * FLOW_PACKETS
    assert len(more) == len(mix) + 18 * PATH_EXTRA
    for i in (0, 9):
        pkt = flow_packets(i, shape, direct=False)[step]
        extra = PATH_EXTRA if i != 9 else 0
        assert more.count(pkt) == mix.count(pkt) + extra
        # The copies follow their original at once.
        at = more.index(pkt)
        assert more[at : at + 1 + extra] == [pkt] * (1 + extra)
