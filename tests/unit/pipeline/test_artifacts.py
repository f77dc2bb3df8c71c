"""The committed compiled artifacts are the controller's contract: they must come from
the current P4 sources, and hold every name and shape the controller writes."""

from __future__ import annotations

import importlib.util
import ipaddress
import json

import pytest
from finsy.proto import p4d
from finsy.proto import p4i as p4info_pb2
from google.protobuf import text_format

from p4lb.intent import reader
from p4lb.models import hashing as model
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.digests import ConnDigests, DigestError
from p4lb.pipeline.entries import MULTICAST, Entry
from p4lb.pipeline.p4info import P4InfoError, Schema, load_p4info
from p4lb.pipeline.shared import ConnEvents, pin
from p4lb.switch.codec import decode, encode
from tests.unit.support import COMPILED, DEFAULT_CONFIG, ROOT

spec = importlib.util.spec_from_file_location("p4hash", ROOT / "scripts" / "p4_sources_hash.py")
assert spec and spec.loader
p4hash = importlib.util.module_from_spec(spec)
spec.loader.exec_module(p4hash)

EXACT = p4info_pb2.MatchField.EXACT
LPM = p4info_pb2.MatchField.LPM

# table -> [(field, bitwidth, match type)], action -> [(param, bitwidth)]
TABLES = {
    "vip_address_table": [("addr", 32, EXACT)],
    "vip_source_table": [("addr", 32, EXACT)],
    "vip_table": [("addr", 32, EXACT), ("protocol", 8, EXACT), ("port", 16, EXACT)],
    "pool_table": [("service_id", 32, EXACT), ("version", 1, EXACT), ("index", 16, EXACT)],
    "slot_table": [("service_id", 32, EXACT), ("version", 1, EXACT), ("slot", 16, EXACT)],
    "backend_table": [("backend_id", 32, EXACT)],
    "backend_port_table": [("backend_id", 32, EXACT)],
    "reverse_nat_table": [("addr", 32, EXACT), ("protocol", 8, EXACT), ("port", 16, EXACT)],
    "conn_table": [
        ("src_addr", 32, EXACT),
        ("dst_addr", 32, EXACT),
        ("protocol", 8, EXACT),
        ("src_port", 16, EXACT),
        ("dst_port", 16, EXACT),
    ],
    "conn6_table": [
        ("src_addr", 128, EXACT),
        ("dst_addr", 128, EXACT),
        ("protocol", 8, EXACT),
        ("src_port", 16, EXACT),
        ("dst_port", 16, EXACT),
    ],
    "ipv4_route_table": [("dst_addr", 32, LPM)],
    "ipv6_route_table": [("dst_addr", 128, LPM)],
    "conn_share_table": [("service_id", 32, EXACT)],
    "cookie_table": [("service_id", 32, EXACT), ("cookie", 10, EXACT)],
}
ACTIONS = {
    "vip_address": [("vip_mac", 48)],
    "set_vip": [
        ("service_id", 32),
        ("algorithm", 8),
        ("version", 1),
        ("pool_size", 16),
        ("slot_count", 16),
        ("shared", 1),
    ],
    "set_member": [("backend_id", 32)],
    "set_backend_port": [("switch_port", 9)],
    "set_backend": [
        ("addr", 32),
        ("port", 16),
        ("src_mac", 48),
        ("dst_mac", 48),
    ],
    # 16 places: exact least-* for pools up to 16 backends (results/algorithms/candidates).
    "set_candidates": [
        (name, width)
        for k in range(16)
        for name, width in ((f"candidate_{k}", 32), (f"weight_{k}", 16))
    ],
    "set_vip_source": [
        ("vip_addr", 32),
        ("vip_port", 16),
        ("service_id", 32),
        ("backend_id", 32),
        ("track_time", 1),
        ("cookie", 1),
    ],
    "use_backend": [("backend_id", 32)],
    "use_backend6": [("backend_id", 32), ("switch_port", 9)],
    "set_vip6_source": [
        ("vip_addr", 128),
        ("vip_port", 16),
        ("service_id", 32),
        ("backend_id", 32),
        ("csum_delta", 16),
        ("track_time", 1),
        ("cookie", 1),
    ],
    "use_shared_backend": [("backend_id", 32)],
    "use_shared_backend6": [("backend_id", 32), ("switch_port", 9)],
    "share_connection": [],
    "use_cookie": [("backend_id", 32)],
    "forward": [("port", 9), ("src_mac", 48), ("dst_mac", 48)],
    "forward_ipv6": [("port", 9), ("src_mac", 48), ("dst_mac", 48)],
    "refuse_vip_packet": [],
    "vip_source": [],
}
# Counters indexed by backend id (the sizes themselves live only in the P4Info).
PER_BACKEND = ("backend_conns", "backend_established", "backend_closes")


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema(load_p4info(COMPILED / "lb.p4info.txtpb"))


