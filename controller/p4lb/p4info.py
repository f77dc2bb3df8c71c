"""The committed P4Info: names, ids, widths and sizes, and the codec between our entries
and P4Runtime messages. Pure: it reads a file and builds protobuf messages, nothing more."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

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
        matches = {
            m.field_id: (m.lpm.value, m.lpm.prefix_len) if m.HasField("lpm") else (m.exact.value, 0)
            for m in te.match
        }
        params = {p.param_id: p.value for p in te.action.action.params}
        return self._entry(te.table_id, matches, te.action.action.action_id, params)

    def decode_read_response(self, raw: bytes) -> list[Entry]:
        """The table entries of a serialized ReadResponse, decoded straight from the wire.

        p4runtime-shell pins protobuf < 3.21, which has no compiled extension for Python
        3.11: parsing a read of a few thousand entries through protobuf took most of a
        no-op `p4lb apply`. Table entries use a handful of fields, read here directly."""
        out = []
        for fno, entity in _wire(raw):
            if fno != _F_ENTITIES:
                continue
            for eno, te in _wire(entity):
                if eno == _F_TABLE_ENTRY:
                    out.append(self._decode_wire_entry(te))
        return out

    def _decode_wire_entry(self, te: bytes) -> Entry:
        table_id = action_id = 0
        matches: dict[int, tuple[bytes, int]] = {}
        params: dict[int, bytes] = {}
        for fno, value in _wire(te):
            if fno == _F_TABLE_ID:
                table_id = value
            elif fno == _F_MATCH:
                field_id, kind, body = 0, 0, b""
                for mno, mval in _wire(value):
                    if mno == _F_FIELD_ID:
                        field_id = mval
                    elif mno in (_F_EXACT, _F_LPM):
                        kind, body = mno, mval
                got = dict(_wire(body))
                if kind == _F_LPM:
                    matches[field_id] = (
                        got.get(_F_LPM_VALUE, b""),
                        got.get(_F_LPM_PREFIX_LEN, 0),
                    )
                else:
                    matches[field_id] = (got.get(_F_EXACT_VALUE, b""), 0)
            elif fno == _F_ACTION:
                for ano, action in _wire(value):
                    if ano != _F_ACTION_ACTION:
                        continue
                    for pno, pval in _wire(action):
                        if pno == _F_ACTION_ID:
                            action_id = pval
                        elif pno == _F_PARAMS:
                            param = dict(_wire(pval))
                            params[param.get(_F_PARAM_ID, 0)] = param.get(_F_PARAM_VALUE, b"")
        return self._entry(table_id, matches, action_id, params)

    def _entry(
        self,
        table_id: int,
        matches: dict[int, tuple[bytes, int]],
        action_id: int,
        params: dict[int, bytes],
    ) -> Entry:
        tab = self.tables_by_id[table_id]
        match: list[tuple[str, MatchValue]] = []
        for f in tab.fields:
            value, prefix_len = matches.get(f.id, (b"", 0))
            number = int.from_bytes(value, "big")
            if f.match_type == p4info_pb2.MatchField.LPM:
                match.append((f.name, (number, prefix_len)))
            else:
                match.append((f.name, number))
        act = self.actions_by_id[action_id]
        values = tuple((p.name, int.from_bytes(params.get(p.id, b""), "big")) for p in act.params)
        return Entry(tab.name, tuple(match), act.name, values)


def _number(message: Any, name: str) -> int:
    return int(message.DESCRIPTOR.fields_by_name[name].number)


# Field numbers of the P4Runtime messages a table read returns, from the descriptors.
_F_ENTITIES = _number(p4runtime_pb2.ReadResponse, "entities")
_F_TABLE_ENTRY = _number(p4runtime_pb2.Entity, "table_entry")
_F_TABLE_ID = _number(p4runtime_pb2.TableEntry, "table_id")
_F_MATCH = _number(p4runtime_pb2.TableEntry, "match")
_F_ACTION = _number(p4runtime_pb2.TableEntry, "action")
_F_FIELD_ID = _number(p4runtime_pb2.FieldMatch, "field_id")
_F_EXACT = _number(p4runtime_pb2.FieldMatch, "exact")
_F_LPM = _number(p4runtime_pb2.FieldMatch, "lpm")
_F_EXACT_VALUE = _number(p4runtime_pb2.FieldMatch.Exact, "value")
_F_LPM_VALUE = _number(p4runtime_pb2.FieldMatch.LPM, "value")
_F_LPM_PREFIX_LEN = _number(p4runtime_pb2.FieldMatch.LPM, "prefix_len")
_F_ACTION_ACTION = _number(p4runtime_pb2.TableAction, "action")
_F_ACTION_ID = _number(p4runtime_pb2.Action, "action_id")
_F_PARAMS = _number(p4runtime_pb2.Action, "params")
_F_PARAM_ID = _number(p4runtime_pb2.Action.Param, "param_id")
_F_PARAM_VALUE = _number(p4runtime_pb2.Action.Param, "value")


def _wire(buf: bytes) -> Iterator[tuple[int, Any]]:
    """(field number, value) for each field of one serialized protobuf message: varints as
    int, length-delimited fields as bytes; fixed-width fields are skipped."""
    i, end = 0, len(buf)
    while i < end:
        key, i = _varint(buf, i)
        kind = key & 7
        if kind == 0:
            number, i = _varint(buf, i)
            yield key >> 3, number
        elif kind == 2:
            size, i = _varint(buf, i)
            yield key >> 3, buf[i : i + size]
            i += size
        elif kind in (1, 5):
            i += 8 if kind == 1 else 4
        else:
            raise P4InfoError(f"unexpected protobuf wire type {kind} in a read response")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


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
