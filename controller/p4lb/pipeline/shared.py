"""Connections a tier of balancers shares: the data plane's conn_event_t digests (a
connection of a stateful VIP opened on one balancer, or its client ended it), and which
conn_table copies every balancer should hold so that whichever one a connection's packets
reach next knows its backend. Pure: the tier's controller feeds it events and writes what
it returns.

A connection opened on balancer A gets a copy (use_shared_backend) on every other balancer.
When its client's FIN or RST is reported (by A, or by whichever balancer carries it through
a copy), every copy goes CLOSE_GRACE_S later, once the last ACKs have passed. A balancer
that joins (or comes back, its state lost) gets a copy of every live connection, its own
former ones included."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4lb.pipeline.digests import CONN_ACTION, CONN_TABLE, ConnDigests
from p4lb.pipeline.entries import Entry
from p4lb.pipeline.p4info import P4InfoError, Schema

CONN_EVENT_DIGEST = "conn_event_t"
SHARED_ACTION = "use_shared_backend"
OPENED, CLOSED = 1, 2  # the data plane's CONN_OPENED, CONN_CLOSED
EVENT_BITS = 8
# After a client's FIN: the data plane keeps a closing slot ~4 s (CONN_CLOSING_TICKS).
CLOSE_GRACE_S = 5.0

FlowKey = tuple[tuple[str, int], ...]  # conn_table's match: the 5-tuple as the client sent it


@dataclass(frozen=True)
class ConnEvent:
    event: int  # OPENED or CLOSED
    flow: FlowKey
    backend_id: int


@dataclass(frozen=True)
class ConnEvents:
    """How a conn_event_t digest reads: its event (top 8 bits), then conn_digest_t's layout
    (conn_table's key, use_backend's parameter), widths from the P4Info."""

    conn: ConnDigests

    @classmethod
    def of(cls, schema: Schema) -> ConnEvents:
        conn = ConnDigests.of(schema)
        members = schema.digest_fields(CONN_EVENT_DIGEST)
        width = EVENT_BITS + sum(w for _, w in conn.match + conn.params)
        if len(members) != 1 or members[0][1] != width:
            raise P4InfoError(f"{CONN_EVENT_DIGEST} must be one bit<{width}> member, not {members}")
        return cls(conn)

    def decode(self, packed: int) -> ConnEvent:
        values: dict[str, int] = {}
        for name, width in reversed(self.conn.match + self.conn.params):
            values[name] = packed & ((1 << width) - 1)
            packed >>= width
        (param,) = self.conn.params
        flow = tuple((name, values[name]) for name, _ in self.conn.match)
        return ConnEvent(packed & ((1 << EVENT_BITS) - 1), flow, values[param[0]])

    def event(self, member: Any) -> ConnEvent:
        """One digest list member (a P4Data struct of one bit string)."""
        (packed,) = (int.from_bytes(x.bitstring, "big") for x in member.struct.members)
        return self.decode(packed)

    def copy(self, flow: FlowKey, backend_id: int) -> Entry:
        """The conn_table entry a balancer holds for a connection another one opened."""
        (param,) = self.conn.params
        return Entry(CONN_TABLE, flow, SHARED_ACTION, ((param[0], backend_id),))


def flow_of(entry: Entry) -> FlowKey:
    """A conn_table entry's match as a flow key (its fields are all exact)."""
    return tuple((name, entry.exact(name)) for name, _ in entry.match)


def pin(entry: Entry) -> bool:
    """Whether a conn_table entry is a collision pin (use_backend), not a shared copy."""
    return entry.table == CONN_TABLE and entry.action == CONN_ACTION


@dataclass
class Shared:
    """The live shared connections and where each has its copies.

    `writes` and `deletes` return, per balancer, what to write next; the caller reports
    what it wrote back with `written` / `removed`, so a balancer that was down gets its
    copies when it returns, and a write that failed is tried again."""

    conns: dict[FlowKey, tuple[str, int]] = field(default_factory=dict)  # -> (owner, backend)
    closing: dict[FlowKey, float] = field(default_factory=dict)  # -> when to remove copies
    held: dict[str, set[FlowKey]] = field(default_factory=dict)  # copies on each balancer
    # Copies a balancer let age out (never hit for the copy TTL): not written there again.
    aged: dict[str, set[FlowKey]] = field(default_factory=dict)

    def opened(self, owner: str, flow: FlowKey, backend_id: int) -> None:
        self.conns[flow] = (owner, backend_id)
        self.closing.pop(flow, None)

    def closed(self, flow: FlowKey, now: float) -> None:
        if flow in self.conns:
            self.closing.setdefault(flow, now + CLOSE_GRACE_S)

    def expire(self, now: float) -> None:
        """Forget connections whose grace after the close is over (their copies go)."""
        for flow, when in list(self.closing.items()):
            if when <= now:
                del self.closing[flow]
                self.conns.pop(flow, None)

    def wanted(self, balancer: str, fresh: bool = False) -> set[FlowKey]:
        """The copies `balancer` should hold: every live connection another balancer opened;
        `fresh` (it lost its state: it just joined or restarted): every live connection."""
        aged = self.aged.get(balancer, set())
        return {
            f
            for f, (owner, _) in self.conns.items()
            if (fresh or owner != balancer) and f not in aged
        }

    def writes(self, balancer: str, fresh: bool = False) -> list[tuple[FlowKey, int]]:
        have = self.held.setdefault(balancer, set())
        return sorted((f, self.conns[f][1]) for f in self.wanted(balancer, fresh) if f not in have)

    def deletes(self, balancer: str) -> list[FlowKey]:
        have = self.held.get(balancer, set())
        return sorted(f for f in have if f not in self.conns)

    def written(self, balancer: str, flows: list[FlowKey]) -> None:
        self.held.setdefault(balancer, set()).update(flows)

    def removed(self, balancer: str, flows: list[FlowKey]) -> None:
        self.held.setdefault(balancer, set()).difference_update(flows)

    def idle(self, balancer: str, flow: FlowKey) -> None:
        """The balancer's copy of `flow` aged out (the switch removes it): not written
        there again; the connection is forgotten once no balancer holds a copy."""
        self.held.setdefault(balancer, set()).discard(flow)
        self.aged.setdefault(balancer, set()).add(flow)
        if not any(flow in h for h in self.held.values()):
            self.conns.pop(flow, None)
            self.closing.pop(flow, None)
            for a in self.aged.values():
                a.discard(flow)

    def lost(self, balancer: str) -> None:
        """The balancer restarted or left: it holds no copies any more."""
        self.held[balancer] = set()
        self.aged[balancer] = set()
