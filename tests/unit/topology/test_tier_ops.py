"""The tier's operator verbs and its bond, without root: the plumbing commands (ip, bridge,
vtysh) recorded instead of run, each process a real `sleep` of ours. What `add` records in
state.json is exactly what `remove` takes away (so `make stop` stops what the verbs start and
nothing of another balancer); `restart` replaces a balancer's processes and stops the old
ones; the bond kills a speaker the moment its switch ends, and only a speaker."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topology import tier_ops, tier_procs
from topology import tier_plan as plan
from topology.procs import alive
from topology.tier_plan import balancer_records
from topology.tier_procs import Tier

ROOT = Path(__file__).resolve().parents[3]
REAL_POPEN = subprocess.Popen


class Plumbing:
    """Stands in for the commands the tier runs: records them, starts a `sleep` for each
    process, answers vtysh as a configured bfdd would."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.sleepers: list[subprocess.Popen[bytes]] = []

    def sleeper(self) -> int:
        p = REAL_POPEN(["sleep", "120"])
        self.sleepers.append(p)
        return p.pid

    def sh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(args))
        out = f"{plan.ROUTER_LB} {plan.ROUTER_RET}" if "vtysh" in args else ""
        return subprocess.CompletedProcess(list(args), 0, out, "")

    def in_ns(self, ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.sh("ip", "netns", "exec", ns, *args)

    def run(self, args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        """An FRR daemon's start: it daemonizes and writes its pid file (-i)."""
        self.commands.append(list(args))
        Path(args[args.index("-i") + 1]).write_text(f"{self.sleeper()}\n")
        return subprocess.CompletedProcess(args, 0, "", "")

    def popen(self, args: list[str], **_: Any) -> Any:
        self.commands.append(list(args))
        return type("Proc", (), {"pid": self.sleeper()})()

    def stop(self) -> None:
        for p in self.sleepers:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def plumbing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plumbing]:
    from p4lb.intent import writer

    fake = Plumbing()
    run = tmp_path / "run" / "tier"
    run.mkdir(parents=True)
    monkeypatch.setattr(plan, "RUN", run)
    monkeypatch.setattr(plan, "STATE", run / "state.json")
    monkeypatch.setattr(plan, "PKI", run / "pki")
    monkeypatch.setattr(plan, "BGP_SECRET", run / "bgp-password")
    monkeypatch.setattr(tier_procs, "sh", fake.sh)
    monkeypatch.setattr(tier_procs, "in_ns", fake.in_ns)
    monkeypatch.setattr(tier_ops, "sh", fake.sh)
    monkeypatch.setattr(tier_ops, "in_ns", fake.in_ns)
    monkeypatch.setattr(tier_procs.subprocess, "run", fake.run)
    monkeypatch.setattr(tier_procs.subprocess, "Popen", fake.popen)
    monkeypatch.setattr(tier_procs, "wait_listening", lambda *a, **k: None)
    monkeypatch.setattr(tier_procs.thrift_guard, "confine", lambda port: None)
    monkeypatch.setattr(tier_procs.thrift_guard, "release", lambda port: None)
    monkeypatch.setattr(tier_procs.time, "sleep", lambda s: None)
    # The tier's config as `make run TOPO=tier` writes it (clear text: no CA here).
    cfg = plan.p4lb_config(3, 3)
    cfg = dataclasses.replace(cfg, switch=dataclasses.replace(cfg.switch, tls=None))
    cfg = dataclasses.replace(cfg, switch=dataclasses.replace(cfg.switch, insecure=True))
    writer.save(cfg, run / "lb.toml")
    try:
        yield fake
    finally:
        fake.stop()


def three_balancers() -> Tier:
    """A tier's record with three balancers (the pieces up() adds for each one)."""
    t = Tier(balancers=3, servers=1)
    with t.edit():
        t.pids["controller"] = 1  # never signalled here: not a balancer's
        t.namespaces += ["p4t-fab", "p4t-r0", "p4t-r1"]
        for i in (1, 2, 3):
            t.add_balancer(i)
    return t


def recorded() -> dict[str, Any]:
    return dict(json.loads(plan.STATE.read_text()))


def test_add_records_exactly_what_remove_takes_away(
    plumbing: Plumbing, monkeypatch: pytest.MonkeyPatch
) -> None:
    from p4lb.intent import reader

    t = three_balancers()
    before = recorded()
    monkeypatch.setattr(Tier, "ecmp_next_hops", lambda self, vip=plan.VIP: [])
    t = Tier()
    with t.edit():
        i = tier_ops.add(t)
    assert i == 4
    after = recorded()
    procs, links, ns, thrift = balancer_records(4)
    assert set(after["pids"]) - set(before["pids"]) == procs
    assert set(after["links"]) - set(before["links"]) == links
    assert set(after["netns"]) - set(before["netns"]) == {ns}
    assert set(after["thrift_ports"]) - set(before["thrift_ports"]) == {thrift}
    assert after["balancer_ids"] == [1, 2, 3, 4]
    assert [b.name for b in reader.load(plan.config_file()).tier] == ["lb1", "lb2", "lb3", "lb4"]
    # The routers and the bridge got lb4's fixed entries (no ARP crosses a switch).
    neigh = [c for c in plumbing.commands if "neigh" in c and plan.nexthop_addr(4) in c]
    assert len(neigh) == 2 and all("permanent" in c for c in neigh)
    assert any("fdb" in c and plan.mac(1, 4) in c for c in plumbing.commands)
    # The control plane ahead of everything on the CPU, the switch behind it.
    switch = next(c for c in plumbing.commands if "--device-id" in c and "4" in c)
    speaker = next(c for c in plumbing.commands if "gobgpd" in c and "p4t-lb4" in c)
    assert switch[:3] == ["nice", "-n", str(plan.SWITCH_NICE)] and plan.SWITCH_NICE > 0
    assert ["nice", "-n", str(plan.CONTROL_NICE)] == speaker[4:7] and plan.CONTROL_NICE < 0
    lb4 = [after["pids"][n] for n in procs]
    assert all(alive(p) for p in lb4)

    t = Tier()
    with t.edit():
        tier_ops.remove(t, 4)
    assert recorded() == before
    assert [b.name for b in reader.load(plan.config_file()).tier] == ["lb1", "lb2", "lb3"]
    # Its processes stopped (reaped by the plumbing: a zombie is gone too), the others run.
    for p in plumbing.sleepers:
        if p.pid in lb4:
            assert p.wait(5) is not None
    assert all(alive(p) for n, p in before["pids"].items() if n != "controller")


def test_restart_replaces_the_switch_speaker_and_bond_and_stops_the_old(
    plumbing: Plumbing,
) -> None:
    three_balancers()
    old = recorded()["pids"]
    t = Tier()
    with t.edit():
        done = tier_ops.restart(t, 2, switch=True, speaker=False)
    new = recorded()["pids"]
    assert len(done) == 2  # the switch and its speaker
    for name in ("switch-lb2", "gobgpd-lb2", "bond-lb2"):
        assert new[name] != old[name]
        old_proc = next(p for p in plumbing.sleepers if p.pid == old[name])
        assert old_proc.wait(5) is not None
        assert alive(new[name])
    # bfdd and the other balancers untouched.
    for name in ("p4t-lb2-bfdd", "switch-lb1", "gobgpd-lb3"):
        assert new[name] == old[name]

    # The speaker alone: only gobgpd changes.
    t = Tier()
    with t.edit():
        tier_ops.restart(t, 3, switch=False, speaker=True)
    again = recorded()["pids"]
    assert again["gobgpd-lb3"] != new["gobgpd-lb3"]
    assert {n for n in again if again[n] != new[n]} == {"gobgpd-lb3"}


def test_a_verb_on_an_unknown_balancer_is_one_line(plumbing: Plumbing) -> None:
    three_balancers()
    t = Tier()
    with t.edit(), pytest.raises(tier_ops.VerbError) as e:
        tier_ops.index_of("lb9", t)
    assert "lb1, lb2, lb3" in str(e.value) and "\n" not in str(e.value)


def test_the_last_balancer_is_not_removed(plumbing: Plumbing) -> None:
    t = Tier(balancers=1)
    with t.edit():
        t.add_balancer(1)
    with t.edit(), pytest.raises(tier_ops.VerbError, match="last balancer"):
        tier_ops.remove(t, 1)


def speaker_process(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A process named gobgpd (a copy of sleep), as the bond looks for."""
    exe = tmp_path / "gobgpd"
    sleep = shutil.which("sleep")
    assert sleep is not None
    shutil.copy(sleep, exe)
    return REAL_POPEN([str(exe), "120"])


@pytest.mark.parametrize("named_gobgpd", [True, False])
def test_the_bond_kills_the_speaker_when_the_switch_ends(
    tmp_path: Path, named_gobgpd: bool
) -> None:
    switch = REAL_POPEN(["sleep", "120"])
    speaker = speaker_process(tmp_path) if named_gobgpd else REAL_POPEN(["sleep", "120"])
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"pids": {"switch-lb1": switch.pid, "gobgpd-lb1": speaker.pid}}))
    bond = REAL_POPEN(
        [
            sys.executable,
            "-m",
            "topology.bond",
            "--switch",
            "switch-lb1",
            "--speaker",
            "gobgpd-lb1",
            "--state",
            str(state),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        # While the switch runs, the bond waits and the speaker lives.
        with pytest.raises(subprocess.TimeoutExpired):
            bond.wait(0.5)
        assert speaker.poll() is None
        switch.send_signal(signal.SIGKILL)
        switch.wait()
        ended = time.monotonic()
        assert bond.wait(10) == 0
        if named_gobgpd:
            assert speaker.wait(5) == -signal.SIGKILL
            assert time.monotonic() - ended < 5
        else:  # not a gobgpd (a reused PID): left alone
            assert speaker.poll() is None
    finally:
        for p in (switch, speaker, bond):
            if p.poll() is None:
                p.kill()
            p.wait()
