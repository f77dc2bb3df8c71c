"""Which balancers of the tier announce the VIPs: a pure decision over what the controller
knows of each one, with hysteresis and a floor, so that load never withdraws the tier.

Two kinds of evidence reach the controller. A switch whose process is gone (its P4Runtime
port refuses connections: nothing listens) is withdrawn at once; no load makes a live
process's listening socket refuse. A switch that is merely silent (its session broke or a
call timed out, but something still listens) may be a hung switch, or a live one too busy
to answer in time: that is what load fakes. A silent balancer therefore stays announced
for `hold_s`, and after that it is withdrawn only while at least `floor(n)` of the n
balancers not drained stay announced (the longest silent go first). Withdrawing a busy
balancer moves its traffic onto the others, which makes them busy too; without the floor
that cascade ends with nothing announced (Maglev, Eisenbud et al., "Maglev: A Fast and
Reliable Software Network Load Balancer", NSDI 2016, sheds load instead of going dark).
A balancer withdrawn for silence announces again only once it has served for `settle_s`:
one that flaps between silent and serving stays out instead of moving flows twice a cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    """One balancer as the decision sees it."""

    name: str
    announced: bool  # its speaker announces the VIPs now
    serving: bool  # it holds the tier's state (joined, or held for a moment by a command)
    drained: bool  # the operator drained it (or removed it from the config)
    gone: bool  # its switch's process is gone: its P4Runtime port refuses connections
    silent_s: float = 0.0  # not serving, not gone, for this long (0 while serving)
    serving_s: float = 0.0  # serving without a break for this long (0 while not)
    withdrawn_silent: bool = False  # its last withdrawal was for silence


@dataclass(frozen=True)
class Policy:
    hold_s: float = 3.0  # a silent balancer stays announced this long
    settle_s: float = 2.0  # serving this long before one withdrawn for silence returns


def floor(n: int) -> int:
    """The fewest of n balancers (not drained) that silence alone may leave announced: a
    majority. When more than half look silent at once the cause is more likely shared
    (load, the controller's own trouble) than half the switches failing together."""
    return math.ceil(n / 2)


def decide(views: list[View], policy: Policy) -> frozenset[str]:
    """The names that should announce now."""
    keep: set[str] = set()
    silent: list[View] = []
    for v in views:
        if v.drained or v.gone:
            continue
        if v.serving:
            if v.announced or not v.withdrawn_silent or v.serving_s >= policy.settle_s:
                keep.add(v.name)
        elif v.announced:
            if v.silent_s < policy.hold_s:
                keep.add(v.name)
            else:
                silent.append(v)
    least = floor(sum(1 for v in views if not v.drained))
    # The longest silent first; the rest stay while the floor needs them.
    silent.sort(key=lambda v: (-v.silent_s, v.name))
    for i in range(len(silent)):
        if len(keep) + len(silent) - i - 1 < least:
            keep.update(s.name for s in silent[i:])
            break
    return frozenset(keep)
