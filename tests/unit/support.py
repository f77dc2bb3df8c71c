"""Scaffolding the unit tests share: the repository's paths and default config, whether the
fake switch holds what an intent asks for, a health state file as `p4lb run` publishes it,
and `p4lb run` in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from p4lb.intent import reader
from p4lb.intent.model import Config
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.entries import OWNED_TABLES, Entry
from p4lb.pipeline.p4info import schema
from p4lb.service.daemon import Controller
from p4lb.service.health import state_file
from p4lb.service.health.state import Health, State
from p4lb.switch.codec import decode
from tests.unit.fake_switch import FakeSwitch

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "configs" / "default.toml"
COMPILED = ROOT / "p4src" / "compiled"


def default_config() -> Config:
    return reader.load(DEFAULT_CONFIG)


def config_for(fake: FakeSwitch, election_id: int = 10) -> Config:
    """The default config, pointing at the fake switch with this election id."""
    cfg = default_config()
    return replace(cfg, switch=replace(cfg.switch, address=fake.address, election_id=election_id))


def held(fake: FakeSwitch) -> list[Entry]:
    """Every table entry the fake holds, decoded (no RPC: straight from its tables)."""
    return [decode(schema(), te) for te in fake.all_entries()]


def intended(cfg: Config, entries: list[Entry], tables: Collection[str] = OWNED_TABLES) -> bool:
    """`entries` (what a switch holds) are exactly what `cfg` asks for, in `tables`."""
    mine = [e for e in entries if e.table in tables]
    want = [e for e in desired_entries(cfg, entries)[1] if e.table in tables]
    return sorted(mine) == sorted(want)


def holds(fake: FakeSwitch, cfg: Config) -> bool:
    """The fake holds exactly the entries of the controller's tables that `cfg` asks for."""
    return intended(cfg, held(fake))


# A `[vip.web.health]` table for the default config: checks every 50 ms, 2 to rise or fall.
HEALTH_TABLE = """
[vip.web.health]     # checked from p4lb run
interval_s = 0.05
timeout_s = 0.05
rise = 2
fall = 2
"""


def publish_health(path: Path, states: dict[str, str], fresh: bool = True) -> None:
    """A state file for VIP web's backends as `p4lb run` writes it: fresh, or stale (its
    `stale_after` already past, as when `p4lb run` stopped)."""
    now = time.time()
    doc = state_file.document(
        {("web", b): Health(State(s)) for b, s in states.items()},
        {},
        {},
        now,
        30.0 if fresh else -1.0,
    )
    state_file.save_state(path, doc)


@contextmanager
def run_in_thread(ctl: Controller, duration_s: float = 60) -> Iterator[Controller]:
    """`p4lb run` (a Controller) in a thread for the block; stopped and joined (bounded)
    after it, failing the test if it does not stop."""
    thread = threading.Thread(target=ctl.run, kwargs={"duration_s": duration_s})
    thread.start()
    try:
        yield ctl
    finally:
        ctl.stop()
        thread.join(10)
        assert not thread.is_alive(), "p4lb run did not stop"
