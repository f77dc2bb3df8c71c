"""What the checker knows about a backend, and the rise/fall state machine. Pure.

Semantics are HAProxy's: an UP backend goes DOWN after `fall` consecutive failures, a DOWN one
comes UP after `rise` consecutive successes; a success resets the failure run and a failure
the success run, so a flapping backend keeps the state it has. Every backend *starts UP*
(with no failures counted): the config lists it as serving, a restart of `p4lb run` must not
pull every backend out of rotation until it has been probed, and a dead one still goes DOWN
after `fall` probes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from p4lb.intent.model import HealthSettings

Key = tuple[str, str]  # (VIP name, backend name)


class State(StrEnum):
    UP = "up"
    DOWN = "down"


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
