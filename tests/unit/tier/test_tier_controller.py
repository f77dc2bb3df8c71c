"""`p4lb run` for a tier, over real gRPC against two in-process fake P4Runtime switches: both
get the same intent with the same ids; a connection one balancer reports opened is copied
into the other's conn_table, its close removes the copy after the grace; a balancer that
restarts empty gets the intent and every live copy back; a collision is pinned on both."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent.model import Balancer, Config, member_config
from p4lb.pipeline import shared as shared_mod
from p4lb.pipeline.desired import desired_entries, maglev_tables
from p4lb.pipeline.entries import Slot, ip
from p4lb.pipeline.p4info import schema
from p4lb.service.announce import Policy
from p4lb.service.tier import TierController
from p4lb.switch.client import Switch
from tests.support import poll_until
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import default_config, held, holds
from tests.unit.tier.test_tier_stats_and_speaker import GOBGP


@pytest.fixture
def fakes() -> Iterator[tuple[FakeSwitch, FakeSwitch]]:
    a, b = FakeSwitch(device_id=1).start(), FakeSwitch(device_id=2).start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def tier_config(a: FakeSwitch, b: FakeSwitch) -> Config:
    cfg = default_config()
    cfg = dataclasses.replace(cfg, switch=dataclasses.replace(cfg.switch, election_id=10))
    tier = (
        Balancer("lb1", a.address, 1, "02:00:00:00:01:01"),
        Balancer("lb2", b.address, 2, "02:00:00:00:01:02"),
    )
    return dataclasses.replace(cfg, tier=tier)


@pytest.fixture
def running(
    fakes: tuple[FakeSwitch, FakeSwitch], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TierController, Config]]:
    monkeypatch.setattr(shared_mod, "CLOSE_GRACE_S", 0.2)
    monkeypatch.setattr(shared_mod, "COPY_AFTER_S", 0.05)
    cfg = tier_config(*fakes)
    ctl = TierController(lambda: cfg, check_s=0.2, retry_s=0.1)
    t = threading.Thread(target=ctl.run, kwargs={"duration_s": 60}, daemon=True)
    t.start()
    try:
        assert poll_until(
            lambda: all(m.ready.is_set() for m in ctl.members.values()) and len(ctl.members) == 2
        )
        yield ctl, cfg
    finally:
        ctl.stop()
        t.join(15)
        assert not t.is_alive()


def event(kind: int, sport: int, backend_id: int) -> dict[str, int]:
    packed = kind
    for value, width in (
        (ip("10.0.0.1"), 32),
        (ip("10.0.0.100"), 32),
        (6, 8),
        (sport, 16),
        (80, 16),
        (backend_id, 32),
    ):
        packed = (packed << width) | value
    return {"event_entry": packed}


def copies(fake: FakeSwitch) -> dict[int, tuple[str, int]]:
    """src_port -> (action, backend id) of the conn_table entries the fake holds."""
    return {
        e.exact("src_port"): (e.action, e.p("backend_id"))
        for e in held(fake)
        if e.table == "conn_table"
    }


def test_both_balancers_hold_the_tier_intent_with_the_same_ids(
    fakes: tuple[FakeSwitch, FakeSwitch], running: tuple[TierController, Config]
) -> None:
    a, b = fakes
    _, cfg = running
    for fake, bal in ((a, cfg.tier[0]), (b, cfg.tier[1])):
        assert poll_until(lambda f=fake, x=bal: holds(f, member_config(cfg, x)))
    ids = [
        {(e.table, e.match): dict(e.params) for e in held(f) if e.table == "reverse_nat_table"}
        for f in (a, b)
    ]
    assert ids[0] == ids[1]  # backend ids included


def test_an_opened_connection_is_copied_to_the_other_and_its_close_removes_it(
    fakes: tuple[FakeSwitch, FakeSwitch], running: tuple[TierController, Config]
) -> None:
    a, b = fakes
    assert a.send_digest("conn_opened_t", [event(shared_mod.OPENED, 5000, 2)]) is not None
    assert poll_until(lambda: copies(b) == {5000: ("use_shared_backend", 2)})
    assert copies(a) == {}  # its own state holds it
    b.send_digest("conn_closed_t", [event(shared_mod.CLOSED, 5000, 2)])  # closed via b
    assert poll_until(lambda: copies(b) == {})


def test_a_reused_tuple_s_copy_gets_the_new_backend(
    fakes: tuple[FakeSwitch, FakeSwitch], running: tuple[TierController, Config]
) -> None:
    """A client reused its port before the old connection's copy was removed: the copy on
    the other balancer names the new connection's backend, not the old one's."""
    a, b = fakes
    a.send_digest("conn_opened_t", [event(shared_mod.OPENED, 5100, 2)])
    assert poll_until(lambda: copies(b) == {5100: ("use_shared_backend", 2)})
    a.send_digest("conn_closed_t", [event(shared_mod.CLOSED, 5100, 2)])
    b.send_digest("conn_opened_t", [event(shared_mod.OPENED, 5100, 3)])  # the port again, on b
    assert poll_until(lambda: copies(a) == {5100: ("use_shared_backend", 3)})
    assert poll_until(lambda: copies(b) == {5100: ("use_shared_backend", 3)})
    # And again on a: b's copy (written, not its own connection now) follows.
    b.send_digest("conn_closed_t", [event(shared_mod.CLOSED, 5100, 3)])
    a.send_digest("conn_opened_t", [event(shared_mod.OPENED, 5100, 1)])
    assert poll_until(lambda: copies(b) == {5100: ("use_shared_backend", 1)})
    assert poll_until(lambda: copies(a) == {5100: ("use_shared_backend", 1)})


def test_a_restarted_balancer_gets_everything_back(
    fakes: tuple[FakeSwitch, FakeSwitch], running: tuple[TierController, Config]
) -> None:
    a, b = fakes
    _, cfg = running
    a.send_digest("conn_opened_t", [event(shared_mod.OPENED, 6000, 1)])
    b.send_digest("conn_opened_t", [event(shared_mod.OPENED, 6001, 3)])
    assert poll_until(lambda: copies(b) == {6000: ("use_shared_backend", 1)})
    assert poll_until(lambda: copies(a) == {6001: ("use_shared_backend", 3)})
    a.restart()  # empty, as a restarted BMv2
    assert poll_until(lambda: holds(a, member_config(cfg, cfg.tier[0])))
    # Its own former connection too: its buckets are gone.
    assert poll_until(
        lambda: copies(a) == {6000: ("use_shared_backend", 1), 6001: ("use_shared_backend", 3)}
    )


def test_a_collision_is_pinned_on_every_balancer(
    fakes: tuple[FakeSwitch, FakeSwitch], running: tuple[TierController, Config]
) -> None:
    a, b = fakes
    a.send_digest(
        "conn_digest_t",
        [{"entry": int.from_bytes(bytes.fromhex("0a0000010a000064061b58005000000002"), "big")}],
    )
    assert poll_until(lambda: copies(a) == {7000: ("use_backend", 2)})
    assert poll_until(lambda: copies(b) == {7000: ("use_backend", 2)})


def maglev_of(fake: FakeSwitch) -> dict[int, list[Slot]]:
    return maglev_tables(held(fake), schema().algorithms()["maglev"])


@pytest.mark.parametrize("family", [4, 6])
def test_a_restarted_balancer_gets_the_maglev_table_the_others_hold(
    fakes: tuple[FakeSwitch, FakeSwitch], family: int
) -> None:
    """The tiers' Maglev tables have a history (a backend that was down, then back, took
    entries from the others' surplus), which a table built from scratch does not repeat: a
    restarted balancer must continue the tier's table, or the flows the router moves to it
    with no state there land on other backends (session 38's full suite: 5 connections
    reset when a killed balancer came back). An IPv6 VIP's too (its entry is in another
    table; the tier's e2e test over IPv6 saw a connection reset when it was not read)."""
    a, b = fakes
    base = tier_config(a, b)
    web = dataclasses.replace(base.vips[0], algorithm="maglev")
    if family == 6:
        web = dataclasses.replace(
            web,
            address="2001:db8::100",
            backends=tuple(
                dataclasses.replace(x, address=f"2001:db8::{k + 2}")
                for k, x in enumerate(web.backends)
            ),
        )
    down = dataclasses.replace(web.backends[0], weight=0)
    first = dataclasses.replace(
        base, vips=(dataclasses.replace(web, backends=(down, *web.backends[1:])),)
    )
    later = dataclasses.replace(base, vips=(web,))
    now = {"cfg": first}
    ctl = TierController(lambda: now["cfg"], check_s=0.2, retry_s=0.1)
    t = threading.Thread(target=ctl.run, kwargs={"duration_s": 60}, daemon=True)
    t.start()
    try:
        for fake, bal in ((a, first.tier[0]), (b, first.tier[1])):
            assert poll_until(lambda f=fake, x=bal: holds(f, member_config(first, x)))
        now["cfg"] = later
        for fake, bal in ((a, later.tier[0]), (b, later.tier[1])):
            assert poll_until(lambda f=fake, x=bal: holds(f, member_config(later, x)))
        table = maglev_of(b)
        assert table and maglev_of(a) == table
        scratch = maglev_tables(
            desired_entries(member_config(later, later.tier[0]), [])[1],
            schema().algorithms()["maglev"],
        )
        assert scratch != table  # the history matters: else this test proves nothing
        a.restart()  # empty, as a restarted BMv2
        assert poll_until(lambda: maglev_of(a) != {})
        assert maglev_of(a) == table
    finally:
        ctl.stop()
        t.join(15)
        assert not t.is_alive()


