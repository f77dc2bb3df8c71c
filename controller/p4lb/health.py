"""Backend health checks: probe each backend at an interval, decide UP/DOWN with rise/fall
thresholds, and report every change so the controller can take a backend out of rotation.

Config (a `[vip.NAME.health]` table turns checks on for that VIP in `p4lb run`; every key
is optional, a tcp VIP only):

    [vip.web.health]
    interval_s = 1.0     # start of one probe of a backend to the start of the next
    timeout_s = 0.5      # connect (and HTTP status line) deadline; at most interval_s
    rise = 2             # consecutive successes that bring a DOWN backend back UP
    fall = 2             # consecutive failures that take an UP backend DOWN
    http_path = ""       # "": TCP connect only; "/health": also GET it ...
    http_status = 200    # ... and expect this status (anything else is a failure)
    namespace = ""       # "": probe from the controller's namespace; a name: run the probe
                         # under `ip netns exec NAME`; a path (/proc/PID/ns/net,
                         # /run/netns/NAME): under `nsenter --net=PATH` (a Mininet host).
                         # "{backend}" in it becomes the backend's name: "{backend}" probes
                         # each backend from its own host's namespace.

The defaults take a killed server out of rotation within fall * interval_s = 2 s (the
issue's goal is 3 s); HAProxy's own defaults (inter 2 s, fall 3) would take 6 s.

Semantics are HAProxy's: an UP backend goes DOWN after `fall` consecutive failures, a DOWN one
comes UP after `rise` consecutive successes; a success resets the failure run and a failure
the success run, so a flapping backend keeps the state it has. Every backend *starts UP*
(with no failures counted): the config lists it as serving, a restart of `p4lb run` must not
pull every backend out of rotation until it has been probed, and a dead one still goes DOWN
after `fall` probes.

A DOWN backend's effective weight is 0 (no new connections; open ones stay); recovery restores
the configured weight. The config file is never rewritten: `effective_weights` is the pure
mapping the controller applies on top of the config.

`p4lb run` (p4lb.daemon) runs the checker in a thread, programs `overlay(cfg, states)` and
publishes the states in `lb.toml.health.json` (see "the state file" below).

The state machine (`observe`) is pure; the probe is pluggable (`Probe`): in-process
(`tcp_probe`) or a subprocess in a namespace (`SubprocessProbe`, running
`python -m p4lb.health_probe`). `HealthChecker.tick` runs one round, so tests drive it step by
step; `HealthChecker.run` repeats it until an event is set.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from p4lb.config import Config, ConfigError
from p4lb.health_probe import probe as _socket_probe

log = logging.getLogger("p4lb.health")


class State(StrEnum):
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class HealthSettings:
    """One VIP's `[vip.NAME.health]` table."""

    interval_s: float = 1.0
    timeout_s: float = 0.5
    rise: int = 2
    fall: int = 2
    http_path: str = ""
    http_status: int = 200
    namespace: str = ""

    def __post_init__(self) -> None:
        problem = _settings_problem(self)
        if problem:
            raise ValueError(problem)


def _settings_problem(s: HealthSettings) -> str:
    if not (math.isfinite(s.interval_s) and s.interval_s > 0):
        return "interval_s: must be > 0"
    if not (math.isfinite(s.timeout_s) and 0 < s.timeout_s <= s.interval_s):
        return "timeout_s: must be > 0 and at most interval_s (probes would pile up)"
    if not 1 <= s.rise <= 100:
        return "rise: must be 1..100"
    if not 1 <= s.fall <= 100:
        return "fall: must be 1..100"
    if s.http_path and (not s.http_path.startswith("/") or any(c.isspace() for c in s.http_path)):
        return "http_path: must start with / and contain no spaces"
    if not 100 <= s.http_status <= 599:
        return "http_status: must be 100..599"
    return ""


