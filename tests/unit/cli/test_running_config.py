"""Which config `p4lb` uses without `-c` ($P4LB_CONFIG, else the running lab's config named by
the pointer `make run` writes, else p4lb.toml), and what it says when it may not read or write
a file (one line naming the file, its owner and the command again with sudo)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4lb.cli import main as cli_main
from p4lb.cli.main import build_parser, config_origin, main, permission_line
from p4lb.intent.running import clear_pointer, pointer_path, running_config, write_pointer
from p4lb.pipeline.p4info import compiled_limits
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import DEFAULT_CONFIG, ROOT

P4LB = Path(sys.executable).with_name("p4lb")
NOBODY = 65534


def help_of_c() -> str:
    """`p4lb --help` on one line (wide enough that no path is broken at a hyphen)."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("COLUMNS", "2000")
        text = build_parser(compiled_limits()).format_help()
    return " ".join(text.split())


def test_the_pointer_names_the_running_config_and_stop_removes_it(cfg_file: Path) -> None:
    pointer = pointer_path()
    assert running_config() is None and not pointer.exists()
    write_pointer(cfg_file)
    assert pointer.read_text() == f"{cfg_file.resolve()}\n"
    assert pointer.stat().st_mode & 0o777 == 0o644  # a user without sudo finds it
    assert running_config() == cfg_file.resolve()
    assert not clear_pointer(cfg_file.with_name("other.toml"))  # another run's: kept
    assert pointer.exists()
    assert clear_pointer(cfg_file)
    assert not pointer.exists() and not clear_pointer()


