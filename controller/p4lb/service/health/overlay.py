"""Health applied to the intent: a DOWN backend of a checked VIP is programmed at weight 0 (no
new connections; open ones stay), and recovery restores its configured weight. Pure but for
`overlay_from_file`; the config file is never rewritten with these weights."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from p4lb.intent.model import Config
from p4lb.service.health.state import Key, State, Target
from p4lb.service.health.state_file import fresh_states, load_state


def effective_weights(configured: Mapping[str, int], states: Mapping[str, State]) -> dict[str, int]:
    """Weights to program: a DOWN backend's is 0, every other keeps its configured weight.
    Backends without a state (not checked) keep theirs."""
    return {name: 0 if states.get(name) is State.DOWN else w for name, w in configured.items()}


def targets_of(cfg: Config) -> list[Target]:
    """What to check: every backend (drained ones too, so their state is known when they
    come back) of every VIP with a `[vip.NAME.health]` table."""
    return [
        Target(v.name, b.name, b.address, b.port, v.health)
        for v in cfg.vips
        if v.health is not None
        for b in v.backends
    ]


@dataclass(frozen=True)
class Overlay:
    """The intent with health applied: what to program on the switch."""

    config: Config
    # VIPs whose every serving backend is DOWN: programmed at their configured weights
    # (fail open, as Envoy's panic mode does) — a broken probe must not take a whole
    # service down, and the data plane cannot hold a pool of total weight 0.
    fail_open: tuple[str, ...] = ()


def overlay(cfg: Config, states: Mapping[Key, State]) -> Overlay:
    """`cfg` with each DOWN backend of a health-checked VIP at weight 0. Pure; the config
    file is never rewritten with these weights."""
    vips, fail_open = [], []
    for v in cfg.vips:
        if v.health is None:
            vips.append(v)
            continue
        mine = {b: st for (vip, b), st in states.items() if vip == v.name}
        weights = effective_weights({b.name: b.weight for b in v.backends}, mine)
        if sum(weights.values()) == 0 and any(b.active for b in v.backends):
            fail_open.append(v.name)
            vips.append(v)
            continue
        backends = tuple(replace(b, weight=weights[b.name]) for b in v.backends)
        vips.append(replace(v, backends=backends))
    return Overlay(replace(cfg, vips=tuple(vips)), tuple(fail_open))


def overlay_from_file(cfg: Config, config_path: str | os.PathLike[str]) -> Config:
    """What a one-shot command programs: `cfg` with the DOWN backends a running `p4lb run`
    publishes at weight 0 (just `cfg` when none is running)."""
    return overlay(cfg, fresh_states(load_state(config_path), time.time())).config
