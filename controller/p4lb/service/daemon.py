"""`p4lb run`: the long-running controller.

It holds the switch as the config's election id, keeps it in the config's intent (a
reconcile every few seconds, and at once after the switch restarts or mastership comes
back), installs conn_table entries for colliding flows from digests and removes them when
the switch reports them idle.

With a runtime command at the same time: the command takes the config lock and becomes
primary with the election id + 1; this loop then is a backup. It skips its reconciles
while the lock is held (so it never applies a config older than the command's), keeps
digest entries it could not write and writes them once it is primary again, and reconciles
as soon as mastership returns to it — by then the command has written the file.

Health checks (VIPs with a `[vip.NAME.health]` table) run in a thread of their own. A
state change makes the loop reconcile at once, with every DOWN backend at weight 0 (the
config file keeps the configured weights; p4lb.service.health.overlay); open connections
stay on it, pinned by the data plane's connection state. The states go to `lb.toml.health.json`
for `p4lb stats` and for runtime commands, which program the same weights."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from p4lb.intent.lock import ConfigLocked, config_lock
from p4lb.intent.model import Config, ConfigError
from p4lb.pipeline.digests import ConnDigests
from p4lb.pipeline.entries import Update
from p4lb.service.health import state_file
from p4lb.service.health.checker import HealthChecker
from p4lb.service.health.overlay import overlay, targets_of
from p4lb.service.health.probes import Probe, default_probe
from p4lb.service.health.state import Key, State, Target
from p4lb.service.health.state_file import Programmed
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.operations import ApplyResult, apply, connect
from p4lb.switch.client import Switch
from p4lb.switch.errors import NotPrimaryError, SwitchError

log = logging.getLogger("p4lb")

CONN_IDLE_TIMEOUT_NS = 120 * 1_000_000_000
HEALTH_JOIN_S = 10.0  # longer than any probe (timeout_s + the subprocess grace)
SWITCH_LABEL = "switch"  # the one switch's name in the metrics (a tier's are its balancers')


class Controller:
    """Run with `run()`; `stop()` ends it from a signal handler or another thread."""

    def __init__(
        self,
        load_config: Callable[[], Config],
        poll_s: float = 0.2,
        check_s: float = 2.0,
        config_path: str | None = None,
        retry_s: float = 1.0,
        probe: Probe = default_probe,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.load_config = load_config
        # Reconcile time, write errors, digests, mastership (served when [metrics] is set).
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self.metrics.primary.labels(SWITCH_LABEL).set(0)
        self.config_path = config_path
        self.poll_s = poll_s
        self.check_s = check_s
        self.retry_s = retry_s
        self._stop = threading.Event()
        self.installed: set[tuple[Any, ...]] = set()
        # conn entries to insert / idle ones to delete, not yet written (we were a backup)
        self.pending: list[Update] = []
        self.pending_deletes: list[Update] = []
        self.config_problem = ""  # the last config error seen, "" when the file is valid
        self.changed = threading.Condition()  # notified when config_problem changes
        # Set while a session holds the switch, in its intent, with digests enabled.
        self.ready = threading.Event()
        # Health: the checker (its own thread), set when a state changed and the switch
        # should follow; the weights last programmed for checked backends.
        self.checker = HealthChecker([], self._health_changed, probe)
        self.health_dirty = threading.Event()
        self.programmed: dict[Key, Programmed] = {}
        self._since: dict[Key, float] = {}  # wall time of each backend's last change
        self._fail_open: tuple[str, ...] = ()
        self._last_good: Config | None = None
        self._publish_lock = threading.Lock()
        self._published = False

    def stop(self, *_: object) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, duration_s: float | None = None) -> int:
        if threading.current_thread() is threading.main_thread():  # else: stop() ends it
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        with contextlib.suppress(ConfigError):  # a broken file is reported by the loop
            self.checker.set_targets(targets_of(self.load_config()))
        health_stop = threading.Event()
        checks = threading.Thread(
            target=self.checker.run,
            args=(health_stop, lambda changes: self._publish_health()),
            name="p4lb-health",
            daemon=True,
        )
        checks.start()
        try:
            return self._loop(deadline)
        finally:
            health_stop.set()
            checks.join(HEALTH_JOIN_S)
            self.checker.close()
            self._publish_health(final=True)

    def _loop(self, deadline: float | None) -> int:
        sw: Switch | None = None
        next_check = 0.0
        while not self.stopping and (deadline is None or time.monotonic() < deadline):
            try:
                if sw is None:
                    sw = connect(self.load_config())
                    self.installed.clear()
                if sw.is_primary and not self.ready.is_set():
                    if self._reconcile(sw, "took the switch"):
                        sw.enable_digest()
                        self.ready.set()
                        self.metrics.primary.labels(SWITCH_LABEL).set(1)
                        log.info("primary on %s, digests on", sw.address)
                    next_check = time.monotonic() + self.check_s
                elif not sw.is_primary and self.ready.is_set():
                    self._not_ready()
                    log.info("another controller is primary on %s; waiting", sw.address)
                self._handle_stream(sw)
                if not sw.alive:
                    raise SwitchError("stream to the switch closed")
                health_changed = self.health_dirty.is_set()
                if self.ready.is_set() and (health_changed or time.monotonic() >= next_check):
                    self.health_dirty.clear()
                    next_check = time.monotonic() + self.check_s
                    done = self._reconcile(sw, "health" if health_changed else "reconciled")
                    if health_changed and not done:  # a command holds the lock: again soon
                        self.health_dirty.set()
            except NotPrimaryError as e:
                self._not_ready()
                if sw is None:  # refused a session (our election id is in use): retry later
                    log.warning("switch: %s; retrying", e)
                    self._stop.wait(self.retry_s)
                # else mastership moved mid-write; the next round sees it
            except ConfigError as e:  # the file broke while we run: keep what the switch has
                self._config_problem(str(e))
                self._stop.wait(self.retry_s)
            except SwitchError as e:
                self._not_ready()
                log.warning("switch: %s; reconnecting", e)
                if sw is not None:
                    with contextlib.suppress(Exception):  # the session is gone anyway
                        sw.close()
                sw = None
                self._stop.wait(self.retry_s)
        if sw is not None:
            sw.close()
        self._not_ready()
        log.info("stopped")
        return 0

    def _not_ready(self) -> None:
        self.ready.clear()
        self.metrics.primary.labels(SWITCH_LABEL).set(0)

    def _reconcile(self, sw: Switch, what: str) -> bool:
        """Apply the config file to the switch under the config lock; False when a runtime
        command holds the lock (it is changing the file and the switch right now)."""
        lock = (
            config_lock(self.config_path, wait_s=0)
            if self.config_path
            else contextlib.nullcontext()
        )
        try:
            with lock:
                cfg = self._current_config()
                if cfg is None:
                    return False
                started = time.monotonic()
                try:
                    result = self._apply(sw, cfg)
                except NotPrimaryError:
                    raise
                except SwitchError:
                    self.metrics.write_errors.labels(SWITCH_LABEL).inc()
                    raise
                self.metrics.reconcile_seconds.labels(SWITCH_LABEL).observe(
                    time.monotonic() - started
                )
        except ConfigLocked:
            return False
        if result.writes or result.pipeline_pushed:
            log.info(
                "%s: pipeline %s, %d writes",
                what,
                "pushed" if result.pipeline_pushed else "kept",
                result.writes,
            )
        return True

    def _current_config(self) -> Config | None:
        """The file's intent; while the file is broken, the last valid one (so health
        changes still reach the switch); None when there never was a valid one."""
        try:
            cfg = self.load_config()
        except ConfigError as e:
            self._config_problem(str(e))
            return self._last_good
        self._config_problem("")
        self._last_good = cfg
        return cfg

    def _apply(self, sw: Switch, cfg: Config) -> ApplyResult:
        """Apply `cfg` with the DOWN backends of checked VIPs at weight 0."""
        self.checker.set_targets(targets_of(cfg))
        states = {k: h.state for k, h in self.checker.health().items()}
        over = overlay(cfg, states)
        if over.fail_open != self._fail_open:
            for name in sorted(set(over.fail_open) - set(self._fail_open)):
                log.warning("health: every backend of VIP %s is DOWN; keeping their weights", name)
            self._fail_open = over.fail_open
        result = apply(sw, over.config)
        self._note_programmed(cfg, over.config, states)
        return result

    def _note_programmed(self, cfg: Config, programmed: Config, states: dict[Key, State]) -> None:
        """Remember (and log) the weights now on the switch for checked backends."""
        now = time.time()
        seen: dict[Key, Programmed] = {}
        for v, pv in zip(cfg.vips, programmed.vips, strict=True):
            if v.health is None:
                continue
            for b, pb in zip(v.backends, pv.backends, strict=True):
                key = (v.name, b.name)
                old = self.programmed.get(key)
                if old is not None and old.weight == pb.weight:
                    seen[key] = old
                    continue
                seen[key] = Programmed(pb.weight, now)
                if old is not None or pb.weight != b.weight:
                    log.info(
                        "health: backend %s of VIP %s (%s): weight %d on the switch "
                        "(configured %d)",
                        b.name,
                        v.name,
                        states.get(key, State.UP).upper(),
                        pb.weight,
                        b.weight,
                    )
        with self._publish_lock:
            self.programmed = seen
        self._publish_health()

    def _health_changed(self, target: Target, old: State, new: State, reason: str) -> None:
        """From the checker's thread: have the loop bring the switch in line at once."""
        with self._publish_lock:
            self._since[target.key] = time.time()
        self.health_dirty.set()

    def _publish_health(self, final: bool = False) -> None:
        """Write the states for `p4lb stats` and runtime commands (only when checks are
        configured, or were); `final`: mark them stale now, as nobody checks any more."""
        if self.config_path is None:
            return
        with self._publish_lock:
            targets = self.checker.targets()
            if not targets and not self._published:
                return
            now = time.time()
            horizon = 0.0 if final else state_file.stale_horizon(targets)
            doc = state_file.document(
                self.checker.health(), self._since, self.programmed, now, horizon
            )
            try:
                state_file.save_state(self.config_path, doc)
            except OSError as e:
                log.warning("health: state not written to %s: %s", self.config_path, e)
                return
            self._published = True

    def _config_problem(self, message: str) -> None:
        """Log a config problem once (and once when it is gone), not every round."""
        if message and message != self.config_problem:
            log.warning("config: %s; the switch keeps what it has", message)
        elif not message and self.config_problem:
            log.info("config: valid again")
        with self.changed:
            self.config_problem = message
            self.changed.notify_all()

    def wait_until(self, check: Callable[[], bool], timeout: float) -> bool:
        """Wait (bounded) until `check()` holds; re-evaluated when the loop's state changes."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True

    def _handle_stream(self, sw: Switch) -> None:
        rep = sw.next_stream_message("digest", timeout=self.poll_s)
        if rep is not None:
            msg = rep.digest
            digests = ConnDigests.of(sw.schema)
            for member in msg.data:
                entry = digests.entry(digests.values(member))
                if entry.key in self.installed:
                    continue
                self.installed.add(entry.key)
                self.pending.append(Update("INSERT", entry))
                log.info("collision flow %s: installing conn entry", dict(entry.match))
            self.metrics.digests.labels(SWITCH_LABEL, "collision").inc(len(msg.data))
            sw.ack_digest(msg.digest_id, msg.list_id)
        if self.pending and sw.is_primary:
            batch, self.pending = self.pending, []
            try:
                sw.write(batch, idle_timeout_ns=CONN_IDLE_TIMEOUT_NS)
            except NotPrimaryError:
                self.pending = batch + self.pending
                raise
            except SwitchError as e:
                self.metrics.write_errors.labels(SWITCH_LABEL).inc()
                log.warning("conn entries not installed: %s", e)
        rep = sw.next_stream_message("idle_timeout_notification", timeout=0)
        if rep is not None:
            note = rep.idle_timeout_notification
            expired = [Update("DELETE", sw.decode(te)) for te in note.table_entry]
            for u in expired:
                self.installed.discard(u.entry.key)
                log.info("conn entry idle, removing %s", dict(u.entry.match))
            self.pending_deletes.extend(expired)
        if self.pending_deletes and sw.is_primary:
            batch, self.pending_deletes = self.pending_deletes, []
            try:
                sw.write(batch)
            except NotPrimaryError:
                self.pending_deletes = batch + self.pending_deletes
                raise
            except SwitchError as e:  # e.g. already gone: nothing left to remove
                self.metrics.write_errors.labels(SWITCH_LABEL).inc()
                log.warning("idle conn entries not removed: %s", e)
