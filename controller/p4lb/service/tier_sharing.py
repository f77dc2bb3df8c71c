"""The tier's shared connections, from digests to copies: a connection a stateful VIP opened
on one balancer (a connection event digest) is copied into every other balancer's conn_table
(conn6_table for IPv6),
its close removes the copies after a grace, and a balancer that joins gets every live one
(p4lb.pipeline.shared holds the bookkeeping; this writes it to the switches)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from p4lb.pipeline.digests import DigestError
from p4lb.pipeline.entries import Entry, Update
from p4lb.pipeline.p4info import Schema
from p4lb.pipeline.shared import (
    CLOSED,
    CONN_EVENT_DIGESTS,
    OPENED,
    SHARED_ACTIONS,
    Backend,
    ConnEvents,
    FlowKey,
    Shared,
    flow_of,
    pin,
)
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.switch.client import Switch
from p4lb.switch.errors import NotPrimaryError, SwitchError

log = logging.getLogger("p4lb")

COPIES_PER_WRITE = 500


@functools.lru_cache(maxsize=16)
def _conn_events(schema: Schema) -> ConnEvents:
    return ConnEvents.of(schema)


def conn_events(sw: Switch) -> ConnEvents:
    """The switch's connection event layout (read from its P4Info once)."""
    return _conn_events(sw.schema)


