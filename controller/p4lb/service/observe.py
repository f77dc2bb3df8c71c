"""What `p4lb stats` shows and `p4lb run`'s metrics export, read one way for both: each
switch's lifetime counts, then per VIP the counts since its last runtime change (its
baseline) with the health `p4lb run` publishes."""

from __future__ import annotations

import os
from dataclasses import replace

from p4lb.service.health import state_file
from p4lb.stats import baselines, windows
from p4lb.stats.counters import Stats


def shown(lifetime: Stats, config_path: str | os.PathLike[str], now: float) -> Stats:
    """`lifetime` as `p4lb stats` shows it: each VIP since its baseline (when the state file
    beside the config has one) and each checked backend's health; `now` is wall time."""
    kept = baselines.load_baselines(config_path)
    windowed = replace(
        lifetime,
        vips=tuple(windows.since(v, kept[v.name]) if v.name in kept else v for v in lifetime.vips),
    )
    return windows.with_health(windowed, state_file.load_state(config_path), now)
