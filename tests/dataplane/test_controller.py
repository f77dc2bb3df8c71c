"""The controller against a real simple_switch_grpc: read-back, idempotence, mastership."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import edits, reader, writer
from p4lb.intent.model import Config
from p4lb.pipeline.desired import desired_entries
from p4lb.service import operations
from p4lb.service.daemon import Controller
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError
from tests.dataplane.support import GRPC_PORT, Bmv2, Wire, flow_syn, same_bucket_flows
from tests.support import poll_until


def test_what_the_switch_holds_is_what_was_intended(bmv2: Bmv2) -> None:
    held = bmv2.sw.read_entries()
    _, desired = desired_entries(bmv2.cfg, held)
    assert sorted(held) == sorted(desired)


def test_second_apply_writes_nothing(bmv2: Bmv2) -> None:
    result = operations.apply(bmv2.sw, bmv2.cfg)
    assert (result.pipeline_pushed, result.writes) == (False, 0)


def test_invalid_config_changes_nothing_on_the_switch(
    bmv2: Bmv2, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(bmv2.sw.read_entries())
    text = bmv2.cfg_path.read_text().replace('algorithm = "wrr"', 'algorithm = "magic"', 1)
    bmv2.cfg_path.write_text(text)
    assert main(["-c", str(bmv2.cfg_path), "apply"]) == 1
    assert "unknown algorithm 'magic'" in capsys.readouterr().err
    assert sorted(bmv2.sw.read_entries()) == before


def test_cli_weight_set_reaches_the_switch_and_the_file(bmv2: Bmv2) -> None:
    assert main(["-c", str(bmv2.cfg_path), "weight", "set", "web", "s2", "3"]) == 0
    assert reader.load(bmv2.cfg_path).vip("web").backend("s2").weight == 3
    vip = next(e for e in bmv2.sw.read_entries(("vip_table",)) if e.m("port") == 80)
    assert vip.p("slot_count") == 5


def test_concurrent_cli_writers_all_land_on_the_switch_and_in_the_file(bmv2: Bmv2) -> None:
    """Three `p4lb weight set` started at the same moment (issue 13): all exit 0, and the
    switch and the file both hold all three weights."""
    exe = Path(sys.executable).with_name("p4lb")
    procs = [
        subprocess.Popen(
            [str(exe), "-c", str(bmv2.cfg_path), "weight", "set", "web", f"s{port}", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for port in (2, 3, 4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    cfg = reader.load(bmv2.cfg_path)
    assert [b.weight for b in cfg.vip("web").backends] == [2, 3, 4]
    held = bmv2.sw.read_entries()
    assert sorted(held) == sorted(desired_entries(cfg, held)[1])
    bmv2.cfg = cfg


def test_a_lower_election_id_cannot_write(bmv2: Bmv2) -> None:
    other = Switch(f"127.0.0.1:{GRPC_PORT}", 0, 5)
    try:
        assert not other.is_primary
        with pytest.raises(SwitchError, match="another controller"):
            operations.apply(other, edits.set_weight(bmv2.cfg, "web", "s2", 7))
    finally:
        other.close()
    assert operations.apply(bmv2.sw, bmv2.cfg).writes == 0


class RunningController:
    """`p4lb run` (Controller.run) in a thread, as a higher election id than the test's own
    session, against the test switch; stopped and joined on exit."""

    def __init__(self, bmv2: Bmv2) -> None:
        cfg = replace(bmv2.cfg, switch=replace(bmv2.cfg.switch, election_id=20))
        self.path = bmv2.cfg_path.with_name("run.toml")
        writer.save(cfg, self.path)
        self.ctl = Controller(
            lambda: reader.load(self.path), check_s=0.5, config_path=str(self.path)
        )
        self.thread = threading.Thread(target=self.ctl.run, kwargs={"duration_s": 60})

    def __enter__(self) -> RunningController:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ctl.stop()
        self.thread.join(15)
        assert not self.thread.is_alive(), "p4lb run did not stop"


def _until(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll `check` (bounded) until it holds; a switch that refuses a read meanwhile is a
    check that does not hold yet."""

    def holds() -> bool:
        with contextlib.suppress(SwitchError):
            return check()
        return False

    return poll_until(holds, timeout, every=0.1)


def _holds_intent(session: Switch, cfg: Config) -> bool:
    held = session.read_entries()
    return bool(held) and sorted(held) == sorted(desired_entries(cfg, held)[1])


def _reader(bmv2: Bmv2) -> Switch:
    """The test's session becomes a reader (election id 1); the controller writes."""
    bmv2.sw.close()
    bmv2.sw = Switch(f"127.0.0.1:{GRPC_PORT}", 0, 1)
    return bmv2.sw


def test_run_restores_everything_after_the_switch_restarts(bmv2: Bmv2) -> None:
    with RunningController(bmv2):
        session = _reader(bmv2)
        assert _until(lambda: _holds_intent(session, bmv2.cfg))
        bmv2.restart()  # a new, empty simple_switch_grpc on the same ports
        session = _reader(bmv2)
        assert _until(lambda: _holds_intent(session, bmv2.cfg))


def test_run_installs_an_entry_for_a_colliding_flow(bmv2: Bmv2, wire: Wire) -> None:
    *held_flows, b = same_bucket_flows(5)
    with RunningController(bmv2) as run:
        session = _reader(bmv2)
        assert run.ctl.ready.wait(15), "p4lb run did not take the switch"
        for f in [*held_flows, b]:  # four fill the bucket, the fifth finds it full
            wire.send(1, flow_syn(f))
        assert len(wire.expect(5, where=lambda port, raw: port != 1)) == 5

        def installed() -> bool:
            held = session.read_entries(("conn_table",))
            return [e.m("src_port") for e in held if e.table == "conn_table"] == [b.sport]

        assert _until(installed)
