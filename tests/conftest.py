"""Markers by folder, one clear skip message naming what a layer is missing, and at the end
of a run one line naming the layers that were skipped and why (`layers skipped: none` when
every layer ran), so a green run can never hide an untested layer."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A skip that stands for a whole layer says "<layer> layer skipped: <why>".
LAYER_SKIP = re.compile(r"(?:^|: )(?P<layer>[\w-]+) layer skipped: (?P<why>.+)$")
LAYER_ORDER = ("dataplane", "e2e", "tier")


def missing_for(layer: str) -> list[str]:
    """What this machine lacks for the dataplane, e2e or tier layer (empty: runnable)."""
    if layer == "tier":
        return missing_for_tier()
    need = ["simple_switch_grpc", "nft"]  # nft: every switch's Thrift port is confined
    if layer == "e2e":
        need += ["mn", "ab"]
    missing = [t for t in need if shutil.which(t) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def missing_for_tier() -> list[str]:
    """The tier's engines and tools (topology.tier_procs.missing_tools), its clients' ab, curl."""
    try:
        from topology.tier_procs import missing_tools
    except ImportError as e:
        return [f"{e.name} (Python)"]
    missing = missing_tools()
    extra = [t for t in ("ab", "curl") if shutil.which(t) is None]
    return [*[m for m in missing if m != "root"], *extra, *[m for m in missing if m == "root"]]


def layer_of(path: Path) -> str:
    """The layer of a test file: the first folder under tests/ (tests/unit/intent/... is
    unit); the tier's tests (tests/e2e/test_tier*.py) are a layer of their own."""
    parts = path.resolve().relative_to(ROOT / "tests").parts
    layer = parts[0] if len(parts) > 1 else ""
    if layer == "e2e" and parts[-1].startswith("test_tier"):
        return "tier"
    return layer


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing: dict[str, list[str]] = {}
    for item in items:
        layer = layer_of(Path(str(item.fspath)))
        marker = "e2e" if layer == "tier" else layer
        if marker in ("unit", "dataplane", "e2e"):
            item.add_marker(getattr(pytest.mark, marker))
        if layer in ("dataplane", "e2e", "tier"):
            if layer not in missing:
                missing[layer] = missing_for(layer)
            if missing[layer]:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{layer} layer skipped: missing {', '.join(missing[layer])}"
                    )
                )


def skipped_layers_line(reasons: Iterable[str]) -> str:
    """The run's last word on coverage, from its skip reasons: `layers skipped: none`, or each
    skipped layer with why (`layers skipped: dataplane (missing simple_switch_grpc, root),
    tier (missing vtysh)`); the dataplane, e2e and tier layers first, others after."""
    whys: dict[str, list[str]] = {}
    for reason in reasons:
        m = LAYER_SKIP.search(reason.strip())
        if m is None:
            continue
        seen = whys.setdefault(m["layer"], [])
        if m["why"] not in seen:
            seen.append(m["why"])
    if not whys:
        return "layers skipped: none"
    order = [x for x in LAYER_ORDER if x in whys] + sorted(set(whys) - set(LAYER_ORDER))
    return "layers skipped: " + ", ".join(f"{x} ({'; '.join(whys[x])})" for x in order)


def skip_reason(report: pytest.TestReport) -> str:
    """A skipped test's reason, as pytest keeps it (file, line, "Skipped: why")."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """After the short summary (-ra), just above the final counts."""
    yield
    reports = terminalreporter.stats.get("skipped", [])
    terminalreporter.write_line(skipped_layers_line(skip_reason(r) for r in reports))
