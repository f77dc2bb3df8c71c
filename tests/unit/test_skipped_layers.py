"""The one line a test run ends with: which layers were skipped and why, or none. Built from
the skip reasons (a pure function), and printed by a real pytest run whose tools are hidden."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import layer_of, skipped_layers_line

ROOT = Path(__file__).resolve().parents[2]


def test_no_layer_skip_is_none() -> None:
    assert skipped_layers_line([]) == "layers skipped: none"
    # Skips that are not a layer's (one optional tool) do not count as a layer.
    assert skipped_layers_line(["Skipped: browser test: missing chromium"]) == (
        "layers skipped: none"
    )


def test_each_layer_once_with_its_reasons_in_layer_order() -> None:
    reasons = [
        "Skipped: tier layer skipped: missing vtysh, gobgpd",
        "Skipped: e2e layer skipped: missing mn, root",
        "Skipped: dataplane layer skipped: missing simple_switch_grpc, root",
        "Skipped: e2e layer skipped: missing mn, root",
        "Skipped: e2e layer skipped: missing p4src/compiled artifacts (make artifacts)",
        "floor layer skipped: needs root and nothing else",
    ]
    assert skipped_layers_line(reasons) == (
        "layers skipped: dataplane (missing simple_switch_grpc, root), "
        "e2e (missing mn, root; missing p4src/compiled artifacts (make artifacts)), "
        "tier (missing vtysh, gobgpd), floor (needs root and nothing else)"
    )


def test_the_tiers_tests_are_a_layer_of_their_own() -> None:
    assert layer_of(ROOT / "tests/e2e/test_tier.py") == "tier"
    assert layer_of(ROOT / "tests/e2e/test_tier_security.py") == "tier"
    assert layer_of(ROOT / "tests/e2e/test_fairness.py") == "e2e"
    assert layer_of(ROOT / "tests/unit/cli/test_cli.py") == "unit"


def test_a_run_without_the_tools_names_the_skipped_layers_last() -> None:
    """pytest on a dataplane and an e2e module with an empty PATH: both layers skip, and the
    line says so just above the final counts."""
    root = "" if os.geteuid() == 0 else ", root"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/dataplane/test_packets.py",
            "tests/e2e/test_fairness.py",
        ],
        cwd=ROOT,
        env={**os.environ, "PATH": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = r.stdout.strip().splitlines()
    ours = [ln for ln in lines if ln.startswith("layers skipped:")]
    assert ours == [
        f"layers skipped: dataplane (missing simple_switch_grpc, nft{root}), "
        f"e2e (missing simple_switch_grpc, nft, mn, ab{root})"
    ], r.stdout
    assert lines[-2] == ours[0] and " skipped in " in lines[-1]


def make_test_first_lines(as_nobody: bool, fake_dir: Path) -> list[str]:
    """`make test`'s own lines, with lint and pytest stood in for by a program that does
    nothing (VPY, MAKE), as root or as nobody."""
    fake = fake_dir / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)  # newer than pyproject.toml: make does not rebuild it
    drop: dict[str, object] = {"user": 65534, "group": 65534, "extra_groups": []}
    r = subprocess.run(  # type: ignore[call-overload]
        ["make", "--no-print-directory", "test", f"VPY={fake}", "MAKE=true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        **(drop if as_nobody else {}),
    )
    assert r.returncode == 0, r.stderr
    return [ln for ln in r.stdout.splitlines() if not ln.startswith(str(fake))]


NOT_ROOT = (
    "make test: not root: the dataplane and e2e layers will be skipped (sudo make test runs them)"
)


def test_make_test_says_first_when_it_is_not_root() -> None:
    shared = Path(tempfile.mkdtemp(prefix="p4lb-make-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        if os.geteuid() == 0:
            assert make_test_first_lines(False, shared) == []
            assert make_test_first_lines(True, shared) == [NOT_ROOT]
        else:
            assert make_test_first_lines(False, shared) == [NOT_ROOT]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
