"""bench.toolchain: the p4c found against scripts/toolchain.env's minimum, in one line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench import toolchain

ROOT = Path(__file__).resolve().parents[2]


def fake_p4c(tmp_path: Path, text: str) -> str:
    tool = tmp_path / "p4c-bm2-ss"
    tool.write_text(f"#!/bin/sh\necho '{text}'\n")
    tool.chmod(0o755)
    return str(tool)


def test_minimums_are_read_from_toolchain_env() -> None:
    mins = toolchain.minimums()
    assert set(mins) == {"p4c", "bmv2", "pi"}
    # The value the README and the install route state: p4c 1.2.4.x rejects lb.p4.
    assert toolchain.version_key(mins["p4c"]) > (1, 2, 4, 8)


@pytest.mark.parametrize(
    ("printed", "problem"),
    [
        ("p4c-bm2-ss\nVersion 1.2.5.16 (SHA: 6b7ec98 BUILD: Release)", None),
        ("p4c 1.2.5.0", None),
        ("p4c 1.2.4.8 (SHA: abc)", "is p4c 1.2.4.8; p4lb needs p4c >= 1.2.5"),
        ("p4c-bm2-ss, no version", "is p4c of an unknown version; p4lb needs p4c >= 1.2.5"),
    ],
)
def test_p4c_problem(tmp_path: Path, printed: str, problem: str | None) -> None:
    env = tmp_path / "toolchain.env"
    env.write_text("# pins\nP4LB_MIN_P4C=1.2.5\nP4LB_MIN_BMV2=1.15.0\n")
    p4c = fake_p4c(tmp_path, printed)
    got = toolchain.p4c_problem(p4c, env)
    if problem is None:
        assert got is None
    else:
        assert got == f"{p4c} {problem}"


def test_p4c_missing_is_named(tmp_path: Path) -> None:
    got = toolchain.p4c_problem(str(tmp_path / "no-such-p4c"))
    assert got is not None and got.endswith("(p4c >= 1.2.5) is not installed")


@pytest.mark.skipif(shutil.which("make") is None, reason="make build's check needs make")
@pytest.mark.parametrize(
    ("version", "rc", "line"),
    [
        ("1.2.4.8", 2, "is p4c 1.2.4.8; p4lb needs p4c >= 1.2.5 (run 'make deps')"),
        ("1.2.5.16", 0, "is p4c 1.2.5.16 (p4lb needs >= 1.2.5)"),
    ],
)
def test_make_build_says_which_p4c(tmp_path: Path, version: str, rc: int, line: str) -> None:
    # A stand-in p4c that compiles nothing: only make build's version line is under test.
    p4c = fake_p4c(tmp_path, f"p4c {version} (SHA: stand-in)")
    r = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "build", f"P4C={p4c}", f"BUILD={tmp_path / 'out'}"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == rc, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == f"make build: {p4c} {line}"
