"""The health checker: probe each backend at its interval, in parallel, apply the rise/fall
rule, and report every change so `p4lb run` (p4lb.service.daemon) can take a backend out of
rotation at once. It runs in a thread of its own there; `HealthChecker.tick` runs one round,
so tests drive it step by step, and `HealthChecker.run` repeats it until an event is set.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from p4lb.service.health.probes import Probe, default_probe
from p4lb.service.health.state import Health, ProbeResult, State, Target, observe

log = logging.getLogger("p4lb.health")


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
