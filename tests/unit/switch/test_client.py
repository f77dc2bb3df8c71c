"""The P4Runtime client over real gRPC, against the in-process fake switch: apply and
reconcile, read-back, refusals named by update, the codec's entries checked against the
P4Info, arbitration, readers, and counters (indirect and direct)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r

from p4lb.intent import edits
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.entries import MULTICAST, OWNED_TABLES, Update
from p4lb.pipeline.p4info import Schema, schema
from p4lb.pipeline.plan import plan
from p4lb.service import operations
from p4lb.switch.client import Switch
from p4lb.switch.codec import encode
from p4lb.switch.errors import NotPrimaryError, SwitchError
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import COMPILED, config_for, intended


@pytest.fixture
def writer(fake: FakeSwitch) -> Iterator[Switch]:
    sw = Switch(fake.address, 0, 10)
    try:
        yield sw
    finally:
        sw.close()


def test_apply_programs_an_empty_switch_and_reads_back_the_intent(
    fake: FakeSwitch, writer: Switch
) -> None:
    cfg = config_for(fake)
    first = operations.apply(writer, cfg)
    assert first.pipeline_pushed and first.writes > 0
    assert fake.updates_applied == first.writes
    assert intended(cfg, writer.read_entries(), (*OWNED_TABLES, MULTICAST))
    assert len(fake.entries("vip_table")) == 1 and len(fake.entries("slot_table")) == 3


def test_a_second_apply_writes_nothing(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    operations.apply(writer, cfg)
    requests = fake.write_requests
    again = operations.apply(writer, cfg)
    assert (again.pipeline_pushed, again.writes, fake.write_requests) == (False, 0, requests)


def test_a_weight_change_flips_one_vip_entry(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    operations.apply(writer, cfg)
    operations.apply(writer, edits.set_weight(cfg, "web", "h2", 3))
    (vip,) = [e for e in writer.read_entries() if e.table == "vip_table"]
    assert vip.p("slot_count") == 5 and vip.p("version") == 1
    assert len(fake.entries("slot_table")) == 5  # the old version is gone


def test_the_switch_names_the_update_it_refused(fake: FakeSwitch, writer: Switch) -> None:
    operations.apply(writer, config_for(fake))
    backend = next(e for e in writer.read_entries() if e.table == "backend_table")
    with pytest.raises(SwitchError, match=r"refused INSERT backend_table .*exists"):
        writer.write([Update("INSERT", backend)])
    missing = replace(backend, match=(("backend_id", 999),))
    with pytest.raises(SwitchError, match=r"refused MODIFY backend_table .*does not exist"):
        writer.write([Update("MODIFY", missing)])


def test_the_fake_switch_checks_entries_against_the_p4info(
    fake: FakeSwitch, writer: Switch
) -> None:
    operations.apply(writer, config_for(fake))
    backend = next(e for e in writer.read_entries() if e.table == "backend_table")
    good = encode(writer.schema, backend)

    def write(te: p4r.TableEntry) -> grpc.RpcError:
        req = p4r.WriteRequest(device_id=0)
        req.election_id.low = 10
        upd = req.updates.add(type=p4r.Update.INSERT)
        upd.entity.table_entry.CopyFrom(te)
        with pytest.raises(grpc.RpcError) as caught:
            writer.stub.Write(req)
        err = caught.value
        assert isinstance(err, grpc.RpcError)
        return err

    cases = {
        "unknown table id": lambda te: setattr(te, "table_id", 1),
        "unknown match field id": lambda te: setattr(te.match[0], "field_id", 99),
        "does not fit": lambda te: setattr(te.match[0].exact, "value", b"\x01\x00\x00\x00\x00"),
        "not canonical": lambda te: setattr(te.match[0].exact, "value", b"\x00\x05"),
        "not allowed here": lambda te: setattr(te.action.action, "action_id", 1),
        "parameters missing": lambda te: te.action.action.params.pop(),
    }
    for what, spoil in cases.items():
        te = p4r.TableEntry()
        te.CopyFrom(good)
        te.match[0].exact.value = b"\x7f"  # a fresh key, so only the spoiling can fail
        spoil(te)
        err = write(te)
        assert err.code() == grpc.StatusCode.UNKNOWN
        details = dict(err.trailing_metadata() or ())["grpc-status-details-bin"]
        assert what in str(details), what


def test_a_lower_election_id_cannot_write(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    operations.apply(writer, cfg)
    with Switch(fake.address, 0, 5) as low:
        assert not low.is_primary
        with pytest.raises(NotPrimaryError, match="another controller"):
            operations.apply(low, edits.set_weight(cfg, "web", "h2", 7))
    assert operations.apply(writer, cfg).writes == 0


def test_a_higher_election_id_takes_over_and_the_old_primary_is_refused(
    fake: FakeSwitch, writer: Switch
) -> None:
    cfg = config_for(fake)
    operations.apply(writer, cfg)
    with Switch(fake.address, 0, 11) as high:
        assert high.is_primary
        with pytest.raises(NotPrimaryError):
            operations.apply(writer, edits.set_weight(cfg, "web", "h2", 7))
        assert operations.apply(high, edits.set_weight(cfg, "web", "h2", 2)).writes > 0
    # Mastership returns to the remaining session once the higher one leaves.
    assert fake.wait_for(lambda: fake.primary is not None and fake.primary.election_id == 10)
    assert operations.apply(writer, cfg).writes > 0


def test_an_election_id_in_use_is_refused(fake: FakeSwitch, writer: Switch) -> None:
    with pytest.raises(NotPrimaryError, match="election id 10 is in use"):
        Switch(fake.address, 0, 10)


def test_a_reader_reads_without_arbitration(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    operations.apply(writer, cfg)
    before = fake.arbitrations
    with operations.connect_reader(cfg) as reader:
        assert not reader.is_primary
        assert sorted(reader.read_entries()) == sorted(writer.read_entries())
    assert fake.arbitrations == before


def test_stats_read_the_counters_by_backend_id(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    operations.apply(writer, cfg)
    ids = {
        e.exact("backend_id"): e.p("addr") & 0xFF
        for e in writer.read_entries(("backend_table",))
        if e.table == "backend_table"
    }
    for bid, last_octet in ids.items():  # h2: 20 connections, h3: 30, h4: 40
        fake.set_counter("backend_conns", bid, last_octet * 10, 0)
    fake.set_counter("drops", 0 * writer.schema.drop_counter_stride() + 5, 7)
    st = operations.read_stats(writer, cfg)
    web = st.vip("web")
    assert [r.connections for r in web.backends] == [20, 30, 40]
    assert [round(r.share, 4) for r in web.backends] == [0.2222, 0.3333, 0.4444]
    assert st.drops == {writer.schema.drop_reasons()[5]: 7}


def test_stats_read_direct_counters_when_the_program_has_them(
    fake: FakeSwitch, tmp_path: Path
) -> None:
    """The data plane counts packets/bytes per backend with direct counters on
    backend_table and reverse_nat_table; stats read them by the entries' backend ids."""
    info = schema().info
    assert {c.preamble.name for c in info.direct_counters} >= {"backend_tx", "backend_rx"}
    p4info_path = COMPILED / "lb.p4info.txtpb"
    cfg = config_for(fake)
    with Switch(fake.address, 0, 10, info=Schema(info)) as sw:
        assert sw.ensure_pipeline(p4info_path, COMPILED / "lb.json")
        sw.write_plan(plan(desired_entries(cfg, [])[1], []))
        for te in fake.entries("backend_table"):  # backend id n: n packets, 100 n bytes out
            bid = te.match[0].exact.value[-1]
            fake.set_direct_counter("backend_table", lambda x, t=te: x == t, bid, 100 * bid)
        fake.set_direct_counter("reverse_nat_table", lambda te: True, 5, 50)
        web = operations.read_stats(sw, cfg).vip("web")
    assert sorted((r.packets, r.bytes) for r in web.backends) == [(1, 100), (2, 200), (3, 300)]
    assert [(r.reply_packets, r.reply_bytes) for r in web.backends] == [(5, 50)] * 3