class Sharing:
    """The shared connections of one tier and the writes that copy them; thread-safe (each
    balancer's session calls it from its own thread)."""

    def __init__(self, metrics: ControllerMetrics, ttl_ns: Callable[[], int]) -> None:
        self.metrics = metrics
        self.ttl_ns = ttl_ns  # how long a copy may go unused (the config's tier_state_ttl_s)
        self.lock = threading.Lock()
        self.shared = Shared()

    def events(self, name: str, sw: Switch, digest: str, data: Any) -> None:
        """The members of a connection event digest (`digest`, one of CONN_EVENT_DIGESTS)
        from balancer `name`: connections opened, closed."""
        events = conn_events(sw)
        now = time.monotonic()
        with self.lock:
            for member in data:
                try:
                    ev = events.event(member, digest)
                except DigestError as err:
                    log.warning("%s: connection event ignored: %s", name, err)
                    continue
                if ev.event == OPENED:
                    self.shared.opened(name, ev.flow, ev.backend, now)
                elif ev.event == CLOSED:
                    self.shared.closed(ev.flow, now, ev.backend)

    def idle(self, name: str, entries: list[Entry]) -> None:
        """conn_table and conn6_table entries `name`'s switch reports idle: copies it no
        longer holds."""
        with self.lock:
            for e in entries:
                if not pin(e):
                    self.shared.idle(name, flow_of(e))

    def join(self, name: str, sw: Switch, fresh: bool) -> int:
        """`name` holds the tier's intent: write it every live connection (all of them when
        `fresh`: its switch may have restarted empty); how many were written."""
        # Every new connection of a shared VIP is one event: lists of up to 64 within 1 ms
        # cut the messages (and acks) per connection at a millisecond's delay.
        for digest in CONN_EVENT_DIGESTS:
            if digest in sw.schema.digests:
                sw.enable_digest(digest, max_list_size=64, max_timeout_ns=1_000_000)
        with self.lock:
            if fresh:
                self.shared.lost(name)
            self.shared.join(name, fresh=fresh)
            todo = self.shared.writes(name)
        self._insert_copies(name, sw, todo, timed=False)
        return len(todo)

    def adopt(self, name: str, sw: Switch) -> int:
        """A new session on `name`'s switch, which kept its state: the copies it holds are
        live connections (the digests that announced them may have gone to another
        controller); each is to be copied to the balancers that lack it. How many it holds."""
        held = _copies(sw)
        with self.lock:
            self.shared.adopt(name, held, time.monotonic())
        return len(held)

    def learn(self, sw: Switch) -> int:
        """The copies another balancer's switch holds (read as its primary or as a backup:
        P4Runtime lets any controller read), to be written where they are lacking, without
        taking that balancer as one of ours. How many it holds."""
        held = _copies(sw)
        with self.lock:
            self.shared.learn(held, time.monotonic())
        return len(held)

    def lost(self, name: str) -> None:
        """`name` no longer holds copies (its session broke, or it left the tier)."""
        with self.lock:
            self.shared.lost(name)

    def write(self, name: str, sw: Switch) -> None:
        """The copies `name` should get and those it should drop, now."""
        with self.lock:
            self.shared.expire(time.monotonic())
            todo = self.shared.writes(name)
            drop = self.shared.deletes(name)
        self._insert_copies(name, sw, todo)
        # Removing copies can wait; writing them cannot (it is the window in which a
        # connection can break): under load, copies first.
        if drop and not todo:
            events = conn_events(sw)
            try:
                sw.write([Update("DELETE", events.copy(f, None)) for f in drop])
            except NotPrimaryError:
                raise
            except SwitchError as e:  # some were gone already (idle): forget them all
                log.debug("%s: copies not removed: %s", name, e)
            with self.lock:
                self.shared.removed(name, drop)

    def report_delays(self) -> None:
        """How long shared connections' copies took, since the last report (log)."""
        with self.lock:
            d, self.shared.delays = sorted(self.shared.delays), []
            live = len(self.shared.conns)
        if d:
            log.info(
                "shared connections: %d copies written, event to copy median %.1f ms, "
                "p99 %.1f ms, max %.1f ms; %d live",
                len(d),
                1000 * d[len(d) // 2],
                1000 * d[min(len(d) - 1, int(len(d) * 0.99))],
                1000 * d[-1],
                live,
            )

    def _insert_copies(
        self, name: str, sw: Switch, todo: list[tuple[FlowKey, Backend]], timed: bool = True
    ) -> None:
        if not todo:
            return
        events = conn_events(sw)
        ttl = self.ttl_ns()
        for k in range(0, len(todo), COPIES_PER_WRITE):
            chunk = todo[k : k + COPIES_PER_WRITE]
            try:
                sw.write(
                    [Update("INSERT", events.copy(f, b)) for f, b in chunk], idle_timeout_ns=ttl
                )
            except NotPrimaryError:
                raise
            except SwitchError as e:  # one exists already: write them one by one
                log.debug("%s: copies batch refused (%s); one by one", name, e)
                failed = []
                for f, b in chunk:
                    try:
                        sw.write([Update("INSERT", events.copy(f, b))], idle_timeout_ns=ttl)
                    except NotPrimaryError:
                        raise
                    except SwitchError as one:
                        if "exist" not in str(one).lower() or not _overwrite(sw, f, b, ttl):
                            failed.append((f, b))
                if failed:
                    self.metrics.write_errors.labels(name).inc(len(failed))
                    log.warning("%s: %d copies not written; again next round", name, len(failed))
                    with self.lock:
                        self.shared.retry(name, failed)
                chunk = [c for c in chunk if c not in failed]
            with self.lock:
                self.shared.written(name, [f for f, _ in chunk], time.monotonic(), timed)


def _copies(sw: Switch) -> list[tuple[FlowKey, Backend]]:
    """The shared connections' copies a switch holds (both families): (flow, the copy's
    parameters) each."""
    tables = tuple(conn_events(sw).copies)
    return [
        (flow_of(e), tuple(value for _, value in e.params))
        for e in sw.read_entries(tables)
        if e.action in SHARED_ACTIONS
    ]


def _overwrite(sw: Switch, flow: FlowKey, bid: Backend, ttl: int) -> bool:
    """A copy there already (a reused 5-tuple's, or one written before): it gets this
    connection's backend. False if the switch refused that too."""
    try:
        sw.write([Update("MODIFY", conn_events(sw).copy(flow, bid))], idle_timeout_ns=ttl)
    except NotPrimaryError:
        raise
    except SwitchError:
        return False
    return True
