"""Health checks in `p4lb run` and a drain that finishes: the `[vip.NAME.health]` table,
DOWN backends at weight 0 on the (fake) switch and back, the state file `p4lb stats` and
runtime commands read, and `backend drain --wait` over the data plane's counters."""

from __future__ import annotations

import json
import logging
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from p4lb import cli, config_file, health, intent
from p4lb import config as cfgmod
from p4lb.cli import main
from p4lb.config import Config, ConfigError
from p4lb.daemon import Controller
from p4lb.entries import OWNED_TABLES, backend_key, desired_entries, ids_on_switch
from p4lb.health import HealthSettings, ProbeResult, State, Target
from p4lb.p4info import schema
from tests.unit.fake_switch import FakeSwitch, run_in_thread

HEALTH = """
[vip.web.health]     # checked from p4lb run
interval_s = 0.05
timeout_s = 0.05
rise = 2
fall = 2
"""


def switch_holds(fake: FakeSwitch, cfg: Config) -> bool:
    """The fake holds exactly the entries `cfg` asks for."""
    held = [
        e for e in (schema().decode(te) for te in fake.all_entries()) if e.table in OWNED_TABLES
    ]
    want = [e for e in desired_entries(cfg, held)[1] if e.table in OWNED_TABLES]
    return sorted(held) == sorted(want)


def with_weight(cfg: Config, backend: str, weight: int) -> Config:
    return intent.set_weight(cfg, "web", backend, weight)


# ---------------------------------------------------------------- the config table


def test_health_table_parses_and_is_optional(cfg_file: Path) -> None:
    assert cfgmod.load(cfg_file).vip("web").health is None
    cfg_file.write_text(cfg_file.read_text() + HEALTH + 'http_path = "/health"\n')
    got = cfgmod.load(cfg_file).vip("web").health
    assert got == HealthSettings(
        interval_s=0.05, timeout_s=0.05, rise=2, fall=2, http_path="/health"
    )


@pytest.mark.parametrize(
    "table,message",
    [
        ("[vip.web.health]\nintervall_s = 1\n", "vip.web.health.intervall_s: unknown key"),
        ("[vip.web.health]\nrise = 0\n", "vip.web.health.rise: must be 1..100"),
        ('[vip.web.health]\nfall = "2"\n', "vip.web.health.fall: must be a int"),
        ("[vip.web.health]\ninterval_s = 1\ntimeout_s = 2\n", "vip.web.health.timeout_s"),
        ('[vip.web.health]\nhttp_path = "health"\n', "vip.web.health.http_path"),
        ("[vip.web]\nhealth = 3\n", "vip.web.health: must be a table"),
    ],
)
def test_a_bad_health_table_is_one_line_naming_the_key(
    cfg_file: Path, table: str, message: str
) -> None:
    text = cfg_file.read_text()
    if table.startswith("[vip.web]\n"):  # a key of the VIP itself
        text = text.replace(
            'algorithm = "wrr"\n', 'algorithm = "wrr"\n' + table.split("\n")[1] + "\n"
        )
    else:
        text += table
    cfg_file.write_text(text)
    with pytest.raises(ConfigError) as err:
        cfgmod.load(cfg_file)
    assert message in str(err.value) and str(cfg_file) in str(err.value)
    assert "\n" not in str(err.value)


def test_a_udp_vip_cannot_have_tcp_health_checks(cfg_file: Path) -> None:
    text = cfg_file.read_text().replace('protocol = "tcp"', 'protocol = "udp"')
    cfg_file.write_text(text + HEALTH)
    with pytest.raises(ConfigError, match=r"vip\.web\.health: checks connect over TCP"):
        cfgmod.load(cfg_file)