def test_artifacts_were_compiled_from_the_current_sources() -> None:
    stamp = (COMPILED / "SOURCES.sha256").read_text().split()[0]
    assert stamp == p4hash.sources_hash(), "p4src changed without `make artifacts`"


def test_bmv2_json_is_a_v1model_program_with_our_tables() -> None:
    prog = json.loads((COMPILED / "lb.json").read_text())
    names = {t["name"] for p in prog["pipelines"] for t in p["tables"]}
    assert {"vip_table", "conn_table", "slot_table", "ipv4_route_table"} <= names
    regs = {r["name"].rsplit(".", 1)[-1]: r for r in prog["register_arrays"]}
    # The reference model (and the collision figures) assume the data plane's geometry.
    assert regs["conn_state"]["size"] == model.CONN_BUCKETS
    assert regs["conn_state"]["bitwidth"] == model.CONN_SLOT_BITS * model.CONN_WAYS
    # Per-backend load for the LEAST* algorithms, indexed like the backend counters.
    backends = raw_sizes()["tables"]["backend_table"]
    for name in ("active_conns", "response_time", "packet_window"):
        assert regs[name]["size"] == backends


def _metadata_fields(program: str) -> set[str]:
    prog = json.loads((COMPILED / f"{program}.json").read_text())
    return {
        name.split(".", 1)[1]
        for h in prog["header_types"]
        if h["name"].startswith("scalars")
        for name, *_ in h["fields"]
        if name.startswith("metadata_t.")
    }


def test_the_baseline_carries_only_the_metadata_plain_forwarding_uses() -> None:
    """BMv2 resets every metadata field of every packet: a baseline carrying the load
    balancer's fields would pay part of its cost and flatter every ratio to it. Plain
    forwarding parses no transport header, so it has none of the L4 fields either."""
    baseline, lb = _metadata_fields("baseline"), _metadata_fields("lb")
    assert baseline <= lb
    assert {"bucket", "slot", "service_id", "backend_id"} <= lb
    assert baseline == {"drop_reason"}


def test_the_baseline_parses_only_what_forwarding_needs() -> None:
    """Ethernet and IPv4 (with its options): headers the baseline never parses would be
    reset for every packet all the same."""
    prog = json.loads((COMPILED / "baseline.json").read_text())
    headers = {h["name"] for h in prog["headers"]} - {"scalars", "standard_metadata"}
    assert headers == {"ethernet", "ipv4", "ipv4_options"}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_table_shapes(schema: Schema, table: str) -> None:
    t = schema.table(table)
    assert [(f.name, f.bitwidth, f.match_type) for f in t.fields] == TABLES[table]


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_action_shapes(schema: Schema, action: str) -> None:
    assert [(p.name, p.bitwidth) for p in schema.action(action).params] == ACTIONS[action]


def raw_sizes() -> dict[str, dict[str, int]]:
    """Table and counter sizes straight from the committed P4Info text (not through the
    controller's schema): the one place they are written down."""
    info = p4info_pb2.P4Info()
    text_format.Parse((COMPILED / "lb.p4info.txtpb").read_text(), info)
    short = lambda x: x.preamble.name.rsplit(".", 1)[-1]  # noqa: E731
    return {
        "tables": {short(t): t.size for t in info.tables},
        "counters": {short(c): c.size for c in info.counters},
    }


