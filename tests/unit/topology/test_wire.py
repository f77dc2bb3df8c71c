"""The veth labs (topology.wire) side by side, and the switch command line they start: no
two labs share a veth or a port, every name fits Linux's interface names, a lab another run
uses is refused rather than taken over, and the switch gets each lab's ports, program and
Thrift port (the one its guard lifts at the end)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import controller, lab
from tests.dataplane import support, test_security
from topology import bmv2, thrift_guard, wire
from topology.wire import VethLab

LABS = [lab.LAB, controller.LAB, support.LAB, test_security.LAB]
IFNAMSIZ = 16  # Linux's limit, the terminating NUL included


def test_labs_share_no_veth_and_no_port_and_every_name_fits() -> None:
    names = [n for x in LABS for p in range(1, x.ports + 1) for n in (x.host_if(p), x.switch_if(p))]
    assert len(names) == len(set(names))
    assert all(len(n) < IFNAMSIZ for n in names), names
    ports = [p for x in LABS for p in (x.grpc_port, x.thrift_port)]
    assert len(ports) == len(set(ports))


def test_switch_command_has_the_labs_ports_and_its_program() -> None:
    x = VethLab("p4lbx", ports=3, grpc_port=1111, thrift_port=2222)
    ports = {p: x.switch_if(p) for p in range(1, x.ports + 1)}
    args = bmv2.command(ports, x.grpc_port, x.thrift_port, binary="ssg", program=Path("a.json"))
    ifs = [args[i + 1] for i, a in enumerate(args) if a == "-i"]
    assert ifs == ["1@p4lbx-s1", "2@p4lbx-s2", "3@p4lbx-s3"]
    assert "a.json" in args[: args.index("--")] and "--no-p4" not in args
    assert args[args.index("--") + 1 :] == ["--grpc-server-addr", "127.0.0.1:1111"]
    assert thrift_guard.thrift_port_of(["valgrind", *args]) == 2222
    empty = bmv2.command(ports, x.grpc_port, x.thrift_port, binary="ssg")
    assert "--no-p4" in empty[: empty.index("--")]


def test_a_lab_another_run_holds_or_whose_switch_runs_is_refused_and_left_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(wire, "LOCKS", tmp_path)
    x = VethLab("p4lbx", ports=2, grpc_port=free_port(), thrift_port=1)
    held = subprocess.Popen(  # another run: holds the lab's lock until told to stop
        [sys.executable, "-c", HOLD, str(tmp_path / "lab-p4lbx.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert held.stdout is not None and held.stdout.readline() == b"held\n"
        with pytest.raises(RuntimeError, match="in use by another run"), x.veths():
            pass
    finally:
        held.communicate(b"")
    with socket.socket() as busy:  # a switch of an earlier run, on the lab's port
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        y = VethLab("p4lbx", ports=2, grpc_port=busy.getsockname()[1], thrift_port=1)
        with pytest.raises(RuntimeError, match="is taken"), y.veths():
            pass
    assert ran == []  # no veth removed, none made
    with x.veths():  # the other run ended: the lab is free again
        pass
    assert ran[0][0][:3] == ("ip", "link", "add")


HOLD = """
import fcntl, sys
with open(sys.argv[1], "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
