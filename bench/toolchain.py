"""The P4 toolchain found against the minimums scripts/toolchain.env names: tests and benches
that compile P4 ask `p4c_problem` first rather than fail on p4c's own error."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

TOOLCHAIN_ENV = Path(__file__).resolve().parents[1] / "scripts" / "toolchain.env"


def minimums(path: Path = TOOLCHAIN_ENV) -> dict[str, str]:
    """{"p4c": "1.2.5", "bmv2": ..., "pi": ...} from the P4LB_MIN_* lines."""
    found = re.findall(r"^\s*P4LB_MIN_([A-Z0-9]+)=(\S+)[ \t]*$", path.read_text(), re.M)
    return {name.lower(): value for name, value in found}


def version_key(version: str) -> tuple[int, ...]:
    """1.2.5.16 -> (1, 2, 5, 16); what follows the numbers (-1, -rc) is ignored."""
    m = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def tool_version(tool: str) -> str | None:
    """The first version-looking word `tool --version` prints, None if it prints none."""
    try:
        r = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    m = re.search(r"\d+(?:\.\d+)+", r.stdout + r.stderr)
    return m.group(0) if m else None


def p4c_problem(p4c: str = "p4c-bm2-ss", path: Path = TOOLCHAIN_ENV) -> str | None:
    """None when `p4c` is installed and new enough; else one line saying what p4lb needs."""
    need = minimums(path)["p4c"]
    if not shutil.which(p4c):
        return f"{p4c} (p4c >= {need}) is not installed"
    found = tool_version(p4c)
    if found is None or version_key(found) < version_key(need):
        return f"{p4c} is p4c {found or 'of an unknown version'}; p4lb needs p4c >= {need}"
    return None


def p4c() -> str:
    """The p4c the benches compile with: $P4C, else p4c-bm2-ss."""
    return os.environ.get("P4C", "p4c-bm2-ss")


def compile_p4(source: Path, out: Path, flags: list[str], what: str) -> Path:
    """`p4c FLAGS -o OUT SOURCE` (BMv2 JSON); a failure raises naming `what`."""
    r = subprocess.run(
        [p4c(), *flags, "-o", str(out), str(source)], capture_output=True, text=True, timeout=600
    )
    if r.returncode != 0:
        raise RuntimeError(f"{p4c()} failed on {what}: {r.stderr.strip()[-500:]}")
    return out
