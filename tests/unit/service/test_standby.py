"""A standby controller (`p4lb run --standby`): the election ids it takes, that it writes
nothing while backup (no table writes, no health state file) though its health checks run,
that it takes over when the primary's session ends with the health it saw meanwhile, and that
a returning primary pre-empts it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import edits, reader
from p4lb.pipeline.shared import FlowKey, Shared
from p4lb.service.daemon import Controller
from p4lb.service.health import state_file
from p4lb.service.health.state import ProbeResult, State, Target
from p4lb.service.session import STANDBY_TRIES, standby_ids
from tests.support import poll_until
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import HEALTH_TABLE, holds, run_in_thread


def test_a_standby_takes_the_highest_ids_below_the_primarys_bounded() -> None:
    assert standby_ids(10) == [9, 8, 7, 6][:STANDBY_TRIES]
    assert standby_ids(3) == [2, 1]  # never 0: P4Runtime reads it as no id
    assert standby_ids(1) == []


def test_run_standby_refuses_an_election_id_that_leaves_no_room(
    fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cfg.write_text(fake_cfg.read_text().replace("election_id = 10", "election_id = 1"))
    assert reader.load(fake_cfg).switch.election_id == 1
    assert main(["-c", str(fake_cfg), "run", "--standby", "--duration", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"p4lb: {fake_cfg}: switch.election_id = 1 leaves no id below it for a standby "
        "(--standby); give the primary 2 or more"
    ]


class Probe:
    """Health answers the test sets."""

    def __init__(self) -> None:
        self.dead: set[str] = set()

    def __call__(self, target: Target) -> ProbeResult:
        ok = target.backend not in self.dead
        return ProbeResult(ok, "tcp connect ok" if ok else "connection refused")


def controller(path: Path, probe: Probe, standby: bool, writes_state: bool) -> Controller:
    return Controller(
        lambda: reader.load(path),
        poll_s=0.01,
        check_s=0.3,
        config_path=str(path) if writes_state else None,
        retry_s=0.05,
        probe=probe,
        standby=standby,
    )


@pytest.fixture
def checked(fake_cfg: Path) -> Path:
    fake_cfg.write_text(fake_cfg.read_text() + HEALTH_TABLE)
    return fake_cfg


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def primary_and_standby(
    fake: FakeSwitch, checked: Path, probe: Probe
) -> Iterator[tuple[Controller, Controller]]:
    # The primary writes no state file (config_path None): the file is the standby's alone.
    primary = controller(checked, Probe(), standby=False, writes_state=False)
    standby = controller(checked, probe, standby=True, writes_state=True)
    with ExitStack() as stack:
        stack.enter_context(run_in_thread(primary, 120))
        assert primary.ready.wait(10), "the primary did not take the switch"
        stack.enter_context(run_in_thread(standby, 120))
        yield primary, standby


def test_a_standby_writes_nothing_while_backup_and_takes_over_with_its_health(
    fake: FakeSwitch,
    checked: Path,
    probe: Probe,
    primary_and_standby: tuple[Controller, Controller],
) -> None:
    primary, standby = primary_and_standby
    assert poll_until(lambda: standby.election_id == 9 and standby.sw is not None)
    probe.dead.add("h3")  # dies while the standby waits: its checks see it
    down = ("web", "h3")
    assert poll_until(lambda: standby.checker.health()[down].state == State.DOWN, timeout=10)
    assert not standby.ready.is_set()
    assert {eid for eid, _, _ in fake.table_writes} == {10}
    assert 9 not in fake.denied  # it did not even try
    assert not state_file.state_path(checked).exists()
    assert standby.metrics.primary.labels("switch")._value.get() == 0

    primary.stop()  # its session ends: the switch makes 9 primary
    assert standby.ready.wait(10), "the standby did not take over"
    assert standby.metrics.primary.labels("switch")._value.get() == 1
    # The first reconcile already had h3 out (weight 0), written as id 9.
    h3_out = edits.set_weight(reader.load(checked), "web", "h3", 0)
    assert holds(fake, h3_out)
    assert any(eid == 9 for eid, _, _ in fake.table_writes)
    assert poll_until(lambda: state_file.state_path(checked).exists())


def test_a_returning_primary_pre_empts_the_standby(
    fake: FakeSwitch, checked: Path, primary_and_standby: tuple[Controller, Controller]
) -> None:
    primary, standby = primary_and_standby
    primary.stop()
    assert standby.ready.wait(10)
    again = controller(checked, Probe(), standby=False, writes_state=False)
    with run_in_thread(again, 60):
        assert poll_until(lambda: again.ready.is_set() and not standby.ready.is_set())
        assert standby.metrics.primary.labels("switch")._value.get() == 0
        before = len(fake.table_writes)
        checked.write_text(checked.read_text().replace("weight = 1", "weight = 2", 1))
        assert poll_until(lambda: any(e == 10 for e, _, _ in fake.table_writes[before:]))
        assert all(e == 10 for e, _, _ in fake.table_writes[before:])


def test_a_second_standby_takes_the_next_id_down(
    fake: FakeSwitch, checked: Path, primary_and_standby: tuple[Controller, Controller]
) -> None:
    _, standby = primary_and_standby
    assert poll_until(lambda: standby.election_id == 9 and standby.sw is not None)
    second = controller(checked, Probe(), standby=True, writes_state=False)
    with run_in_thread(second, 60):
        assert poll_until(lambda: second.election_id == 8 and second.sw is not None)
        assert not second.ready.is_set()


def test_a_standby_reconnects_with_the_id_it_held(
    fake: FakeSwitch, checked: Path, primary_and_standby: tuple[Controller, Controller]
) -> None:
    """The switch restarts after the first standby left: the second asks for 8 again, not
    for the free 9, which would make it primary above another controller's sessions."""
    _, standby = primary_and_standby
    assert poll_until(lambda: standby.election_id == 9 and standby.sw is not None)
    second = controller(checked, Probe(), standby=True, writes_state=False)
    with run_in_thread(second, 60):
        assert poll_until(lambda: second.election_id == 8 and second.sw is not None)
        standby.stop()  # 9 is free now
        assert poll_until(lambda: standby.sw is None)
        first = second.sw
        fake.restart()
        assert poll_until(lambda: second.sw is not None and second.sw is not first)
        assert second.election_id == 8