def parse_settings(table: Mapping[str, Any], source: str, where: str) -> HealthSettings:
    """Validate a decoded `[vip.NAME.health]` table (`where` is e.g. "vip.web.health")."""
    known = {f.name: f.type for f in fields(HealthSettings)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(
                f"{source}: {where}.{key}: unknown key (expected one of {sorted(known)})"
            )
        want = known[key]
        if want == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        ok = {
            "float": isinstance(value, float),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "str": isinstance(value, str),
        }[str(want)]
        if not ok:
            raise ConfigError(f"{source}: {where}.{key}: must be a {want}, got {value!r}")
        values[key] = value
    try:
        return HealthSettings(**values)
    except ValueError as e:
        raise ConfigError(f"{source}: {where}.{e}") from None


@dataclass(frozen=True)
class Target:
    """One backend to check, and how."""

    vip: str
    backend: str
    address: str
    port: int
    settings: HealthSettings = field(default_factory=HealthSettings)

    @property
    def key(self) -> tuple[str, str]:
        return (self.vip, self.backend)


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    reason: str


@dataclass(frozen=True)
class Health:
    """What the checker knows about one backend. `successes`/`failures` are current runs."""

    state: State = State.UP
    successes: int = 0
    failures: int = 0
    reason: str = "not checked yet"
    checks: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": str(self.state),
            "reason": self.reason,
            "consecutive_successes": self.successes,
            "consecutive_failures": self.failures,
            "checks": self.checks,
        }


def observe(h: Health, result: ProbeResult, rise: int, fall: int) -> Health:
    """The state after one probe result (HAProxy's rise/fall). Pure."""
    checks = h.checks + 1
    if result.ok:
        successes, failures = h.successes + 1, 0
        state = State.UP if h.state is State.DOWN and successes >= rise else h.state
    else:
        successes, failures = 0, h.failures + 1
        state = State.DOWN if h.state is State.UP and failures >= fall else h.state
    return Health(state, successes, failures, result.reason, checks)


def effective_weights(configured: Mapping[str, int], states: Mapping[str, State]) -> dict[str, int]:
    """Weights to program: a DOWN backend's is 0, every other keeps its configured weight.
    Backends without a state (not checked) keep theirs."""
    return {name: 0 if states.get(name) is State.DOWN else w for name, w in configured.items()}


Key = tuple[str, str]  # (VIP name, backend name)


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


# ---------------------------------------------------------------- probes

Probe = Callable[[Target], ProbeResult]


def tcp_probe(target: Target) -> ProbeResult:
    """Probe from this process's network namespace."""
    s = target.settings
    ok, reason = _socket_probe(target.address, target.port, s.timeout_s, s.http_path, s.http_status)
    return ProbeResult(ok, reason)


def namespace_prefix(namespace: str) -> list[str]:
    """The command that runs a program inside `namespace` ("" = here)."""
    if not namespace:
        return []
    if namespace.startswith("/"):
        return ["nsenter", f"--net={namespace}"]
    return ["ip", "netns", "exec", namespace]


# Starting the interpreter and entering a namespace takes time the probe's own deadline does
# not cover; past timeout_s plus this the process is killed and the probe fails.
SUBPROCESS_GRACE_S = 2.0