def test_a_bad_health_table_changes_nothing_on_the_switch(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cfg.write_text(fake_cfg.read_text() + "[vip.web.health]\nfall = 0\n")
    assert main(["-c", str(fake_cfg), "apply"]) == 1
    assert "vip.web.health.fall: must be 1..100" in capsys.readouterr().err
    assert fake.write_requests == 0 and fake.arbitrations == 0


def test_health_round_trips_and_survives_a_runtime_edit(cfg_file: Path) -> None:
    cfg_file.write_text(cfg_file.read_text() + HEALTH)
    cfg = cfgmod.load(cfg_file)
    config_file.save(with_weight(cfg, "h2", 3), cfg_file)
    text = cfg_file.read_text()
    assert "[vip.web.health]     # checked from p4lb run" in text
    assert cfgmod.load(cfg_file).vip("web").health == cfg.vip("web").health
    fresh = cfgmod.parse(tomllib.loads(config_file.dumps(cfg)))
    assert fresh.vip("web").health == cfg.vip("web").health
    no_checks = cfg.with_vip(replace(cfg.vip("web"), health=None))
    config_file.save(no_checks, cfg_file)
    assert "health" not in cfg_file.read_text()


# ---------------------------------------------------------------- the overlay (pure)


def test_overlay_zeroes_down_backends_of_checked_vips_only(cfg_file: Path) -> None:
    plain = cfgmod.load(cfg_file)
    down = {("web", "h3"): State.DOWN, ("web", "h2"): State.UP}
    assert health.overlay(plain, down).config == plain  # no [vip.web.health]: untouched
    cfg_file.write_text(cfg_file.read_text() + HEALTH)
    checked = cfgmod.load(cfg_file)
    over = health.overlay(checked, down)
    assert [b.weight for b in over.config.vip("web").backends] == [1, 0, 1]
    assert over.fail_open == ()
    assert [t.key for t in health.targets_of(checked)] == [("web", f"h{i}") for i in (2, 3, 4)]


def test_overlay_fails_open_when_every_backend_is_down(cfg_file: Path) -> None:
    cfg_file.write_text(cfg_file.read_text() + HEALTH)
    cfg = with_weight(cfgmod.load(cfg_file), "h4", 0)  # drained: stays 0 regardless
    over = health.overlay(cfg, {("web", "h2"): State.DOWN, ("web", "h3"): State.DOWN})
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
        lambda: cfgmod.load(checked_cfg),
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
    return dict(health.load_state(path).get("vips", {}).get("web", {}).get(backend, {}))


def wait_for(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return bool(check())


def test_run_takes_a_down_backend_out_and_restores_it_without_touching_the_file(
    fake: FakeSwitch,
    checked_cfg: Path,
    probe: Switchable,
    running: Controller,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    cfg = cfgmod.load(checked_cfg)
    text = checked_cfg.read_text()
    assert fake.wait_for(lambda: switch_holds(fake, cfg))
    assert wait_for(lambda: published(checked_cfg, "h3").get("weight") == 1)

    probe.alive["h3"] = False
    assert fake.wait_for(lambda: switch_holds(fake, with_weight(cfg, "h3", 0)))
    assert wait_for(lambda: published(checked_cfg, "h3").get("weight") == 0)
    h3 = published(checked_cfg, "h3")
    assert (h3["state"], h3["reason"]) == ("down", "connection refused")
    assert h3["since"] is not None and h3["weight_at"] >= h3["since"]
    assert published(checked_cfg, "h2")["state"] == "up"
    assert checked_cfg.read_text() == text
    assert "backend h3 of VIP web (10.0.0.3:8000) is DOWN: connection refused" in caplog.text
    assert "backend h3 of VIP web (DOWN): weight 0 on the switch (configured 1)" in caplog.text

    probe.alive["h3"] = True
    assert fake.wait_for(lambda: switch_holds(fake, cfg))
    assert wait_for(lambda: published(checked_cfg, "h3").get("weight") == 1)
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
    assert wait_for(lambda: published(checked_cfg, "h4").get("weight") == 0)
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
    cfg = cfgmod.load(checked_cfg)
    checked_cfg.write_text(checked_cfg.read_text().replace("weight = 1", "weight = 5000", 1))
    assert running.wait_until(lambda: "5000 is outside" in running.config_problem, 10)
    probe.alive["h2"] = False
    assert fake.wait_for(lambda: switch_holds(fake, with_weight(cfg, "h2", 0)))


def test_the_state_file_goes_stale_when_run_stops(
    checked_cfg: Path, probe: Switchable, running: Controller
) -> None:
    assert wait_for(lambda: health.is_fresh(health.load_state(checked_cfg), time.time()))
    running.stop()
    assert wait_for(lambda: not health.is_fresh(health.load_state(checked_cfg), time.time()))


# ---------------------------------------------------------------- runtime commands


def publish(path: Path, states: dict[str, str], fresh: bool = True) -> None:
    """A state file as `p4lb run` writes it (fresh or stale)."""
    now = time.time()
    doc = health.document(
        {("web", b): health.Health(State(s)) for b, s in states.items()},
        {},
        {},
        now,
        30.0 if fresh else -1.0,
    )
    health.save_state(path, doc)


def test_a_command_keeps_a_down_backend_at_weight_0_while_run_checks(
    fake: FakeSwitch, checked_cfg: Path
) -> None:
    publish(checked_cfg, {"h2": "up", "h3": "down", "h4": "up"})
    assert main(["-c", str(checked_cfg), "weight", "set", "web", "h2", "3"]) == 0
    want = cfgmod.load(checked_cfg)
    assert [b.weight for b in want.vip("web").backends] == [3, 1, 1]  # the file: intent
    assert switch_holds(fake, with_weight(want, "h3", 0))  # the switch: h3 is DOWN
    assert main(["-c", str(checked_cfg), "apply"]) == 0
    assert switch_holds(fake, with_weight(want, "h3", 0))


def test_a_stale_state_file_is_ignored(fake: FakeSwitch, checked_cfg: Path) -> None:
    publish(checked_cfg, {"h3": "down"}, fresh=False)
    assert main(["-c", str(checked_cfg), "apply"]) == 0
    assert switch_holds(fake, cfgmod.load(checked_cfg))


# ---------------------------------------------------------------- drain


def set_open(fake: FakeSwitch, path: Path, backend: str, established: int, closes: int) -> None:
    """Set the data plane's handshake and close counters of `backend`."""
    v = cfgmod.load(path).vip("web")
    b = v.backend(backend)
    ids = ids_on_switch([schema().decode(te) for te in fake.all_entries()])
    bid = ids.backends[backend_key(v, b.address, b.port)]
    fake.set_counter("backend_established", bid, established)
    fake.set_counter("backend_closes", bid, closes)


def drain(path: Path, *extra: str) -> list[str]:
    return ["-c", str(path), "backend", "drain", "web", "h3", *extra]


def test_drain_reports_active_connections(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_open(fake, fake_cfg, "h3", 5, 2)
    assert main(drain(fake_cfg)) == 0
    assert "backend h3 of VIP web: 3 active connections" in capsys.readouterr().out
    assert cfgmod.load(fake_cfg).vip("web").backend("h3").weight == 0
    set_open(fake, fake_cfg, "h3", 5, 7)  # more closes than handshakes counted: at least 0
    assert main(drain(fake_cfg)) == 0
    assert "backend h3 of VIP web: 0 active connections" in capsys.readouterr().out
    assert main(["-c", str(fake_cfg), "stats", "--json"]) == 0
    set_open(fake, fake_cfg, "h3", 9, 2)
    assert main(["-c", str(fake_cfg), "stats", "--json"]) == 0
    *_, line = capsys.readouterr().out.strip().splitlines()
    assert [r["active"] for r in json.loads(line)["vips"][0]["backends"]] == [0, 7, 0]


def test_drain_wait_returns_once_the_connections_are_closed(
    fake: FakeSwitch,
    fake_cfg: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "DRAIN_POLL_S", 0.02)
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_open(fake, fake_cfg, "h3", 5, 2)
    codes: list[int] = []
    waiter = threading.Thread(target=lambda: codes.append(main(drain(fake_cfg, "--wait"))))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), "drain --wait returned with 3 connections open"
    set_open(fake, fake_cfg, "h3", 5, 5)
    waiter.join(10)
    assert not waiter.is_alive() and codes == [0]
    out = capsys.readouterr().out
    assert "3 active connections" in out and "drained (0 active connections)" in out


def test_drain_wait_times_out_loudly_and_leaves_the_drain(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_open(fake, fake_cfg, "h3", 5, 2)
    started = time.monotonic()
    assert main(drain(fake_cfg, "--wait", "--timeout", "0.3")) == 1
    assert 0.3 <= time.monotonic() - started < 5
    err = capsys.readouterr().err.strip()
    assert err == (
        "p4lb: backend h3 of VIP web: still 3 active connections after 0.3 s "
        "(the drain stays in place; wait longer or remove it anyway)"
    )
    assert cfgmod.load(fake_cfg).vip("web").backend("h3").weight == 0
