"""`p4lb run` for a tier of balancers: one controller keeps every balancer of the config's
`[tier]` in the same intent, runs the health checks once for all of them, shares the
stateful VIPs' connections between them, and has each balancer's BGP speaker announce the
VIPs only while that balancer holds the tier's state.

One thread per balancer, each the single-switch loop's cycle: connect, take the switch,
reconcile (the same desired entries, the same single-flip update as the others), turn
digests on, catch up, announce; then serve its digests, and reconcile every few seconds or
at once when a backend's health changes. A balancer whose switch is gone (its P4Runtime
port refuses connections) is withdrawn at once; one whose session broke while its switch
still listens (busy or hung: load can cause it) stays announced for a hold time, then is
withdrawn only above a floor of announced balancers (p4lb.service.announce). Either way it
is forgotten as a holder of copies, and when it returns it gets the whole state again
before it announces. A balancer marked `drain = true` stays programmed and keeps serving
what reaches it, but announces nothing; one removed from the file is withdrawn and let go.

Shared connections (p4lb.pipeline.shared): a connection a stateful VIP (round robin, the
least-* algorithms) opened on one balancer is copied into every other balancer's
conn_table within a digest's round trip, so a balancer its packets reach after a change of
the router's next hops knows its backend. The hashing algorithms need no copies: the same
tables on every balancer give the same answer."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p4lb.intent.lock import ConfigLocked, config_lock
from p4lb.intent.model import Balancer, Config, ConfigError, member_config
from p4lb.pipeline.desired import desired_entries, maglev_tables
from p4lb.pipeline.digests import ConnDigests
from p4lb.pipeline.entries import Entry, Slot, Update
from p4lb.pipeline.ids import Ids, assign_ids, ids_on_switch
from p4lb.pipeline.p4info import Schema
from p4lb.pipeline.plan import plan
from p4lb.pipeline.shared import (
    CLOSED,
    CONN_EVENT_DIGEST,
    OPENED,
    ConnEvents,
    Shared,
    flow_of,
    pin,
)
from p4lb.service.announce import Policy, View, decide, floor
from p4lb.service.health.checker import HealthChecker
from p4lb.service.health.overlay import overlay, targets_of
from p4lb.service.health.probes import Probe, default_probe
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.operations import ApplyResult, connect
from p4lb.service.speaker import Speaker, SpeakerError
from p4lb.switch.client import Switch
from p4lb.switch.errors import NotPrimaryError, SwitchError

log = logging.getLogger("p4lb")

PIN_IDLE_TIMEOUT_NS = 120 * 1_000_000_000  # a collision pin: as the single switch's
HEALTH_JOIN_S = 10.0
REPORT_S = 10.0  # how often the copies' delays are logged


@dataclass
class Member:
    """One balancer as the controller sees it."""

    balancer: Balancer
    sw: Switch | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    announced: bool = False
    pins: list[Entry] = field(default_factory=list)  # collision pins still to write
    fresh: bool = True  # a new session: the switch may have lost its state (a restart)
    # Was ready, and a runtime command holds the primary role for a moment (election id
    # + 1): the switch still holds the tier's state and forwards; it stays announced.
    paused: bool = False
    thread: threading.Thread | None = None
    joined_at: float = 0.0  # when it last joined (monotonic)
    left_at: float = 0.0  # when it last stopped serving
    gone: bool = False  # its switch refused connections when it left: the process is gone
    withdrawn_silent: bool = False  # its last withdrawal was for silence (announce.py)
    held: bool = False  # kept announced past the hold by the floor (logged once)
    removed: bool = False  # no longer in the config: its loop ends, it is withdrawn

    @property
    def name(self) -> str:
        return self.balancer.name

    @property
    def speaker(self) -> Speaker | None:
        b = self.balancer
        return Speaker(b.speaker_netns, b.speaker_api, b.nexthop) if b.nexthop else None


class TierController:
    """Run with `run()`; `stop()` ends it from a signal handler or another thread."""

    # check_s: the periodic reconcile (a safety net: config and health changes reconcile
    # at once). Each reads and recomputes the whole intent; with three balancers on a
    # 2-core machine, every 2 s (the single switch's period) took CPU the copies need.
    def __init__(
        self,
        load_config: Callable[[], Config],
        config_path: str | None = None,
        poll_s: float = 0.02,
        check_s: float = 10.0,
        retry_s: float = 0.5,
        probe: Probe = default_probe,
        metrics: ControllerMetrics | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.load_config = load_config
        # Per balancer: reconcile time, write errors, digests, mastership.
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self.config_path = config_path
        self.poll_s = poll_s
        self.check_s = check_s
        self.retry_s = retry_s
        self._stop = threading.Event()
        self.lock = threading.Lock()  # members, shared, last_good
        self.reconcile_lock = threading.Lock()  # one balancer's reconcile at a time
        self.members: dict[str, Member] = {}
        self.shared = Shared()
        self.checker = HealthChecker([], self._health_changed, probe)
        self.health_round = 0  # bumped on each health change: members reconcile on it
        self._last_good: Config | None = None
        self.ids: Ids | None = None  # the tier's service and backend ids
        self.speaker_rounds = 0  # rounds the speakers' loop finished (tests wait on it)
        # The speakers are driven from a thread of their own (a `gobgp` call can take a
        # while on a loaded machine): the balancers' loops never wait for one, so their
        # digests are served and their copies written meanwhile.
        self._speakers_due = threading.Event()
        self.policy = policy if policy is not None else Policy()
        self._stamp: tuple[int, int, int] | None = None  # the config file's, when last read

    def stop(self, *_: object) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # --- the run ------------------------------------------------------------------------

    def run(self, duration_s: float | None = None) -> int:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        health_stop = threading.Event()
        checks = threading.Thread(
            target=self.checker.run, args=(health_stop, lambda changes: None), daemon=True
        )
        checks.start()
        speakers = threading.Thread(target=self._speakers, name="p4lb-speakers", daemon=True)
        speakers.start()
        next_report = time.monotonic() + REPORT_S
        seen: Config | None = None
        try:
            while not self.stopping and (deadline is None or time.monotonic() < deadline):
                cfg = self.config()
                if cfg is not None:
                    if cfg is not seen:
                        seen = cfg
                        self.checker.set_targets(targets_of(cfg))
                    self._members_of(cfg)
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + REPORT_S
                    self._report_delays()
                # A drain or a new balancer in the file is seen within this: the file is
                # parsed again only when it changed (config()).
                self._stop.wait(min(self.check_s, 0.1))
        finally:
            self._stop.set()
            for m in list(self.members.values()):
                if m.thread is not None:
                    m.thread.join(10)
            self._speakers_due.set()
            speakers.join(10)
            health_stop.set()
            checks.join(HEALTH_JOIN_S)
            self.checker.close()
        log.info("stopped")
        return 0

    def _report_delays(self) -> None:
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

    def config(self) -> Config | None:
        """The file's intent; while it is broken, the last valid one. The file is read again
        only when it changed (its inode, size or modification time: the writer replaces it
        by a rename, so every save is a new inode)."""
        stamp = None
        if self.config_path:
            try:
                st = os.stat(self.config_path)
                stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                stamp = None
        if stamp is not None and stamp == self._stamp and self._last_good is not None:
            return self._last_good
        self._stamp = stamp
        try:
            cfg = self.load_config()
        except ConfigError as e:
            log.warning("config: %s; the balancers keep what they have", e)
            return self._last_good
        if cfg != self._last_good and self._last_good is not None:
            self.health_round += 1  # the file changed: every balancer reconciles now
        self._last_good = cfg
        return cfg

    def _members_of(self, cfg: Config) -> None:
        """A thread for each balancer the config names (a balancer added to the file joins
        within a round); a balancer removed from the file is withdrawn and its loop ends."""
        names = {b.name for b in cfg.tier}
        for m in list(self.members.values()):
            if m.name not in names and not m.removed:
                m.removed = True
                self._speakers_due.set()
        for b in cfg.tier:
            with self.lock:
                known = self.members.get(b.name)
                if known is not None and known.removed:
                    if known.thread is not None and known.thread.is_alive():
                        continue  # removed a moment ago and back: once its loop ended
                    known = None
                if known is None:
                    m = self.members[b.name] = Member(b)
                else:
                    m = known
                    if m.balancer.drain != b.drain:
                        self._speakers_due.set()  # a drain acts now, not at the next wake
                    m.balancer = b
            if m.thread is None:
                m.thread = threading.Thread(
                    target=self._member_loop, args=(m,), name=f"p4lb-{b.name}", daemon=True
                )
                m.thread.start()

    # --- one balancer -------------------------------------------------------------------

    def _member_loop(self, m: Member) -> None:
        next_check = 0.0
        seen_health = -1
        while not self.stopping and not m.removed:
            try:
                if m.sw is None:
                    cfg = self._member_cfg(m)
                    if cfg is None:
                        self._stop.wait(self.retry_s)
                        continue
                    m.sw = connect(cfg)
                    m.fresh = True
                sw = m.sw
                if sw.is_primary and not m.ready.is_set():
                    self._join(m, sw)
                    next_check = time.monotonic() + self.check_s
                    seen_health = self.health_round
                elif not sw.is_primary and m.ready.is_set():
                    # A runtime command writes as election id + 1 for a moment: the switch
                    # keeps forwarding and announcing; this loop waits to be primary again.
                    m.paused = True
                    m.ready.clear()
                    self.metrics.primary.labels(m.name).set(0)
                self._handle_stream(m, sw)
                if not sw.alive:
                    raise SwitchError("stream to the switch closed")
                if m.ready.is_set():
                    self._write_shared(m, sw)
                    health = self.health_round
                    due = health != seen_health or time.monotonic() >= next_check
                    if due and self._reconcile(m, sw):
                        seen_health = health
                        next_check = time.monotonic() + self.check_s
            except NotPrimaryError as e:
                m.paused = m.paused or m.ready.is_set()
                m.ready.clear()
                self.metrics.primary.labels(m.name).set(0)
                log.info("%s: not primary (%s); waiting", m.name, e)
                self._stop.wait(self.retry_s)
            except SwitchError as e:
                self._leave(m, f"switch: {e}")
                if m.sw is not None:
                    with contextlib.suppress(Exception):
                        m.sw.close()
                m.sw = None
                self._stop.wait(self.retry_s)
        if m.sw is not None:
            m.sw.close()
            m.sw = None
        if m.removed:
            m.ready.clear()
            m.paused = False
            with self.lock:
                self.shared.lost(m.name)
            self._speakers_due.set()

    def _member_cfg(self, m: Member) -> Config | None:
        cfg = self._last_good or self.config()
        return None if cfg is None else member_config(cfg, m.balancer)

    def _join(self, m: Member, sw: Switch) -> None:
        """Take the switch into the tier: the intent, digests, every live shared connection
        (it may have restarted with none), then the announcement."""
        if not self._reconcile(m, sw):
            raise NotPrimaryError(
                "the config is busy (a runtime command, or another balancer joining); "
                "joining after it"
            )
        sw.enable_digest()
        if CONN_EVENT_DIGEST in sw.schema.digests:
            # Every new connection of a shared VIP is one event: lists of up to 64 within
            # 1 ms cut the messages (and acks) per connection at a millisecond's delay.
            sw.enable_digest(CONN_EVENT_DIGEST, max_list_size=64, max_timeout_ns=1_000_000)
        with self.lock:
            if m.fresh:
                self.shared.lost(m.name)
            self.shared.join(m.name, fresh=m.fresh)
            todo = self.shared.writes(m.name)
        self._insert_copies(m, sw, todo, timed=False)
        m.fresh = False
        m.joined_at = time.monotonic()
        m.gone = False
        m.held = False
        m.ready.set()
        m.paused = False
        self.metrics.primary.labels(m.name).set(1)
        log.info("%s: in the tier (%d shared connections copied)", m.name, len(todo))
        self._speakers_due.set()

    def _leave(self, m: Member, why: str) -> None:
        was_serving = m.ready.is_set() or m.paused
        if was_serving:
            m.left_at = time.monotonic()
        m.gone = switch_gone(m.balancer.address)
        if was_serving or m.announced:
            state = "its switch is gone" if m.gone else "its switch still listens"
            log.warning("%s: out of the tier: %s (%s)", m.name, why, state)
        m.ready.clear()
        m.paused = False
        self.metrics.primary.labels(m.name).set(0)
        with self.lock:
            self.shared.lost(m.name)
        self._speakers_due.set()

    def _prefixes(self, m: Member) -> list[str]:
        cfg = self._last_good
        vips = sorted({f"{v.address}/32" for v in cfg.vips}) if cfg else []
        return vips + list(cfg.tier_announce if cfg else ())

    def _views(self, members: list[Member], now: float) -> list[View]:
        out = []
        for m in members:
            serving = m.ready.is_set() or m.paused
            out.append(
                View(
                    m.name,
                    m.announced,
                    serving,
                    m.balancer.drain or m.removed,
                    m.gone and not serving,
                    silent_s=0.0 if serving or m.gone else now - m.left_at,
                    serving_s=now - m.joined_at if serving else 0.0,
                    withdrawn_silent=m.withdrawn_silent,
                )
            )
        return out

    def _speakers(self) -> None:
        """Announce for the balancers the decision keeps (p4lb.service.announce: those that
        hold the tier's state and are not drained, also while a runtime command holds their
        primary role; silent ones within the hold or needed by the floor), withdraw for the
        others; every check_s, have a speaker that lost its routes (it restarted) announce
        them again."""
        next_check = 0.0
        while not self.stopping:
            self._speakers_due.wait(0.2)
            self._speakers_due.clear()
            check = time.monotonic() >= next_check
            if check:
                next_check = time.monotonic() + self.check_s
            members = list(self.members.values())
            views = self._views(members, time.monotonic())
            chosen = decide(views, self.policy)
            least = floor(sum(1 for v in views if not v.drained))
            for m, v in zip(members, views, strict=True):
                if self.stopping:
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
                    with self.lock:
                        if self.members.get(m.name) is m:
                            del self.members[m.name]
                    log.info("%s: removed from the tier", m.name)
            self.speaker_rounds += 1

    def _announce(self, m: Member) -> None:
        sp = m.speaker
        if sp is None or m.announced:
            return
        try:
            sp.announce(self._prefixes(m))
            m.announced = True
            log.info("%s: announced %s via %s", m.name, ", ".join(self._prefixes(m)), sp.nexthop)
        except SpeakerError as e:
            log.warning("%s: %s", m.name, e)

    def _check_announced(self, m: Member) -> None:
        """A speaker that restarted announces nothing: announce again what it should."""
        sp = m.speaker
        if sp is None or not m.announced:
            return
        try:
            missing = set(self._prefixes(m)) - sp.announced()
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
            sp.withdraw(self._prefixes(m))
        except SpeakerError as e:  # the speaker may be dead: BFD withdraws for it
            log.warning("%s: withdraw: %s", m.name, e)
        m.announced = False

    def _reconcile(self, m: Member, sw: Switch) -> bool:
        """Apply the tier's intent (DOWN backends at weight 0) to this balancer under the
        file's lock; False when a runtime command holds it, or another balancer of this
        process is reconciling (this loop goes on serving digests and tries again soon)."""
        if not self.reconcile_lock.acquire(timeout=0.05):
            return False
        try:
            lock = (
                config_lock(self.config_path, wait_s=0)
                if self.config_path
                else contextlib.nullcontext()
            )
            with lock:
                cfg = self._last_good or self.config()
                if cfg is None:
                    return False
                states = {k: h.state for k, h in self.checker.health().items()}
                over = overlay(cfg, states)
                started = time.monotonic()
                try:
                    result = self._apply(m, sw, member_config(over.config, m.balancer))
                except NotPrimaryError:
                    raise
                except SwitchError:
                    self.metrics.write_errors.labels(m.name).inc()
                    raise
                self.metrics.reconcile_seconds.labels(m.name).observe(time.monotonic() - started)
        except ConfigLocked:
            return False
        finally:
            self.reconcile_lock.release()
        if result.writes or result.pipeline_pushed:
            log.info(
                "%s: pipeline %s, %d writes",
                m.name,
                "pushed" if result.pipeline_pushed else "kept",
                result.writes,
            )
        return True

    def _apply(self, m: Member, sw: Switch, cfg: Config) -> ApplyResult:
        """apply() with the tier's ids: every balancer gives a VIP and a backend the same
        id, so a connection copied from one names the right backend on another. The ids
        come from the first balancer reached (what it holds), then stay. So do the Maglev
        tables: each balancer's next table continues the tier's (`_tier_maglev`), so a
        restarted or new balancer gets the table the others hold, and any balancer sends a
        flow it has no state for where the others would."""
        pushed = sw.ensure_pipeline()
        current = sw.read_entries()
        with self.lock:
            base = self.ids if self.ids is not None else ids_on_switch(current)
            self.ids = assign_ids(cfg, base)
            ids = self.ids
        codes = sw.schema.algorithms()
        maglev = self._tier_maglev(m, codes.get("maglev"))
        _, desired = desired_entries(cfg, current, codes, ids, maglev)
        batches = plan(desired, current)
        sw.write_plan(batches)
        return ApplyResult(pushed, batches)

    def _tier_maglev(self, m: Member, code: int | None) -> dict[int, list[Slot]] | None:
        """The tier's Maglev tables for `m` to continue: those of the first balancer in the
        config's order that holds the tier's state, read now (so a runtime command's change
        is in them); None when that is `m` itself (its own tables are the tier's). A
        balancer joining (a new session: its switch may have restarted empty) never is."""
        for other in list(self.members.values()):
            if other is m:
                if not m.fresh:
                    return None
                continue
            sw = other.sw
            if not other.ready.is_set() or sw is None:
                continue
            try:
                return maglev_tables(sw.read_entries(("vip_table", "wrr_table")), code)
            except Exception as e:  # noqa: BLE001 - another balancer's trouble is not m's
                log.info("%s: Maglev tables not read from %s (%s)", m.name, other.name, e)
        return None

    def _health_changed(self, *_: object) -> None:
        self.health_round += 1

    # --- digests and copies -------------------------------------------------------------

    def _handle_stream(self, m: Member, sw: Switch) -> None:
        rep = sw.next_stream_message("digest", timeout=self.poll_s)
        while rep is not None:
            msg = rep.digest
            name = digest_name(sw, msg.digest_id)
            self.metrics.digests.labels(
                m.name, "conn_event" if name == CONN_EVENT_DIGEST else "collision"
            ).inc(len(msg.data))
            if name == CONN_EVENT_DIGEST:
                events = conn_events(sw)
                now = time.monotonic()
                with self.lock:
                    for member in msg.data:
                        ev = events.event(member)
                        if ev.event == OPENED:
                            self.shared.opened(m.name, ev.flow, ev.backend_id, now)
                        elif ev.event == CLOSED:
                            self.shared.closed(ev.flow, now, ev.backend_id)
            else:  # a collision: pin the flow on every balancer
                digests = ConnDigests.of(sw.schema)
                with self.lock:
                    for member in msg.data:
                        entry = digests.entry(digests.values(member))
                        for other in self.members.values():
                            other.pins.append(entry)
            sw.ack_digest(msg.digest_id, msg.list_id)
            rep = sw.next_stream_message("digest", timeout=0)
        rep = sw.next_stream_message("idle_timeout_notification", timeout=0)
        if rep is not None:
            gone = [sw.decode(te) for te in rep.idle_timeout_notification.table_entry]
            with self.lock:
                for e in gone:
                    if not pin(e):
                        self.shared.idle(m.name, flow_of(e))
            with contextlib.suppress(SwitchError):
                sw.write([Update("DELETE", e) for e in gone])

    def _write_shared(self, m: Member, sw: Switch) -> None:
        with self.lock:
            self.shared.expire(time.monotonic())
            todo = self.shared.writes(m.name)
            drop = self.shared.deletes(m.name)
            pins, m.pins = m.pins, []
        if pins:
            try:
                sw.write([Update("INSERT", e) for e in pins], idle_timeout_ns=PIN_IDLE_TIMEOUT_NS)
            except NotPrimaryError:
                raise
            except SwitchError as e:
                self.metrics.write_errors.labels(m.name).inc()
                log.warning("%s: collision pins not written: %s", m.name, e)
        self._insert_copies(m, sw, todo)
        # Removing copies can wait; writing them cannot (it is the window in which a
        # connection can break): under load, copies first.
        if drop and not todo:
            events = conn_events(sw)
            try:
                sw.write([Update("DELETE", events.copy(f, 0)) for f in drop])
            except NotPrimaryError:
                raise
            except SwitchError as e:  # some were gone already (idle): forget them all
                log.debug("%s: copies not removed: %s", m.name, e)
            with self.lock:
                self.shared.removed(m.name, drop)

    def _insert_copies(
        self,
        m: Member,
        sw: Switch,
        todo: list[tuple[tuple[tuple[str, int], ...], int]],
        timed: bool = True,
    ) -> None:
        if not todo:
            return
        events = conn_events(sw)
        ttl = int(self._last_good.tier_state_ttl_s * 1e9) if self._last_good else 0
        for k in range(0, len(todo), 500):
            chunk = todo[k : k + 500]
            try:
                sw.write(
                    [Update("INSERT", events.copy(f, b)) for f, b in chunk], idle_timeout_ns=ttl
                )
            except NotPrimaryError:
                raise
            except SwitchError as e:  # one exists already: write them one by one
                log.debug("%s: copies batch refused (%s); one by one", m.name, e)
                failed = []
                for f, b in chunk:
                    try:
                        sw.write([Update("INSERT", events.copy(f, b))], idle_timeout_ns=ttl)
                    except NotPrimaryError:
                        raise
                    except SwitchError as one:
                        if "exist" not in str(one).lower() or not self._overwrite(sw, f, b, ttl):
                            failed.append((f, b))
                if failed:
                    self.metrics.write_errors.labels(m.name).inc(len(failed))
                    log.warning("%s: %d copies not written; again next round", m.name, len(failed))
                    with self.lock:
                        self.shared.retry(m.name, failed)
                chunk = [c for c in chunk if c not in failed]
            with self.lock:
                self.shared.written(m.name, [f for f, _ in chunk], time.monotonic(), timed)

    @staticmethod
    def _overwrite(sw: Switch, flow: tuple[tuple[str, int], ...], bid: int, ttl: int) -> bool:
        """A copy there already (a reused 5-tuple's, or one written before): it gets this
        connection's backend. False if the switch refused that too."""
        try:
            sw.write([Update("MODIFY", conn_events(sw).copy(flow, bid))], idle_timeout_ns=ttl)
        except NotPrimaryError:
            raise
        except SwitchError:
            return False
        return True


@functools.lru_cache(maxsize=16)
def _conn_events(schema: Schema) -> ConnEvents:
    return ConnEvents.of(schema)


def conn_events(sw: Switch) -> ConnEvents:
    """The switch's conn_event_t layout (read from its P4Info once)."""
    return _conn_events(sw.schema)


def digest_name(sw: Switch, digest_id: int) -> str:
    return next((n for n, d in sw.schema.digests.items() if d.preamble.id == digest_id), "")


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


def run_tier(load_config: Callable[[], Config], config_path: str | None) -> int:
    return TierController(load_config, config_path).run()