@dataclass(frozen=True)
class SubprocessProbe:
    """Runs `python -m p4lb.health_probe` (in the target's namespace, if it names one)."""

    python: str = sys.executable

    def command(self, target: Target) -> list[str]:
        s = target.settings
        cmd = [
            *namespace_prefix(s.namespace.replace("{backend}", target.backend)),
            self.python,
            "-m",
            "p4lb.health_probe",
            target.address,
            str(target.port),
        ]
        if s.http_path:
            cmd += [s.http_path, str(s.http_status)]
        return [*cmd, "--timeout", f"{s.timeout_s:g}"]

    def __call__(self, target: Target) -> ProbeResult:
        try:
            done = subprocess.run(
                self.command(target),
                capture_output=True,
                text=True,
                timeout=target.settings.timeout_s + SUBPROCESS_GRACE_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return ProbeResult(False, "probe process did not finish in time")
        except OSError as e:
            return ProbeResult(False, f"cannot run the probe: {e.strerror or e}")
        lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
        reason = lines[-1] if lines else f"probe exited {done.returncode}"
        if done.returncode in (0, 1):
            return ProbeResult(done.returncode == 0, reason)
        return ProbeResult(False, f"probe failed (exit {done.returncode}): {reason}")


def default_probe(target: Target) -> ProbeResult:
    """In-process without a namespace, a subprocess inside one."""
    if target.settings.namespace:
        return SubprocessProbe()(target)
    return tcp_probe(target)


# ---------------------------------------------------------------- the checker


@dataclass(frozen=True)
class Transition:
    target: Target
    old: State
    new: State
    reason: str


OnChange = Callable[[Target, State, State, str], None]


class HealthChecker:
    """Probes targets when due, in parallel; calls `on_change(target, old, new, reason)` on
    every state change, from the thread that runs `tick`/`run`."""

    def __init__(
        self,
        targets: Iterable[Target],
        on_change: OnChange,
        probe: Probe = default_probe,
        clock: Callable[[], float] = time.monotonic,
        max_parallel: int = 16,
    ) -> None:
        self._on_change = on_change
        self._probe = probe
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="p4lb-health")
        self._lock = threading.Lock()
        self._targets: dict[tuple[str, str], Target] = {}
        self._health: dict[tuple[str, str], Health] = {}
        self._due: dict[tuple[str, str], float] = {}
        self.set_targets(targets)

    def set_targets(self, targets: Iterable[Target]) -> None:
        """Replace the checked set (backends added/removed); a backend that stays keeps its
        state and schedule, a new one starts UP and is probed on the next tick."""
        new = {t.key: t for t in targets}
        with self._lock:
            self._targets = new
            self._health = {k: self._health.get(k, Health()) for k in new}
            self._due = {k: self._due.get(k, -math.inf) for k in new}

    def targets(self) -> list[Target]:
        with self._lock:
            return list(self._targets.values())

    def health(self) -> dict[tuple[str, str], Health]:
        """A snapshot of every target's state (safe from any thread)."""
        with self._lock:
            return dict(self._health)

    def next_due(self) -> float | None:
        with self._lock:
            return min(self._due.values(), default=None)

    def tick(self, now: float | None = None) -> list[Transition]:
        """Probe every target due at `now` (default: the clock), apply the results, report
        the changes. Returns the transitions, in target order."""
        t0 = self._clock() if now is None else now
        with self._lock:
            due = [t for k, t in self._targets.items() if self._due[k] <= t0]
            for t in due:
                self._due[t.key] = t0 + t.settings.interval_s
        results = list(self._pool.map(self._safe_probe, due))
        changes: list[Transition] = []
        with self._lock:
            for t, r in zip(due, results, strict=True):
                if t.key not in self._health:  # removed while its probe ran
                    continue
                old = self._health[t.key]
                new = observe(old, r, t.settings.rise, t.settings.fall)
                self._health[t.key] = new
                if new.state is not old.state:
                    changes.append(Transition(t, old.state, new.state, r.reason))
        for c in changes:
            log.info(
                "backend %s of VIP %s (%s:%d) is %s: %s",
                c.target.backend,
                c.target.vip,
                c.target.address,
                c.target.port,
                c.new.upper(),
                c.reason,
            )
            try:
                self._on_change(c.target, c.old, c.new, c.reason)
            except Exception:
                log.exception("health change handler failed for %s", c.target.key)
        return changes

    def _safe_probe(self, target: Target) -> ProbeResult:
        try:
            return self._probe(target)
        except Exception as e:  # a broken probe counts as a failed check, not a dead checker
            return ProbeResult(False, f"probe raised {type(e).__name__}: {e}")

    def run(
        self, stop: threading.Event, after_tick: Callable[[list[Transition]], None] | None = None
    ) -> None:
        """Tick whenever a target is due until `stop` is set; `after_tick(changes)` after
        each round (p4lb run publishes the states there)."""
        while not stop.is_set():
            changes = self.tick()
            if after_tick is not None:
                try:
                    after_tick(changes)
                except Exception:
                    log.exception("health: after-tick handler failed")
            due = self.next_due()
            stop.wait(1.0 if due is None else max(0.0, due - self._clock()))

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> HealthChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- the state file
#
# `p4lb run` is the only writer of `lb.toml.health.json` beside the config (atomically,
# after every round of checks and every reconcile); `p4lb stats` shows it, and runtime
# commands program DOWN backends at weight 0 while it is fresh, so a command never puts a
# dead backend back into rotation. It goes stale when `p4lb run` stops writing it.

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
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, target)


def load_state(config_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The state file's content; {} when there is none or it is unreadable."""
    try:
        data = json.loads(state_path(config_path).read_text())
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


def overlay_from_file(cfg: Config, config_path: str | os.PathLike[str]) -> Config:
    """What a one-shot command programs: `cfg` with the DOWN backends a running `p4lb run`
    publishes at weight 0 (just `cfg` when none is running)."""
    return overlay(cfg, fresh_states(load_state(config_path), time.time())).config
