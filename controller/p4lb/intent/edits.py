"""Runtime changes as pure edits of the intent: each returns a new Config, valid as an intent
(whether the compiled program can hold it is p4lb.pipeline.capacity's check)."""

from __future__ import annotations

from dataclasses import replace

from p4lb.intent.model import MAX_WEIGHT, Backend, Config, ConfigError, Vip
from p4lb.intent.validate import validate


def _checked(cfg: Config) -> Config:
    validate(cfg)
    return cfg


def set_weight(cfg: Config, vip: str, backend: str, weight: int) -> Config:
    if not 0 <= weight <= MAX_WEIGHT:
        raise ConfigError(f"weight {weight} is outside 0..{MAX_WEIGHT}")
    v = cfg.vip(vip)
    b = v.backend(backend)
    backends = tuple(replace(x, weight=weight) if x is b else x for x in v.backends)
    return _checked(cfg.with_vip(replace(v, backends=backends)))


def drain(cfg: Config, vip: str, backend: str) -> Config:
    """Weight 0: no new connections; open ones keep their backend."""
    return set_weight(cfg, vip, backend, 0)


def add_backend(cfg: Config, vip: str, backend: Backend) -> Config:
    v = cfg.vip(vip)
    if any(b.name == backend.name for b in v.backends):
        raise ConfigError(f"VIP {v.name!r} already has a backend {backend.name!r}")
    return _checked(cfg.with_vip(replace(v, backends=v.backends + (backend,))))


def remove_backend(cfg: Config, vip: str, backend: str) -> Config:
    v = cfg.vip(vip)
    b = v.backend(backend)
    return _checked(cfg.with_vip(replace(v, backends=tuple(x for x in v.backends if x is not b))))


def set_algorithm(cfg: Config, vip: str, algorithm: str, choices: int | None = None) -> Config:
    """The VIP with another algorithm; `choices` (least-* algorithms): its new setting, or
    None to keep the one it has."""
    v = cfg.vip(vip)
    v = replace(v, algorithm=algorithm, choices=v.choices if choices is None else choices)
    return _checked(cfg.with_vip(v))


def add_vip(cfg: Config, vip: Vip) -> Config:
    if any(v.name == vip.name for v in cfg.vips):
        raise ConfigError(f"a VIP named {vip.name!r} exists already")
    return _checked(cfg.with_vip(vip))


def remove_vip(cfg: Config, vip: str) -> Config:
    return _checked(cfg.without_vip(cfg.vip(vip).name))
