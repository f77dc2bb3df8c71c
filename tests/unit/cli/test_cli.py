"""The CLI through main(argv): exit codes, one-line errors, and that a failed runtime
change leaves the config file untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from p4lb.cli.main import main
from p4lb.intent import edits, reader, writer
from p4lb.switch.client import Switch
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import COMPILED


def _unreachable(p: Path) -> Path:
    # Port 9 on loopback: nothing listens, so the connection is refused at once.
    p.write_text(p.read_text().replace("127.0.0.1:9559", "127.0.0.1:9"))
    return p


def test_check_accepts_the_default_config(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(cfg_file), "check"]) == 0
    assert "1 VIPs, 3 backends" in capsys.readouterr().out


def test_invalid_config_is_one_line_and_exit_1(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg_file.write_text(cfg_file.read_text().replace("weight = 1\n", "weight = 5000\n", 1))
    assert main(["-c", str(cfg_file), "apply"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith(f"p4lb: {cfg_file}: vip.web.backend[0].weight: 5000 is outside")


def test_runtime_change_rejected_by_validation_changes_nothing(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = cfg_file.read_bytes()
    assert main(["-c", str(cfg_file), "weight", "set", "web", "h2", "1001"]) == 1
    assert "outside 0..1000" in capsys.readouterr().err
    assert main(["-c", str(cfg_file), "weight", "set", "web", "nobody", "2"]) == 1
    assert "has no backend 'nobody'" in capsys.readouterr().err
    assert main(["-c", str(cfg_file), "backend", "drain", "nope", "h2"]) == 1
    assert "no VIP 'nope'" in capsys.readouterr().err
    assert cfg_file.read_bytes() == before


def test_draining_every_backend_is_refused(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = reader.load(cfg_file)

    cfg = edits.drain(edits.drain(cfg, "web", "h2"), "web", "h3")
    writer.save(cfg, cfg_file)
    before = cfg_file.read_bytes()
    assert main(["-c", str(cfg_file), "backend", "drain", "web", "h4"]) == 1
    assert "total weight is 0" in capsys.readouterr().err
    assert cfg_file.read_bytes() == before


def test_unreachable_switch_is_a_clear_error_and_the_file_is_kept(
    cfg_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unreachable(cfg_file)
    before = cfg_file.read_bytes()
    assert main(["-c", str(cfg_file), "weight", "set", "web", "h2", "3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "p4lb: switch at 127.0.0.1:9 is unreachable (connection refused: nothing listens there)"
    )
    assert cfg_file.read_bytes() == before
    assert main(["-c", str(cfg_file), "apply"]) == 1
    assert main(["-c", str(cfg_file), "stats"]) == 1


# ---------------------------------------------------------------- against the fake switch


def test_apply_over_grpc_then_a_dry_run_has_nothing_to_write(
    fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    assert "; pipeline pushed" in capsys.readouterr().out
    assert main(["-c", str(fake_cfg), "apply", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == f"{fake_cfg}: would write 0 entries in 0 batches"


def test_a_runtime_change_the_switch_refuses_leaves_the_file_untouched(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    fake.full_tables.add("backend_table")
    before = fake_cfg.read_bytes()
    args = ["--address", "10.0.0.5", "--port", "80", "--mac", "00:00:00:00:00:05"]
    assert (
        main(["-c", str(fake_cfg), "backend", "add", "web", "h5", *args, "--switch-port", "5"]) == 1
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"p4lb: switch at {fake.address} refused INSERT backend_table")
    assert err.endswith("is full") and "\n" not in err
    assert fake_cfg.read_bytes() == before


def _shell_run(cfg: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`p4lb shell` in a child process, with a stand-in for p4runtime-shell's Python that
    prints the arguments it was started with."""
    stand_in = tmp_path / "python"
    stand_in.write_text('#!/bin/sh\necho "$@"\n')
    stand_in.chmod(0o755)
    env = {
        **os.environ,
        "P4LB_SHELL_PYTHON": str(stand_in),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    code = "import sys; from p4lb.cli.main import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, "-c", str(cfg), "shell", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_shell_opens_p4runtime_shell_as_a_reader_on_the_configured_switch(
    fake: FakeSwitch, fake_cfg: Path, tmp_path: Path
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    got = _shell_run(fake_cfg, tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [
        "-m", "p4runtime_sh", "--grpc-addr", fake.address, "--device-id", "0",
        "--election-id", "0,1",
    ]  # fmt: skip
    primary = _shell_run(fake_cfg, tmp_path, "--primary")
    assert primary.stdout.split()[-1] == "0,12"  # above p4lb run (10) and commands (11)


def test_shell_refuses_a_switch_without_our_pipeline(
    fake: FakeSwitch, fake_cfg: Path, tmp_path: Path
) -> None:
    got = _shell_run(fake_cfg, tmp_path)
    assert got.returncode == 1
    assert got.stderr.strip().endswith("has no pipeline: run `p4lb apply`")


def test_shell_says_how_to_install_p4runtime_shell(
    fake_cfg: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("P4LB_SHELL_PYTHON", "/nonexistent/python")
    assert main(["-c", str(fake_cfg), "shell"]) == 1
    assert "run `make shell`" in capsys.readouterr().err


def test_shell_as_a_reader_never_takes_p4lb_s_own_election_ids(
    fake_cfg: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("P4LB_SHELL_PYTHON", sys.executable)
    assert main(["-c", str(fake_cfg), "shell", "--election-id", "11"]) == 1
    assert "election id 11 is p4lb's own" in capsys.readouterr().err


def test_shell_refuses_a_switch_running_another_p4info(
    fake: FakeSwitch, fake_cfg: Path, tmp_path: Path
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    other = p4i.P4Info()
    text_format.Parse((COMPILED / "lb.p4info.txtpb").read_text(), other)
    other.pkg_info.name = "another program"
    other_path = tmp_path / "other.p4info.txtpb"
    other_path.write_text(text_format.MessageToString(other))
    with Switch(fake.address, 0, 50) as sw:  # another controller pushes its own program
        assert sw.ensure_pipeline(other_path, COMPILED / "lb.json")
    got = _shell_run(fake_cfg, tmp_path)
    assert got.returncode == 1 and got.stdout == ""  # p4runtime-shell never started
    err = got.stderr.strip().splitlines()[-1]
    assert err.startswith(f"p4lb: switch at {fake.address} runs a P4Info other than")
    assert err.endswith("run `p4lb apply`")
