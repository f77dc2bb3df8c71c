"""The committed P4Info: names, ids, widths and sizes, and the codec between our entries
and P4Runtime messages. Pure: it reads a file and builds protobuf messages, nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4lb.config import Limits
from p4lb.entries import Entry, MatchValue

COMPILED_DIR = Path(__file__).resolve().parent / "compiled"
P4INFO_NAME = "lb.p4info.txtpb"
BMV2_JSON_NAME = "lb.json"


def compiled_dir() -> Path:
    """Where the compiled artifacts live: in the package when installed, else the repo's."""
    if (COMPILED_DIR / P4INFO_NAME).exists():
        return COMPILED_DIR
    return Path(__file__).resolve().parents[2] / "p4src" / "compiled"


class P4InfoError(Exception):
    """An entry does not fit the P4Info (unknown name, value too wide)."""


@dataclass(frozen=True)
class Field:
    name: str
    id: int
    bitwidth: int
    match_type: int = 0


@dataclass(frozen=True)
class Action:
    name: str
    id: int
    params: tuple[Field, ...]


@dataclass(frozen=True)
class Table:
    name: str
    id: int
    size: int
    fields: tuple[Field, ...]
    actions: tuple[str, ...]
    idle_timeout: bool


class Schema:
    """Name/id lookups over one P4Info message."""

    def __init__(self, info: p4info_pb2.P4Info) -> None:
        self.info = info
        self.actions: dict[str, Action] = {}
        self.actions_by_id: dict[int, Action] = {}
        for a in info.actions:
            act = Action(
                name=_short(a.preamble.name),
                id=a.preamble.id,
                params=tuple(Field(p.name, p.id, p.bitwidth) for p in a.params),
            )
            self.actions[act.name] = act
            self.actions_by_id[act.id] = act
        self.tables: dict[str, Table] = {}
        self.tables_by_id: dict[int, Table] = {}
        for t in info.tables:
            tab = Table(
                name=_short(t.preamble.name),
                id=t.preamble.id,
                size=t.size,
                fields=tuple(Field(f.name, f.id, f.bitwidth, f.match_type) for f in t.match_fields),
                actions=tuple(_short(self.actions_by_id[r.id].name) for r in t.action_refs),
                idle_timeout=t.idle_timeout_behavior
                == p4info_pb2.Table.IdleTimeoutBehavior.NOTIFY_CONTROL,
            )
            self.tables[tab.name] = tab
            self.tables_by_id[tab.id] = tab
        self.counters = {_short(c.preamble.name): c for c in info.counters}
        self.digests = {_short(d.preamble.name): d for d in info.digests}

    def table(self, name: str) -> Table:
        try:
            return self.tables[name]
        except KeyError:
            raise P4InfoError(f"P4Info has no table {name!r}") from None

    def action(self, name: str) -> Action:
        try:
            return self.actions[name]
        except KeyError:
            raise P4InfoError(f"P4Info has no action {name!r}") from None

    def counter_id(self, name: str) -> int:
        try:
            return int(self.counters[name].preamble.id)
        except KeyError:
            raise P4InfoError(f"P4Info has no counter {name!r}") from None

    def counter_size(self, name: str) -> int:
        return int(self.counters[name].size)

    def limits(self) -> Limits:
        """The data plane's capacities, as compiled."""
        return Limits(
            max_services=self.table("vip_table").size,
            max_backends=self.table("backend_table").size,
            pool_table_size=self.table("pool_table").size,
            wrr_table_size=self.table("wrr_table").size,
            route_table_size=self.table("ipv4_route_table").size,
        )

    # ------------------------------------------------------------ codec

    def encode(
        self, entry: Entry, into: p4runtime_pb2.TableEntry | None = None
    ) -> p4runtime_pb2.TableEntry:
        """Our Entry as a P4Runtime TableEntry, with canonical byte strings; written into
        `into` when given (a write request's own message: no copy of a large batch)."""
        tab = self.table(entry.table)
        te = p4runtime_pb2.TableEntry() if into is None else into
        te.table_id = tab.id
        given = dict(entry.match)
        for f in tab.fields:
            if f.name not in given:
                raise P4InfoError(f"{entry.table}: match field {f.name!r} missing")
            value = given.pop(f.name)
            m = te.match.add(field_id=f.id)
            if f.match_type == p4info_pb2.MatchField.LPM:
                if not isinstance(value, tuple):
                    raise P4InfoError(f"{entry.table}.{f.name}: LPM needs (value, prefix_len)")
                addr, plen = value
                if plen == 0:
                    te.match.pop()  # a /0 route is the absence of the field in P4Runtime
                    continue
                mask = ((1 << plen) - 1) << (f.bitwidth - plen)
                m.lpm.value = to_bytes(addr & mask, f.bitwidth, f"{entry.table}.{f.name}")
                m.lpm.prefix_len = plen
            else:
                if isinstance(value, tuple):
                    raise P4InfoError(f"{entry.table}.{f.name}: exact match takes one value")
                m.exact.value = to_bytes(value, f.bitwidth, f"{entry.table}.{f.name}")
        if given:
            raise P4InfoError(f"{entry.table}: unknown match fields {sorted(given)}")
        if entry.action not in tab.actions:
            raise P4InfoError(f"{entry.table}: action {entry.action!r} not allowed")
        act = self.action(entry.action)
        te.action.action.action_id = act.id
        params = dict(entry.params)
        for p in act.params:
            if p.name not in params:
                raise P4InfoError(f"{entry.action}: parameter {p.name!r} missing")
            te.action.action.params.add(
                param_id=p.id,
                value=to_bytes(params.pop(p.name), p.bitwidth, f"{entry.action}.{p.name}"),
            )
        if params:
            raise P4InfoError(f"{entry.action}: unknown parameters {sorted(params)}")
        return te

    def decode(self, te: p4runtime_pb2.TableEntry) -> Entry:
        """A P4Runtime TableEntry read from the switch as our Entry."""
        tab = self.tables_by_id[te.table_id]
        by_id = {m.field_id: m for m in te.match}
        match: list[tuple[str, MatchValue]] = []
        for f in tab.fields:
            m = by_id.get(f.id)
            if f.match_type == p4info_pb2.MatchField.LPM:
                if m is None:
                    match.append((f.name, (0, 0)))
                else:
                    match.append((f.name, (int.from_bytes(m.lpm.value, "big"), m.lpm.prefix_len)))
            else:
                match.append((f.name, int.from_bytes(m.exact.value, "big") if m else 0))
        act = self.actions_by_id[te.action.action.action_id]
        pvals = {p.param_id: int.from_bytes(p.value, "big") for p in te.action.action.params}
        params = tuple((p.name, pvals.get(p.id, 0)) for p in act.params)
        return Entry(tab.name, tuple(match), act.name, params)


def to_bytes(value: int, bitwidth: int, what: str) -> bytes:
    """Canonical P4Runtime bytes: big-endian, no leading zero bytes, at least one byte."""
    if value < 0 or value >= 1 << bitwidth:
        raise P4InfoError(f"{what}: {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def load_p4info(path: Path | None = None) -> p4info_pb2.P4Info:
    p = path or compiled_dir() / P4INFO_NAME
    info = p4info_pb2.P4Info()
    text_format.Parse(p.read_text(), info)
    return info


@cache
def schema(path: Path | None = None) -> Schema:
    """The schema of the committed P4Info (cached)."""
    return Schema(load_p4info(path))
