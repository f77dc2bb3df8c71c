"""The tier's membership: each balancer of the config as a switch session
(p4lb.service.session) that joins the tier once its switch holds the tier's intent and
every shared connection, and leaves it when its session breaks (at once forgotten as a
holder of copies); the members the config names; and each one as the announcement
decision sees it (p4lb.service.announce.View)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from p4lb.intent.model import Balancer, Config
from p4lb.pipeline.entries import Entry
from p4lb.service.announce import View
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.operations import ApplyResult
from p4lb.service.session import Intent, Session
from p4lb.service.speaker import Speaker
from p4lb.service.tier_sharing import Sharing
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError

log = logging.getLogger("p4lb")


class Tier(Protocol):
    """What a member asks of the tier's controller (p4lb.service.tier.TierController)."""

    def member_config(self, m: Member) -> Config | None: ...
    def intent(self, m: Member, sw: Switch) -> Intent | None: ...
    def applied(self, m: Member, result: ApplyResult) -> None: ...
    def exclusive(self) -> contextlib.AbstractContextManager[bool]: ...
    def changes(self) -> int: ...
    def all_members(self) -> list[Member]: ...


def switch_gone(address: str, timeout_s: float = 0.5) -> bool:
    """Whether nothing listens at a switch's P4Runtime address (`host:port`): the connection
    is refused, so its process is gone. A live process's kernel completes the handshake
    however busy the process is, so load cannot make this true; a timeout (a host that does
    not answer at all) is not taken as proof either."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False


class Member(Session):
    """One balancer as the controller sees it: its switch session and its place in the
    tier (serving, announced, how long silent)."""

    def __init__(
        self,
        balancer: Balancer,
        tier: Tier,
        sharing: Sharing,
        announce_due: threading.Event,
        stop: threading.Event,
        metrics: ControllerMetrics,
        config_path: str | None,
        poll_s: float,
        check_s: float,
        retry_s: float,
    ) -> None:
        super().__init__(balancer.name, stop, metrics, config_path, poll_s, check_s, retry_s)
        self.balancer = balancer
        self.tier = tier
        self.sharing = sharing
        self.announce_due = announce_due  # set: the speakers' loop should act now
        self.announced = False
        # Was ready, and a runtime command holds the primary role for a moment (election id
        # + 1): the switch still holds the tier's state and forwards; it stays announced.
        self.paused = False
        self.thread: threading.Thread | None = None
        self.joined_at = 0.0  # when it last joined (monotonic)
        self.left_at = 0.0  # when it last stopped serving
        self.gone = False  # its switch refused connections when it left: the process is gone
        self.withdrawn_silent = False  # its last withdrawal was for silence (announce.py)
        self.held = False  # kept announced past the hold by the floor (logged once)
        self.removed = False  # no longer in the config: its loop ends, it is withdrawn
        self._copied = 0  # shared connections written when it last joined
        self._pushed = False  # the last reconcile pushed the pipeline: the switch was empty

    @property
    def speaker(self) -> Speaker | None:
        b = self.balancer
        if not (b.nexthop or b.nexthop6):
            return None
        return Speaker(b.speaker_netns, b.speaker_api, b.nexthop, b.nexthop6)

    @property
    def serving(self) -> bool:
        """It holds the tier's state (joined, or held for a moment by a command)."""
        return self.ready.is_set() or self.paused

    def view(self, now: float) -> View:
        serving = self.serving
        return View(
            self.name,
            self.announced,
            serving,
            self.balancer.drain or self.removed,
            self.gone and not serving,
            silent_s=0.0 if serving or self.gone else now - self.left_at,
            serving_s=now - self.joined_at if serving else 0.0,
            withdrawn_silent=self.withdrawn_silent,
        )

    def start(self) -> None:
        self.thread = threading.Thread(target=self.hold, name=f"p4lb-{self.name}", daemon=True)
        self.thread.start()

    def leave(self, why: str) -> None:
        was_serving = self.serving
        if was_serving:
            self.left_at = time.monotonic()
        self.gone = switch_gone(self.balancer.address)
        if was_serving or self.announced:
            state = "its switch is gone" if self.gone else "its switch still listens"
            log.warning("%s: out of the tier: %s (%s)", self.name, why, state)
        self.ready.clear()
        self.paused = False
        self.sharing.lost(self.name)
        self.announce_due.set()

    # --- the session's hooks ------------------------------------------------------------

    def connect_config(self) -> Config | None:
        return self.tier.member_config(self)

    def intent(self, sw: Switch) -> Intent | None:
        return self.tier.intent(self, sw)

    def applied(self, intent: Intent, result: ApplyResult) -> None:
        self._pushed = result.pipeline_pushed
        self.tier.applied(self, result)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[bool]:
        with self.tier.exclusive() as mine:
            yield mine

    def changes(self) -> int:
        return self.tier.changes()

    def log_as(self, what: str) -> str:
        return self.name

    def joining(self, sw: Switch) -> None:
        """Every live shared connection it lacks, then ready. A switch that kept its state
        and that another controller held (this one is a standby taking over, or restarted)
        holds copies of live connections whose events went to that controller: they are
        learnt first (Sharing.adopt). A switch that was empty (it restarted: the pipeline
        was just pushed) gets every live connection, its own former ones included; if this
        controller holds no other balancer it has seen none of the tier's events (a standby
        that reached a restarted switch before the primary did), so it first learns them
        from the copies the others hold."""
        fresh = self._pushed
        if not fresh and (self.fresh or self.standby):
            adopted = self.sharing.adopt(self.name, sw)
            log.info("%s: took over: %d shared connections held there", self.name, adopted)
        others = [o for o in self.tier.all_members() if o is not self]
        if fresh and not any(o.ready.is_set() for o in others):
            for other in others:
                if other.sw is None:
                    continue
                try:
                    learnt = self.sharing.learn(other.sw)
                except Exception as e:  # noqa: BLE001 - another balancer's trouble is not this one's
                    # (an empty switch, the tier's first start: nothing to learn there)
                    log.debug("%s: copies not read from %s (%s)", self.name, other.name, e)
                    continue
                log.info("%s: %d shared connections held by %s", self.name, learnt, other.name)
        self._copied = self.sharing.join(self.name, sw, fresh)
        self.joined_at = time.monotonic()
        self.gone = False
        self.held = False

    def joined(self) -> None:
        self.paused = False
        log.info("%s: in the tier (%d shared connections copied)", self.name, self._copied)
        self.announce_due.set()

    def lost_primary(self) -> None:
        # A runtime command writes as election id + 1 for a moment: the switch keeps
        # forwarding and announcing; the session waits to be primary again.
        self.paused = True

    def left(self, error: SwitchError) -> None:
        self.leave(f"switch: {error}")

    def connection_event(self, sw: Switch, digest: str, data: Any) -> None:
        self.sharing.events(self.name, sw, digest, data)

    def collision(self, entry: Entry) -> None:
        for other in self.tier.all_members():  # pinned on every balancer
            other.pin(entry)

    def idle(self, entries: list[Entry]) -> None:
        self.sharing.idle(self.name, entries)

    def serve(self, sw: Switch) -> None:
        self.sharing.write(self.name, sw)

    def keep(self) -> bool:
        return not self.removed

    def ended(self) -> None:
        if self.removed:
            self.paused = False
            self.sharing.lost(self.name)
            self.announce_due.set()


