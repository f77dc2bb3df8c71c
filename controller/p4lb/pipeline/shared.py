"""Connections a tier of balancers shares: the data plane's connection event digests (a
connection of a stateful VIP opened on one balancer, or its client ended it), and which
copies (conn_table's use_shared_backend, conn6_table's use_shared_backend6) every balancer
should hold so that whichever one a connection's packets reach next knows its backend.
Pure: the tier's controller feeds it events and writes what it returns.

A connection opened on balancer A gets a copy on every other balancer
once it has lived COPY_AFTER_S (most short connections end before and cost nothing).
When its client's FIN or RST is reported (by A, or by whichever balancer carries it through
a copy), every copy goes CLOSE_GRACE_S later, once the last ACKs have passed. A balancer
that joins (or comes back, its state lost) gets a copy of every live connection, its own
former ones included."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from p4lb.pipeline.digests import CONN6_DIGEST, CONN_DIGEST, PINS, ConnDigests, packed
from p4lb.pipeline.entries import Entry
from p4lb.pipeline.p4info import P4InfoError, Schema

# The connection event digests of each family, one per digest() call in the data plane
# (metadata.p4 says why), all of one layout: the event, then the family's collision digest
# (its table's key, then the parameters of the copy's action, written to that table).
CONN_EVENTS = {
    CONN_DIGEST: (("conn_opened_t", "conn_closed_t", "copy_closed_t"), "use_shared_backend"),
    CONN6_DIGEST: (
        ("conn6_opened_t", "conn6_closed_t", "copy6_closed_t"),
        "use_shared_backend6",
    ),
}
CONN_EVENT_DIGESTS = tuple(name for names, _ in CONN_EVENTS.values() for name in names)
SHARED_ACTIONS = frozenset(action for _, action in CONN_EVENTS.values())
OPENED, CLOSED = 1, 2  # the data plane's CONN_OPENED, CONN_CLOSED
EVENT_BITS = 8
# After a client's FIN: the data plane keeps a closing slot ~4 s (CONN_CLOSING_TICKS).
CLOSE_GRACE_S = 5.0
# A connection is copied once it has lived this long: most connections of a busy VIP (an
# HTTP/1.0 request) end sooner and are never copied at all, which keeps the copies that
# matter (long-lived connections) from queueing behind them on the switches' management
# path. It is part of the window in which a balancer's death can break a connection.
COPY_AFTER_S = 0.25
# How long a close waits for its connection's open. Events do not arrive in the order the
# data plane sent them: each digest() call has its own BMv2 learn list (the open, the close
# at a slot, the close through a copy), BMv2 buffers and sends each list from a thread of
# its own, and PI merges them into one P4Runtime stream.
# Measured on BMv2 1.15 with ab: a short connection's close came before its open in 80 %
# of them. So a close of a connection not yet opened is kept this long; its open then
# finds it and the connection ends at once (neither live nor copied).
EARLY_CLOSE_S = 2.0

Match = tuple[tuple[str, int], ...]  # a copy's key: the 5-tuple as the client sent it
FlowKey = tuple[str, Match]  # the table its copies go to (conn_table, conn6_table), the key
# What a copy names: its action's parameters (the backend id; an IPv6 copy the port too).
# Shared compares them only.
Backend = Hashable


@dataclass(frozen=True)
class ConnEvent:
    event: int  # OPENED or CLOSED
    flow: FlowKey
    backend: tuple[int, ...]  # the copy's action's parameters, backend id first

    @property
    def backend_id(self) -> int:
        return self.backend[0]


@dataclass(frozen=True)
class ConnEvents:
    """How a connection event digest reads (each of CONN_EVENT_DIGESTS): its event (top 8
    bits), then its family's collision digest layout (the table's key, the parameters),
    widths from the P4Info; and the copy each becomes."""

    layouts: dict[str, ConnDigests]  # each event digest's layout after the event
    copies: dict[str, tuple[str, ConnDigests]]  # each copy table's action and layout

    @classmethod
    def of(cls, schema: Schema) -> ConnEvents:
        layouts, copies = {}, {}
        for collision, (names, action) in CONN_EVENTS.items():
            conn = ConnDigests.of(schema, collision)
            params = tuple((p.name, p.bitwidth) for p in schema.action(action).params)
            if params != conn.params:
                raise P4InfoError(f"{action} must take {conn.params}, not {params}")
            width = EVENT_BITS + sum(w for _, w in conn.match + conn.params)
            for name in names:
                members = schema.digest_fields(name)
                if len(members) != 1 or members[0][1] != width:
                    raise P4InfoError(f"{name} must be one bit<{width}> member, not {members}")
                layouts[name] = conn
            copies[conn.table] = (action, conn)
        return cls(layouts, copies)

    def decode(self, packed: int, digest: str = "conn_opened_t") -> ConnEvent:
        conn = self.layouts[digest]
        values: dict[str, int] = {}
        for name, width in reversed(conn.match + conn.params):
            values[name] = packed & ((1 << width) - 1)
            packed >>= width
        flow = (conn.table, tuple((name, values[name]) for name, _ in conn.match))
        backend = tuple(values[name] for name, _ in conn.params)
        return ConnEvent(packed & ((1 << EVENT_BITS) - 1), flow, backend)

    def event(self, member: Any, digest: str = "conn_opened_t") -> ConnEvent:
        """One member of a `digest` list (a P4Data struct of one bit string); DigestError
        if it is not that."""
        conn = self.layouts[digest]
        width = EVENT_BITS + sum(w for _, w in conn.match + conn.params)
        return self.decode(packed(member, width), digest)

    def copy(self, flow: FlowKey, backend: Backend | None) -> Entry:
        """The entry a balancer holds for a connection another one opened (None: its key
        alone, to remove it)."""
        table, match = flow
        action, conn = self.copies[table]
        names = [n for n, _ in conn.params]
        values = backend if isinstance(backend, tuple) else (0,) * len(names)
        return Entry(table, match, action, tuple(zip(names, values, strict=True)))


def flow_of(entry: Entry) -> FlowKey:
    """A conn_table or conn6_table entry's match as a flow key (its fields are all exact)."""
    return entry.table, tuple((name, entry.exact(name)) for name, _ in entry.match)


