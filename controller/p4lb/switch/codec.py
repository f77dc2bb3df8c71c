"""Our Entry values <-> P4Runtime TableEntry messages (p4.v1), by the names, ids and widths of
the P4Info schema; values in P4Runtime's canonical bytes."""

from __future__ import annotations

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r as p4runtime_pb2

from p4lb.pipeline.entries import Entry, MatchValue
from p4lb.pipeline.p4info import P4InfoError, Schema


def encode(
    schema: Schema, entry: Entry, into: p4runtime_pb2.TableEntry | None = None
) -> p4runtime_pb2.TableEntry:
    """`entry` as a P4Runtime TableEntry, with canonical byte strings; written into `into`
    when given (a write request's own message: no copy of a large batch)."""
    tab = schema.table(entry.table)
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
    act = schema.action(entry.action)
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


def decode(schema: Schema, te: p4runtime_pb2.TableEntry) -> Entry:
    """A P4Runtime TableEntry read from the switch as our Entry."""
    tab = schema.tables_by_id[te.table_id]
    matches = {
        m.field_id: (m.lpm.value, m.lpm.prefix_len) if m.HasField("lpm") else (m.exact.value, 0)
        for m in te.match
    }
    match: list[tuple[str, MatchValue]] = []
    for f in tab.fields:
        value, prefix_len = matches.get(f.id, (b"", 0))
        number = int.from_bytes(value, "big")
        if f.match_type == p4info_pb2.MatchField.LPM:
            match.append((f.name, (number, prefix_len)))
        else:
            match.append((f.name, number))
    action_id = te.action.action.action_id
    if action_id == 0:  # BMv2 answers a direct counter read with the match only
        return Entry(tab.name, tuple(match), "", ())
    act = schema.actions_by_id[action_id]
    params = {p.param_id: p.value for p in te.action.action.params}
    values = tuple((p.name, int.from_bytes(params.get(p.id, b""), "big")) for p in act.params)
    return Entry(tab.name, tuple(match), act.name, values)


def to_bytes(value: int, bitwidth: int, what: str) -> bytes:
    """Canonical P4Runtime bytes: big-endian, no leading zero bytes, at least one byte."""
    if value < 0 or value >= 1 << bitwidth:
        raise P4InfoError(f"{what}: {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