class Members:
    """The balancers the config names, by name; a balancer added to the file joins within a
    round, one removed is marked so, withdrawn by the speakers' loop, then forgotten."""

    def __init__(self, make: Callable[[Balancer], Member], announce_due: threading.Event) -> None:
        self.make = make
        self.announce_due = announce_due
        self.lock = threading.Lock()
        self.by_name: dict[str, Member] = {}

    def all(self) -> list[Member]:
        with self.lock:
            return list(self.by_name.values())

    def update(self, cfg: Config) -> None:
        """A session for each balancer `cfg` names; those it no longer names are removed."""
        names = {b.name for b in cfg.tier}
        for m in self.all():
            if m.name not in names and not m.removed:
                m.removed = True
                self.announce_due.set()
        for b in cfg.tier:
            with self.lock:
                known = self.by_name.get(b.name)
                if known is not None and known.removed:
                    if known.thread is not None and known.thread.is_alive():
                        continue  # removed a moment ago and back: once its loop ended
                    known = None
                if known is None:
                    m = self.by_name[b.name] = self.make(b)
                else:
                    m = known
                    if m.balancer.drain != b.drain:
                        self.announce_due.set()  # a drain acts now, not at the next wake
                    m.balancer = b
            if m.thread is None:
                m.start()

    def forget(self, m: Member) -> None:
        """`m` was removed from the config, its loop ended and it announces nothing."""
        with self.lock:
            if self.by_name.get(m.name) is m:
                del self.by_name[m.name]
        log.info("%s: removed from the tier", m.name)
