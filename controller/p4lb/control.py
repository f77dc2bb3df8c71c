"""Glue between the pure core and the switch: apply, stats, and the long-running loop."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from p4lb.adapter import Switch, SwitchError
from p4lb.config import Config
from p4lb.entries import Entry, Update, desired_entries, ids_on_switch, plan
from p4lb.stats import Stats, compute

log = logging.getLogger("p4lb")

CONN_IDLE_TIMEOUT_NS = 120 * 1_000_000_000
CONN_TABLE = "conn_table"


@dataclass
class ApplyResult:
    pipeline_pushed: bool
    batches: list[list[Update]]

    @property
    def writes(self) -> int:
        return sum(len(b) for b in self.batches)


def connect(cfg: Config, one_shot: bool = False) -> Switch:
    """A session as the config's election id; one-shot CLI commands use the id + 1 so they
    can write while `p4lb run` holds the id (mastership returns to it when they close)."""
    s = cfg.switch
    return Switch(s.address, s.device_id, s.election_id + (1 if one_shot else 0))


def apply(sw: Switch, cfg: Config, dry_run: bool = False) -> ApplyResult:
    """Make the switch hold exactly what `cfg` asks for, writing only the differences."""
    pushed = False if dry_run else sw.ensure_pipeline()
    current = sw.read_entries()
    _, desired = desired_entries(cfg, current)
    batches = plan(desired, current)
    if not dry_run:
        sw.write_plan(batches)
    return ApplyResult(pushed, batches)


def read_stats(sw: Switch, cfg: Config) -> Stats:
    ids = ids_on_switch(sw.read_entries(("vip_table", "reverse_nat_table")))
    counters: dict[str, dict[int, tuple[int, int]]] = {}
    for name in ("backend_conns", "backend_tx", "backend_rx", "drops", "collisions"):
        counters[name] = {i: (c.packets, c.bytes) for i, c in sw.read_counter(name).items()}
    return compute(cfg, ids, counters)


def conn_entry(fields: dict[str, int]) -> Entry:
    return Entry(
        CONN_TABLE,
        (
            ("src_addr", fields["src_addr"]),
            ("dst_addr", fields["dst_addr"]),
            ("protocol", fields["protocol"]),
            ("src_port", fields["src_port"]),
            ("dst_port", fields["dst_port"]),
        ),
        "use_backend",
        (("backend_id", fields["backend_id"]),),
    )


DIGEST_FIELDS = ("src_addr", "dst_addr", "protocol", "src_port", "dst_port", "backend_id")


def _digest_fields(member: Any) -> dict[str, int]:
    """A conn_digest_t (members in P4 declaration order) as named integers."""
    values = [int.from_bytes(x.bitstring, "big") for x in member.struct.members]
    return dict(zip(DIGEST_FIELDS, values, strict=True))


class Controller:
    """`p4lb run`: keeps mastership, installs entries for colliding flows from digests,
    lets the switch age them, and reconnects + reconciles when the switch restarts."""

    def __init__(self, load_config: Any, poll_s: float = 0.2, check_s: float = 2.0) -> None:
        self.load_config = load_config
        self.poll_s = poll_s
        self.check_s = check_s
        self.stopping = False
        self.installed: set[tuple[Any, ...]] = set()
        # Set while a session holds the switch in its intent with digests enabled.
        self.ready = threading.Event()

    def stop(self, *_: object) -> None:
        self.stopping = True

    def _session(self, cfg: Config) -> Switch:
        sw = connect(cfg)
        if not sw.is_primary:
            sw.close()
            raise SwitchError(
                f"another controller is primary on {cfg.switch.address} "
                f"(election id {cfg.switch.election_id} is not the highest)"
            )
        result = apply(sw, cfg)
        log.info(
            "applied: pipeline %s, %d writes",
            "pushed" if result.pipeline_pushed else "kept",
            result.writes,
        )
        sw.enable_digest()
        self.installed.clear()
        self.ready.set()
        return sw

    def run(self, duration_s: float | None = None) -> int:
        if threading.current_thread() is threading.main_thread():  # else: stop() ends it
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        deadline = None if duration_s is None else time.monotonic() + duration_s
        sw: Switch | None = None
        next_check = 0.0
        while not self.stopping and (deadline is None or time.monotonic() < deadline):
            try:
                if sw is None:
                    sw = self._session(self.load_config())
                    next_check = time.monotonic() + self.check_s
                self._handle_stream(sw)
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + self.check_s
                    result = apply(sw, self.load_config())
                    if result.writes or result.pipeline_pushed:
                        log.info(
                            "reconciled: pipeline %s, %d writes",
                            "pushed" if result.pipeline_pushed else "kept",
                            result.writes,
                        )
            except SwitchError as e:
                self.ready.clear()
                log.warning("switch: %s; reconnecting", e)
                if sw is not None:
                    with contextlib.suppress(Exception):  # the session is gone anyway
                        sw.close()
                sw = None
                time.sleep(1.0)
        if sw is not None:
            sw.close()
        log.info("stopped")
        return 0

    def _handle_stream(self, sw: Switch) -> None:
        msg = sw.next_stream_message("digest", timeout=self.poll_s)
        if msg is None and sw.client.stream_recv_thread.is_alive() is False:
            raise SwitchError("stream to the switch closed")
        if msg is not None:
            d = msg.digest
            updates = []
            for member in d.data:
                fields = _digest_fields(member)
                entry = conn_entry(fields)
                if entry.key in self.installed:
                    continue
                self.installed.add(entry.key)
                updates.append(Update("INSERT", entry))
                log.info(
                    "collision flow %s -> backend %d: installing conn entry",
                    dict(entry.match),
                    fields["backend_id"],
                )
            sw.ack_digest(d.digest_id, d.list_id)
            if updates:
                try:
                    sw.write(updates, idle_timeout_ns=CONN_IDLE_TIMEOUT_NS)
                except SwitchError as e:
                    log.warning("conn entry not installed: %s", e)
        note = sw.next_stream_message("idle_timeout_notification", timeout=0)
        if note is not None:
            expired = [
                Update("DELETE", sw.schema.decode(te))
                for te in note.idle_timeout_notification.table_entry
            ]
            for u in expired:
                self.installed.discard(u.entry.key)
                log.info("conn entry idle, removing %s", dict(u.entry.match))
            if expired:
                sw.write(expired)
