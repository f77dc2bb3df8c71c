"""What every region's function shares: reading a results file, and the speed build's name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPEED_NAMES = ("fast", "speed")
Slots = dict[str, Any]


class MissingFile(Exception):
    pass


def load(root: Path, rel: str) -> Any:
    p = root / rel
    if not p.exists():
        raise MissingFile(rel)
    return json.loads(p.read_text())


def speed_build(builds: dict[str, Any]) -> str:
    return next(b for b in builds if b in SPEED_NAMES)


def builds(doc: dict[str, Any]) -> tuple[str, str]:
    """A switch results file's two builds: the standard one, then the speed one."""
    return "standard", speed_build(doc["builds"])