def test_counters_and_sizes(schema: Schema) -> None:
    raw = raw_sizes()
    for name, size in raw["counters"].items():
        assert schema.counter_size(name) == size
    services, backends = raw["tables"]["vip_table"], raw["tables"]["backend_table"]
    # Each counter is sized by what indexes it: backend ids, service ids, or a service's
    # drop reasons (drops[service * stride + reason]).
    for name in PER_BACKEND:
        assert raw["counters"][name] == backends, name
    assert raw["counters"]["collisions"] == services
    assert raw["counters"]["drops"] == services * schema.drop_counter_stride()
    assert schema.table("conn_table").idle_timeout
    # Packets and bytes per backend are direct counters of the tables that name backends.
    assert schema.direct_counter_table("backend_tx") == "backend_table"
    assert schema.direct_counter_table("backend_rx") == "reverse_nat_table"
    assert "conn_digest_t" in schema.digests
    limits = schema.limits()
    assert (limits.max_services, limits.max_backends) == (services, backends)
    assert limits.pool_table_size == raw["tables"]["pool_table"]
    assert limits.wrr_table_size == raw["tables"]["slot_table"]
    assert limits.route_table_size == raw["tables"]["ipv4_route_table"]
    assert limits.ipv6_route_table_size == raw["tables"]["ipv6_route_table"]


def test_every_entry_of_the_default_config_encodes_and_decodes(schema: Schema) -> None:
    cfg = reader.load(DEFAULT_CONFIG)
    _, desired = desired_entries(cfg, [], schema.algorithms())
    for e in desired:
        if e.table == MULTICAST:
            continue
        assert decode(schema, encode(schema, e)) == e


def test_digest_layout_comes_from_the_p4info(schema: Schema) -> None:
    # One bit string: conn_table's key, then use_backend's parameter.
    assert schema.digest_fields("conn_digest_t") == (("entry", 136),)
    layout = ConnDigests.of(schema)
    assert [n for n, _ in layout.match] == [f.name for f in schema.table("conn_table").fields]
    assert [n for n, _ in layout.params] == ["backend_id"]


def test_a_digest_splits_into_the_entry_it_carries(schema: Schema) -> None:
    # 10.0.0.7 -> 10.0.0.100, TCP, 40000 -> 80, backend 3, packed by hand.
    packed = bytes([10, 0, 0, 7, 10, 0, 0, 100, 6]) + (40000).to_bytes(2, "big")
    packed += (80).to_bytes(2, "big") + (3).to_bytes(4, "big")
    member = p4d.P4Data()
    member.struct.members.add().bitstring = packed
    layout = ConnDigests.of(schema)
    assert layout.entry(layout.values(member)) == Entry(
        "conn_table",
        (
            ("src_addr", 0x0A000007),
            ("dst_addr", 0x0A000064),
            ("protocol", 6),
            ("src_port", 40000),
            ("dst_port", 80),
        ),
        "use_backend",
        (("backend_id", 3),),
    )


def test_an_ipv6_collision_digest_splits_into_the_conn6_entry_it_carries(schema: Schema) -> None:
    # 2001:db8::7 -> 2001:db8::100, TCP, 40000 -> 80, backend 3 on switch port 4: 337 bits.
    assert schema.digest_fields("conn6_digest_t") == (("entry", 337),)
    assert schema.table("conn6_table").idle_timeout
    src, vip = ipaddress.ip_address("2001:db8::7"), ipaddress.ip_address("2001:db8::100")
    value = (int(src) << 209) | (int(vip) << 81) | (6 << 73) | (40000 << 57) | (80 << 41)
    value |= (3 << 9) | 4
    member = p4d.P4Data()
    member.struct.members.add().bitstring = value.to_bytes(43, "big")
    layout = ConnDigests.of(schema, "conn6_digest_t")
    assert layout.entry(layout.values(member)) == Entry(
        "conn6_table",
        (
            ("src_addr", int(src)),
            ("dst_addr", int(vip)),
            ("protocol", 6),
            ("src_port", 40000),
            ("dst_port", 80),
        ),
        "use_backend6",
        (("backend_id", 3), ("switch_port", 4)),
    )
    assert pin(layout.entry(layout.values(member)))


