"""`backend drain`: weight 0 on the switch and in the file, the backend's active connections
(handshakes completed minus closes, from the data plane's counters), and `--wait` returning
once they reach 0 or failing loudly at its timeout."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from p4lb.cli import handlers
from p4lb.cli.main import main
from p4lb.intent import reader
from p4lb.pipeline.ids import backend_key, ids_on_switch
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import held


def set_open(fake: FakeSwitch, path: Path, backend: str, established: int, closes: int) -> None:
    """Set the data plane's handshake and close counters of `backend`."""
    v = reader.load(path).vip("web")
    b = v.backend(backend)
    ids = ids_on_switch(held(fake))
    bid = ids.backends[backend_key(v, b.address, b.port)]
    fake.set_counter("backend_established", bid, established)
    fake.set_counter("backend_closes", bid, closes)


def drain(path: Path, *extra: str) -> list[str]:
    return ["-c", str(path), "backend", "drain", "web", "h3", *extra]


def test_drain_reports_active_connections(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_open(fake, fake_cfg, "h3", 5, 2)
    assert main(drain(fake_cfg)) == 0
    assert "backend h3 of VIP web: 3 active connections" in capsys.readouterr().out
    assert reader.load(fake_cfg).vip("web").backend("h3").weight == 0
    set_open(fake, fake_cfg, "h3", 5, 7)  # more closes than handshakes counted: at least 0
    assert main(drain(fake_cfg)) == 0
    assert "backend h3 of VIP web: 0 active connections" in capsys.readouterr().out
    assert main(["-c", str(fake_cfg), "stats", "--json"]) == 0
    set_open(fake, fake_cfg, "h3", 9, 2)
    assert main(["-c", str(fake_cfg), "stats", "--json"]) == 0
    *_, line = capsys.readouterr().out.strip().splitlines()
    assert [r["active"] for r in json.loads(line)["vips"][0]["backends"]] == [0, 7, 0]


def test_drain_wait_returns_once_the_connections_are_closed(
    fake: FakeSwitch,
    fake_cfg: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handlers, "DRAIN_POLL_S", 0.02)
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_open(fake, fake_cfg, "h3", 5, 2)
    codes: list[int] = []
    reads = fake.counter_reads.get("backend_closes", 0)
    waiter = threading.Thread(target=lambda: codes.append(main(drain(fake_cfg, "--wait"))))
    waiter.start()
    # The drain's stats baseline and its first report read the closes once each; two reads
    # more are the wait polling with 3 connections still open ...
    assert fake.wait_for(lambda: fake.counter_reads.get("backend_closes", 0) >= reads + 4)
    assert waiter.is_alive() and codes == [], "drain --wait returned with 3 connections open"
    set_open(fake, fake_cfg, "h3", 5, 5)  # ... and it returns once they are closed.
    waiter.join(10)
    assert not waiter.is_alive() and codes == [0]
    out = capsys.readouterr().out
    assert "3 active connections" in out and "drained (0 active connections)" in out


def test_drain_wait_times_out_loudly_and_leaves_the_drain(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_open(fake, fake_cfg, "h3", 5, 2)
    started = time.monotonic()
    assert main(drain(fake_cfg, "--wait", "--timeout", "0.3")) == 1
    assert 0.3 <= time.monotonic() - started < 5
    err = capsys.readouterr().err.strip()
    assert err == (
        "p4lb: backend h3 of VIP web: still 3 active connections after 0.3 s "
        "(the drain stays in place; wait longer or remove it anyway)"
    )
    assert reader.load(fake_cfg).vip("web").backend("h3").weight == 0
