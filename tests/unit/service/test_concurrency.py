"""Concurrent operators never lose an update: runtime commands serialise on the config
file's lock, wait (bounded) for a writer holding the switch, and `p4lb run` never applies
a config older than a command's. All against the fake switch, over gRPC."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4lb.cli.main import main
from p4lb.intent import reader
from p4lb.service.daemon import Controller
from p4lb.switch.client import Switch
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import holds, run_in_thread

RUN_ELECTION_ID = 10  # configs/default.toml


def _cli(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from p4lb.cli.main import main; sys.exit(main())",
        *args,
    ]


def test_concurrent_cli_processes_all_land_on_the_switch_and_in_the_file(
    fake: FakeSwitch, fake_cfg: Path
) -> None:
    c = str(fake_cfg)
    commands = [
        ["weight", "set", "web", "h2", "2"],
        ["weight", "set", "web", "h3", "3"],
        ["weight", "set", "web", "h4", "4"],
        ["backend", "add", "web", "h5", "--address", "10.0.0.5", "--port", "8000"]
        + ["--weight", "5", "--mac", "00:00:00:00:00:05", "--switch-port", "5"],
        ["algorithm", "set", "web", "iphash"],
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            _cli("-c", c, "--wait", "60", *cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for cmd in commands
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err.decode()
    web = reader.load(fake_cfg).vip("web")
    assert {b.name: b.weight for b in web.backends} == {"h2": 2, "h3": 3, "h4": 4, "h5": 5}
    assert web.algorithm == "iphash"
    assert holds(fake, reader.load(fake_cfg))


def test_concurrent_cli_threads_all_land(fake: FakeSwitch, fake_cfg: Path) -> None:
    names = [f"x{i}" for i in range(8)]
    codes: dict[str, int] = {}

    def add(i: int, name: str) -> None:
        codes[name] = main(
            ["-c", str(fake_cfg), "--wait", "60", "backend", "add", "web", name]
            + ["--address", f"10.0.1.{i + 1}", "--port", "8000", "--weight", "1"]
            + ["--mac", f"00:00:00:00:01:{i + 1:02x}", "--switch-port", str(10 + i)]
        )

    threads = [threading.Thread(target=add, args=(i, n)) for i, n in enumerate(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert codes == dict.fromkeys(names, 0)
    web = reader.load(fake_cfg).vip("web")
    assert {b.name for b in web.backends} == {"h2", "h3", "h4", *names}
    assert holds(fake, reader.load(fake_cfg))


def test_a_command_waits_for_a_writer_holding_the_switch(fake: FakeSwitch, fake_cfg: Path) -> None:
    blocker = Switch(fake.address, 0, 50)
    assert blocker.is_primary
    result: list[int] = []
    before = fake.arbitrations
    t = threading.Thread(
        target=lambda: result.append(
            main(["-c", str(fake_cfg), "--wait", "30", "weight", "set", "web", "h2", "3"])
        )
    )
    t.start()
    try:
        # The command tried, was not primary, and tried again ...
        assert fake.wait_for(lambda: fake.arbitrations >= before + 2)
        assert fake.updates_applied == 0
    finally:
        blocker.close()  # ... and lands once the other writer is gone.
    t.join(60)
    assert result == [0]
    assert reader.load(fake_cfg).vip("web").backend("h2").weight == 3
    assert holds(fake, reader.load(fake_cfg))


def test_a_command_that_cannot_become_primary_fails_loudly_and_changes_nothing(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fake_cfg.read_bytes()
    with Switch(fake.address, 0, 50) as blocker:
        assert blocker.is_primary
        code = main(["-c", str(fake_cfg), "--wait", "0.5", "weight", "set", "web", "h2", "3"])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"p4lb: switch at {fake.address}: could not become primary")
    assert "\n" not in err
    assert fake_cfg.read_bytes() == before
    assert fake.updates_applied == 0


def test_a_command_waits_for_the_config_lock_then_gives_up(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from p4lb.intent.lock import config_lock

    with config_lock(fake_cfg):
        code = main(["-c", str(fake_cfg), "--wait", "0.3", "weight", "set", "web", "h2", "3"])
    assert code == 1
    assert "another p4lb command has held" in capsys.readouterr().err
    assert fake.arbitrations == 0


@pytest.fixture
def running(fake: FakeSwitch, fake_cfg: Path) -> Iterator[Controller]:
    """`p4lb run` on the same config file, reconciling every 50 ms."""
    ctl = Controller(
        lambda: reader.load(fake_cfg),
        poll_s=0.01,
        check_s=0.05,
        config_path=str(fake_cfg),
        retry_s=0.05,
    )
    with run_in_thread(ctl, 120) as running_ctl:
        yield running_ctl


def test_commands_during_p4lb_run_land_and_run_never_applies_a_stale_config(
    fake: FakeSwitch, fake_cfg: Path, running: Controller
) -> None:
    assert running.ready.wait(10), "p4lb run did not take the switch"
    started = len(fake.table_writes)
    codes: list[int] = []

    def change(backend: str, weight: int) -> None:
        args = ["-c", str(fake_cfg), "--wait", "60", "weight", "set", "web", backend]
        codes.append(main([*args, str(weight)]))

    threads = [
        threading.Thread(target=change, args=(b, w)) for b, w in (("h2", 2), ("h3", 3), ("h4", 4))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert codes == [0, 0, 0]
    web = reader.load(fake_cfg).vip("web")
    assert [b.weight for b in web.backends] == [2, 3, 4]
    # Mastership returns to p4lb run, and it holds the switch in the file's intent ...
    assert fake.wait_for(
        lambda: fake.primary is not None and fake.primary.election_id == RUN_ELECTION_ID
    )
    assert running.ready.wait(10)
    assert holds(fake, reader.load(fake_cfg))
    # ... without ever having written an older intent over a command's change: every
    # table write since it took the switch came from the commands (election id 11).
    by_run = [w for w in fake.table_writes[started:] if w[0] == RUN_ELECTION_ID]
    assert by_run == []
    assert {w[0] for w in fake.table_writes[started:]} == {RUN_ELECTION_ID + 1}
    assert any(w[2] == p4r.Update.MODIFY for w in fake.table_writes[started:])
