"""The P4Runtime side over real gRPC, against the in-process fake switch: apply and
reconcile, read-back, refusals, arbitration, counters, digests, idle timeouts, reconnects."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r

from p4lb import config as cfgmod
from p4lb import control, intent
from p4lb.adapter import NotPrimaryError, Switch, SwitchError
from p4lb.config import Config
from p4lb.daemon import Controller
from p4lb.entries import Entry, Update, desired_entries, plan
from p4lb.p4info import Schema, schema
from tests.unit.fake_switch import FakeSwitch, run_in_thread

ROOT = Path(__file__).resolve().parents[2]


def config_for(fake: FakeSwitch, election_id: int = 10) -> Config:
    cfg = cfgmod.load(ROOT / "configs" / "default.toml")
    return replace(cfg, switch=replace(cfg.switch, address=fake.address, election_id=election_id))


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
    first = control.apply(writer, cfg)
    assert first.pipeline_pushed and first.writes > 0
    assert fake.updates_applied == first.writes
    held = writer.read_entries()
    assert sorted(held) == sorted(desired_entries(cfg, held)[1])
    assert len(fake.entries("vip_table")) == 1 and len(fake.entries("wrr_table")) == 3


def test_a_second_apply_writes_nothing(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    control.apply(writer, cfg)
    requests = fake.write_requests
    again = control.apply(writer, cfg)
    assert (again.pipeline_pushed, again.writes, fake.write_requests) == (False, 0, requests)


def test_a_weight_change_flips_one_vip_entry(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    control.apply(writer, cfg)
    control.apply(writer, intent.set_weight(cfg, "web", "h2", 3))
    (vip,) = [e for e in writer.read_entries() if e.table == "vip_table"]
    assert vip.p("slot_count") == 5 and vip.p("version") == 1
    assert len(fake.entries("wrr_table")) == 5  # the old version is gone


def test_the_switch_names_the_update_it_refused(fake: FakeSwitch, writer: Switch) -> None:
    control.apply(writer, config_for(fake))
    backend = next(e for e in writer.read_entries() if e.table == "backend_table")
    with pytest.raises(SwitchError, match=r"refused INSERT backend_table .*exists"):
        writer.write([Update("INSERT", backend)])
    missing = replace(backend, match=(("backend_id", 999),))
    with pytest.raises(SwitchError, match=r"refused MODIFY backend_table .*does not exist"):
        writer.write([Update("MODIFY", missing)])


def test_the_fake_switch_checks_entries_against_the_p4info(
    fake: FakeSwitch, writer: Switch
) -> None:
    control.apply(writer, config_for(fake))
    backend = next(e for e in writer.read_entries() if e.table == "backend_table")
    good = writer.schema.encode(backend)

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
    control.apply(writer, cfg)
    with Switch(fake.address, 0, 5) as low:
        assert not low.is_primary
        with pytest.raises(NotPrimaryError, match="another controller"):
            control.apply(low, intent.set_weight(cfg, "web", "h2", 7))
    assert control.apply(writer, cfg).writes == 0


def test_a_higher_election_id_takes_over_and_the_old_primary_is_refused(
    fake: FakeSwitch, writer: Switch
) -> None:
    cfg = config_for(fake)
    control.apply(writer, cfg)
    with Switch(fake.address, 0, 11) as high:
        assert high.is_primary
        with pytest.raises(NotPrimaryError):
            control.apply(writer, intent.set_weight(cfg, "web", "h2", 7))
        assert control.apply(high, intent.set_weight(cfg, "web", "h2", 2)).writes > 0
    # Mastership returns to the remaining session once the higher one leaves.
    assert fake.wait_for(lambda: fake.primary is not None and fake.primary.election_id == 10)
    assert control.apply(writer, cfg).writes > 0


def test_an_election_id_in_use_is_refused(fake: FakeSwitch, writer: Switch) -> None:
    with pytest.raises(NotPrimaryError, match="election id 10 is in use"):
        Switch(fake.address, 0, 10)


def test_a_reader_reads_without_arbitration(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    control.apply(writer, cfg)
    before = fake.arbitrations
    with control.connect_reader(cfg) as reader:
        assert not reader.is_primary
        assert sorted(reader.read_entries()) == sorted(writer.read_entries())
    assert fake.arbitrations == before


def test_stats_read_the_counters_by_backend_id(fake: FakeSwitch, writer: Switch) -> None:
    cfg = config_for(fake)
    control.apply(writer, cfg)
    ids = {
        e.exact("backend_id"): e.p("addr") & 0xFF
        for e in writer.read_entries(("backend_table",))
        if e.table == "backend_table"
    }
    for bid, last_octet in ids.items():  # h2: 20 connections, h3: 30, h4: 40
        fake.set_counter("backend_conns", bid, last_octet * 10, 0)
    fake.set_counter("drops", 0 * writer.schema.drop_counter_stride() + 5, 7)
    st = control.read_stats(writer, cfg)
    web = st.vip("web")
    assert [r.connections for r in web.backends] == [20, 30, 40]
    assert [round(r.share, 4) for r in web.backends] == [0.2222, 0.3333, 0.4444]
    assert st.drops == {writer.schema.drop_reasons()[5]: 7}


@pytest.fixture
def running(fake: FakeSwitch, tmp_path: Path) -> Iterator[Controller]:
    """`p4lb run` (Controller.run) in a thread against the fake switch."""
    path = tmp_path / "run.toml"
    cfgmod.save(config_for(fake), path)
    ctl = Controller(
        lambda: cfgmod.load(path), poll_s=0.02, check_s=0.1, config_path=str(path), retry_s=0.05
    )
    with run_in_thread(ctl, 60) as running_ctl:
        yield running_ctl


def _conn_fields(src_port: int, backend_id: int) -> dict[str, int]:
    """conn_digest_t's one member: 10.0.0.1 -> 10.0.0.100, TCP, src_port -> 80, and the
    backend (32, 32, 8, 16, 16, 32 bits)."""
    packed = (0x0A000001 << 104) | (0x0A000064 << 72) | (6 << 64) | (src_port << 48)
    return {"entry": packed | (80 << 32) | backend_id}


def test_run_installs_a_conn_entry_from_a_digest_and_removes_it_when_idle(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10), "p4lb run did not take the switch"
    list_id = fake.send_digest("conn_digest_t", [_conn_fields(40000, 2)])
    assert list_id is not None, "p4lb run did not enable digests"
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 1)
    (te,) = fake.entries("conn_table")
    got = schema().decode(te)
    assert got == Entry(
        "conn_table",
        (
            ("src_addr", 0x0A000001),
            ("dst_addr", 0x0A000064),
            ("protocol", 6),
            ("src_port", 40000),
            ("dst_port", 80),
        ),
        "use_backend",
        (("backend_id", 2),),
    )
    assert te.idle_timeout_ns > 0
    assert fake.wait_for(lambda: fake.acks and fake.acks[-1][1] == list_id)
    # The same flow digested again (the ack raced a second packet) is not inserted twice.
    fake.send_digest("conn_digest_t", [_conn_fields(40000, 2)])
    fake.send_digest("conn_digest_t", [_conn_fields(40001, 3)])
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 2)
    assert fake.expire("conn_table") == 2
    assert fake.wait_for(lambda: not fake.entries("conn_table"))


def test_run_restores_a_restarted_switch(fake: FakeSwitch, running: Controller) -> None:
    assert running.ready.wait(10)
    fake.restart()  # streams end, pipeline and entries gone
    assert fake.wait_for(lambda: fake.p4info is not None and bool(fake.entries("vip_table")))
    assert len(fake.entries("wrr_table")) == 3
    assert fake.wait_for(lambda: bool(fake.digest_configs)), "digests not enabled again"
    assert fake.send_digest("conn_digest_t", [_conn_fields(40002, 1)]) is not None
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 1)


def test_run_reconnects_to_a_new_server_on_the_same_port(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10)
    port = fake.port
    fake.stop()
    fresh = FakeSwitch().start(port=port)
    try:
        assert fresh.wait_for(lambda: fresh.p4info is not None and bool(fresh.entries("vip_table")))
    finally:
        fresh.stop()


def test_stats_read_direct_counters_when_the_program_has_them(
    fake: FakeSwitch, tmp_path: Path
) -> None:
    """The data plane counts packets/bytes per backend with direct counters on
    backend_table and reverse_nat_table; stats read them by the entries' backend ids."""
    info = schema().info
    assert {c.preamble.name for c in info.direct_counters} >= {"backend_tx", "backend_rx"}
    p4info_path = ROOT / "p4src" / "compiled" / "lb.p4info.txtpb"
    cfg = config_for(fake)
    with Switch(fake.address, 0, 10, info=Schema(info)) as sw:
        assert sw.ensure_pipeline(p4info_path, ROOT / "p4src" / "compiled" / "lb.json")
        sw.write_plan(plan(desired_entries(cfg, [])[1], []))
        for te in fake.entries("backend_table"):  # backend id n: n packets, 100 n bytes out
            bid = te.match[0].exact.value[-1]
            fake.set_direct_counter("backend_table", lambda x, t=te: x == t, bid, 100 * bid)
        fake.set_direct_counter("reverse_nat_table", lambda te: True, 5, 50)
        web = control.read_stats(sw, cfg).vip("web")
    assert sorted((r.packets, r.bytes) for r in web.backends) == [(1, 100), (2, 200), (3, 300)]
    assert [(r.reply_packets, r.reply_bytes) for r in web.backends] == [(5, 50)] * 3


