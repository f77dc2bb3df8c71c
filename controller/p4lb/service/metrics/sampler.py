"""Reading the switches for the metrics and the stats page: each switch's counters through a
reader session of its own (no arbitration: it never disturbs the writers), made into what
`p4lb stats --json` shows (p4lb.service.observe), with the weights on the switch (health
applied). A bounded history of small points feeds the page's plot."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4lb.intent.model import Config, ConfigError, switch_configs
from p4lb.service import observe, operations
from p4lb.service.health import state_file
from p4lb.service.health.overlay import overlay
from p4lb.stats import windows
from p4lb.stats.counters import Stats
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError

log = logging.getLogger("p4lb")

INTERVAL_S = 2.0  # one history point every INTERVAL_S (the page polls at the same pace)


@dataclass(frozen=True)
class SwitchSample:
    """One switch's counts: `lifetime` (since the switch started: the Prometheus counters)
    and `shown` (what `p4lb stats --json` shows: since each VIP's last runtime change, with
    health); both None and `error` set when it could not be read."""

    name: str  # "switch", or the tier's balancer name
    address: str
    lifetime: Stats | None
    shown: Stats | None
    error: str = ""


@dataclass(frozen=True)
class Sample:
    at: float  # wall-clock time of the read
    config: Config
    # (VIP, backend) -> the weight programmed: configured, or 0 while health has it DOWN
    effective: dict[tuple[str, str], int]
    switches: tuple[SwitchSample, ...]


def effective_weights(
    cfg: Config, config_path: str | os.PathLike[str] | None, now: float
) -> dict[tuple[str, str], int]:
    """The weights `p4lb run` programs: the config's, DOWN backends of checked VIPs at 0
    (as published in the health state file while it is fresh)."""
    states = state_file.fresh_states(state_file.load_state(config_path), now) if config_path else {}
    programmed = overlay(cfg, states).config
    return {(v.name, b.name): b.weight for v in programmed.vips for b in v.backends}


class Sampler:
    """`read()` reads every switch now (one read at a time: concurrent scrapes queue, they
    never multiply the load on the switch); `run()` adds a history point every interval."""

    def __init__(
        self,
        load_config: Callable[[], Config],
        config_path: str | None,
        history_s: float,
        interval_s: float = INTERVAL_S,
        connect: Callable[[Config], Switch] = operations.connect_reader,
    ) -> None:
        self.load_config = load_config
        self.config_path = config_path
        self.interval_s = interval_s
        self.connect = connect
        self._lock = threading.Lock()
        self._sessions: dict[str, Switch] = {}
        self._last_good: Config | None = None
        self._last: Sample | None = None
        self._history: deque[dict[str, Any]] = deque(maxlen=max(2, int(history_s / interval_s)))
        self._history_lock = threading.Lock()

    def _config(self) -> Config:
        try:
            self._last_good = self.load_config()
        except ConfigError:
            if self._last_good is None:
                raise
        return self._last_good

    def read(self) -> Sample:
        """Every switch of the config, read now."""
        with self._lock:
            cfg = self._config()
            now = time.time()
            out = []
            for name, scfg in switch_configs(cfg):
                out.append(self._read_one(name, scfg, now))
            sample = Sample(now, cfg, effective_weights(cfg, self.config_path, now), tuple(out))
            self._last = sample
            return sample

    def latest(self, max_age_s: float) -> Sample:
        """The last sample if it is younger than `max_age_s` and read every switch, else a
        new one."""
        with self._lock:
            last = self._last
        fresh = last is not None and time.time() - last.at <= max_age_s
        if last is not None and fresh and not any(s.error for s in last.switches):
            return last
        return self.read()

    def _read_one(self, name: str, cfg: Config, now: float) -> SwitchSample:
        try:
            sw = self._sessions.get(name)
            if sw is None:
                sw = self._sessions[name] = self.connect(cfg)
            lifetime = operations.read_stats(sw, cfg)
        except SwitchError as e:
            old = self._sessions.pop(name, None)
            if old is not None:
                with contextlib.suppress(Exception):  # the session is gone anyway
                    old.close()
            return SwitchSample(name, cfg.switch.address, None, None, str(e))
        if cfg.tier or not self.config_path:  # the tier's `p4lb stats`: lifetime counts
            health = state_file.load_state(self.config_path) if self.config_path else {}
            shown = windows.with_health(lifetime, health, now)
        else:
            shown = observe.shown(lifetime, self.config_path, now)
        return SwitchSample(name, cfg.switch.address, lifetime, shown)

    def history(self) -> list[dict[str, Any]]:
        with self._history_lock:
            return list(self._history)

    def record(self, sample: Sample) -> None:
        """Keep a small point of `sample` for the page's plot: per switch, VIP and backend
        the lifetime new connections and the active ones."""
        point: dict[str, Any] = {"t": round(sample.at, 3), "switches": {}}
        for s in sample.switches:
            if s.lifetime is None:
                continue
            point["switches"][s.name] = {
                v.name: {b.name: [b.connections, b.active] for b in v.backends}
                for v in s.lifetime.vips
            }
        with self._history_lock:
            self._history.append(point)

    def run(self, stop: threading.Event) -> None:
        """A history point every interval until `stop` is set."""
        while not stop.is_set():
            try:
                self.record(self.read())
            except ConfigError as e:
                log.warning("metrics: %s", e)
            stop.wait(self.interval_s)

    def close(self) -> None:
        with self._lock:
            for sw in self._sessions.values():
                with contextlib.suppress(Exception):
                    sw.close()
            self._sessions.clear()
