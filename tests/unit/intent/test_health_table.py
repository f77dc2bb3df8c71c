"""A VIP's `[vip.NAME.health]` table: every key checked with a one-line error naming it, the
defaults, a tcp VIP only, and the table surviving a runtime edit of the file."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import edits, reader, writer
from p4lb.intent.model import ConfigError, HealthSettings
from p4lb.intent.reader import parse_health_settings
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import HEALTH_TABLE as HEALTH


def test_settings_defaults_detect_within_three_seconds() -> None:
    s = HealthSettings()
    assert s.fall * s.interval_s + s.timeout_s <= 3
    assert s.timeout_s <= s.interval_s


def test_parse_settings_accepts_every_key_and_integer_seconds() -> None:
    s = parse_health_settings(
        {
            "interval_s": 2,
            "timeout_s": 1.5,
            "rise": 3,
            "fall": 4,
            "http_path": "/health",
            "http_status": 204,
            "namespace": "h1",
        },
        "lb.toml",
        "vip.web.health",
    )
    assert s == HealthSettings(2.0, 1.5, 3, 4, "/health", 204, "h1")
    assert parse_health_settings({}, "lb.toml", "vip.web.health") == HealthSettings()


@pytest.mark.parametrize(
    "table,message",
    [
        ({"intervall_s": 1}, "lb.toml: vip.web.health.intervall_s: unknown key"),
        ({"rise": "2"}, "lb.toml: vip.web.health.rise: must be a int"),
        ({"rise": True}, "lb.toml: vip.web.health.rise: must be a int"),
        ({"rise": 0}, "lb.toml: vip.web.health.rise: must be 1..100"),
        ({"fall": 0}, "lb.toml: vip.web.health.fall: must be 1..100"),
        ({"timeout_s": 2.0}, "lb.toml: vip.web.health.timeout_s: must be > 0 and at most"),
        ({"interval_s": 0}, "lb.toml: vip.web.health.interval_s: must be > 0"),
        ({"http_path": "health"}, "lb.toml: vip.web.health.http_path: must start with /"),
        ({"http_status": 42}, "lb.toml: vip.web.health.http_status: must be 100..599"),
    ],
)
def test_parse_settings_names_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_health_settings(table, "lb.toml", "vip.web.health")
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_health_table_parses_and_is_optional(cfg_file: Path) -> None:
    assert reader.load(cfg_file).vip("web").health is None
    cfg_file.write_text(cfg_file.read_text() + HEALTH + 'http_path = "/health"\n')
    got = reader.load(cfg_file).vip("web").health
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
        reader.load(cfg_file)
    assert message in str(err.value) and str(cfg_file) in str(err.value)
    assert "\n" not in str(err.value)


def test_a_udp_vip_cannot_have_tcp_health_checks(cfg_file: Path) -> None:
    text = cfg_file.read_text().replace('protocol = "tcp"', 'protocol = "udp"')
    cfg_file.write_text(text + HEALTH)
    with pytest.raises(ConfigError, match=r"vip\.web\.health: checks connect over TCP"):
        reader.load(cfg_file)


def test_a_bad_health_table_changes_nothing_on_the_switch(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cfg.write_text(fake_cfg.read_text() + "[vip.web.health]\nfall = 0\n")
    assert main(["-c", str(fake_cfg), "apply"]) == 1
    assert "vip.web.health.fall: must be 1..100" in capsys.readouterr().err
    assert fake.write_requests == 0 and fake.arbitrations == 0


def test_health_round_trips_and_survives_a_runtime_edit(cfg_file: Path) -> None:
    cfg_file.write_text(cfg_file.read_text() + HEALTH)
    cfg = reader.load(cfg_file)
    writer.save(edits.set_weight(cfg, "web", "h2", 3), cfg_file)
    text = cfg_file.read_text()
    assert "[vip.web.health]     # checked from p4lb run" in text
    assert reader.load(cfg_file).vip("web").health == cfg.vip("web").health
    fresh = reader.parse(tomllib.loads(writer.dumps(cfg)))
    assert fresh.vip("web").health == cfg.vip("web").health
    no_checks = cfg.with_vip(replace(cfg.vip("web"), health=None))
    writer.save(no_checks, cfg_file)
    assert "health" not in cfg_file.read_text()
