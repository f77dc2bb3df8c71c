"""`p4lb run` for a tier of balancers: one controller keeps every balancer of the config's
`[tier]` in the same intent, runs the health checks once for all of them, shares the
stateful VIPs' connections between them, and has each balancer's BGP speaker announce the
VIPs only while that balancer holds the tier's state.

One thread per balancer, each the session loop `p4lb run` runs for one switch
(p4lb.service.session; the balancer is a p4lb.service.tier_members.Member): connect, take
the switch, reconcile through operations.apply (the same desired entries, the same
single-flip update as the others, with the tier's ids and Maglev tables), turn digests on,
catch up, announce; then serve its digests, and reconcile every few seconds or at once when
a backend's health or the file changes. A balancer whose switch is gone (its P4Runtime
port refuses connections) is withdrawn at once; one whose session broke while its switch
still listens (busy or hung: load can cause it) stays announced for a hold time, then is
withdrawn only above a floor of announced balancers (p4lb.service.announce). Either way it
is forgotten as a holder of copies, and when it returns it gets the whole state again
before it announces. A balancer marked `drain = true` stays programmed and keeps serving
what reaches it, but announces nothing; one removed from the file is withdrawn and let go.

Shared connections (p4lb.pipeline.shared, written by p4lb.service.tier_sharing): a
connection a stateful VIP (round robin, the least-* algorithms) opened on one balancer is
copied into every other balancer's conn_table within a digest's round trip, so a balancer
its packets reach after a change of the router's next hops knows its backend. The hashing
algorithms need no copies: the same tables on every balancer give the same answer. The
speakers are driven from a thread of their own (p4lb.service.tier_speakers).

A standby (`standby=True`, `p4lb run --standby`) holds every balancer as a backup below the
config's election id and writes and announces nothing until a switch makes it primary. It
never received the digests of the connections opened meanwhile, so a balancer it takes over
first tells it which shared connections it holds copies of (Sharing.adopt), and only then
gets the others' copies; then it announces (adding a route GoBGP holds already changes
nothing), and nothing is withdrawn because the controller changed.

A `[qos]` with ports is refused for a tier (p4lb.intent.validate): a discipline's queue
rates and depths are set over one switch's Thrift port, which `[qos]` names once."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

from p4lb.intent.model import Balancer, Config, ConfigError, address_bits, member_config
from p4lb.pipeline.desired import maglev_tables
from p4lb.pipeline.entries import Slot
from p4lb.pipeline.ids import VIP_TABLES, Ids
from p4lb.service.announce import Policy
from p4lb.service.health.checker import HealthChecker
from p4lb.service.health.overlay import overlay, targets_of
from p4lb.service.health.probes import Probe, default_probe
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.operations import ApplyResult
from p4lb.service.session import PIN_IDLE_TIMEOUT_NS, Intent, digest_name
from p4lb.service.tier_members import Member, Members, switch_gone
from p4lb.service.tier_sharing import Sharing, conn_events
from p4lb.service.tier_speakers import Speakers
from p4lb.switch.client import Switch

__all__ = [
    "PIN_IDLE_TIMEOUT_NS",
    "Member",
    "TierController",
    "conn_events",
    "digest_name",
    "run_tier",
    "switch_gone",
]

log = logging.getLogger("p4lb")

HEALTH_JOIN_S = 10.0
REPORT_S = 10.0  # how often the copies' delays are logged


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
        standby: bool = False,
    ) -> None:
        self.standby = standby  # every balancer held as a backup first (p4lb run --standby)
        self.load_config = load_config
        # Per balancer: reconcile time, write errors, digests, mastership.
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self.config_path = config_path
        self.poll_s = poll_s
        self.check_s = check_s
        self.retry_s = retry_s
        self._stop = threading.Event()
        self.reconcile_lock = threading.Lock()  # one balancer's reconcile at a time
        self.checker = HealthChecker([], self._health_changed, probe)
        self.health_round = 0  # bumped on each health change: members reconcile on it
        self._last_good: Config | None = None
        self.ids: Ids | None = None  # the tier's service and backend ids
        self._stamp: tuple[int, int, int] | None = None  # the config file's, when last read
        self.sharing = Sharing(self.metrics, self._state_ttl_ns)
        # The speakers are driven from a thread of their own (a `gobgp` call can take a
        # while on a loaded machine): the balancers' loops never wait for one, so their
        # digests are served and their copies written meanwhile.
        due = threading.Event()
        self._members = Members(self._member, due)
        self.speakers = Speakers(
            self._members,
            self._prefixes,
            policy if policy is not None else Policy(),
            check_s,
            self._stop,
            due,
        )

    def stop(self, *_: object) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def members(self) -> dict[str, Member]:
        """The balancers by name (a copy)."""
        return {m.name: m for m in self._members.all()}

    @property
    def speaker_rounds(self) -> int:
        """Rounds the speakers' loop finished (tests wait on it)."""
        return self.speakers.rounds

    def _member(self, b: Balancer) -> Member:
        m = Member(
            b,
            self,
            self.sharing,
            self.speakers.due,
            self._stop,
            self.metrics,
            self.config_path,
            self.poll_s,
            self.check_s,
            self.retry_s,
        )
        m.standby = self.standby
        return m

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
        speakers = threading.Thread(target=self.speakers.run, name="p4lb-speakers", daemon=True)
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
                    self._members.update(cfg)
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + REPORT_S
                    self.sharing.report_delays()
                # A drain or a new balancer in the file is seen within this: the file is
                # parsed again only when it changed (config()).
                self._stop.wait(min(self.check_s, 0.1))
        finally:
            self._stop.set()
            for m in self._members.all():
                if m.thread is not None:
                    m.thread.join(10)
            self.speakers.due.set()
            speakers.join(10)
            health_stop.set()
            checks.join(HEALTH_JOIN_S)
            self.checker.close()
        log.info("stopped")
        return 0

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

    def _prefixes(self) -> list[str]:
        cfg = self._last_good
        vips = sorted({f"{v.address}/{address_bits(v.address)}" for v in cfg.vips}) if cfg else []
        return vips + list(cfg.tier_announce if cfg else ())

    def _state_ttl_ns(self) -> int:
        return int(self._last_good.tier_state_ttl_s * 1e9) if self._last_good else 0

    def _health_changed(self, *_: object) -> None:
        self.health_round += 1

    # --- what a member asks of the tier (p4lb.service.tier_members.Tier) ----------------

    def member_config(self, m: Member) -> Config | None:
        cfg = self._last_good or self.config()
        return None if cfg is None else member_config(cfg, m.balancer)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[bool]:
        """One balancer of this process reconciles at a time (another tries again soon,
        serving its digests meanwhile)."""
        if not self.reconcile_lock.acquire(timeout=0.05):
            yield False
            return
        try:
            yield True
        finally:
            self.reconcile_lock.release()

    def changes(self) -> int:
        return self.health_round

    def all_members(self) -> list[Member]:
        return self._members.all()

    def intent(self, m: Member, sw: Switch) -> Intent | None:
        """The tier's intent (DOWN backends at weight 0) as `m` holds it, with the tier's
        ids: every balancer gives a VIP and a backend the same id, so a connection copied
        from one names the right backend on another. The ids come from the first balancer
        reached (what it holds), then stay. So do the Maglev tables: each balancer's next
        table continues the tier's (`_tier_maglev`), so a restarted or new balancer gets
        the table the others hold, and any balancer sends a flow it has no state for where
        the others would."""
        cfg = self._last_good or self.config()
        if cfg is None:
            return None
        states = {k: h.state for k, h in self.checker.health().items()}
        over = overlay(cfg, states)
        maglev = self._tier_maglev(m, sw.schema.algorithms().get("maglev"))
        return Intent(member_config(over.config, m.balancer), self.ids, maglev)

    def applied(self, m: Member, result: ApplyResult) -> None:
        self.ids = result.ids

    def _tier_maglev(self, m: Member, code: int | None) -> dict[int, list[Slot]] | None:
        """The tier's Maglev tables for `m` to continue: those of the first balancer in the
        config's order that holds the tier's state, read now (so a runtime command's change
        is in them); None when that is `m` itself (its own tables are the tier's). A
        balancer joining (a new session: its switch may have restarted empty) never is."""
        for other in self._members.all():
            if other is m:
                if not m.fresh:
                    return None
                continue
            sw = other.sw
            if not other.ready.is_set() or sw is None:
                continue
            try:
                # Both families' VIP tables: an IPv6 VIP's Maglev table is the tier's too.
                return maglev_tables(sw.read_entries((*VIP_TABLES, "slot_table")), code)
            except Exception as e:  # noqa: BLE001 - another balancer's trouble is not m's
                log.info("%s: Maglev tables not read from %s (%s)", m.name, other.name, e)
        return None


def run_tier(load_config: Callable[[], Config], config_path: str | None) -> int:
    return TierController(load_config, config_path).run()
