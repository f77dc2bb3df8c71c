"""`p4lb qos set/off/show` through main(argv) on the fake P4Runtime switch, with a stand-in
for simple_switch_CLI (BMv2's Thrift client) that logs its commands: a bad parameter or a
switch that refuses the queues changes nothing, in the file or on the switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4lb.cli.main import main
from tests.unit.fake_switch import FakeSwitch


@pytest.fixture
def thrift_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in simple_switch_CLI appending its stdin to a log; it answers like a switch
    started without priority queues when asked for a queue above 0 and FAIL_PRIO is set."""
    log = tmp_path / "thrift.log"
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(
        "#!/bin/sh\n"
        f'line=$(cat); echo "$line" >> {log}\n'
        'case "$line" in *" 1") [ -n "$FAIL_PRIO" ] && '
        'echo "Error: TApplicationException: Internal error";; esac\n'
        "exit 0\n"
    )
    cli.chmod(0o755)
    monkeypatch.setenv("P4LB_SWITCH_CLI", str(cli))
    return log


def _qos_entries(fake: FakeSwitch) -> list[str]:
    return sorted(t for t in ("qos_port_table", "qos_egress_table") for _ in fake.entries(t))


def test_set_show_and_off_write_the_switch_the_queues_and_the_file(
    fake: FakeSwitch, fake_cfg: Path, thrift_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["-c", str(fake_cfg)]
    assert main([*args, "qos", "set", "4", "fq_codel-approx", "rate_pps=1000", "limit=200"]) == 0
    assert _qos_entries(fake) == ["qos_egress_table", "qos_port_table"]
    thrift = thrift_log.read_text().splitlines()
    assert thrift[:4] == [
        "set_queue_rate 1000 4 1",
        "set_queue_depth 216 4 1",
        "set_queue_rate 1000 4 0",
        "set_queue_depth 216 4 0",
    ]
    # Then the new slot's counts start from zero (one CLI session).
    assert "register_write qos_backlog 0 0" in thrift
    assert "register_write qos_flow_backlog 63 0" in thrift
    assert 'discipline = "fq_codel-approx"' in fake_cfg.read_text()
    capsys.readouterr()
    assert main([*args, "qos", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ports"][0]["port"] == 4 and shown["ports"][0]["switch"] == "ok"
    assert shown["drops"] == {"tail": 0, "aqm": 0, "meter": 0}
    thrift_log.unlink()
    assert main([*args, "qos", "off", "4"]) == 0
    assert _qos_entries(fake) == []
    assert thrift_log.read_text().splitlines() == ["set_queue_rate 0 4 0", "set_queue_depth 64 4 0"]
    assert "qos.port" not in fake_cfg.read_text()


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["4", "fifo"], "command line: qos.port.4.rate_pps: missing (fifo needs it)"),
        (["4", "fifo", "rate_pps=10", "depth=5"], "qos.port.4.depth: not a parameter of fifo"),
        (["4", "codel", "rate_pps=10", "target_us"], "'target_us': parameters are KEY=VALUE"),
        (["600", "fifo", "rate_pps=10"], "600 is not a switch port"),
    ],
)
def test_a_bad_parameter_is_one_line_and_changes_nothing(
    fake: FakeSwitch,
    fake_cfg: Path,
    thrift_log: Path,
    capsys: pytest.CaptureFixture[str],
    words: list[str],
    message: str,
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    before = fake_cfg.read_bytes()
    capsys.readouterr()
    assert main(["-c", str(fake_cfg), "qos", "set", *words]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert fake_cfg.read_bytes() == before
    assert not thrift_log.exists()
    assert _qos_entries(fake) == []


def test_a_switch_without_priority_queues_refuses_before_anything_changes(
    fake: FakeSwitch,
    fake_cfg: Path,
    thrift_log: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAIL_PRIO", "1")
    before = fake_cfg.read_bytes()
    assert main(["-c", str(fake_cfg), "qos", "set", "4", "sfq-approx", "rate_pps=500"]) == 1
    err = capsys.readouterr().err.strip()
    assert "BMv2 refused `set_queue_rate 500 4 1`" in err and "--priority-queues 8" in err
    assert thrift_log.read_text().splitlines() == ["set_queue_rate 500 4 1"]  # nothing after
    assert fake_cfg.read_bytes() == before
    assert _qos_entries(fake) == []
