from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dataplane import support


@pytest.fixture
def bmv2(tmp_path: Path) -> Iterator[support.Bmv2]:
    with support.running(tmp_path / "switch") as b:
        yield b


@pytest.fixture
def wire(bmv2: support.Bmv2) -> Iterator[support.Wire]:
    w = support.Wire()
    try:
        yield w
    finally:
        w.close()
