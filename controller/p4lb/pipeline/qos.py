"""Queueing disciplines (`[qos]`) -> what the switch must hold: the entries of qos_port_table
(ingress admission) and qos_egress_table (CoDel at dequeue), each port's class meters
(PCQ), its BMv2 queues' rates and depths and the reset of its slot's counts (both set over
Thrift, not P4Runtime). Pure.

Every discipline is one shaped queue (BMv2 priority 0) at the port's rate plus admission
rules (limits, shares, a meter) and, where it says so, a second queue for sparse flows
(priority 1) and CoDel at dequeue; p4src/include/qos.p4 says why."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from p4lb.intent.model import Config, QosPort
from p4lb.pipeline.entries import Entry

PORT_TABLE = "qos_port_table"
EGRESS_TABLE = "qos_egress_table"
CLASS_METER = "qos_class_rate"

# qos.p4's meta.qos_flags bits (tests/unit/pipeline/test_qos.py reads them from qos.p4).
BY_DST = 1  # the host classifier is the destination address
POLICED = 2  # ingress: the per-class meter applies
SPARSE = 4  # ingress: flows with nothing queued go to the sparse queue
PER_FLOW = 4  # egress: CoDel state per flow bucket
NO_SHARE = 0xFFFF  # a share the data plane never reaches

BULK_QUEUE = 0  # BMv2 priority of the shaped port queue
SPARSE_QUEUE = 1  # BMv2 priority of the sparse-flow queue
# BMv2's queue depth is set this far above the P4 limit: packets the ingress admitted that
# are not yet in the queue, so the traffic manager itself never drops (its drops are
# invisible to P4 and would leave the backlog counts too high).
DEPTH_MARGIN = 16
BMV2_DEFAULT_DEPTH = 64  # simple_switch's queue depth when nothing sets it
PRIORITY_QUEUES = 8  # `--priority-queues` a switch needs for the sparse queue (v1model's 3 bits)


@dataclass(frozen=True, order=True)
class QueueSetting:
    """One BMv2 egress queue: `set_queue_rate RATE PORT PRIORITY` and `set_queue_depth`.
    rate_pps 0: unshaped."""

    port: int
    priority: int
    rate_pps: int
    depth: int


@dataclass(frozen=True)
class MeterSetting:
    """PCQ's class rate on the meter cells of one port's slot (packets/s, burst packets)."""

    first: int
    count: int
    rate_pps: int
    burst: int


def slots(cfg: Config) -> dict[int, int]:
    """Each port with a discipline -> its slot of the data plane's QoS state (in port order)."""
    ports = cfg.qos.ports if cfg.qos else ()
    return {p.port: i for i, p in enumerate(ports)}


def _ingress_flags(p: QosPort) -> int:
    flags = BY_DST if p.classifier == "dst" else 0
    if p.class_rate_pps:
        flags |= POLICED
    if p.sparse_first:
        flags |= SPARSE
    return flags


def _egress_flags(p: QosPort) -> int:
    # fq_codel-approx and cake-approx keep CoDel state per flow bucket, codel per port.
    return PER_FLOW if p.discipline != "codel" else 0


def entries(cfg: Config) -> list[Entry]:
    """A qos_port_table entry per port with a discipline; a qos_egress_table entry per port
    with CoDel."""
    out: list[Entry] = []
    for p in cfg.qos.ports if cfg.qos else ():
        slot = slots(cfg)[p.port]
        out.append(
            Entry(
                PORT_TABLE,
                (("port", p.port),),
                "qos_admit",
                (
                    ("slot", slot),
                    ("limit", p.limit),
                    ("per_flow", p.flow_limit or NO_SHARE),
                    ("per_host", p.host_limit or NO_SHARE),
                    ("flags", _ingress_flags(p)),
                ),
            )
        )
        if not p.codel:
            continue
        out.append(
            Entry(
                EGRESS_TABLE,
                (("port", p.port),),
                "qos_codel",
                (
                    ("flags", _egress_flags(p)),
                    ("target_us", p.target_us),
                    ("interval_us", p.interval_us),
                ),
            )
        )
    return out


def queues(cfg: Config, former_ports: Iterable[int] = ()) -> list[QueueSetting]:
    """BMv2 queue rates and depths for every port with a discipline, and BMv2's defaults
    back on `former_ports` (ports that had one and have no more)."""
    out: list[QueueSetting] = []
    ports = cfg.qos.ports if cfg.qos else ()
    for p in ports:
        depth = p.limit + DEPTH_MARGIN
        out.append(QueueSetting(p.port, BULK_QUEUE, p.rate_pps, depth))
        if p.sparse_first:
            out.append(QueueSetting(p.port, SPARSE_QUEUE, p.rate_pps, depth))
    kept = {p.port for p in ports}
    for port in sorted(set(former_ports) - kept):
        out.append(QueueSetting(port, BULK_QUEUE, 0, BMV2_DEFAULT_DEPTH))
    return out


# The data plane's per-slot state a port's new discipline starts from zero: its counts
# of queued packets and its CoDel state (registers; over Thrift, as P4Runtime cannot
# write BMv2's registers), at slot * buckets + bucket (the port's own count at bucket 0).
BUCKET_REGISTERS = (
    "qos_backlog",
    "qos_flow_backlog",
    "qos_host_backlog",
    "codel_times",
    "codel_state",
)


def register_resets(cfg: Config, held: dict[int, Entry], buckets: int) -> list[tuple[str, int]]:
    """(register, index) cells to zero: the slots of ports whose admission entry changes
    (`held`: the switch's qos_port_table entries by port), before the new entry is written.
    Releases never go below zero, so packets still queued under the old entry only find
    counts already at zero."""
    out: list[tuple[str, int]] = []
    for e in entries(cfg):
        if e.table != PORT_TABLE or held.get(e.exact("port")) == e:
            continue
        slot = e.p("slot")
        out += [(r, slot * buckets + i) for r in BUCKET_REGISTERS for i in range(buckets)]
    return out


def needs_priority_queues(cfg: Config) -> bool:
    return any(p.sparse_first for p in (cfg.qos.ports if cfg.qos else ()))


def meters(cfg: Config, buckets: int) -> list[MeterSetting]:
    """PCQ's class rate on every host bucket of its port's slot (`buckets` per slot)."""
    out = []
    for p in cfg.qos.ports if cfg.qos else ():
        if p.class_rate_pps:
            first = slots(cfg)[p.port] * buckets
            out.append(MeterSetting(first, buckets, p.class_rate_pps, max(1, p.host_limit)))
    return out
