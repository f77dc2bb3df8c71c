"""The committed compiled artifacts are the controller's contract: they must come from
the current P4 sources, and hold every name and shape the controller writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4lb import config as cfgmod
from p4lb.entries import MULTICAST, Entry, desired_entries
from p4lb.p4info import P4InfoError, Schema, load_p4info

ROOT = Path(__file__).resolve().parents[2]
COMPILED = ROOT / "p4src" / "compiled"

spec = importlib.util.spec_from_file_location("p4hash", ROOT / "scripts" / "p4_sources_hash.py")
assert spec and spec.loader
p4hash = importlib.util.module_from_spec(spec)
spec.loader.exec_module(p4hash)

EXACT = p4info_pb2.MatchField.EXACT
LPM = p4info_pb2.MatchField.LPM

# table -> [(field, bitwidth, match type)], action -> [(param, bitwidth)]
TABLES = {
    "vip_address_table": [("addr", 32, EXACT)],
    "vip_table": [("addr", 32, EXACT), ("protocol", 8, EXACT), ("port", 16, EXACT)],
    "pool_table": [("service_id", 16, EXACT), ("version", 1, EXACT), ("index", 16, EXACT)],
    "wrr_table": [("service_id", 16, EXACT), ("version", 1, EXACT), ("slot", 16, EXACT)],
    "backend_table": [("backend_id", 16, EXACT)],
    "reverse_nat_table": [("addr", 32, EXACT), ("protocol", 8, EXACT), ("port", 16, EXACT)],
    "conn_table": [
        ("src_addr", 32, EXACT),
        ("dst_addr", 32, EXACT),
        ("protocol", 8, EXACT),
        ("src_port", 16, EXACT),
        ("dst_port", 16, EXACT),
    ],
    "ipv4_route_table": [("dst_addr", 32, LPM)],
}
ACTIONS = {
    "vip_address": [("vip_mac", 48)],
    "set_vip": [
        ("service_id", 16),
        ("algorithm", 8),
        ("version", 1),
        ("pool_size", 16),
        ("slot_count", 16),
    ],
    "set_member": [("backend_id", 16)],
    "set_backend": [("addr", 32), ("port", 16)],
    "set_vip_source": [("vip_addr", 32), ("vip_port", 16), ("backend_id", 16)],
    "use_backend": [("backend_id", 16)],
    "forward": [("port", 9), ("src_mac", 48), ("dst_mac", 48)],
}
COUNTERS = {
    "backend_tx": 1024,
    "backend_rx": 1024,
    "backend_conns": 1024,
    "drops": 4096,
    "collisions": 256,
}


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema(load_p4info(COMPILED / "lb.p4info.txtpb"))


def test_artifacts_were_compiled_from_the_current_sources() -> None:
    stamp = (COMPILED / "SOURCES.sha256").read_text().split()[0]
    assert stamp == p4hash.sources_hash(), "p4src changed without `make artifacts`"


def test_bmv2_json_is_a_v1model_program_with_our_tables() -> None:
    prog = json.loads((COMPILED / "lb.json").read_text())
    names = {t["name"] for p in prog["pipelines"] for t in p["tables"]}
    assert {"vip_table", "conn_table", "wrr_table", "ipv4_route_table"} <= names
    regs = {r["name"].rsplit(".", 1)[-1]: r["size"] for r in prog["register_arrays"]}
    assert regs["conn_sig"] >= 65536


@pytest.mark.parametrize("table", sorted(TABLES))
def test_table_shapes(schema: Schema, table: str) -> None:
    t = schema.table(table)
    assert [(f.name, f.bitwidth, f.match_type) for f in t.fields] == TABLES[table]


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_action_shapes(schema: Schema, action: str) -> None:
    assert [(p.name, p.bitwidth) for p in schema.action(action).params] == ACTIONS[action]


def test_counters_and_sizes(schema: Schema) -> None:
    for name, size in COUNTERS.items():
        assert schema.counter_size(name) == size
    assert schema.table("conn_table").idle_timeout
    assert "conn_digest_t" in schema.digests
    limits = schema.limits()
    assert limits.max_services == 256 and limits.max_backends == 1024


def test_every_entry_of_the_default_config_encodes_and_decodes(schema: Schema) -> None:
    cfg = cfgmod.load(ROOT / "configs" / "default.toml", schema.limits())
    _, desired = desired_entries(cfg, [])
    for e in desired:
        if e.table == MULTICAST:
            continue
        assert schema.decode(schema.encode(e)) == e


def test_a_serialized_read_response_decodes_from_the_wire_like_protobuf(schema: Schema) -> None:
    cfg = cfgmod.load(ROOT / "configs" / "default.toml", schema.limits())
    _, desired = desired_entries(cfg, [])
    entries = [e for e in desired if e.table != MULTICAST]
    # A default route (/0 is sent without its field), large values, and a non-table entity
    # in between, which the wire decoder must skip.
    entries.append(
        Entry(
            "ipv4_route_table",
            (("dst_addr", (0, 0)),),
            "forward",
            (("port", 511), ("src_mac", (1 << 48) - 1), ("dst_mac", 0)),
        )
    )
    rep = p4runtime_pb2.ReadResponse()
    for i, e in enumerate(entries):
        schema.encode(e, into=rep.entities.add().table_entry)
        if i == 1:
            rep.entities.add().counter_entry.data.packet_count = 7
    raw = rep.SerializeToString()
    got = schema.decode_read_response(raw)
    assert got == entries
    assert got == [schema.decode(x.table_entry) for x in rep.entities if x.HasField("table_entry")]


def test_encode_refuses_values_that_do_not_fit(schema: Schema) -> None:
    cfg = cfgmod.load(ROOT / "configs" / "default.toml")
    _, desired = desired_entries(cfg, [])
    vip = next(e for e in desired if e.table == "vip_table")
    bad = type(vip)(
        vip.table,
        vip.match,
        vip.action,
        tuple((k, 2 if k == "version" else v) for k, v in vip.params),
    )
    with pytest.raises(P4InfoError, match="does not fit in 1 bits"):
        schema.encode(bad)
