"""The tier's announcements: one thread drives every balancer's BGP speaker
(p4lb.service.speaker) by the decision p4lb.service.announce makes over the members' views,
so that no balancer's switch session ever waits for a `gobgp` call."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from p4lb.service.announce import Policy, decide, floor
from p4lb.service.speaker import SpeakerError
from p4lb.service.tier_members import Member, Members

log = logging.getLogger("p4lb")


class Speakers:
    """Announce for the balancers the decision keeps (those that hold the tier's state and
    are not drained, also while a runtime command holds their primary role; silent ones
    within the hold or needed by the floor), withdraw for the others; every check_s, have a
    speaker that lost its routes (it restarted) announce them again."""

    def __init__(
        self,
        members: Members,
        prefixes: Callable[[], list[str]],
        policy: Policy,
        check_s: float,
        stop: threading.Event,
        due: threading.Event,
    ) -> None:
        self.members = members
        self.prefixes = prefixes  # what every speaker announces: the VIPs and [tier] announce
        self.policy = policy
        self.check_s = check_s
        self._stop = stop
        self.due = due  # set: act now (a member joined, left, was drained)
        self.rounds = 0  # rounds finished (tests wait on it)

    def run(self) -> None:
        next_check = 0.0
        while not self._stop.is_set():
            self.due.wait(0.2)
            self.due.clear()
            check = time.monotonic() >= next_check
            if check:
                next_check = time.monotonic() + self.check_s
            members = self.members.all()
            views = [m.view(time.monotonic()) for m in members]
            chosen = decide(views, self.policy)
            least = floor(sum(1 for v in views if not v.drained))
            for m, v in zip(members, views, strict=True):
                if self._stop.is_set():
                    return
                if m.name in chosen:
                    self._announce(m)
                    if check and v.serving:
                        self._check_announced(m)
                    if not v.serving and v.silent_s >= self.policy.hold_s and not m.held:
                        m.held = True
                        log.warning(
                            "%s: silent for %.1f s, kept announced: the floor (%d of %d)",
                            m.name,
                            v.silent_s,
                            least,
                            sum(1 for w in views if not w.drained),
                        )
                elif m.announced:
                    self._withdraw(m)
                    m.withdrawn_silent = not (v.gone or v.drained or v.serving)
                    if v.drained:
                        log.info("%s: draining: withdrawn", m.name)
                    elif v.gone:
                        log.info("%s: withdrawn: its switch is gone", m.name)
                    else:
                        log.warning("%s: withdrawn: silent for %.1f s", m.name, v.silent_s)
                if m.removed and not m.announced and not (m.thread and m.thread.is_alive()):
                    self.members.forget(m)
            self.rounds += 1

    def _announce(self, m: Member) -> None:
        sp = m.speaker
        if sp is None or m.announced:
            return
        try:
            sp.announce(self.prefixes())
            m.announced = True
            hops = " and ".join(sp.next_hops.values())
            log.info("%s: announced %s via %s", m.name, ", ".join(self.prefixes()), hops)
        except SpeakerError as e:
            log.warning("%s: %s", m.name, e)

    def _check_announced(self, m: Member) -> None:
        """A speaker that restarted announces nothing: announce again what it should."""
        sp = m.speaker
        if sp is None or not m.announced:
            return
        try:
            missing = set(self.prefixes()) - sp.announced()
        except SpeakerError as e:
            log.warning("%s: %s", m.name, e)
            return
        if missing:
            log.info("%s: speaker lost %s; announcing again", m.name, ", ".join(sorted(missing)))
            m.announced = False
            self._announce(m)

    def _withdraw(self, m: Member) -> None:
        sp = m.speaker
        if sp is None or not m.announced:
            return
        try:
            sp.withdraw(self.prefixes())
        except SpeakerError as e:  # the speaker may be dead: BFD withdraws for it
            log.warning("%s: withdraw: %s", m.name, e)
        m.announced = False
