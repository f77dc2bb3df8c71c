"""The veth labs (topology.wire) side by side, and the switch command line they start: no
two labs share a veth or a port, every name fits Linux's interface names, a lab another run
uses is refused rather than taken over, and the switch gets each lab's ports, program and
Thrift port (the one its guard lifts at the end)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import controller, lab
from tests.dataplane import support, test_security
from topology import bmv2, thrift_guard
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


def test_a_lab_whose_switch_runs_is_refused_and_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        x = VethLab("p4lbx", ports=2, grpc_port=busy.getsockname()[1], thrift_port=1)
        with pytest.raises(RuntimeError, match="in use"), x.veths():
            pass
    assert ran == []  # no veth of the running lab removed