def test_a_backup_follows_the_file_its_checks_probe_what_it_names_now(
    fake: FakeSwitch, fake_cfg: Path
) -> None:
    primary = controller(fake_cfg, Probe(), standby=False, writes_state=False)
    standby = controller(fake_cfg, Probe(), standby=True, writes_state=True)
    with run_in_thread(primary, 60), run_in_thread(standby, 60):
        assert primary.ready.wait(10)
        assert poll_until(lambda: standby.sw is not None)
        assert standby.checker.targets() == []
        fake_cfg.write_text(fake_cfg.read_text() + HEALTH_TABLE)
        assert poll_until(lambda: len(standby.checker.targets()) == 3)
        assert not standby.ready.is_set()


def test_a_runtime_command_lands_while_the_standby_is_primary(
    fake: FakeSwitch, checked: Path, primary_and_standby: tuple[Controller, Controller]
) -> None:
    primary, standby = primary_and_standby
    primary.stop()
    assert standby.ready.wait(10)
    assert main(["-c", str(checked), "weight", "set", "web", "h2", "3"]) == 0
    assert any(eid == 11 for eid, _, _ in fake.table_writes)  # the command, as id + 1
    assert reader.load(checked).vip("web").backend("h2").weight == 3
    # Mastership returns to the standby (the highest id left) and it holds the file's intent.
    assert poll_until(lambda: standby.ready.is_set(), timeout=10)
    cfg = reader.load(checked)
    assert poll_until(lambda: holds(fake, cfg))


def test_adopted_copies_go_to_the_balancers_that_lack_them() -> None:
    flow_a: FlowKey = (("src_port", 1),)
    flow_b: FlowKey = (("src_port", 2),)
    shared = Shared()
    shared.join("lb1")
    shared.adopt("lb2", [(flow_a, 4), (flow_b, 5)], now=1.0)
    shared.adopt("lb1", [(flow_a, 4)], now=1.0)  # lb1 holds flow_a already
    shared.join("lb2")
    assert shared.writes("lb1") == [(flow_b, 5)]
    assert shared.writes("lb2") == []
    shared.join("lb3")  # a balancer joining later gets both
    assert shared.writes("lb3") == [(flow_a, 4), (flow_b, 5)]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--standby", "--metrics-port", "9101"], "--metrics-port needs a [metrics] table"),
        (["--metrics-port", "9101"], "--metrics-port is a standby's (--standby)"),
    ],
)
def test_a_metrics_port_is_a_standbys_and_needs_metrics(
    fake_cfg: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    assert main(["-c", str(fake_cfg), "run", *args, "--duration", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0], err
