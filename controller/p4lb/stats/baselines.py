"""Where the stats baselines live: a small state file beside the config (`lb.toml` ->
`lb.toml.state.json`), written at each runtime change under the config lock."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from p4lb.intent.private import write_private


def state_path(config_path: str | os.PathLike[str]) -> Path:
    """The baselines live beside the config: `lb.toml` -> `lb.toml.state.json`."""
    p = Path(config_path)
    return p.with_name(p.name + ".state.json")


def load_baselines(config_path: str | os.PathLike[str]) -> dict[str, Any]:
    """VIP name -> baseline; {} when there is no state file or it is not JSON (a
    PermissionError goes up: the CLI says to use sudo)."""
    try:
        data = json.loads(state_path(config_path).read_text())
    except PermissionError:
        raise
    except (OSError, ValueError):
        return {}
    vips = data.get("vips", {}) if isinstance(data, dict) else {}
    return vips if isinstance(vips, dict) else {}


def save_baselines(config_path: str | os.PathLike[str], baselines: Mapping[str, Any]) -> None:
    """Replace the state file atomically (callers hold the config lock)."""
    target = state_path(config_path)
    text = json.dumps({"vips": dict(baselines)}, indent=1, sort_keys=True) + "\n"
    write_private(target, text, f".{target.name}.tmp")
