"""The state file, `lb.toml.health.json`: what `p4lb run`'s checks found, for `p4lb stats` and
for runtime commands.

`p4lb run` is the only writer of it beside the config (atomically, after every round of checks
and every reconcile); `p4lb stats` shows it, and runtime commands program DOWN backends at
weight 0 while it is fresh, so a command never puts a dead backend back into rotation. It goes
stale when `p4lb run` stops writing it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4lb.intent.private import write_private
from p4lb.service.health.probes import SUBPROCESS_GRACE_S
from p4lb.service.health.state import Health, Key, State, Target

STALE_ROUNDS = 3  # rounds of checks a reader waits for before it calls the file stale
STALE_SLACK_S = 5.0


def state_path(config_path: str | os.PathLike[str]) -> Path:
    """`lb.toml` -> `lb.toml.health.json`."""
    p = Path(config_path)
    return p.with_name(p.name + ".health.json")


def stale_horizon(targets: Iterable[Target]) -> float:
    """How long a published state stays believable: a few rounds of the slowest check."""
    slowest = max((t.settings.interval_s + t.settings.timeout_s for t in targets), default=1.0)
    return STALE_ROUNDS * (slowest + SUBPROCESS_GRACE_S) + STALE_SLACK_S


@dataclass(frozen=True)
class Programmed:
    """The weight `p4lb run` last wrote to the switch for a backend, and when."""

    weight: int
    at: float


def document(
    health: Mapping[Key, Health],
    since: Mapping[Key, float],
    programmed: Mapping[Key, Programmed],
    now: float,
    horizon_s: float,
) -> dict[str, Any]:
    """The state file's content (JSON-ready). Times are wall-clock seconds."""
    vips: dict[str, dict[str, Any]] = {}
    for (vip, backend), h in sorted(health.items()):
        p = programmed.get((vip, backend))
        vips.setdefault(vip, {})[backend] = h.as_dict() | {
            "since": since.get((vip, backend)),
            "weight": None if p is None else p.weight,
            "weight_at": None if p is None else p.at,
        }
    return {"pid": os.getpid(), "updated_at": now, "stale_after": now + horizon_s, "vips": vips}


def save_state(config_path: str | os.PathLike[str], doc: Mapping[str, Any]) -> None:
    """Replace the state file atomically (temp file + rename)."""
    target = state_path(config_path)
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    write_private(target, text, f".{target.name}.{os.getpid()}.tmp")


def load_state(config_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The state file's content; {} when there is none or it is not JSON (a PermissionError
    goes up: the CLI says to use sudo, rather than show no health at all)."""
    try:
        data = json.loads(state_path(config_path).read_text())
    except PermissionError:
        raise
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("vips"), dict) else {}


def is_fresh(doc: Mapping[str, Any], now: float) -> bool:
    stale_after = doc.get("stale_after")
    return isinstance(stale_after, int | float) and now <= stale_after


def fresh_states(doc: Mapping[str, Any], now: float) -> dict[Key, State]:
    """The published states, if `p4lb run` is still publishing them ({} otherwise)."""
    if not is_fresh(doc, now):
        return {}
    out: dict[Key, State] = {}
    for vip, backends in doc.get("vips", {}).items():
        if not isinstance(backends, dict):
            continue
        for name, h in backends.items():
            if isinstance(h, dict) and h.get("state") in (State.UP, State.DOWN):
                out[(vip, name)] = State(h["state"])
    return out