def test_run_keeps_the_switch_when_the_config_breaks_and_follows_it_when_fixed(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10)
    assert running.config_path is not None
    path = Path(running.config_path)
    good = path.read_text()
    path.write_text(good.replace("weight = 1", "weight = 5000", 1))
    assert running.wait_until(lambda: "5000 is outside" in running.config_problem, 10)
    assert running.ready.is_set() and len(fake.entries("wrr_table")) == 3
    path.write_text(good.replace("weight = 1", "weight = 2", 1))
    assert running.wait_until(lambda: running.config_problem == "", 10)
    assert fake.wait_for(lambda: len(fake.entries("wrr_table")) == 4)


def test_run_keeps_conn_writes_it_could_not_make_until_it_is_primary_again(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10)
    with Switch(fake.address, 0, 50) as other:  # another writer takes the switch ...
        assert other.is_primary
        # ... just as a digest reaches p4lb run, which cannot write now,
        list_id = fake.send_digest("conn_digest_t", [_conn_fields(40003, 2)], election_id=10)
        assert list_id is not None
        assert fake.wait_for(lambda: any(ack[1] == list_id for ack in fake.acks))
        assert fake.entries("conn_table") == []
    # and the entry lands once mastership is back.
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 1)
    # The same for removing it: reported idle while another writer holds the switch ...
    with Switch(fake.address, 0, 50) as other:
        assert other.is_primary
        assert fake.expire("conn_table", election_id=10) == 1
        assert not fake.wait_for(lambda: not fake.entries("conn_table"), timeout=0.2)
    # ... it goes once p4lb run is primary again.
    assert fake.wait_for(lambda: not fake.entries("conn_table"))


def test_a_second_p4lb_run_with_the_same_election_id_waits_and_takes_over(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10)
    assert running.config_path is not None
    path = running.config_path
    second = Controller(lambda: cfgmod.load(path), poll_s=0.02, check_s=0.1, retry_s=0.05)
    thread = threading.Thread(target=second.run, kwargs={"duration_s": 60})
    before = fake.arbitrations
    thread.start()
    try:
        assert fake.wait_for(lambda: fake.arbitrations >= before + 2)  # refused, retried
        assert not second.ready.is_set()
        running.stop()  # the first one goes away ...
        assert second.ready.wait(10)  # ... and the second takes the switch
    finally:
        second.stop()
        thread.join(10)
    assert not thread.is_alive()
