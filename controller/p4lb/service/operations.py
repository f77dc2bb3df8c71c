"""One-shot operations between the pure core and the switch: connect (as a writer that
waits, bounded, to become primary, or as a reader), apply, and counter reads."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from p4lb.intent.model import Config
from p4lb.pipeline import qos
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.entries import Slot, Update
from p4lb.pipeline.ids import (
    REVERSE_NAT_TABLES,
    VIP_TABLES,
    Ids,
    assign_ids,
    backend_key,
    ids_on_switch,
)
from p4lb.pipeline.plan import plan
from p4lb.stats.counters import DropLayout, Stats, compute
from p4lb.switch import queues
from p4lb.switch.client import Switch
from p4lb.switch.errors import NotPrimaryError

log = logging.getLogger("p4lb")

PRIMARY_WAIT_S = 15.0
STATS_COUNTERS = (
    "backend_conns",
    "backend_established",
    "backend_closes",
    "backend_tx",
    "backend_rx",
    "drops",
    "collisions",
)


@dataclass
class ApplyResult:
    pipeline_pushed: bool
    batches: list[list[Update]]
    ids: Ids  # the service and backend ids the switch now holds

    @property
    def writes(self) -> int:
        return sum(len(b) for b in self.batches)


def connect(cfg: Config, one_shot: bool = False, wait_s: float = PRIMARY_WAIT_S) -> Switch:
    """A session as the config's election id (`p4lb run`), or, for one-shot commands, as the
    id + 1 so they can write while `p4lb run` holds the id (mastership returns to it when
    they close). A one-shot session that is not primary (another writer holds the switch
    with a higher id, or the same id) is closed and retried with backoff for `wait_s`
    seconds; then it fails with one line."""
    s = cfg.switch
    if not one_shot:
        return Switch(s.address, s.device_id, s.election_id, tls=s.tls, insecure=s.insecure)
    election_id = s.election_id + 1
    deadline = time.monotonic() + wait_s
    pause, attempts = 0.05, 0
    while True:
        attempts += 1
        try:
            sw = Switch(s.address, s.device_id, election_id, tls=s.tls, insecure=s.insecure)
            if sw.is_primary:
                return sw
            sw.close()
            why = "another controller with a higher election id is primary"
        except NotPrimaryError as e:
            why = str(e)
        if time.monotonic() + pause > deadline:
            raise NotPrimaryError(
                f"switch at {s.address}: could not become primary as election id "
                f"{election_id} in {attempts} attempts over {wait_s:.0f} s; last: {why}"
            )
        log.debug("not primary on %s (%s); retrying in %.2f s", s.address, why, pause)
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def connect_reader(cfg: Config) -> Switch:
    """A session that only reads: no arbitration, so it never disturbs the writers."""
    return Switch(
        cfg.switch.address,
        cfg.switch.device_id,
        None,
        tls=cfg.switch.tls,
        insecure=cfg.switch.insecure,
    )


def apply(
    sw: Switch,
    cfg: Config,
    dry_run: bool = False,
    ids: Ids | None = None,
    maglev: Mapping[int, list[Slot]] | None = None,
) -> ApplyResult:
    """Make the switch hold exactly what `cfg` asks for, writing only the differences. A
    tier's balancer passes the tier's `ids` (kept, new VIPs and backends numbered from
    them; else the switch's own) and the tier's `maglev` tables to continue, so that every
    balancer holds the same (p4lb.pipeline.desired.desired_entries)."""
    pushed = False if dry_run else sw.ensure_pipeline()
    current = sw.read_entries()
    kept = assign_ids(cfg, ids if ids is not None else ids_on_switch(current))
    kept, desired = desired_entries(cfg, current, sw.schema.algorithms(), kept, maglev)
    batches = plan(desired, current)
    if not dry_run:
        # Queues first: a switch that cannot take them (no priority queues, Thrift
        # unreachable) refuses before any table changes.
        held = {e.exact("port"): e for e in current if e.table == qos.PORT_TABLE}
        if cfg.qos is not None or held:
            thrift_port = cfg.qos.thrift_port if cfg.qos else THRIFT_PORT
            queues.apply(thrift_port, qos.queues(cfg, held))
            queues.zero_registers(thrift_port, qos.register_resets(cfg, held, qos_buckets(sw)))
        sw.write_plan(batches)
        if cfg.qos is not None:
            buckets = qos_buckets(sw)
            for m in qos.meters(cfg, buckets):
                sw.set_meter_rates(qos.CLASS_METER, m.first, m.count, m.rate_pps, m.burst)
    return ApplyResult(pushed, batches, kept)


THRIFT_PORT = 9090  # BMv2's default, for a config whose [qos] is gone


def qos_buckets(sw: Switch) -> int:
    """Host (and flow) buckets per QoS slot: the class meter's cells over the slots."""
    return int(sw.schema.meters[qos.CLASS_METER].size) // sw.schema.table(qos.PORT_TABLE).size


def qos_on_switch(sw: Switch, cfg: Config) -> dict[int, str]:
    """Each port the switch has a discipline on: "ok" when both of its entries are what
    `cfg` asks for, else "differs"."""
    held = sw.read_entries((qos.PORT_TABLE, qos.EGRESS_TABLE))
    wanted = set(qos.entries(cfg))
    out: dict[int, str] = {}
    for e in held:
        if e.table in (qos.PORT_TABLE, qos.EGRESS_TABLE):
            port = e.exact("port")
            ok = e in wanted and out.get(port, "ok") == "ok"
            out[port] = "ok" if ok else "differs"
    return out


def read_stats(sw: Switch, cfg: Config) -> Stats:
    """Lifetime counter totals for the VIPs and backends of `cfg`."""
    ids = ids_on_switch(sw.read_entries(VIP_TABLES + REVERSE_NAT_TABLES))
    counters = {name: _cells(sw, name) for name in STATS_COUNTERS}
    # An IPv6 backend's replies are counted on its own table's entries: same backend ids.
    for bid, (packets, nbytes) in _cells(sw, "backend_rx6").items():
        old = counters["backend_rx"].get(bid, (0, 0))
        counters["backend_rx"][bid] = (old[0] + packets, old[1] + nbytes)
    layout = DropLayout(sw.schema.drop_reasons(), sw.schema.drop_counter_stride())
    return compute(cfg, ids, counters, layout)


def active_connections(sw: Switch, cfg: Config, vip: str, backend: str) -> int:
    """A backend's open connections: the data plane's handshakes completed minus
    connections closed (FIN/RST either way, or a dead slot reclaimed), at least 0. A backend
    the switch does not hold has none."""
    v = cfg.vip(vip)
    b = v.backend(backend)
    ids = ids_on_switch(sw.read_entries(REVERSE_NAT_TABLES))
    bid = ids.backends.get(backend_key(v, b.address, b.port))
    if bid is None:
        return 0
    established = sw.read_counter("backend_established", bid).get(bid)
    closes = sw.read_counter("backend_closes", bid).get(bid)
    opened = established.packets if established else 0
    return max(0, opened - (closes.packets if closes else 0))


def _cells(sw: Switch, name: str) -> dict[int, tuple[int, int]]:
    """A counter's cells as {index: (packets, bytes)}. A direct counter (on backend_table or
    reverse NAT table) is indexed by the backend id its entries match or set."""
    if name in sw.schema.counters:
        return {i: (c.packets, c.bytes) for i, c in sw.read_counter(name).items()}
    out: dict[int, tuple[int, int]] = {}
    cells = sw.read_direct_counter(name)
    # BMv2 returns a direct counter's entries without their actions: the backend id of a
    # reverse_nat_table entry (an action parameter) comes from the table itself.
    tables = {e.table for e, _ in cells}
    params = {(e.table, e.match): dict(e.params) for e in sw.read_entries(tuple(tables))}
    for entry, c in cells:
        fields = dict(entry.match) | dict(entry.params) | params.get((entry.table, entry.match), {})
        bid = fields.get("backend_id")
        if isinstance(bid, int):
            packets, nbytes = out.get(bid, (0, 0))
            out[bid] = (packets + c.packets, nbytes + c.bytes)
    return out
