"""One switch held over time: the cycle `p4lb run` runs for its switch and the tier runs for
each balancer. Connect as the config's election id; once the switch says this session is
primary, reconcile (operations.apply under the config lock), turn digests on and join; then
serve the stream (digests, idle timeouts) and reconcile every `check_s`, or at once when the
owner's `changes()` moves (a health change, a new config); when the session breaks, reconnect
after `retry_s`, the pause doubling (up to RETRY_MAX_S) while the switch cannot be reached.

What differs between the single controller and a tier's balancer is a subclass's: the
hooks below (what the switch should hold, what joining and leaving mean, where a
connection event goes). Collision pins and idle entries are the session's own.

The session keeps its election id and its connection while another controller is primary
(a runtime command, as the id + 1, for a moment): it leaves the ready state, keeps reading
the stream, and joins again when the arbitration update makes it primary. A standby
(`p4lb run --standby`, `standby = True`) is that same wait on purpose: it connects as the
highest free id below the config's (`standby_ids`), writes nothing while backup, and takes
over when the switch's arbitration update makes it primary (the primary's stream ended);
a primary that returns with the config's id pre-empts it, and it waits again."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from p4lb.intent.lock import ConfigLocked, config_lock
from p4lb.intent.model import Config
from p4lb.pipeline.digests import COLLISION_DIGESTS, ConnDigests, DigestError
from p4lb.pipeline.entries import Entry, Slot, Update
from p4lb.pipeline.ids import Ids
from p4lb.pipeline.p4info import P4InfoError
from p4lb.pipeline.shared import CONN_EVENT_DIGESTS, pin
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.operations import ApplyResult, apply, connect
from p4lb.switch.client import Switch
from p4lb.switch.errors import NotPrimaryError, SwitchError

log = logging.getLogger("p4lb")

PIN_IDLE_TIMEOUT_NS = 120 * 1_000_000_000  # a collision pin goes after 2 min unused
RETRY_MAX_S = 2.0  # the longest pause between two attempts to reach a switch
# A backup gets no digests to wake it: it looks at the arbitration updates this often, so a
# takeover waits for this, not for a digest round (poll_s).
BACKUP_POLL_S = 0.01
# A standby tries the ids below the config's, highest first, this many of them (another
# standby may hold one): enough for a few standbys, bounded so a refusal ends in one line.
STANDBY_TRIES = 4


def standby_ids(election_id: int, tries: int = STANDBY_TRIES) -> list[int]:
    """The election ids a standby tries, highest first: election_id - 1, - 2, ... (at most
    `tries`, never below 1: P4Runtime reads 0 as no id). Empty when election_id is 1."""
    return list(range(election_id - 1, max(0, election_id - 1 - tries), -1))


@dataclass(frozen=True)
class Intent:
    """What the switch should hold now: the config (health already applied) and, for a
    tier's balancer, the tier's ids and Maglev tables (operations.apply's parameters)."""

    config: Config
    ids: Ids | None = None
    maglev: dict[int, list[Slot]] | None = None


def digest_name(sw: Switch, digest_id: int) -> str:
    return next((n for n, d in sw.schema.digests.items() if d.preamble.id == digest_id), "")


class Session:
    """One switch held until `stop` is set (`hold()`); subclasses fill in the hooks."""

    def __init__(
        self,
        name: str,
        stop: threading.Event,
        metrics: ControllerMetrics,
        config_path: str | None,
        poll_s: float,
        check_s: float,
        retry_s: float,
    ) -> None:
        self.name = name  # the switch's label in the metrics
        self._stop = stop
        self.metrics = metrics
        self.metrics.primary.labels(name).set(0)
        self.config_path = config_path
        self.poll_s = poll_s
        self.check_s = check_s
        self.retry_s = retry_s
        self.sw: Switch | None = None
        self.election_id: int | None = None  # the id this session holds the switch as
        self.standby = False  # start as a backup below the config's id (p4lb run --standby)
        self._tried = 0  # a standby: how many of its ids the switch refused in a row
        self._standby_ids: list[int] = []
        self._kept: int | None = None  # a standby: the id a switch last accepted
        # Set while the session holds the switch, in its intent, with digests on.
        self.ready = threading.Event()
        self.fresh = True  # a new connection: the switch may have lost its state (a restart)
        self._pins_lock = threading.Lock()
        self.pending: list[Entry] = []  # collision pins to write
        self._pinned: set[tuple[Any, ...]] = set()  # written on this connection
        self.pending_deletes: list[Update] = []  # idle entries to remove

    # --- hooks --------------------------------------------------------------------------

    def connect_config(self) -> Config | None:
        """The config to connect with (address, device and election id); None: not yet."""
        raise NotImplementedError

    def intent(self, sw: Switch) -> Intent | None:
        """What the switch should hold, under the config lock; None: nothing valid yet."""
        raise NotImplementedError

    def applied(self, intent: Intent, result: ApplyResult) -> None:
        """After a reconcile wrote `intent`."""

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[bool]:
        """Around each reconcile: yields False when it must not run now (try again soon)."""
        yield True

    def changes(self) -> int:
        """A count that moves when the switch should be reconciled at once."""
        return 0

    def joining(self, sw: Switch) -> None:
        """Reconciled, digests on, not yet ready: bring anything else in."""

    def joined(self) -> None:
        """Ready: the switch holds the intent."""

    def lost_primary(self) -> None:
        """Was ready; another controller is primary now (the session waits, connected)."""

    def left(self, error: SwitchError) -> None:
        """The session broke (called while `ready` still says whether it served)."""

    def connection_event(self, sw: Switch, digest: str, data: Any) -> None:
        """The members of a connection event digest `digest` (a tier's shared connections)."""

    def collision(self, entry: Entry) -> None:
        """A flow the data plane could not keep state for: pin it (a tier: everywhere)."""
        self.pin(entry)

    def idle(self, entries: list[Entry]) -> None:
        """conn_table entries the switch reports idle (they are removed after this)."""

    def serve(self, sw: Switch) -> None:
        """Each round while ready, after the pins are written."""

    def waiting(self) -> None:
        """Each round while connected but not ready (a backup): write nothing."""

    def keep(self) -> bool:
        """False ends `hold()`."""
        return True

    def ended(self) -> None:
        """`hold()` is over: the session is closed."""

    # --- the cycle ----------------------------------------------------------------------

    def pin(self, entry: Entry) -> None:
        """Have this switch hold `entry` (a collision pin) from the next round."""
        with self._pins_lock:
            if entry.key not in self._pinned:
                self._pinned.add(entry.key)
                self.pending.append(entry)

    def hold(self, deadline: float | None = None) -> None:
        """Hold the switch until stopped, `keep()` turns False or `deadline` (monotonic)."""
        pause = self.retry_s
        next_check = 0.0
        seen = -1
        while (
            not self._stop.is_set()
            and self.keep()
            and (deadline is None or time.monotonic() < deadline)
        ):
            try:
                if self.sw is None:
                    cfg = self.connect_config()
                    if cfg is None:
                        self._stop.wait(self.retry_s)
                        continue
                    self.election_id = self._election_id(cfg)
                    if self.election_id is None:
                        self._stop.wait(pause)
                        pause = min(pause * 2, max(self.retry_s, RETRY_MAX_S))
                        continue
                    switch = dataclasses.replace(cfg.switch, election_id=self.election_id)
                    self.sw = connect(dataclasses.replace(cfg, switch=switch))
                    self._tried = 0
                    self._kept = self.election_id
                    if self.standby and not self.sw.is_primary:
                        log.info(
                            "%s: standby on %s as election id %d; backup until the primary's "
                            "session ends",
                            self.name,
                            self.sw.address,
                            self.election_id,
                        )
                    self.fresh = True
                    pause = self.retry_s  # it answers: the next failure is a new one
                    with self._pins_lock:
                        self._pinned.clear()
                sw = self.sw
                if sw.is_primary and not self.ready.is_set():
                    changes = self.changes()
                    if self._join(sw):
                        seen = changes
                        next_check = time.monotonic() + self.check_s
                elif not sw.is_primary and self.ready.is_set():
                    self._unready()
                    self.lost_primary()
                self._serve_stream(sw, self.poll_s if self.ready.is_set() else BACKUP_POLL_S)
                if not sw.alive:
                    raise SwitchError("stream to the switch closed")
                if not self.ready.is_set():
                    self.waiting()
                if self.ready.is_set():
                    self._write_pins(sw)
                    self.serve(sw)
                    self._write_deletes(sw)
                    changes = self.changes()
                    if changes != seen or time.monotonic() >= next_check:
                        what = "reconciled" if changes == seen else "health"
                        if self.reconcile(sw, what):
                            seen = changes
                            next_check = time.monotonic() + self.check_s
            except NotPrimaryError as e:
                if self.ready.is_set():
                    self._unready()
                    self.lost_primary()
                if self.sw is None and self._tried + 1 < len(self._standby_ids):
                    self._tried += 1  # that id is another standby's: the next one down
                elif self.sw is None:  # refused a session (our election id is in use)
                    self._tried = 0
                    log.warning("%s: %s; retrying", self.name, e)
                    self._stop.wait(pause)
                    pause = min(pause * 2, max(self.retry_s, RETRY_MAX_S))
                # else mastership moved mid-write: the next rounds wait for it to return
            except SwitchError as e:
                self.left(e)
                self._unready()
                if self.sw is not None:
                    with contextlib.suppress(Exception):  # the session is gone anyway
                        self.sw.close()
                self.sw = None
                self._stop.wait(pause)
                pause = min(pause * 2, max(self.retry_s, RETRY_MAX_S))
        if self.sw is not None:
            self.sw.close()
            self.sw = None
        self._unready()
        self.ended()

    def _election_id(self, cfg: Config) -> int | None:
        """The id to connect as: the config's, or a standby's next one below it (None, and
        one line, when the config's leaves none). A standby that reconnects (its switch
        restarted) asks for the id it held first: a higher one free on the restarted switch
        would make it primary there while another controller is primary on the others, and
        neither could then copy the other's connections."""
        if not self.standby:
            return cfg.switch.election_id
        ids = self._standby_ids = standby_ids(cfg.switch.election_id)
        if not ids:
            log.error(
                "%s: a standby needs an election id below [switch] election_id = %d; "
                "raise it to 2 or more",
                self.name,
                cfg.switch.election_id,
            )
            return None
        first = ids.index(self._kept) if self._kept in ids else 0
        return ids[(first + self._tried) % len(ids)]

    def _unready(self) -> None:
        self.ready.clear()
        self.metrics.primary.labels(self.name).set(0)

    def _join(self, sw: Switch) -> bool:
        """Reconcile, digests on, the subclass's joining, ready; False when the reconcile
        could not run now (a runtime command holds the config): again next round."""
        if not self.reconcile(sw, "took the switch"):
            return False
        for digest in COLLISION_DIGESTS:
            if digest in sw.schema.digests:
                sw.enable_digest(digest)
        self.joining(sw)
        self.fresh = False
        self.ready.set()
        self.metrics.primary.labels(self.name).set(1)
        self.joined()
        return True

    def reconcile(self, sw: Switch, what: str) -> bool:
        """Apply the intent under the config lock; False when a runtime command holds the
        lock (it is changing the file and the switch right now) or `exclusive` refused."""
        with self.exclusive() as mine:
            if not mine:
                return False
            lock = (
                config_lock(self.config_path, wait_s=0)
                if self.config_path
                else contextlib.nullcontext()
            )
            try:
                with lock:
                    intent = self.intent(sw)
                    if intent is None:
                        return False
                    started = time.monotonic()
                    try:
                        result = apply(sw, intent.config, ids=intent.ids, maglev=intent.maglev)
                    except NotPrimaryError:
                        raise
                    except SwitchError:
                        self.metrics.write_errors.labels(self.name).inc()
                        raise
                    self.metrics.reconcile_seconds.labels(self.name).observe(
                        time.monotonic() - started
                    )
            except ConfigLocked:
                return False
        self.applied(intent, result)
        if result.writes or result.pipeline_pushed:
            log.info(
                "%s: pipeline %s, %d writes",
                self.log_as(what),
                "pushed" if result.pipeline_pushed else "kept",
                result.writes,
            )
        return True

    def log_as(self, what: str) -> str:
        """The name a reconcile's log line starts with."""
        return what

    def _serve_stream(self, sw: Switch, wait_s: float) -> None:
        """Every digest waiting (the first waited for up to `wait_s`), then idle timeouts."""
        rep = sw.next_stream_message("digest", timeout=wait_s)
        while rep is not None:
            msg = rep.digest
            name = digest_name(sw, msg.digest_id)
            self.metrics.digests.labels(
                self.name, "conn_event" if name in CONN_EVENT_DIGESTS else "collision"
            ).inc(len(msg.data))
            if name in COLLISION_DIGESTS:
                self._collisions(sw, name, msg.data)
            elif name in CONN_EVENT_DIGESTS:
                self.connection_event(sw, name, msg.data)
            else:
                log.warning(
                    "%s: digest id %d is none the controller knows: ignored",
                    self.name,
                    msg.digest_id,
                )
            sw.ack_digest(msg.digest_id, msg.list_id)
            rep = sw.next_stream_message("digest", timeout=0)
        rep = sw.next_stream_message("idle_timeout_notification", timeout=0)
        if rep is not None:
            gone = [sw.decode(te) for te in rep.idle_timeout_notification.table_entry]
            with self._pins_lock:
                for e in gone:
                    if pin(e):
                        self._pinned.discard(e.key)
                        log.info("conn entry idle, removing %s", dict(e.match))
                self.pending_deletes.extend(Update("DELETE", e) for e in gone)
            self.idle(gone)

    def _collisions(self, sw: Switch, name: str, data: Any) -> None:
        """Pin each flow a collision digest names. A member (or a program's layout) the
        controller cannot read is logged and skipped: one bad sample never stops the
        session or the samples beside it."""
        try:
            digests = ConnDigests.of(sw.schema, name)
        except P4InfoError as err:
            log.warning("%s: %s ignored: %s", self.name, name, err)
            return
        for member in data:
            try:
                entry = digests.entry(digests.values(member))
            except DigestError as err:
                log.warning("%s: %s member ignored: %s", self.name, name, err)
                continue
            log.info("collision flow %s: installing conn entry", dict(entry.match))
            self.collision(entry)

    def _write_pins(self, sw: Switch) -> None:
        with self._pins_lock:
            batch, self.pending = self.pending, []
        if not batch:
            return
        try:
            sw.write([Update("INSERT", e) for e in batch], idle_timeout_ns=PIN_IDLE_TIMEOUT_NS)
        except NotPrimaryError:
            with self._pins_lock:
                self.pending = batch + self.pending
            raise
        except SwitchError as e:
            self.metrics.write_errors.labels(self.name).inc()
            log.warning("%s: conn entries not installed: %s", self.name, e)

    def _write_deletes(self, sw: Switch) -> None:
        with self._pins_lock:
            batch, self.pending_deletes = self.pending_deletes, []
        if not batch:
            return
        try:
            sw.write(batch)
        except NotPrimaryError:
            with self._pins_lock:
                self.pending_deletes = batch + self.pending_deletes
            raise
        except SwitchError as e:  # e.g. already gone: nothing left to remove
            log.debug("%s: idle conn entries not removed: %s", self.name, e)