def test_a_standby_alone_on_a_restarted_balancer_learns_what_the_others_hold(
    fakes: tuple[FakeSwitch, FakeSwitch], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted balancer reached first by a standby, which is only a backup on the
    others (the primary holds them): that standby has seen none of the tier's events, yet
    must write the restarted switch the copies of its former connections before it serves,
    or the router's next hops bring them back to a switch that sends them elsewhere. It
    reads them from the copies the others hold (a backup may read)."""
    monkeypatch.setattr(shared_mod, "COPY_AFTER_S", 0.05)
    a, b = fakes
    full = tier_config(a, b)
    now = {"cfg": full}
    primary = TierController(lambda: now["cfg"], check_s=0.2, retry_s=0.1)
    standby = TierController(lambda: full, check_s=0.2, retry_s=0.1, standby=True)
    threads = [
        threading.Thread(target=c.run, kwargs={"duration_s": 60}, daemon=True)
        for c in (primary, standby)
    ]
    threads[0].start()
    try:
        assert poll_until(lambda: len(primary.members) == 2)
        assert poll_until(lambda: all(m.ready.is_set() for m in primary.members.values()))
        a.send_digest("conn_opened_t", [event(shared_mod.OPENED, 6000, 1)])
        assert poll_until(lambda: copies(b) == {6000: ("use_shared_backend", 1)})
        threads[1].start()
        assert poll_until(
            lambda: (
                len(standby.members) == 2
                and all(m.sw is not None for m in standby.members.values())
            )
        )
        now["cfg"] = dataclasses.replace(full, tier=full.tier[1:])  # the primary lets lb1 go
        assert poll_until(lambda: standby.members["lb1"].ready.is_set())
        assert not standby.members["lb2"].ready.is_set()  # a backup there
        a.restart()  # empty, as a restarted BMv2: the standby is its only controller
        assert poll_until(lambda: holds(a, member_config(full, full.tier[0])))
        assert poll_until(lambda: copies(a) == {6000: ("use_shared_backend", 1)})
    finally:
        for c in (primary, standby):
            c.stop()
        for t in threads:
            if t.is_alive() or t.ident is not None:
                t.join(15)
                assert not t.is_alive()


def test_a_runtime_command_taking_a_balancer_for_a_moment_withdraws_nothing(
    fakes: tuple[FakeSwitch, FakeSwitch], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`p4lb weight set` on a tier writes each balancer as election id + 1 for a moment; the
    switch keeps forwarding with the tier's state, so its route must stay (a full e2e run
    saw new connections fail "Network is unreachable": every balancer withdrew at once)."""
    a, b = fakes
    exe = tmp_path / "gobgp"
    exe.write_text(GOBGP)
    exe.chmod(0o755)
    calls = tmp_path / "calls"
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_RIB", str(tmp_path / "rib.json"))
    monkeypatch.setenv("STANDIN_CALLS", str(calls))
    base = tier_config(a, b)
    cfg = dataclasses.replace(
        base,
        tier=tuple(
            dataclasses.replace(bal, speaker_api=f"127.0.0.1:{50051 + i}", nexthop=f"10.10.0.1{i}")
            for i, bal in enumerate(base.tier)
        ),
    )
    ctl = TierController(lambda: cfg, check_s=0.2, retry_s=0.1)
    t = threading.Thread(target=ctl.run, kwargs={"duration_s": 60}, daemon=True)
    t.start()

    def calls_of(port: int) -> list[str]:  # the stand-in gobgp's calls to one speaker
        lines = calls.read_text().splitlines() if calls.exists() else []
        return [ln for ln in lines if f"-p {port} " in ln]

    try:
        assert poll_until(lambda: (m := ctl.members.get("lb1")) is not None and m.announced)
        lb1 = ctl.members["lb1"]
        with Switch(a.address, 1, 50) as command:  # the runtime command's session
            assert command.is_primary
            assert poll_until(lambda: not lb1.ready.is_set())
            mark, rounds = len(calls_of(50051)), ctl.speaker_rounds
            # Two rounds of the speakers' loop ended since: one began after lb1 left ready.
            assert poll_until(lambda: ctl.speaker_rounds >= rounds + 2)
            assert not any(" del " in c for c in calls_of(50051)[mark:]), calls_of(50051)
            assert lb1.announced
        assert poll_until(lb1.ready.is_set)  # primary again: back in the tier
    finally:
        ctl.stop()
        t.join(15)
        assert not t.is_alive()


GOBGP_PER_PORT = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
port = args[3]
rib_path = os.environ["STANDIN_RIB"] + "." + port
rib = json.load(open(rib_path)) if os.path.exists(rib_path) else {}
cmd = args[4:]
if cmd[:1] == ["-j"]:
    print(json.dumps(rib)); sys.exit(0)
prefix = cmd[5]
if cmd[4] == "add":
    rib[prefix] = [{"nexthop": cmd[cmd.index("nexthop") + 1]}]
else:
    rib.pop(prefix, None)
with open(rib_path + ".tmp", "w") as f:  # whole: the test reads it meanwhile
    json.dump(rib, f)
os.replace(rib_path + ".tmp", rib_path)
"""


def silence(fake: FakeSwitch) -> socket.socket:
    """The switch's port still listening (its kernel would: the process lives) but nothing
    answering there: a listener on the same port (gRPC's server sets SO_REUSEPORT), then the
    fake's server stopped, so its sessions end and new ones never get an answer."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", fake.port))
    s.listen(64)
    fake.stop()
    return s


def test_gone_switches_are_withdrawn_at_once_silent_ones_after_the_hold_above_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three balancers: two go silent (their switches listen but answer nothing, as a
    switch too busy to answer looks); after the hold one of them is withdrawn, the other is
    kept by the floor (2 of 3). Then the third's switch goes (nothing listens): withdrawn
    at once; the silent one kept stays announced: the VIP never goes dark."""
    fakes = [FakeSwitch(device_id=i).start() for i in (1, 2, 3)]
    exe = tmp_path / "gobgp"
    exe.write_text(GOBGP_PER_PORT)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_RIB", str(tmp_path / "rib"))
    cfg = default_config()
    cfg = dataclasses.replace(
        cfg,
        switch=dataclasses.replace(cfg.switch, election_id=10),
        tier=tuple(
            Balancer(
                f"lb{i}",
                f.address,
                i,
                f"02:00:00:00:01:0{i}",
                speaker_api=f"127.0.0.1:{50050 + i}",
                nexthop=f"10.10.0.1{i}",
            )
            for i, f in enumerate(fakes, 1)
        ),
    )

    def rib(i: int) -> set[str]:
        p = tmp_path / f"rib.{50050 + i}"
        return set(json.loads(p.read_text())) if p.exists() else set()

    hold = 1.0
    ctl = TierController(
        lambda: cfg, check_s=0.2, retry_s=0.1, policy=Policy(hold_s=hold, settle_s=0.5)
    )
    t = threading.Thread(target=ctl.run, kwargs={"duration_s": 60}, daemon=True)
    t.start()
    listeners: list[socket.socket] = []
    try:
        assert poll_until(lambda: all(rib(i) for i in (1, 2, 3)))
        listeners = [silence(fakes[0]), silence(fakes[1])]
        left = time.monotonic()
        assert poll_until(lambda: not all(ctl.members[n].ready.is_set() for n in ("lb1", "lb2")))
        # Within the hold both stay announced.
        assert poll_until(lambda: time.monotonic() - left > hold * 0.6, timeout=hold)
        assert rib(1) and rib(2) and rib(3)
        # After it, exactly one of the two goes; the floor keeps the other.
        assert poll_until(lambda: not rib(1) or not rib(2), timeout=10)
        assert poll_until(lambda: ctl.speaker_rounds > 0)
        rounds = ctl.speaker_rounds
        assert poll_until(lambda: ctl.speaker_rounds >= rounds + 3)
        assert bool(rib(1)) != bool(rib(2)) and rib(3)
        kept = 1 if rib(1) else 2
        assert not ctl.members[f"lb{kept}"].gone
        # The third's switch gone (nothing listens): withdrawn, though the floor (2 of 3)
        # would keep it were it merely silent like the kept one.
        fakes[2].stop()
        assert poll_until(lambda: not rib(3), timeout=5)
        assert ctl.members["lb3"].gone
        rounds = ctl.speaker_rounds
        assert poll_until(lambda: ctl.speaker_rounds >= rounds + 3)
        assert rib(kept)  # never dark: the floor holds the silent one
    finally:
        ctl.stop()
        t.join(15)
        for s in listeners:
            s.close()
        for f in fakes:
            f.stop()
    assert not t.is_alive()


def test_a_drain_acts_at_once_and_a_balancer_taken_out_of_the_file_is_withdrawn(
    fakes: tuple[FakeSwitch, FakeSwitch], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the file, as `p4lb tier drain` and `make tier-remove` change it: a drained
    balancer is withdrawn within a fraction of a second (the file is watched every 0.1 s,
    the speakers act when a drain flips), and one removed from the file is withdrawn, its
    loop ends and the controller forgets it; the other stays announced throughout."""
    from p4lb.intent import writer

    a, b = fakes
    exe = tmp_path / "gobgp"
    exe.write_text(GOBGP_PER_PORT)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_RIB", str(tmp_path / "rib"))
    base = tier_config(a, b)
    cfg = dataclasses.replace(
        base,
        tier=tuple(
            dataclasses.replace(bal, speaker_api=f"127.0.0.1:{50061 + i}", nexthop=f"10.10.0.4{i}")
            for i, bal in enumerate(base.tier)
        ),
    )
    path = tmp_path / "lb.toml"
    writer.save(cfg, path)
    from p4lb.intent import reader

    def rib(port: int) -> set[str]:
        p = tmp_path / f"rib.{port}"
        return set(json.loads(p.read_text())) if p.exists() else set()

    # A hold far longer than the polls below: a drain that waited for it would fail them.
    ctl = TierController(
        lambda: reader.load(path),
        config_path=str(path),
        retry_s=0.1,
        policy=Policy(hold_s=60, settle_s=0.5),
    )
    t = threading.Thread(target=ctl.run, kwargs={"duration_s": 60}, daemon=True)
    t.start()
    try:
        assert poll_until(lambda: rib(50061) and rib(50062))
        drained = (dataclasses.replace(cfg.tier[0], drain=True), cfg.tier[1])
        writer.save(dataclasses.replace(cfg, tier=drained), path)
        assert poll_until(lambda: not rib(50061), timeout=5)
        assert rib(50062)
        # lb2 taken out of the file (lb1 back).
        writer.save(dataclasses.replace(cfg, tier=(cfg.tier[0],)), path)
        assert poll_until(lambda: not rib(50062) and rib(50061), timeout=5)
        assert poll_until(lambda: "lb2" not in ctl.members, timeout=5)
        assert "lb1" in ctl.members
    finally:
        ctl.stop()
        t.join(15)
    assert not t.is_alive()


class SlowPushSwitch(FakeSwitch):
    """A fake whose pipeline push takes a while without holding its state (as BMv2's
    does), counting the reads that arrive meanwhile: BMv2's P4Runtime server can crash on
    one. A read that finds no pipeline first waits (bounded) for a push to begin, so that a
    reader that would race one meets it however the threads are scheduled."""

    def __init__(self, device_id: int) -> None:
        super().__init__(device_id)
        self.push_began = threading.Event()
        self.pushing = threading.Event()
        self.read_in_push = threading.Event()
        self.reads_during_push = 0

    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        self.pushing.set()
        self.push_began.set()
        try:
            self.read_in_push.wait(0.5)  # bounded: a read that should not come
            return super().SetForwardingPipelineConfig(request, context)
        finally:
            self.pushing.clear()

    def Read(self, request: Any, context: Any) -> Any:
        if self.p4info is None:
            self.push_began.wait(1.0)
        if self.pushing.is_set():
            self.reads_during_push += 1
            self.read_in_push.set()
        return super().Read(request, context)


def test_no_balancer_is_read_while_its_pipeline_is_pushed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tier's first start: each member, once joined, learns the copies the others hold,
    never from one whose pipeline is being pushed at that moment. (Members wait for their
    turn to reconcile here, so that the second one's push starts as the first one joins.)"""

    @contextlib.contextmanager
    def waiting_turn(ctl: TierController) -> Iterator[bool]:
        with ctl.reconcile_lock:
            yield True

    monkeypatch.setattr(TierController, "exclusive", waiting_turn)
    a, b = SlowPushSwitch(1).start(), SlowPushSwitch(2).start()
    ctl = TierController(lambda: tier_config(a, b), check_s=0.2, retry_s=0.1)
    t = threading.Thread(target=ctl.run, kwargs={"duration_s": 60}, daemon=True)
    t.start()
    try:
        assert poll_until(
            lambda: len(ctl.members) == 2 and all(m.ready.is_set() for m in ctl.members.values())
        )
        assert (a.reads_during_push, b.reads_during_push) == (0, 0)
    finally:
        ctl.stop()
        t.join(15)
        a.stop()
        b.stop()
    assert not t.is_alive()
