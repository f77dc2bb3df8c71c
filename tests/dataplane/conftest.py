from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dataplane import harness


@pytest.fixture
def bmv2(tmp_path: Path) -> Iterator[harness.Bmv2]:
    if not harness.have_artifacts():
        pytest.skip("dataplane layer skipped: missing p4src/compiled artifacts (make artifacts)")
    b = harness.start(tmp_path / "switch")
    try:
        yield b
    finally:
        harness.stop(b)


@pytest.fixture
def wire(bmv2: harness.Bmv2) -> Iterator[harness.Wire]:
    w = harness.Wire()
    try:
        yield w
    finally:
        w.close()
