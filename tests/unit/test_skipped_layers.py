"""The one line a test run ends with: which layers were skipped and why, or none. Built from
the skip reasons (a pure function), and printed by a real pytest run whose tools are hidden."""

from __future__ import annotations

import os
import subprocess
import sys
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
