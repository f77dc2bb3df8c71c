"""`p4lb run`: the long-running controller.

It holds the switch as the config's election id, keeps it in the config's intent (a
reconcile every few seconds, and at once after the switch restarts or mastership comes
back), installs conn_table entries for colliding flows from digests and removes them when
the switch reports them idle: the session loop every balancer of a tier runs too
(p4lb.service.session), with this module's health checks and config-file reporting.

With a runtime command at the same time: the command takes the config lock and becomes
primary with the election id + 1; this loop then is a backup. It skips its reconciles
while the lock is held (so it never applies a config older than the command's), keeps
digest entries it could not write and writes them once it is primary again, and reconciles
as soon as mastership returns to it — by then the command has written the file.

Health checks (VIPs with a `[vip.NAME.health]` table) run in a thread of their own. A
state change makes the loop reconcile at once, with every DOWN backend at weight 0 (the
config file keeps the configured weights; p4lb.service.health.overlay); open connections
stay on it, pinned by the data plane's connection state. The states go to `lb.toml.health.json`
for `p4lb stats` and for runtime commands, which program the same weights.

A standby (`standby=True`, `p4lb run --standby`) holds the switch as a backup below the
config's election id (p4lb.service.session): it follows the file and runs its health checks
all along, so the first reconcile after it takes over already has every backend that died
meanwhile at weight 0, but it writes nothing, the state file included, until the switch
makes it primary."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable

from p4lb.intent.model import Config, ConfigError
from p4lb.service.health import state_file
from p4lb.service.health.checker import HealthChecker
from p4lb.service.health.overlay import overlay, targets_of
from p4lb.service.health.probes import Probe, default_probe
from p4lb.service.health.state import Key, State, Target
from p4lb.service.health.state_file import Programmed
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.operations import ApplyResult
from p4lb.service.session import Intent, Session
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError

log = logging.getLogger("p4lb")

HEALTH_JOIN_S = 10.0  # longer than any probe (timeout_s + the subprocess grace)
SWITCH_LABEL = "switch"  # the one switch's name in the metrics (a tier's are its balancers')


class Controller(Session):
    """Run with `run()`; `stop()` ends it from a signal handler or another thread. The
    switch is held by the session loop (p4lb.service.session); this adds the health checks,
    their state file and the config file's problems."""

    def __init__(
        self,
        load_config: Callable[[], Config],
        poll_s: float = 0.2,
        check_s: float = 2.0,
        config_path: str | None = None,
        retry_s: float = 1.0,
        probe: Probe = default_probe,
        metrics: ControllerMetrics | None = None,
        standby: bool = False,
    ) -> None:
        # Reconcile time, write errors, digests, mastership (served when [metrics] is set).
        super().__init__(
            SWITCH_LABEL,
            threading.Event(),
            metrics if metrics is not None else ControllerMetrics(),
            config_path,
            poll_s,
            check_s,
            retry_s,
        )
        self.standby = standby
        self.load_config = load_config
        self.config_problem = ""  # the last config error seen, "" when the file is valid
        self.changed = threading.Condition()  # notified when config_problem changes
        # Health: the checker (its own thread), bumping health_round when a state changed
        # and the switch should follow; the weights last programmed for checked backends.
        self.checker = HealthChecker([], self._health_changed, probe)
        self.health_round = 0
        self.programmed: dict[Key, Programmed] = {}
        self._since: dict[Key, float] = {}  # wall time of each backend's last change
        self._fail_open: tuple[str, ...] = ()
        self._last_good: Config | None = None
        self._overlaid: tuple[Config, dict[Key, State]] | None = None  # the last intent's
        self._publish_lock = threading.Lock()
        self._published = False
        self._followed = 0.0  # when a backup last read the file (monotonic)

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
            self.hold(deadline)
            log.info("stopped")
            return 0
        finally:
            health_stop.set()
            checks.join(HEALTH_JOIN_S)
            self.checker.close()
            self._publish_health(final=True)

    # --- the session's hooks ------------------------------------------------------------

    def connect_config(self) -> Config | None:
        try:
            return self.load_config()
        except ConfigError as e:  # reported; the loop tries again after retry_s
            self._config_problem(str(e))
            return None

    def intent(self, sw: Switch) -> Intent | None:
        """The config file's intent with the DOWN backends of checked VIPs at weight 0."""
        cfg = self._current_config()
        if cfg is None:
            return None
        self.checker.set_targets(targets_of(cfg))
        states = {k: h.state for k, h in self.checker.health().items()}
        over = overlay(cfg, states)
        if over.fail_open != self._fail_open:
            for name in sorted(set(over.fail_open) - set(self._fail_open)):
                log.warning("health: every backend of VIP %s is DOWN; keeping their weights", name)
            self._fail_open = over.fail_open
        self._overlaid = (cfg, states)
        return Intent(over.config)

    def applied(self, intent: Intent, result: ApplyResult) -> None:
        if self._overlaid is not None:
            cfg, states = self._overlaid
            self._note_programmed(cfg, intent.config, states)

    def changes(self) -> int:
        return self.health_round

    def waiting(self) -> None:
        """A backup follows the file: its checks probe what the file names now, so the
        first reconcile after a takeover has their states."""
        now = time.monotonic()
        if now < self._followed + self.check_s:
            return
        self._followed = now
        cfg = self._current_config()
        if cfg is not None:
            self.checker.set_targets(targets_of(cfg))

    def joined(self) -> None:
        address = self.sw.address if self.sw else "?"
        if self.standby:
            log.info(
                "primary on %s as election id %s (took over from a higher election id), digests on",
                address,
                self.election_id,
            )
            self._publish_health()  # skipped while it was backup
        else:
            log.info("primary on %s, digests on", address)

    def lost_primary(self) -> None:
        log.info(
            "another controller is primary on %s; waiting", self.sw.address if self.sw else "?"
        )

    def left(self, error: SwitchError) -> None:
        log.warning("switch: %s; reconnecting", error)

    # --- the config file and health -----------------------------------------------------

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
        self.health_round += 1

    def _publish_health(self, final: bool = False) -> None:
        """Write the states for `p4lb stats` and runtime commands (only when checks are
        configured, or were); `final`: mark them stale now, as nobody checks any more."""
        if self.config_path is None or (self.standby and not self.ready.is_set()):
            return  # a standby writes nothing while backup: the primary's file stands
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
        with self.changed:
            return bool(self.changed.wait_for(check, timeout))
