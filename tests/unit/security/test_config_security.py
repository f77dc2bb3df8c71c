"""What a config must say before p4lb talks to a switch off this host, and the files p4lb
keeps beside the config: clear text only to loopback unless `insecure = true`, TLS files
checked when read, a config writable by others refused, lock and state files owner-only."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import reader, writer
from p4lb.intent.lock import config_lock, lock_path
from p4lb.intent.model import ConfigError, switch_configs
from p4lb.service.health import state_file
from p4lb.stats import baselines
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError
from tests.unit.support import DEFAULT_CONFIG

BASE = DEFAULT_CONFIG.read_text()
TIER = """
[tier]
[[tier.balancer]]
name = "lb1"
address = "127.0.0.1:9561"
device_id = 1
mac = "02:00:00:00:01:01"
[[tier.balancer]]
name = "lb2"
address = "192.0.2.7:9559"
device_id = 2
mac = "02:00:00:00:01:02"
"""


def parse(text: str, src: str = "t.toml"):  # type: ignore[no-untyped-def]
    return reader.parse(tomllib.loads(text), src)


def remote(text: str, extra: str = "") -> str:
    return text.replace('address = "127.0.0.1:9559"', f'address = "192.0.2.7:9559"{extra}', 1)


@pytest.mark.parametrize(
    "address", ["127.0.0.1:9559", "127.3.0.1:1", "localhost:9559", "[::1]:9559"]
)
def test_clear_text_to_loopback_is_fine(address: str) -> None:
    assert parse(BASE.replace("127.0.0.1:9559", address, 1)).switch.address == address


def test_clear_text_to_another_address_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as e:
        parse(remote(BASE))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("t.toml: switch.address: 192.0.2.7:9559 is not a loopback address")
    assert "tls" in msg and "insecure = true" in msg


def test_insecure_says_so_explicitly() -> None:
    assert parse(remote(BASE, "\ninsecure = true")).switch.insecure
    with pytest.raises(ConfigError, match=r"switch.insecure: must be true or false"):
        parse(remote(BASE, '\ninsecure = "yes"'))


def test_a_balancer_off_this_host_needs_tls_or_insecure() -> None:
    with pytest.raises(ConfigError, match=r"tier.balancer 'lb2'.address: 192.0.2.7:9559 is not"):
        parse(BASE + TIER)
    cfg = parse(BASE + TIER.replace("device_id = 2", "device_id = 2\ninsecure = true"))
    assert [c.switch.insecure for _, c in switch_configs(cfg)] == [False, True]


def test_tls_files_resolve_against_the_config_folder_and_must_exist(tmp_path: Path) -> None:
    for name in ("ca.crt", "p4lb.crt", "p4lb.key"):
        (tmp_path / name).write_text("x")
    cfg_path = tmp_path / "lb.toml"
    tls = '\ntls = { ca = "ca.crt", cert = "p4lb.crt", key = "p4lb.key" }'
    cfg_path.write_text(remote(BASE, tls))
    cfg = reader.load(cfg_path)
    assert cfg.switch.tls is not None
    assert cfg.switch.tls.ca == str(tmp_path / "ca.crt")
    assert cfg.switch.tls.key == str(tmp_path / "p4lb.key")
    # Written back (a runtime change), the table stays as the user wrote it.
    writer.save(cfg, cfg_path)
    assert 'ca = "ca.crt"' in cfg_path.read_text()
    cfg_path.write_text(remote(BASE, tls.replace("ca.crt", "nope.crt")))
    with pytest.raises(ConfigError, match=r"switch.tls.ca: no such file .*nope.crt"):
        reader.load(cfg_path)
    cfg_path.write_text(remote(BASE, '\ntls = { ca = "ca.crt", cert = "p4lb.crt" }'))
    with pytest.raises(ConfigError, match=r"switch.tls: give cert and key together"):
        reader.load(cfg_path)


def test_tls_round_trips_through_the_writer(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("x")
    cfg = parse(remote(BASE, f'\ntls = {{ ca = "{tmp_path / "ca.crt"}" }}'))
    assert parse(writer.dumps(cfg)) == cfg


def test_the_client_refuses_clear_text_off_this_host_before_connecting() -> None:
    with pytest.raises(SwitchError, match="refusing clear-text P4Runtime"):
        Switch("192.0.2.7:9559", 0, 1)


def test_a_config_writable_by_others_is_refused(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg_file.chmod(0o666)
    with pytest.raises(ConfigError, match=r"writable by others \(mode 0666\)"):
        reader.load(cfg_file)
    assert main(["-c", str(cfg_file), "check"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(cfg_file) in err and "chmod o-w" in err
    cfg_file.chmod(0o664)  # group-writable is the owner's choice
    reader.load(cfg_file)


def test_lock_and_state_files_are_owner_only(cfg_file: Path) -> None:
    old = os.umask(0)
    try:
        with config_lock(cfg_file):
            pass
        baselines.save_baselines(cfg_file, {})
        state_file.save_state(cfg_file, {"vips": {}})
    finally:
        os.umask(old)
    for path in (
        lock_path(cfg_file),
        baselines.state_path(cfg_file),
        state_file.state_path(cfg_file),
    ):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # A lock file left with a wider mode by an older p4lb is narrowed.
    lock_path(cfg_file).chmod(0o644)
    with config_lock(cfg_file):
        pass
    assert stat.S_IMODE(lock_path(cfg_file).stat().st_mode) == 0o600
