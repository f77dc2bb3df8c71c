"""The committed P4Info: names, ids, widths and sizes, serializable enums and digest
layouts, and the codec between our entries and P4Runtime messages. Pure: it reads a file
and builds protobuf messages, nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple, TypeVar

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r as p4runtime_pb2
from google.protobuf import text_format

from p4lb.config import Limits
from p4lb.entries import Entry, MatchValue

T = TypeVar("T")

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


class Field(NamedTuple):
    """A match field or an action parameter."""

    name: str
    id: int
    bitwidth: int
    match_type: int = 0


class Action(NamedTuple):
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
        self.actions_by_id = {
            a.preamble.id: Action(
                _short(a.preamble.name),
                a.preamble.id,
                tuple(Field(p.name, p.id, p.bitwidth) for p in a.params),
            )
            for a in info.actions
        }
        self.actions = {a.name: a for a in self.actions_by_id.values()}
        notify = p4info_pb2.Table.IdleTimeoutBehavior.NOTIFY_CONTROL
        self.tables_by_id = {
            t.preamble.id: Table(
                name=_short(t.preamble.name),
                id=t.preamble.id,
                size=t.size,
                fields=tuple(Field(f.name, f.id, f.bitwidth, f.match_type) for f in t.match_fields),
                actions=tuple(self.actions_by_id[r.id].name for r in t.action_refs),
                idle_timeout=t.idle_timeout_behavior == notify,
            )
            for t in info.tables
        }
        self.tables = {t.name: t for t in self.tables_by_id.values()}
        self.counters = {_short(c.preamble.name): c for c in info.counters}
        self.direct_counters = {_short(c.preamble.name): c for c in info.direct_counters}
        self.digests = {_short(d.preamble.name): d for d in info.digests}

    def table(self, name: str) -> Table:
        return _lookup(self.tables, "table", name)

    def action(self, name: str) -> Action:
        return _lookup(self.actions, "action", name)

    def counter_id(self, name: str) -> int:
        return int(_lookup(self.counters, "counter", name).preamble.id)

    def counter_size(self, name: str) -> int:
        return int(_lookup(self.counters, "counter", name).size)

    def direct_counter_table(self, name: str) -> str:
        """The table a direct counter counts the entries of."""
        table_id = _lookup(self.direct_counters, "direct counter", name).direct_table_id
        return self.tables_by_id[table_id].name

    def digest_id(self, name: str) -> int:
        return int(_lookup(self.digests, "digest", name).preamble.id)

    def digest_fields(self, name: str) -> tuple[tuple[str, int], ...]:
        """The members of a digest's struct as (name, bit width), in P4 declaration order
        (the order of a digest message's members)."""
        struct = _lookup(self.digests, "digest", name).type_spec.struct.name
        return tuple(
            (m.name, m.type_spec.bitstring.bit.bitwidth)
            for m in self.info.type_info.structs[struct].members
        )

    def enum(self, name: str) -> dict[str, int] | None:
        """A P4 serializable enum as {member name in lower case: value}; None if the
        program declares no such enum."""
        if name not in self.info.type_info.serializable_enums:
            return None
        members = self.info.type_info.serializable_enums[name].members
        return {m.name.lower(): int.from_bytes(m.value, "big") for m in members}

    def _required_enum(self, name: str) -> dict[str, int]:
        found = self.enum(name)
        if found is None:
            raise P4InfoError(f"P4Info declares no serializable enum {name!r}")
        return found

    def algorithms(self) -> dict[str, int]:
        """Algorithm name -> the code `set_vip` takes (the P4 `Algorithm` enum)."""
        return self._required_enum("Algorithm")

    def drop_reasons(self) -> dict[int, str]:
        """Drop reason code -> name (the P4 `DropReason` enum), without 'none' (code 0)."""
        codes = self._required_enum("DropReason")
        return {code: name for name, code in codes.items() if code != 0}

    def drop_counter_stride(self) -> int:
        """Cells of the `drops` counter per service: drops[service * stride + reason]."""
        return self.counter_size("drops") // self.table("vip_table").size

    def limits(self) -> Limits:
        """The data plane's capacities and algorithms, as compiled."""
        return Limits(
            algorithms=tuple(sorted(self.algorithms(), key=self.algorithms().__getitem__)),
            max_services=self.table("vip_table").size,
            max_backends=self.table("backend_table").size,
            pool_table_size=self.table("pool_table").size,
            wrr_table_size=self.table("wrr_table").size,
            route_table_size=self.table("ipv4_route_table").size,
            max_slots_per_vip=(1 << self.param("set_vip", "slot_count").bitwidth) - 1,
        )

    def param(self, action: str, name: str) -> Field:
        for p in self.action(action).params:
            if p.name == name:
                return p
        raise P4InfoError(f"P4Info action {action!r} has no parameter {name!r}")

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
        if action_id == 0:  # BMv2 answers a direct counter read with the match only
            return Entry(tab.name, tuple(match), "", ())
        act = self.actions_by_id[action_id]
        values = tuple((p.name, int.from_bytes(params.get(p.id, b""), "big")) for p in act.params)
        return Entry(tab.name, tuple(match), act.name, values)


def _lookup(store: dict[str, T], kind: str, name: str) -> T:
    try:
        return store[name]
    except KeyError:
        raise P4InfoError(f"P4Info has no {kind} {name!r}") from None


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
