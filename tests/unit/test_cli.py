"""The CLI through main(argv): exit codes, one-line errors, and that a failed runtime
change leaves the config file untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from p4lb import config as cfgmod
from p4lb.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cfg_file(tmp_path: Path) -> Path:
    p = tmp_path / "lb.toml"
    shutil.copy(ROOT / "configs" / "default.toml", p)
    return p


def _unreachable(p: Path) -> Path:
    # Port 9 on loopback: nothing listens, so the connection is refused at once.
    p.write_text(p.read_text().replace("127.0.0.1:9559", "127.0.0.1:9"))
    return p


def test_check_accepts_the_default_config(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(cfg_file), "check"]) == 0
    assert "1 VIPs, 3 backends" in capsys.readouterr().out


def test_invalid_config_is_one_line_and_exit_1(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg_file.write_text(cfg_file.read_text().replace("weight = 1\n", "weight = 5000\n", 1))
    assert main(["-c", str(cfg_file), "apply"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith(f"p4lb: {cfg_file}: vip.web.backend[0].weight: 5000 is outside")


def test_runtime_change_rejected_by_validation_changes_nothing(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = cfg_file.read_bytes()
    assert main(["-c", str(cfg_file), "weight", "set", "web", "h2", "1001"]) == 1
    assert "outside 0..1000" in capsys.readouterr().err
    assert main(["-c", str(cfg_file), "weight", "set", "web", "nobody", "2"]) == 1
    assert "has no backend 'nobody'" in capsys.readouterr().err
    assert main(["-c", str(cfg_file), "backend", "drain", "nope", "h2"]) == 1
    assert "no VIP 'nope'" in capsys.readouterr().err
    assert cfg_file.read_bytes() == before


def test_draining_every_backend_is_refused(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = cfgmod.load(cfg_file)
    from p4lb import intent

    cfg = intent.drain(intent.drain(cfg, "web", "h2"), "web", "h3")
    cfgmod.save(cfg, cfg_file)
    before = cfg_file.read_bytes()
    assert main(["-c", str(cfg_file), "backend", "drain", "web", "h4"]) == 1
    assert "total weight is 0" in capsys.readouterr().err
    assert cfg_file.read_bytes() == before


def test_unreachable_switch_is_a_clear_error_and_the_file_is_kept(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unreachable(cfg_file)
    before = cfg_file.read_bytes()
    assert main(["-c", str(cfg_file), "weight", "set", "web", "h2", "3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "p4lb: switch at 127.0.0.1:9 is unreachable (no P4Runtime server answered within 3 s)"
    )
    assert cfg_file.read_bytes() == before
    assert main(["-c", str(cfg_file), "apply"]) == 1
    assert main(["-c", str(cfg_file), "stats"]) == 1
