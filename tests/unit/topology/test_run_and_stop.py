"""`make run`'s and `make stop`'s edges that need no network: `make stop` without root is one
line; it stops the single-switch lab and the tier by the PIDs they recorded and removes the
pointer to the running config; the tier's banner's kill line works as bash reads it; the
Mininet CLI's `p4lb` command runs p4lb on the lab's config."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from p4lb.intent.running import pointer_path, write_pointer
from tests.unit.support import DEFAULT_CONFIG, ROOT
from topology import run as lab_run
from topology import stop, tier, tier_plan, tier_procs


def sleeper() -> subprocess.Popen[bytes]:
    """A process of our own to be stopped by PID, in a session of its own (as the tier's)."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )


def ended(proc: subprocess.Popen[bytes]) -> bool:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    return True


@pytest.fixture
def states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Where stop looks for the lab's and the tier's state files, moved under tmp_path."""
    lab_state = tmp_path / "run" / "state.json"
    tier_run = tmp_path / "run" / "tier"
    tier_run.mkdir(parents=True)
    monkeypatch.setattr(stop, "STATE", lab_state)
    monkeypatch.setattr(tier_plan, "RUN", tier_run)
    monkeypatch.setattr(tier_plan, "STATE", tier_run / "state.json")
    return lab_state, tier_run / "state.json"


@pytest.mark.parametrize("entry", ["make stop", "tier down"])
def test_stop_without_root_is_one_line(
    entry: str,
    states: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lab_state, _ = states
    lab_state.parent.mkdir(exist_ok=True)
    lab_state.write_text(json.dumps({"pids": {"controller": 1}}))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    killed: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(pid))
    code = stop.main() if entry == "make stop" else tier.main(["down"])
    assert code == 1
    assert capsys.readouterr().err == "make stop: needs root: sudo make stop\n"
    assert killed == [] and lab_state.exists()  # checked before anything is touched


def test_stop_refused_by_the_kernel_is_the_same_line(
    states: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab_state, _ = states
    lab_state.parent.mkdir(exist_ok=True)
    lab_state.write_text(json.dumps({"pids": {"controller": 12345}}))
    monkeypatch.setattr(os, "geteuid", lambda: 0)

    def refuse(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refuse)
    assert stop.main() == 1
    out = capsys.readouterr()
    assert out.err == "make stop: needs root: sudo make stop\n"
    assert "Traceback" not in out.out + out.err


@pytest.mark.skipif(os.geteuid() != 0, reason="make stop needs root")
def test_stop_ends_the_lab_and_the_tier_by_pid_and_removes_the_pointer(
    states: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab_state, tier_state = states
    lab_proc, tier_proc = sleeper(), sleeper()
    lab_state.write_text(json.dumps({"pids": {"controller": lab_proc.pid}, "interfaces": []}))
    tier_state.write_text(
        json.dumps({"pids": {"controller": tier_proc.pid}, "links": [], "netns": []})
    )
    write_pointer(DEFAULT_CONFIG)
    assert stop.main() == 0
    assert ended(lab_proc) and ended(tier_proc)
    assert not lab_state.exists() and not tier_state.exists()
    assert not pointer_path().exists()
    out = capsys.readouterr().out
    assert "stopped the single-switch lab" in out and "stopped the tier" in out
    assert stop.main() == 0  # again: nothing left
    assert capsys.readouterr().out == "make stop: nothing recorded as running\n"


@pytest.mark.skipif(shutil.which("jq") is None, reason="banner kill line test: missing jq")
def test_the_tier_banners_kill_line_works_in_bash(tmp_path: Path) -> None:
    victim, bystander = sleeper(), sleeper()
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"pids": {"switch-lb2": victim.pid, "switch-lb1": bystander.pid}}))
    banner = tier.BANNER.format(
        n=3,
        vip=tier_plan.VIP,
        servers=3,
        pointer="/run/p4lb/config",
        log="log",
        kill_line=tier.kill_line("switch-lb2", state),
        how_to_stop="",
    )
    line = next(ln for ln in banner.splitlines() if "kill -9" in ln).strip()
    # As printed, comment included; sudo stands in as a function (we may lack it, or be root).
    r = subprocess.run(
        ["bash", "-c", f'sudo() {{ "$@"; }}\n{line}'], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0, r.stderr
    assert ended(victim) and victim.returncode == -signal.SIGKILL
    assert bystander.poll() is None
    bystander.kill()
    bystander.wait()


def test_banners_name_p4lb_as_users_type_it() -> None:
    lab = lab_run.BANNER.format(
        vip="10.0.0.100",
        port=80,
        algorithm="wrr",
        servers="h2",
        pointer="/run/p4lb/config",
        log="log",
        metrics="",
        vip6="",
        curl6="",
    )
    the_tier = tier.BANNER.format(
        n=3,
        vip=tier_plan.VIP,
        servers=3,
        pointer="/run/p4lb/config",
        log="log",
        kill_line="",
        how_to_stop="",
    )
    for banner in (lab, the_tier):
        p4lb_lines = [ln for ln in banner.splitlines() if "p4lb " in ln and "running" not in ln]
        assert p4lb_lines
        assert not [ln for ln in p4lb_lines if ".venv" in ln or " -c " in ln]
    assert "mininet> p4lb weight set web h2 3" in lab and "\n  sudo p4lb stats" in lab


def test_the_mininet_cli_runs_p4lb_on_the_labs_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "lab" / "lb.toml"
    config.parent.mkdir()
    shutil.copy(DEFAULT_CONFIG, config)
    monkeypatch.chdir(tmp_path)  # no p4lb.toml here, no $P4LB_CONFIG: only -c finds it
    monkeypatch.delenv("P4LB_CONFIG", raising=False)
    printed: list[str] = []
    monkeypatch.setattr(lab_run, "output", printed.append)
    script = tmp_path / "commands"
    script.write_text("p4lb check\np4lb weight set web nobody 2\n")
    lab = SimpleNamespace(net={}, config_path=config)
    with open(os.devnull) as stdin:
        lab_run.LabCLI(lab, stdin=stdin, script=str(script))  # type: ignore[arg-type]
    assert printed[0] == f"{config}: ok (1 VIPs, 3 backends)\n"
    assert printed[1] == "p4lb: VIP 'web' has no backend 'nobody'\n"  # its error, one line
    assert printed[2] == "(p4lb exited with status 1)\n"
    assert len(printed) == 3


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a parent that is not us does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_tiers_processes_outlive_its_run_and_make_stop_ends_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `make run TOPO=tier RUN_ARGS=--detach` relies on: a process the tier starts runs
    in a session of its own, recorded in state.json, after the Python that started it is
    gone; stopping from state.json ends it."""
    code = (
        "import sys; from pathlib import Path; from topology import tier_plan, tier_procs; "
        f"tier_plan.RUN = Path({str(tmp_path)!r}); tier_plan.STATE = tier_plan.RUN / 'state.json'; "
        "tier_procs.Tier().start('server', [sys.executable, '-c', 'import time; time.sleep(60)'], "
        f"None, Path({str(tmp_path / 'server.log')!r}))"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    pid = json.loads((tmp_path / "state.json").read_text())["pids"]["server"]
    assert running(pid) and os.getsid(pid) == pid
    monkeypatch.setattr(tier_plan, "RUN", tmp_path)
    monkeypatch.setattr(tier_plan, "STATE", tmp_path / "state.json")
    assert tier_procs.stop_from_state(tmp_path / "state.json")
    assert not running(pid) and not (tmp_path / "state.json").exists()


def test_make_stop_without_root_is_one_line_before_any_python() -> None:
    """As a user who may not even run the venv's Python: the Makefile says it first."""
    drop: dict[str, object] = (
        {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    )
    r = subprocess.run(  # type: ignore[call-overload]
        ["make", "--no-print-directory", "stop"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        **drop,
    )
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.splitlines()[0] == "make stop: needs root: sudo make stop", r.stderr
    assert "Traceback" not in r.stderr and "python" not in r.stderr
