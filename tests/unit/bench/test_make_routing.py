"""The Makefile's bench targets (issue 33): a quick run never writes into results/; the
committed profile does, and the speed build is measured beside the standard one when it is
installed. Read from `make -n` (prints the commands, runs none)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench import outdir

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def commands(*args: str) -> list[str]:
    r = subprocess.run(
        ["make", "-n", "--no-print-directory", *args],
        cwd=outdir.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    joined = r.stdout.replace("\\\n", " ")
    return [ln for ln in joined.splitlines() if "-m bench." in ln]


def test_quick_bench_switch_writes_only_into_the_scratch_tree() -> None:
    lines = commands("bench-switch", "QUICK=1")
    assert lines, "make -n bench-switch printed no bench command"
    for ln in lines:
        if "bench.report" in ln:
            assert "--dir build/results-quick/switch" in ln
        else:
            assert ln.startswith("P4LB_RESULTS_DIR=build/results-quick "), ln


def test_full_bench_switch_writes_into_results_and_explicit_dir_wins() -> None:
    assert all("results-quick" not in ln for ln in commands("bench-switch"))
    lines = commands("bench-switch", "QUICK=1", "RESULTS_DIR=results")
    assert all("results-quick" not in ln for ln in lines)


def test_speed_build_is_picked_up_from_its_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "bmv2-fast"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "simple_switch_grpc").write_text("")
    lines = commands("bench-switch", "QUICK=1", f"P4LB_SPEED_PREFIX={prefix}")
    switch = next(ln for ln in lines if "-m bench.switch" in ln)
    assert f"--build speed={prefix}/bin/simple_switch_grpc" in switch


def test_make_results_defaults_to_the_quick_profile() -> None:
    (line,) = [ln for ln in commands("results") if "bench.results" in ln]
    assert "--profile quick" in line and "--results-dir" not in line
    (full,) = [ln for ln in commands("results", "PROFILE=full") if "bench.results" in ln]
    assert "--profile full" in full
