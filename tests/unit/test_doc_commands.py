"""The `p4lb` commands docs/cli.md shows, run as written (through main(argv)) against the
in-process fake switch, and the example config's check with the output the docs show."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import reader
from tests.docs import ROOT, doc_block
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import DEFAULT_CONFIG, holds


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[0] == "p4lb", f"not a p4lb command: {command}"
    return argv[1:]


def test_the_cli_tour_runs_as_written(
    fake: FakeSwitch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "lb.toml"
    shutil.copy(DEFAULT_CONFIG, cfg)
    cfg.write_text(cfg.read_text().replace("127.0.0.1:9559", fake.address))
    os.chmod(cfg, 0o600)
    monkeypatch.chdir(tmp_path)
    commands = doc_block("cli-tour")
    assert len(commands) >= 10
    for c in commands:
        assert main(_argv(c.command)) == 0, c.command
    # What the tour leaves: h2 at 3, h3 drained, h5 and dns gone, iphash, on the switch too.
    final = reader.load(cfg)
    web = final.vip("web")
    assert [(b.name, b.weight) for b in web.backends] == [("h2", 3), ("h3", 0), ("h4", 1)]
    assert web.algorithm == "iphash" and [v.name for v in final.vips] == ["web"]
    assert holds(fake, final)


def test_the_example_check_prints_what_the_docs_show(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    (c,) = doc_block("check-default")
    assert c.prompt == "$"
    assert main(_argv(c.command)) == 0
    assert capsys.readouterr().out.splitlines() == c.output


def test_the_qos_commands_run_as_written(
    fake: FakeSwitch, fake_cfg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for simple_switch_CLI (BMv2's Thrift client) that logs what it is told.
    log = tmp_path / "thrift.log"
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(f"#!/bin/sh\ncat >> {log}\nexit 0\n")
    cli.chmod(0o755)
    monkeypatch.setenv("P4LB_SWITCH_CLI", str(cli))
    monkeypatch.setenv("P4LB_CONFIG", str(fake_cfg))  # the running lab's config, as sudo p4lb
    commands = doc_block("qos-tour")
    assert [c.command.split()[:3] for c in commands] == [["sudo", "p4lb", "qos"]] * 3
    for c in commands[:2]:
        assert main(_argv(c.command.removeprefix("sudo "))) == 0, c.command
    assert "set_queue_rate 1000 4 0" in log.read_text().splitlines()
    assert 'discipline = "fq_codel-approx"' in fake_cfg.read_text()
    assert main(_argv(commands[2].command.removeprefix("sudo "))) == 0
    assert "qos.port" not in fake_cfg.read_text()