def pin(entry: Entry) -> bool:
    """Whether an entry is a collision pin (conn_table's use_backend, conn6_table's
    use_backend6), not a shared copy."""
    return (entry.table, entry.action) in PINS


@dataclass
class Shared:
    """The live shared connections and where each has its copies; incremental, so a busy
    tier (hundreds of new connections a second) costs work per event, not per live
    connection.

    The caller names the balancers (`join`); `writes` and `deletes` hand out, per balancer,
    what to write next; the caller reports what it wrote with `written` / `removed`, so a
    balancer that was down gets its copies when it returns (`lost`, then `join` fresh)."""

    conns: dict[FlowKey, tuple[str, Backend]] = field(default_factory=dict)  # -> (owner, backend)
    # (when its copies go, flow, when it closed)
    closing: deque[tuple[float, FlowKey, float]] = field(default_factory=deque)
    held: dict[str, set[FlowKey]] = field(default_factory=dict)  # copies on each balancer
    pending: dict[str, dict[FlowKey, Backend]] = field(default_factory=dict)  # to write
    pending_del: dict[str, set[FlowKey]] = field(default_factory=dict)  # to remove
    # Copies a balancer let age out (never hit for the copy TTL): not written there again.
    aged: dict[str, set[FlowKey]] = field(default_factory=dict)
    # When each live connection's event reached the controller, and how long its copies
    # then took to be written (seconds, the latest ones): the window in which its first
    # balancer's death would still break it.
    since: dict[FlowKey, float] = field(default_factory=dict)
    delays: list[float] = field(default_factory=list)
    young: deque[tuple[float, FlowKey]] = field(default_factory=deque)  # not yet copied
    ended: set[FlowKey] = field(default_factory=set)  # closed, in their grace
    # Closes reported before their opens (flow -> (when, backend id)), and their order.
    early: dict[FlowKey, tuple[float, Backend | None]] = field(default_factory=dict)
    early_order: deque[tuple[float, FlowKey]] = field(default_factory=deque)

    def join(self, balancer: str, fresh: bool = False) -> None:
        """A balancer to keep copies on; `fresh` (it lost its state: it just joined or
        restarted): it gets every live connection, its own former ones included."""
        self.held.setdefault(balancer, set())
        self.aged.setdefault(balancer, set())
        todo = self.pending.setdefault(balancer, {})
        self.pending_del.setdefault(balancer, set())
        for f, (owner, bid) in self.conns.items():
            if (
                (fresh or owner != balancer)
                and f not in self.held[balancer]
                and f not in self.ended
            ):
                todo[f] = bid

    def adopt(self, balancer: str, copies: list[tuple[FlowKey, Backend]], now: float) -> None:
        """`balancer` holds these copies (a controller that took it over read them): live
        connections, each to be copied to every balancer that lacks it (`learn`)."""
        self.held.setdefault(balancer, set())
        for flow, _ in copies:
            self.held[balancer].add(flow)
            self.pending.get(balancer, {}).pop(flow, None)  # handed to it by another's adopt
        self.learn(copies, now)

    def learn(self, copies: list[tuple[FlowKey, Backend]], now: float) -> None:
        """Copies some balancer holds: live connections whose owner is not known (the events
        went to another controller); each balancer that lacks one gets it, its owner too (a
        copy there names the backend its own state names)."""
        for flow, backend_id in copies:
            if flow in self.conns:
                continue
            self.conns[flow] = ("", backend_id)
            self.since[flow] = now
            for b, todo in self.pending.items():
                if flow not in self.held[b]:
                    todo[flow] = backend_id

    def opened(self, owner: str, flow: FlowKey, backend_id: Backend, now: float = 0.0) -> None:
        """A connection opened on `owner`; copied to the others once it is COPY_AFTER_S
        old and still open (`expire` promotes it)."""
        self.conns[flow] = (owner, backend_id)
        self.since[flow] = now
        self.ended.discard(flow)
        self.young.append((now, flow))
        # A reused 5-tuple: a balancer holding the old connection's copy would send the new
        # one's packets to the old backend (it takes a copy before a cookie). Overwritten at
        # once, not removed: removals wait behind copies under load.
        for b, todo in self.pending.items():
            if flow in self.held[b]:
                todo[flow] = backend_id
                self.pending_del[b].discard(flow)
        # Its close came first (a digest list's samples out of order): it is over already.
        when, bid = self.early.get(flow, (None, None))
        if when is not None and bid in (None, backend_id):
            del self.early[flow]
            self.closed(flow, now, backend_id)

    def _copy(self, flow: FlowKey) -> None:
        owner, backend_id = self.conns[flow]
        for b, todo in self.pending.items():
            if b != owner and flow not in self.held[b]:
                todo[flow] = backend_id
                self.pending_del[b].discard(flow)
                self.aged[b].discard(flow)

    def closed(self, flow: FlowKey, now: float, backend_id: Backend | None = None) -> None:
        """The client ended `flow` (its connection to `backend_id`): its copies go after
        the grace. A close of no live connection, or naming another backend (a reused
        5-tuple's old connection's, reported after the new one opened: events from
        different balancers race), waits EARLY_CLOSE_S for an open it ends."""
        known = self.conns.get(flow)
        if known is None or (backend_id is not None and known[1] != backend_id):
            # Not opened yet (its open may follow: samples arrive out of order), or the
            # open of a reused 5-tuple's new connection came before the old one's close.
            self.early[flow] = (now, backend_id)
            self.early_order.append((now, flow))
            return
        self.closing.append((now + CLOSE_GRACE_S, flow, now))
        self.ended.add(flow)

    def expire(self, now: float) -> None:
        """Copy the connections that reached COPY_AFTER_S still open; forget those whose
        grace after the close is over (their copies go)."""
        while self.young and self.young[0][0] <= now - COPY_AFTER_S:
            opened_at, flow = self.young.popleft()
            if flow in self.conns and self.since.get(flow) == opened_at and flow not in self.ended:
                self._copy(flow)
        while self.early_order and self.early_order[0][0] <= now - EARLY_CLOSE_S:
            when, flow = self.early_order.popleft()
            if self.early.get(flow, (None, None))[0] == when:
                del self.early[flow]
        while self.closing and self.closing[0][0] <= now:
            _, flow, closed_at = self.closing.popleft()
            if flow not in self.conns:
                continue
            # Opened again since that close (a reused 5-tuple). Compared with the close's own
            # time, not recomputed from the due time: an open whose close came first ends at
            # the open's instant, and 5.01 - 5.0 < 0.01 in floating point kept every such
            # connection for ever (80 % of short ones: the controller's memory grew with
            # every connection the tier opened).
            if self.since.get(flow, 0.0) > closed_at:
                continue
            self._forget(flow)

    def _forget(self, flow: FlowKey) -> None:
        self.conns.pop(flow, None)
        self.since.pop(flow, None)
        self.ended.discard(flow)
        for b, have in self.held.items():
            self.pending[b].pop(flow, None)
            if flow in have:
                self.pending_del[b].add(flow)

    def writes(self, balancer: str) -> list[tuple[FlowKey, Backend]]:
        """The copies to write on `balancer` now (handed out once)."""
        todo = self.pending.get(balancer)
        if not todo:
            return []
        out = sorted(todo.items(), key=lambda item: item[0])
        todo.clear()
        return out

    def deletes(self, balancer: str) -> list[FlowKey]:
        todo = self.pending_del.get(balancer)
        if not todo:
            return []
        out = sorted(todo)
        todo.clear()
        return out

    def written(
        self, balancer: str, flows: list[FlowKey], now: float = 0.0, timed: bool = True
    ) -> None:
        """`flows` are on `balancer` now; `timed`: their delays since the event count (not
        for the whole state written to a balancer that joins)."""
        if balancer not in self.pending:
            return  # it left meanwhile: its copies count for nothing
        have = self.held.setdefault(balancer, set())
        for f in flows:
            if f in self.conns:
                have.add(f)
                if timed and now and f in self.since:
                    self.delays.append(now - self.since[f])
            else:  # closed meanwhile: remove it again
                self.pending_del.setdefault(balancer, set()).add(f)
        del self.delays[:-10_000]

    def retry(self, balancer: str, copies: list[tuple[FlowKey, Backend]]) -> None:
        """Copies the switch refused (not as duplicates): handed out again next time."""
        todo = self.pending.get(balancer)
        if todo is None:
            return  # it left meanwhile
        for f, bid in copies:
            if f in self.conns:
                todo[f] = bid

    def removed(self, balancer: str, flows: list[FlowKey]) -> None:
        self.held.setdefault(balancer, set()).difference_update(flows)

    def idle(self, balancer: str, flow: FlowKey) -> None:
        """The balancer's copy of `flow` aged out (the switch removes it): not written
        there again; the connection is forgotten once no balancer holds a copy."""
        self.held.setdefault(balancer, set()).discard(flow)
        self.aged.setdefault(balancer, set()).add(flow)
        if not any(flow in h for h in self.held.values()):
            self._forget(flow)
            for a in self.aged.values():
                a.discard(flow)

    def lost(self, balancer: str) -> None:
        """The balancer restarted or left: it holds no copies any more, and gets none until
        it joins again (fresh)."""
        for store in (self.held, self.aged, self.pending, self.pending_del):
            store.pop(balancer, None)
