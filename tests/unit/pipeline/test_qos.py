"""Disciplines -> qos_port_table / qos_egress_table entries, BMv2 queue settings and class
meters: the entries fit the committed P4Info, the flag bits are qos.p4's, and the queue
commands put a sparse queue first."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from p4lb.intent import qos as qos_intent
from p4lb.intent import reader
from p4lb.intent.model import Config
from p4lb.pipeline import qos
from p4lb.pipeline.p4info import schema
from p4lb.switch import codec, queues

QOS_P4 = Path("p4src/include/qos.p4")
SIZE_P4 = Path("p4src/include/size.p4")  # QOS_SLOTS, QOS_BUCKETS


def _cfg(*ports: tuple[int, dict[str, Any]]) -> Config:
    cfg = reader.load(Path("configs/default.toml"))
    for port, raw in ports:
        cfg = qos_intent.with_port(cfg, qos_intent.parse_port(port, raw, "t", "w"))
    return cfg


def test_flag_bits_and_queues_are_the_p4_programs() -> None:
    text = QOS_P4.read_text() + SIZE_P4.read_text()
    consts = {m[0]: int(m[1]) for m in re.findall(r"const bit<\d+>\s+(QOS_\w+)\s*=\s*(\d+);", text)}
    assert consts["QOS_BY_DST"] == qos.BY_DST
    assert consts["QOS_POLICED"] == qos.POLICED
    assert consts["QOS_SPARSE"] == qos.SPARSE
    assert consts["QOS_PER_FLOW"] == qos.PER_FLOW
    assert consts["QOS_BULK_QUEUE"] == qos.BULK_QUEUE
    assert consts["QOS_SPARSE_QUEUE"] == qos.SPARSE_QUEUE
    s = schema()
    # One meter per (slot, host bucket).
    assert s.meters[qos.CLASS_METER].size == consts["QOS_SLOTS"] * consts["QOS_BUCKETS"]
    assert s.table(qos.PORT_TABLE).size == consts["QOS_SLOTS"]


def test_every_discipline_encodes_against_the_p4info() -> None:
    s = schema()
    cfg = _cfg(
        (1, {"discipline": "fifo", "rate_pps": 100}),
        (2, {"discipline": "codel", "rate_pps": 100}),
        (3, {"discipline": "sfq-approx", "rate_pps": 100}),
        (
            4,
            {
                "discipline": "pcq-approx",
                "rate_pps": 100,
                "class_rate_pps": 10,
                "classifier": "dst",
            },
        ),
        (5, {"discipline": "fq_codel-approx", "rate_pps": 100}),
        (6, {"discipline": "cake-approx", "rate_pps": 100}),
    )
    entries = {(e.table, e.exact("port")): e for e in qos.entries(cfg)}
    # Every port is admitted; the three with CoDel have an egress entry too.
    assert len(entries) == 9
    for e in entries.values():
        codec.encode(s, e)  # raises on a name or width the program does not have
    admit = {port: dict(e.params) for (t, port), e in entries.items() if t == qos.PORT_TABLE}
    release = {port: dict(e.params) for (t, port), e in entries.items() if t == qos.EGRESS_TABLE}
    assert [admit[p]["slot"] for p in range(1, 7)] == [0, 1, 2, 3, 4, 5]
    assert admit[1] == {
        "slot": 0,
        "limit": 1000,
        "per_flow": 0xFFFF,
        "per_host": 0xFFFF,
        "flags": 0,
    }
    assert admit[3]["flags"] == qos.SPARSE and admit[3]["per_flow"] == 127 // 8
    assert admit[4]["flags"] == qos.BY_DST | qos.POLICED and admit[4]["per_host"] == 50
    assert sorted(release) == [2, 5, 6]
    assert release[2] == {"flags": 0, "target_us": 5000, "interval_us": 100000}
    assert release[5]["flags"] == release[6]["flags"] == qos.PER_FLOW


def test_queues_shape_the_port_and_give_it_back_when_the_discipline_goes() -> None:
    cfg = _cfg(
        (2, {"discipline": "fifo", "rate_pps": 1000, "limit": 50}),
        (4, {"discipline": "fq_codel-approx", "rate_pps": 1000}),
    )
    got = qos.queues(cfg, former_ports=[2, 3])
    assert got == [
        qos.QueueSetting(2, 0, 1000, 50 + qos.DEPTH_MARGIN),
        qos.QueueSetting(4, 0, 1000, 1000 + qos.DEPTH_MARGIN),
        qos.QueueSetting(4, 1, 1000, 1000 + qos.DEPTH_MARGIN),
        qos.QueueSetting(3, 0, 0, qos.BMV2_DEFAULT_DEPTH),
    ]
    assert qos.needs_priority_queues(cfg)
    lines = queues.commands(got)
    # The sparse queue first: a switch without priority queues refuses before any change.
    assert lines[:2] == ["set_queue_rate 1000 4 1", "set_queue_depth 1016 4 1"]
    assert "set_queue_rate 0 3 0" in lines


def test_a_port_whose_admission_changes_starts_from_zero_counts() -> None:
    cfg = _cfg(
        (2, {"discipline": "fifo", "rate_pps": 1000}),
        (4, {"discipline": "codel", "rate_pps": 1000}),
    )
    held = {e.exact("port"): e for e in qos.entries(cfg) if e.table == qos.PORT_TABLE}
    assert qos.register_resets(cfg, held, 4) == []  # nothing changed: nothing reset
    changed = _cfg(
        (2, {"discipline": "fifo", "rate_pps": 1000}),
        (4, {"discipline": "codel", "rate_pps": 1000, "limit": 10}),
    )
    cells = qos.register_resets(changed, held, 4)
    # Port 4 has slot 1: cells 4..7 of every register (4 buckets a slot here), not slot 0's.
    assert {i for r, i in cells if r == "qos_flow_backlog"} == {4, 5, 6, 7}
    assert {i for r, i in cells if r == "qos_backlog"} == {4, 5, 6, 7}
    assert {r for r, _ in cells} == set(qos.BUCKET_REGISTERS)
    text = QOS_P4.read_text()
    for r in {r for r, _ in cells}:
        assert f") {r};" in text, f"qos.p4 has no register {r}"


def test_class_meters_cover_the_pcq_ports_slot_only() -> None:
    cfg = _cfg(
        (1, {"discipline": "fifo", "rate_pps": 100}),
        (2, {"discipline": "pcq-approx", "rate_pps": 1000, "class_rate_pps": 300}),
    )
    assert qos.meters(cfg, 64) == [qos.MeterSetting(64, 64, 300, 50)]