def test_without_c_the_order_is_env_then_running_lab_then_p4lb_toml(
    cfg_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("P4LB_CONFIG", raising=False)
    assert config_origin()[0] == "p4lb.toml"
    assert "default p4lb.toml: no $P4LB_CONFIG and no running lab" in help_of_c()
    write_pointer(cfg_file)
    path, origin = config_origin()
    assert path == str(cfg_file.resolve())
    assert origin == f"the running lab's, named by {pointer_path()}"
    assert f"default {cfg_file.resolve()}: the running lab's" in help_of_c()
    other = tmp_path / "mine.toml"
    monkeypatch.setenv("P4LB_CONFIG", str(other))
    assert config_origin() == (str(other), "from $P4LB_CONFIG")
    assert f"default {other}: from $P4LB_CONFIG" in help_of_c()
    # A pointer left behind by a run whose config is gone: not followed.
    monkeypatch.delenv("P4LB_CONFIG")
    cfg_file.unlink()
    assert config_origin()[0] == "p4lb.toml"


def test_commands_reach_the_running_lab_from_any_directory(
    fake: FakeSwitch,
    fake_cfg: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("P4LB_CONFIG", raising=False)
    write_pointer(fake_cfg)
    assert main(["apply"]) == 0
    assert main(["weight", "set", "web", "h2", "3"]) == 0
    capsys.readouterr()
    assert main(["stats"]) == 0
    assert "h2" in capsys.readouterr().out
    assert "weight = 3" in fake_cfg.read_text()


def test_permission_line_names_file_owner_and_the_command_with_sudo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readable: set[str] = set()
    monkeypatch.setattr(cli_main.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cli_main.os, "access", lambda path, mode: str(path) in readable)
    config = tmp_path / "lb.toml"
    config.write_text("")
    owner = cli_main._owner(config)
    lock = tmp_path / ".lb.toml.lock"
    # An unreadable config is named, whichever file failed first (here the lock).
    for failed in (config, lock):
        e = PermissionError(13, "Permission denied", str(failed))
        assert permission_line(e, str(config), ["weight", "set", "web", "h2", "3"]) == (
            f"p4lb: cannot read {config}: permission denied (the running balancer's config "
            f"belongs to {owner}: use sudo p4lb weight set web h2 3)"
        )
    readable.add(str(config))  # a readable config; the lock is not there yet: making it failed
    e = PermissionError(13, "Permission denied", str(lock))
    assert permission_line(e, str(config), ["-c", "a b.toml", "stats"]) == (
        f"p4lb: cannot write {lock}: permission denied (it belongs to {owner}: "
        "use sudo p4lb -c 'a b.toml' stats)"
    )


# ------------------------------------------- as a user who may not read root's files


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can enter (pytest's tmp_path is owner-only)."""
    d = Path(tempfile.mkdtemp(prefix="p4lb-perm-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def other_user() -> tuple[list[str], dict[str, object]]:
    """How to run `p4lb` as a user without rights to this process's files: nobody when we
    are root (with a Python nobody may run: this one, else the system's, on the venv's
    packages), else ourselves (the files are then made unreadable to their owner)."""
    if os.geteuid() != 0:
        return [str(P4LB)], {}
    drop: dict[str, object] = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    path = os.pathsep.join([sysconfig.get_paths()["purelib"], str(ROOT / "controller")])
    for python in (sys.executable, "/usr/bin/python3"):
        cmd = [python, "-c", "import sys; from p4lb.cli.main import main; sys.exit(main())"]
        try:
            r = subprocess.run(
                [*cmd, "--help"],
                capture_output=True,
                env={"PYTHONPATH": path, "HOME": "/tmp"},
                cwd="/tmp",
                timeout=60,
                **drop,  # type: ignore[arg-type]
            )
        except PermissionError:  # under a directory nobody may not enter
            continue
        if r.returncode == 0:
            return cmd, {**drop, "env_extra": {"PYTHONPATH": path}}
    pytest.skip("permission tests skipped: no Python user nobody may run with these packages")


def as_other_user(*args: str) -> subprocess.CompletedProcess[str]:
    """`p4lb ARGS` as other_user(), from /tmp."""
    cmd, kwargs = other_user()
    env = {k: v for k, v in os.environ.items() if k not in ("P4LB_CONFIG", "PYTHONPATH")}
    env["HOME"] = "/tmp"
    env.update(kwargs.pop("env_extra", {}))  # type: ignore[arg-type]
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [*cmd, *args], capture_output=True, text=True, timeout=60, env=env, cwd="/tmp", **kwargs
    )


def private(path: Path) -> None:
    path.chmod(0o600 if os.geteuid() == 0 else 0o000)


def one_line_with_sudo(r: subprocess.CompletedProcess[str], start: str, then: str) -> None:
    err = r.stderr.strip()
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and err.count("\n") == 0, r.stderr
    assert err.startswith(start), err
    assert err.endswith(then), err


def test_an_unreadable_config_is_one_line_suggesting_sudo(shared_dir: Path) -> None:
    config = shared_dir / "lb.toml"
    shutil.copy(DEFAULT_CONFIG, config)
    private(config)
    r = as_other_user("-c", str(config), "stats")
    one_line_with_sudo(
        r,
        f"p4lb: cannot read {config}: permission denied (the running balancer's config belongs",
        f": use sudo p4lb -c {config} stats)",
    )


def test_the_running_labs_config_needs_sudo_without_c(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = shared_dir / "run" / "lb.toml"
    config.parent.mkdir(mode=0o755)
    shutil.copy(DEFAULT_CONFIG, config)
    private(config)
    monkeypatch.setenv("P4LB_RUN_POINTER", str(shared_dir / "pointer" / "config"))
    write_pointer(config)
    r = as_other_user("weight", "set", "web", "h2", "3")
    one_line_with_sudo(
        r, f"p4lb: cannot read {config}: permission denied", ": use sudo p4lb weight set web h2 3)"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a directory only root may write in")
def test_the_lock_file_is_one_line_suggesting_sudo(shared_dir: Path) -> None:
    config = shared_dir / "lb.toml"
    shutil.copy(DEFAULT_CONFIG, config)
    config.chmod(0o644)  # readable, but the directory is root's: the lock cannot be made
    r = as_other_user("-c", str(config), "weight", "set", "web", "h2", "3")
    one_line_with_sudo(
        r,
        f"p4lb: cannot write {shared_dir}/.lb.toml.lock: permission denied (it belongs to root",
        f": use sudo p4lb -c {config} weight set web h2 3)",
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: files another user may not read")
@pytest.mark.parametrize("suffix", [".state.json", ".health.json"])
def test_stats_with_unreadable_state_files_is_one_line_suggesting_sudo(
    fake: FakeSwitch, shared_dir: Path, suffix: str
) -> None:
    """The stats baselines and the health state are owner-only files beside the config."""
    config = shared_dir / "lb.toml"
    config.write_text(DEFAULT_CONFIG.read_text().replace("127.0.0.1:9559", fake.address))
    config.chmod(0o644)
    assert main(["-c", str(config), "apply"]) == 0
    state = config.with_name(config.name + suffix)
    state.write_text('{"vips": {}}\n')
    state.chmod(0o600)
    r = as_other_user("-c", str(config), "stats")
    one_line_with_sudo(
        r,
        f"p4lb: cannot read {state}: permission denied (it belongs to root",
        f": use sudo p4lb -c {config} stats)",
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: files another user may not read")
def test_the_switchs_tls_files_are_one_line_suggesting_sudo(shared_dir: Path) -> None:
    """A readable config whose TLS key files are root's (as the tier's): say so, not crash."""
    for name in ("ca.crt", "p4lb.crt", "p4lb.key"):
        (shared_dir / name).write_text("not read by this test\n")
        (shared_dir / name).chmod(0o600)
    config = shared_dir / "lb.toml"
    tls = 'tls = { ca = "ca.crt", cert = "p4lb.crt", key = "p4lb.key" }'
    config.write_text(
        DEFAULT_CONFIG.read_text().replace(
            'address = "127.0.0.1:9559"', f'address = "127.0.0.1:9559"\n{tls}'
        )
    )
    config.chmod(0o644)
    r = as_other_user("-c", str(config), "stats")
    one_line_with_sudo(
        r,
        f"p4lb: cannot read {shared_dir}/ca.crt: permission denied (it belongs to root",
        f": use sudo p4lb -c {config} stats)",
    )
