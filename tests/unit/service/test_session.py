"""The switch-session loop `p4lb run` and each balancer of the tier share: a switch it cannot
reach is tried again after a pause that doubles up to a bound, and both the single switch
and every balancer of a tier reconcile through the one apply path (operations.apply), the
tier's with its ids and Maglev tables as parameters."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent import reader, writer
from p4lb.intent.model import Config
from p4lb.service import operations, session
from p4lb.service.daemon import Controller
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.session import RETRY_MAX_S, Intent, Session
from p4lb.service.tier import TierController
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError
from tests.support import poll_until
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import config_for, default_config, run_in_thread
from tests.unit.tier.test_tier_controller import tier_config


class Pauses(threading.Event):
    """A stop event that records each pause asked of it and is set after `rounds`."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.asked: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout or 0.0)
        if len(self.asked) >= self.rounds:
            self.set()
        return self.is_set()


class Unreachable(Session):
    def connect_config(self) -> Config:
        return default_config()

    def intent(self, sw: Switch) -> Intent | None:
        raise AssertionError("never connected: nothing to reconcile")


def test_an_unreachable_switch_is_tried_again_after_a_pause_doubling_to_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(cfg: Config, **_: Any) -> Switch:
        raise SwitchError(f"switch at {cfg.switch.address} is unreachable")

    monkeypatch.setattr(session, "connect", refuse)
    stop = Pauses(rounds=7)
    s = Unreachable("switch", stop, ControllerMetrics(), None, 0.01, 1.0, 0.1)
    s.hold()
    assert stop.asked == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, RETRY_MAX_S, RETRY_MAX_S])
    assert not s.ready.is_set() and s.sw is None


def test_a_single_switch_and_a_tier_apply_through_the_one_path(
    fake: FakeSwitch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, bool]] = []  # (the switch's address, the tier's ids given)
    real = operations.apply

    def recording(sw: Switch, cfg: Config, **kw: Any) -> operations.ApplyResult:
        calls.append((cfg.switch.address, kw.get("ids") is not None))
        return real(sw, cfg, **kw)

    monkeypatch.setattr(session, "apply", recording)
    path = tmp_path / "run.toml"
    writer.save(config_for(fake), path)
    single = Controller(lambda: reader.load(path), poll_s=0.02, config_path=str(path))
    with run_in_thread(single, 30):
        assert single.ready.wait(10)
    assert calls and {addr for addr, _ in calls} == {fake.address}
    assert not any(ids for _, ids in calls)  # the switch's own ids

    calls.clear()
    a, b = FakeSwitch(device_id=1).start(), FakeSwitch(device_id=2).start()
    try:
        cfg = tier_config(a, b)
        tier = TierController(lambda: cfg, check_s=0.2, retry_s=0.1)
        t = threading.Thread(target=tier.run, kwargs={"duration_s": 30}, daemon=True)
        t.start()
        try:
            assert poll_until(
                lambda: (
                    len(tier.members) == 2 and all(m.ready.is_set() for m in tier.members.values())
                )
            )
        finally:
            tier.stop()
            t.join(15)
        assert not t.is_alive()
    finally:
        a.stop()
        b.stop()
    assert {addr for addr, _ in calls} == {a.address, b.address}
    # The first reconcile found the tier's ids; every later one was given them.
    assert [ids for _, ids in calls][1:] == [True] * (len(calls) - 1)


def test_a_session_another_controller_outranks_keeps_its_connection_and_waits(
    fake: FakeSwitch, tmp_path: Path
) -> None:
    """A writer with a higher election id takes the switch: the session leaves the ready
    state but keeps its connection and election id, and joins again on the arbitration
    update that makes it primary once the other is gone (what a standby would build on)."""
    path = tmp_path / "run.toml"
    writer.save(config_for(fake), path)
    ctl = Controller(lambda: reader.load(path), poll_s=0.02, config_path=str(path), retry_s=0.05)
    with run_in_thread(ctl, 30):
        assert ctl.ready.wait(10)
        held = ctl.sw
        with Switch(fake.address, 0, 50) as other:
            assert other.is_primary
            assert poll_until(lambda: not ctl.ready.is_set())
        assert ctl.ready.wait(10)
        assert ctl.sw is held and ctl.election_id == 10
