"""Runtime changes as pure edits of the intent: each returns a new, validated Config."""

from __future__ import annotations

from dataclasses import replace

from p4lb.config import (
    MAX_WEIGHT,
    Backend,
    Config,
    ConfigError,
    Limits,
    Vip,
    compiled_limits,
)
from p4lb.validate import validate


def _checked(cfg: Config, limits: Limits | None) -> Config:
    validate(cfg, limits or compiled_limits())
    return cfg


def set_weight(
    cfg: Config, vip: str, backend: str, weight: int, limits: Limits | None = None
) -> Config:
    if not 0 <= weight <= MAX_WEIGHT:
        raise ConfigError(f"weight {weight} is outside 0..{MAX_WEIGHT}")
    v = cfg.vip(vip)
    b = v.backend(backend)
    backends = tuple(replace(x, weight=weight) if x is b else x for x in v.backends)
    return _checked(cfg.with_vip(replace(v, backends=backends)), limits)


def drain(cfg: Config, vip: str, backend: str, limits: Limits | None = None) -> Config:
    """Weight 0: no new connections; open ones keep their backend."""
    return set_weight(cfg, vip, backend, 0, limits)


def add_backend(cfg: Config, vip: str, backend: Backend, limits: Limits | None = None) -> Config:
    v = cfg.vip(vip)
    if any(b.name == backend.name for b in v.backends):
        raise ConfigError(f"VIP {v.name!r} already has a backend {backend.name!r}")
    return _checked(cfg.with_vip(replace(v, backends=v.backends + (backend,))), limits)


def remove_backend(cfg: Config, vip: str, backend: str, limits: Limits | None = None) -> Config:
    v = cfg.vip(vip)
    b = v.backend(backend)
    return _checked(
        cfg.with_vip(replace(v, backends=tuple(x for x in v.backends if x is not b))), limits
    )


def set_algorithm(cfg: Config, vip: str, algorithm: str, limits: Limits | None = None) -> Config:
    known = (limits or compiled_limits()).algorithms
    if algorithm not in known:
        raise ConfigError(f"unknown algorithm {algorithm!r} (known: {', '.join(known)})")
    v = cfg.vip(vip)
    return _checked(cfg.with_vip(replace(v, algorithm=algorithm)), limits)


def add_vip(cfg: Config, vip: Vip, limits: Limits | None = None) -> Config:
    if any(v.name == vip.name for v in cfg.vips):
        raise ConfigError(f"a VIP named {vip.name!r} exists already")
    return _checked(cfg.with_vip(vip), limits)


def remove_vip(cfg: Config, vip: str, limits: Limits | None = None) -> Config:
    return _checked(cfg.without_vip(cfg.vip(vip).name), limits)