def _member(*bitstrings: bytes) -> p4d.P4Data:
    member = p4d.P4Data()
    for b in bitstrings:
        member.struct.members.add().bitstring = b
    return member


MALFORMED = [
    ("no member", p4d.P4Data()),
    ("two members", _member(b"\x01", b"\x02")),
    ("wider than either layout", _member(b"\xff" * 19)),
]


@pytest.mark.parametrize(("desc", "member"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_digest_member_that_is_not_its_layout_is_a_digest_error(
    schema: Schema, desc: str, member: p4d.P4Data
) -> None:
    with pytest.raises(DigestError):
        ConnDigests.of(schema).values(member)
    with pytest.raises(DigestError):
        ConnEvents.of(schema).event(member)


def test_a_digest_that_is_not_the_entry_it_should_carry_is_refused(schema: Schema) -> None:
    info = p4info_pb2.P4Info()
    info.CopyFrom(schema.info)
    member = info.type_info.structs["conn_digest_t"].members[0]
    member.type_spec.bitstring.bit.bitwidth = 128  # the backend id narrower than the action's
    with pytest.raises(P4InfoError, match="conn_digest_t must be one bit<136> member"):
        ConnDigests.of(Schema(info))


def test_algorithms_and_drop_reasons_come_from_the_p4info(schema: Schema) -> None:
    assert schema.enum("Algorithm") is not None and schema.enum("DropReason") is not None
    algorithms = schema.algorithms()
    assert {"iphash", "wrr", "srchash", "maglev"} <= set(algorithms)
    assert len(set(algorithms.values())) == len(algorithms)
    width = schema.param("set_vip", "algorithm").bitwidth
    assert all(0 <= c < 1 << width for c in algorithms.values())
    reasons = schema.drop_reasons()
    assert 0 not in reasons and len(set(reasons.values())) == len(reasons)
    # Every reason code has a cell per service in the drops counter.
    assert max(reasons) < schema.drop_counter_stride()
    assert schema.limits().algorithms == tuple(sorted(algorithms, key=algorithms.__getitem__))


def test_serializable_enums_are_read_when_the_p4info_declares_them(schema: Schema) -> None:
    info = p4info_pb2.P4Info()
    info.CopyFrom(schema.info)
    enum = info.type_info.serializable_enums["Algorithm"]
    enum.ClearField("members")  # whatever the committed program declares
    enum.underlying_type.bitwidth = 8
    for name, value in (("IPHASH", 0), ("WRR", 1), ("MAGLEV", 2)):
        enum.members.add(name=name, value=bytes([value]))
    drops = info.type_info.serializable_enums["DropReason"]
    drops.ClearField("members")
    for name, value in (("NONE", 0), ("MALFORMED", 1), ("RATE_LIMITED", 9)):
        drops.members.add(name=name, value=bytes([value]))
    s = Schema(info)
    assert s.algorithms() == {"iphash": 0, "wrr": 1, "maglev": 2}
    assert s.drop_reasons() == {1: "malformed", 9: "rate_limited"}
    assert s.limits().algorithms == ("iphash", "wrr", "maglev")


def test_a_p4info_without_the_enums_is_refused(schema: Schema) -> None:
    info = p4info_pb2.P4Info()
    info.CopyFrom(schema.info)
    info.type_info.ClearField("serializable_enums")
    with pytest.raises(P4InfoError, match="no serializable enum 'Algorithm'"):
        Schema(info).algorithms()


def test_encode_refuses_values_that_do_not_fit(schema: Schema) -> None:
    cfg = reader.load(DEFAULT_CONFIG)
    _, desired = desired_entries(cfg, [])
    vip = next(e for e in desired if e.table == "vip_table")
    bad = type(vip)(
        vip.table,
        vip.match,
        vip.action,
        tuple((k, 2 if k == "version" else v) for k, v in vip.params),
    )
    with pytest.raises(P4InfoError, match="does not fit in 1 bits"):
        encode(schema, bad)
