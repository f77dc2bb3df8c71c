"""[qos] and `p4lb qos set`'s parameters: defaults, one-line errors naming the key, and the
file written back reading as the same intent."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent import qos, reader, writer
from p4lb.intent.model import ConfigError
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import compiled_limits

RATE = {"rate_pps": 1000}


def test_shares_default_to_a_fraction_of_the_limit() -> None:
    fq = qos.parse_port(2, {"discipline": "fq_codel-approx", **RATE, "limit": 800}, "t", "w")
    assert (fq.flow_limit, fq.target_us, fq.interval_us) == (100, 5000, 100000)
    assert fq.sparse_first and fq.codel
    cake = qos.parse_port(2, {"discipline": "cake-approx", **RATE, "limit": 400}, "t", "w")
    # A host's flows share its place: the per-flow cap is the host's.
    assert cake.host_limit == cake.flow_limit == 100
    fifo = qos.parse_port(2, {"discipline": "fifo", **RATE}, "t", "w")
    assert (fifo.limit, fifo.flow_limit, fifo.codel, fifo.sparse_first) == (1000, 0, False, False)


BAD: list[tuple[str, Any, dict[str, Any], str]] = [
    ("unknown discipline", 2, {"discipline": "red", **RATE}, "w.discipline: 'red' is not one of"),
    ("no rate", 2, {"discipline": "fifo"}, "w.rate_pps: missing (fifo needs it)"),
    (
        "parameter of another discipline",
        2,
        {"discipline": "fifo", **RATE, "target_us": 5},
        "w.target_us: not a parameter of fifo",
    ),
    (
        "zero limit",
        2,
        {"discipline": "fifo", **RATE, "limit": 0},
        "w.limit: must be an integer in 1..65535",
    ),
    (
        "limit too large for 16 bits",
        2,
        {"discipline": "codel", **RATE, "limit": 70000},
        "w.limit: must be an integer in 1..65535",
    ),
    ("boolean rate", 2, {"discipline": "fifo", "rate_pps": True}, "w.rate_pps: must be an integer"),
    (
        "target above interval",
        2,
        {"discipline": "codel", **RATE, "target_us": 200000},
        "w.target_us: must be below interval_us",
    ),
    (
        "share above the limit",
        2,
        {"discipline": "sfq-approx", **RATE, "limit": 10, "flow_limit": 11},
        "w.flow_limit: 11 is above the port's limit 10",
    ),
    (
        "classifier",
        2,
        {"discipline": "pcq-approx", **RATE, "classifier": "port"},
        "w.classifier: must be src or dst",
    ),
    ("port 0", 0, {"discipline": "fifo", **RATE}, "w: 0 is not a switch port (1..510)"),
    ("BMv2's drop port", 511, {"discipline": "fifo", **RATE}, "w: 511 is not a switch port"),
    ("not a number", "x", {"discipline": "fifo", **RATE}, "w: 'x' is not a switch port"),
]


@pytest.mark.parametrize(("what", "port", "raw", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_parameters_are_one_line_naming_the_key(
    what: str, port: Any, raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as e:
        qos.parse_port(port, raw, "t", "w")
    assert str(e.value).startswith(f"t: {message}"), str(e.value)
    assert "\n" not in str(e.value)


def test_the_file_written_back_reads_as_the_same_disciplines(tmp_path: Path) -> None:
    cfg = reader.load(Path("configs/default.toml"))
    for port, raw in [
        (4, {"discipline": "fq_codel-approx", **RATE, "target_us": 2000}),
        (2, {"discipline": "pcq-approx", **RATE, "class_rate_pps": 300, "classifier": "dst"}),
        (3, {"discipline": "fifo", **RATE, "limit": 50}),
    ]:
        cfg = qos.with_port(cfg, qos.parse_port(port, raw, "t", "w"))
    text = writer.dumps(cfg)
    again = reader.parse(tomllib.loads(text), "again")
    assert again.qos == cfg.qos
    assert [p.port for p in again.qos.ports] == [2, 3, 4]  # type: ignore[union-attr]
    # Defaults stay implicit: fq_codel's interval was not given, so it is not written.
    assert "interval_us" not in text and "target_us = 2000" in text
    off = qos.without_port(again, 3)
    assert reader.parse(tomllib.loads(writer.dumps(off)), "x").qos.port(3) is None  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="switch port 3 has no discipline"):
        qos.without_port(off, 3)


def test_unknown_keys_and_a_bad_thrift_port_are_refused() -> None:
    base = tomllib.loads(Path("configs/default.toml").read_text())
    with pytest.raises(ConfigError, match=r"qos.shaper: unknown key"):
        reader.parse({**base, "qos": {"shaper": 1}}, "t")
    with pytest.raises(ConfigError, match=r"qos.thrift_port: must be a TCP port"):
        reader.parse({**base, "qos": {"thrift_port": 0}}, "t")


def test_more_ports_than_the_program_has_slots_is_a_capacity_error() -> None:
    cfg = reader.load(Path("configs/default.toml"))
    limits = compiled_limits()
    for port in range(1, limits.qos_ports + 2):
        cfg = qos.with_port(cfg, qos.parse_port(port, {"discipline": "fifo", **RATE}, "t", "w"))
    with pytest.raises(ConfigError, match=rf"at most {limits.qos_ports}"):
        capacity.check(cfg, limits)
