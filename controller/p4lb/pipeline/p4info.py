"""The committed P4Info as a schema: names, ids, widths and sizes, serializable enums and
digest layouts, and the `Limits` they set on a config. Pure: it reads the P4Info file (the
contract with the data plane, p4.config.v1); turning entries into P4Runtime messages is the
switch client's job (p4lb.switch.codec)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple, TypeVar

from finsy.proto import p4i as p4info_pb2
from google.protobuf import text_format

T = TypeVar("T")

# The package's own copy when installed with one, else the repository's.
COMPILED_DIR = Path(__file__).resolve().parents[1] / "compiled"
P4INFO_NAME = "lb.p4info.txtpb"
BMV2_JSON_NAME = "lb.json"


def compiled_dir() -> Path:
    """Where the compiled artifacts live: in the package when installed, else the repo's."""
    if (COMPILED_DIR / P4INFO_NAME).exists():
        return COMPILED_DIR
    return Path(__file__).resolve().parents[3] / "p4src" / "compiled"


class P4InfoError(Exception):
    """An entry does not fit the P4Info (unknown name, value too wide)."""


@dataclass(frozen=True)
class Limits:
    """What the compiled data plane offers: table capacities and the algorithm names, all
    read from the P4Info (`Schema.limits`); nothing here repeats a P4 constant."""

    algorithms: tuple[str, ...]
    max_services: int
    max_backends: int
    pool_table_size: int
    wrr_table_size: int
    route_table_size: int
    ipv6_route_table_size: int
    max_slots_per_vip: int
    # Candidates a least-* slot has room for (set_candidates' candidate_k parameters).
    max_candidates: int
    # Switch ports that can carry a queueing discipline at once (qos_port_table).
    qos_ports: int = 0


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
        self.meters = {_short(m.preamble.name): m for m in info.meters}

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
            wrr_table_size=self.table("slot_table").size,
            route_table_size=self.table("ipv4_route_table").size,
            ipv6_route_table_size=self.table("ipv6_route_table").size,
            max_slots_per_vip=(1 << self.param("set_vip", "slot_count").bitwidth) - 1,
            max_candidates=sum(
                1 for p in self.action("set_candidates").params if p.name.startswith("candidate_")
            ),
            qos_ports=self.tables["qos_port_table"].size if "qos_port_table" in self.tables else 0,
        )

    def param(self, action: str, name: str) -> Field:
        for p in self.action(action).params:
            if p.name == name:
                return p
        raise P4InfoError(f"P4Info action {action!r} has no parameter {name!r}")


def _lookup(store: dict[str, T], kind: str, name: str) -> T:
    try:
        return store[name]
    except KeyError:
        raise P4InfoError(f"P4Info has no {kind} {name!r}") from None


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


def compiled_limits() -> Limits:
    """The limits of the committed P4 program."""
    return schema().limits()
