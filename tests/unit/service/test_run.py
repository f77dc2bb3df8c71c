"""`p4lb run` (the Controller) over real gRPC against the fake switch: conn_table entries
from digests and their removal when idle, a restarted switch restored, a new server on the
same port, a config file that breaks while it runs, writes kept while it is a backup, and a
second `p4lb run` taking over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4lb.intent import reader, writer
from p4lb.pipeline.entries import Entry
from p4lb.pipeline.p4info import schema
from p4lb.service.daemon import Controller
from p4lb.switch.client import Switch
from p4lb.switch.codec import decode
from tests.support import poll_until
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import config_for, run_in_thread

DELETE = p4r.Update.DELETE


@pytest.fixture
def running(fake: FakeSwitch, tmp_path: Path) -> Iterator[Controller]:
    """`p4lb run` (Controller.run) in a thread against the fake switch."""
    path = tmp_path / "run.toml"
    writer.save(config_for(fake), path)
    ctl = Controller(
        lambda: reader.load(path), poll_s=0.02, check_s=0.1, config_path=str(path), retry_s=0.05
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
    got = decode(schema(), te)
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
    assert len(fake.entries("slot_table")) == 3
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


def test_run_keeps_the_switch_when_the_config_breaks_and_follows_it_when_fixed(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10)
    assert running.config_path is not None
    path = Path(running.config_path)
    good = path.read_text()
    path.write_text(good.replace("weight = 1", "weight = 5000", 1))
    assert running.wait_until(lambda: "5000 is outside" in running.config_problem, 10)
    assert running.ready.is_set() and len(fake.entries("slot_table")) == 3
    path.write_text(good.replace("weight = 1", "weight = 2", 1))
    assert running.wait_until(lambda: running.config_problem == "", 10)
    assert fake.wait_for(lambda: len(fake.entries("slot_table")) == 4)


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
        # ... p4lb run takes the report and keeps the removal it cannot write yet,
        assert poll_until(lambda: len(running.pending_deletes) == 1)
        assert len(fake.entries("conn_table")) == 1
        assert [w for w in fake.table_writes if w[1] == "conn_table" and w[2] == DELETE] == []
    # ... and it goes once p4lb run is primary again.
    assert fake.wait_for(lambda: not fake.entries("conn_table"))


def test_a_second_p4lb_run_with_the_same_election_id_waits_and_takes_over(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10)
    assert running.config_path is not None
    path = running.config_path
    second = Controller(lambda: reader.load(path), poll_s=0.02, check_s=0.1, retry_s=0.05)
    before = fake.arbitrations
    with run_in_thread(second):
        assert fake.wait_for(lambda: fake.arbitrations >= before + 2)  # refused, retried
        assert not second.ready.is_set()
        running.stop()  # the first one goes away ...
        assert second.ready.wait(10)  # ... and the second takes the switch


def _conn6_fields(src_port: int, backend_id: int, switch_port: int) -> dict[str, int]:
    """conn6_digest_t's one member: 2001:db8::1 -> 2001:db8::100, TCP, src_port -> 80, the
    backend and its switch port (128, 128, 8, 16, 16, 32, 9 bits)."""
    src, vip = (0x2001_0DB8 << 96) | 1, (0x2001_0DB8 << 96) | 0x100
    packed = (src << 209) | (vip << 81) | (6 << 73) | (src_port << 57) | (80 << 41)
    return {"entry": packed | (backend_id << 9) | switch_port}


def test_run_pins_an_ipv6_flow_from_its_digest_and_removes_it_when_idle(
    fake: FakeSwitch, running: Controller
) -> None:
    assert running.ready.wait(10), "p4lb run did not take the switch"
    assert fake.send_digest("conn6_digest_t", [_conn6_fields(40000, 2, 3)]) is not None
    assert fake.wait_for(lambda: len(fake.entries("conn6_table")) == 1)
    (te,) = fake.entries("conn6_table")
    got = decode(schema(), te)
    assert (got.action, got.params) == ("use_backend6", (("backend_id", 2), ("switch_port", 3)))
    assert (got.m("src_addr"), got.m("src_port")) == ((0x2001_0DB8 << 96) | 1, 40000)
    assert te.idle_timeout_ns > 0
    assert fake.entries("conn_table") == []
    assert fake.expire("conn6_table") == 1
    assert fake.wait_for(lambda: not fake.entries("conn6_table"))
    # Pinned again once gone: the controller forgot it with the idle report.
    fake.send_digest("conn6_digest_t", [_conn6_fields(40000, 2, 3)])
    assert fake.wait_for(lambda: len(fake.entries("conn6_table")) == 1)


def test_a_malformed_digest_is_ignored_and_the_next_one_served(
    fake: FakeSwitch, running: Controller
) -> None:
    """A member wider than its layout (of either family) is skipped with a warning; the
    controller stays up, acknowledges the list and pins the good member beside it."""
    assert running.ready.wait(10)
    wide = {"entry": 1 << 400}
    list_id = fake.send_digest("conn6_digest_t", [wide, _conn6_fields(40001, 3, 4)])
    assert list_id is not None
    assert fake.wait_for(lambda: any(ack[1] == list_id for ack in fake.acks))
    assert fake.wait_for(lambda: len(fake.entries("conn6_table")) == 1)
    fake.send_digest("conn_digest_t", [{"entry": 1 << 200}])
    fake.send_digest("conn_digest_t", [_conn_fields(40004, 2)])
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 1)
    assert running.ready.is_set()
