"""Fixtures of the unit layer: the fake P4Runtime switch and a config that points at it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import DEFAULT_CONFIG


@pytest.fixture(autouse=True)
def no_running_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pointer to a running lab's config (/run/p4lb/config) moved to an empty place, so
    a `make run` up on this machine does not change which config `p4lb` picks in a test."""
    monkeypatch.setenv("P4LB_RUN_POINTER", str(tmp_path / "run-p4lb" / "config"))


@pytest.fixture
def fake() -> Iterator[FakeSwitch]:
    sw = FakeSwitch().start()
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def cfg_file(tmp_path: Path) -> Path:
    """The default config, in a temporary directory."""
    p = tmp_path / "lb.toml"
    shutil.copy(DEFAULT_CONFIG, p)
    return p


@pytest.fixture
def fake_cfg(cfg_file: Path, fake: FakeSwitch) -> Path:
    """The default config, pointing at the fake switch."""
    cfg_file.write_text(cfg_file.read_text().replace("127.0.0.1:9559", fake.address))
    return cfg_file
