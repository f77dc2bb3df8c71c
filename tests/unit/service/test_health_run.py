"""Health checks in `p4lb run`: DOWN backends at weight 0 on the (fake) switch and back with
the config file untouched, failing open, the state file `p4lb stats` and runtime commands
read, and commands keeping a DOWN backend at 0 while `p4lb run` checks."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from p4lb.cli.main import main
from p4lb.intent import edits, reader
from p4lb.intent.model import Config
from p4lb.service.daemon import Controller
from p4lb.service.health import overlay, state_file
from p4lb.service.health.state import ProbeResult, State, Target
from tests.support import poll_until
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import HEALTH_TABLE as HEALTH
from tests.unit.support import holds, publish_health, run_in_thread


def with_weight(cfg: Config, backend: str, weight: int) -> Config:
    return edits.set_weight(cfg, "web", backend, weight)


# ---------------------------------------------------------------- the overlay (pure)


def test_overlay_zeroes_down_backends_of_checked_vips_only(cfg_file: Path) -> None:
    plain = reader.load(cfg_file)
    down = {("web", "h3"): State.DOWN, ("web", "h2"): State.UP}
    assert overlay.overlay(plain, down).config == plain  # no [vip.web.health]: untouched
    cfg_file.write_text(cfg_file.read_text() + HEALTH)
    checked = reader.load(cfg_file)
    over = overlay.overlay(checked, down)
    assert [b.weight for b in over.config.vip("web").backends] == [1, 0, 1]
    assert over.fail_open == ()
    assert [t.key for t in overlay.targets_of(checked)] == [("web", f"h{i}") for i in (2, 3, 4)]


def test_overlay_fails_open_when_every_backend_is_down(cfg_file: Path) -> None:
    cfg_file.write_text(cfg_file.read_text() + HEALTH)
    cfg = with_weight(reader.load(cfg_file), "h4", 0)  # drained: stays 0 regardless
    over = overlay.overlay(cfg, {("web", "h2"): State.DOWN, ("web", "h3"): State.DOWN})
    assert over.fail_open == ("web",)
    assert [b.weight for b in over.config.vip("web").backends] == [1, 1, 0]


# ---------------------------------------------------------------- p4lb run


class Switchable:
    """A probe whose answer per backend the test sets."""

    def __init__(self) -> None:
        self.alive: dict[str, bool] = {}

    def __call__(self, target: Target) -> ProbeResult:
        ok = self.alive.get(target.backend, True)
        return ProbeResult(ok, "tcp connect ok" if ok else "connection refused")


@pytest.fixture
def checked_cfg(fake_cfg: Path) -> Path:
    fake_cfg.write_text(fake_cfg.read_text() + HEALTH)
    return fake_cfg


@pytest.fixture
def probe() -> Switchable:
    return Switchable()


@pytest.fixture
def running(checked_cfg: Path, probe: Switchable) -> Iterator[Controller]:
    ctl = Controller(
        lambda: reader.load(checked_cfg),
        poll_s=0.01,
        check_s=0.5,
        config_path=str(checked_cfg),
        retry_s=0.05,
        probe=probe,
    )
    with run_in_thread(ctl, 120) as running_ctl:
        assert running_ctl.ready.wait(10), "p4lb run did not take the switch"
        yield running_ctl


def published(path: Path, backend: str) -> dict[str, Any]:
    return dict(state_file.load_state(path).get("vips", {}).get("web", {}).get(backend, {}))


def test_run_takes_a_down_backend_out_and_restores_it_without_touching_the_file(
    fake: FakeSwitch,
    checked_cfg: Path,
    probe: Switchable,
    running: Controller,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    cfg = reader.load(checked_cfg)
    text = checked_cfg.read_text()
    assert fake.wait_for(lambda: holds(fake, cfg))
    assert poll_until(lambda: published(checked_cfg, "h3").get("weight") == 1)

    probe.alive["h3"] = False
    assert fake.wait_for(lambda: holds(fake, with_weight(cfg, "h3", 0)))
    assert poll_until(lambda: published(checked_cfg, "h3").get("weight") == 0)
    h3 = published(checked_cfg, "h3")
    assert (h3["state"], h3["reason"]) == ("down", "connection refused")
    assert h3["since"] is not None and h3["weight_at"] >= h3["since"]
    assert published(checked_cfg, "h2")["state"] == "up"
    assert checked_cfg.read_text() == text
    assert "backend h3 of VIP web (10.0.0.3:8000) is DOWN: connection refused" in caplog.text
    assert "backend h3 of VIP web (DOWN): weight 0 on the switch (configured 1)" in caplog.text

    probe.alive["h3"] = True
    assert fake.wait_for(lambda: holds(fake, cfg))
    assert poll_until(lambda: published(checked_cfg, "h3").get("weight") == 1)
    assert published(checked_cfg, "h3")["state"] == "up"
    assert checked_cfg.read_text() == text
    assert "backend h3 of VIP web (10.0.0.3:8000) is UP" in caplog.text


def test_stats_shows_health_per_backend(
    fake: FakeSwitch,
    checked_cfg: Path,
    probe: Switchable,
    running: Controller,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe.alive["h4"] = False
    assert poll_until(lambda: published(checked_cfg, "h4").get("weight") == 0)
    capsys.readouterr()
    assert main(["-c", str(checked_cfg), "stats", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["vips"][0]["backends"]
    assert [(r["name"], r["health"]["state"], r["health"]["stale"]) for r in rows] == [
        ("h2", "up", False),
        ("h3", "up", False),
        ("h4", "down", False),
    ]
    assert rows[2]["health"]["reason"] == "connection refused"
    assert rows[2]["weight"] == 1  # the configured weight; the switch has 0
    assert main(["-c", str(checked_cfg), "stats"]) == 0
    table = capsys.readouterr().out
    assert "health" in table and "DOWN" in table and "h4 is DOWN since" in table


def test_run_keeps_a_down_backend_out_when_the_config_file_breaks(
    fake: FakeSwitch, checked_cfg: Path, probe: Switchable, running: Controller
) -> None:
    cfg = reader.load(checked_cfg)
    checked_cfg.write_text(checked_cfg.read_text().replace("weight = 1", "weight = 5000", 1))
    assert running.wait_until(lambda: "5000 is outside" in running.config_problem, 10)
    probe.alive["h2"] = False
    assert fake.wait_for(lambda: holds(fake, with_weight(cfg, "h2", 0)))


def test_the_state_file_goes_stale_when_run_stops(
    checked_cfg: Path, probe: Switchable, running: Controller
) -> None:
    def fresh() -> bool:
        return state_file.is_fresh(state_file.load_state(checked_cfg), time.time())

    assert poll_until(fresh)
    running.stop()
    assert poll_until(lambda: not fresh())


# ---------------------------------------------------------------- runtime commands


def test_a_command_keeps_a_down_backend_at_weight_0_while_run_checks(
    fake: FakeSwitch, checked_cfg: Path
) -> None:
    publish_health(checked_cfg, {"h2": "up", "h3": "down", "h4": "up"})
    assert main(["-c", str(checked_cfg), "weight", "set", "web", "h2", "3"]) == 0
    want = reader.load(checked_cfg)
    assert [b.weight for b in want.vip("web").backends] == [3, 1, 1]  # the file: intent
    assert holds(fake, with_weight(want, "h3", 0))  # the switch: h3 is DOWN
    assert main(["-c", str(checked_cfg), "apply"]) == 0
    assert holds(fake, with_weight(want, "h3", 0))


def test_a_stale_state_file_is_ignored(fake: FakeSwitch, checked_cfg: Path) -> None:
    publish_health(checked_cfg, {"h3": "down"}, fresh=False)
    assert main(["-c", str(checked_cfg), "apply"]) == 0
    assert holds(fake, reader.load(checked_cfg))
