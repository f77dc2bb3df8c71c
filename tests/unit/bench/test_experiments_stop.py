"""Stopping the experiment matrix (bench/experiments/networks.py) by Ctrl-C or SIGTERM: the
interrupt must reach main's bookkeeping even when the signal lands inside a Mininet command
(session 38: it left a host's shell "waiting", the network's stop then raised AssertionError
in its place, and the meta's end, the begun run's removal and the report were all skipped)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.experiments import matrix, networks
from bench.experiments.plan import QUICK
from topology import net


class Shell:
    """A Mininet node's shell as `release_shells` sees it: `waiting` until the sentinel has
    been read, which takes `answers_after` reads (None: never)."""

    def __init__(self, waiting: bool, answers_after: int | None) -> None:
        self.waiting = waiting
        self.answers_after = answers_after
        self.interrupted = False
        self.reads = 0

    def sendInt(self) -> None:  # noqa: N802 - Mininet's name
        self.interrupted = True

    def monitor(self, timeoutms: int | None = None) -> str:
        assert timeoutms is not None, "an unbounded read could hang the stop"
        self.reads += 1
        if self.answers_after is not None and self.reads >= self.answers_after:
            self.waiting = False
        return ""


def test_a_shell_left_mid_command_is_interrupted_and_read_to_its_end() -> None:
    idle, busy = Shell(False, 1), Shell(True, 3)
    net.release_shells([idle, busy])
    assert (idle.interrupted, idle.reads) == (False, 0)
    assert busy.interrupted and busy.reads == 3 and not busy.waiting


def test_a_shell_that_never_answers_is_released_after_a_bounded_wait() -> None:
    dead = Shell(True, None)
    net.release_shells([dead])
    assert dead.reads == net.SHELL_DRAIN_TRIES
    assert not dead.waiting


def test_the_network_stop_frees_waiting_shells_before_mininet_stops_it() -> None:
    host = Shell(True, 2)

    def mininet_stop() -> None:  # what Mininet's link deletion asserts of every node
        assert not host.waiting

    lab = SimpleNamespace(
        netns=[], pids={}, net=SimpleNamespace(hosts=[host], switches=[], stop=mininet_stop)
    )
    net.stop(lab)  # type: ignore[arg-type]
    assert host.interrupted


def test_an_interrupt_survives_a_network_stop_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    todo = matrix.jobs(QUICK, ("wrr",), k6=False, only={"ab"})[:2]
    done, begun = todo

    def one_run(lab: Any, job: matrix.Job, root: Path, *_: Any) -> dict[str, Any]:
        job.path(root).mkdir(parents=True)
        if job is begun:
            raise KeyboardInterrupt  # the signal, inside the run
        rec = {"served": 1, "switch_pps": 1.0, "elapsed_s": 1.0}
        (job.path(root) / "run.json").write_text(json.dumps(rec))
        return rec

    stops: list[str] = []

    def failing_stop(lab: Any) -> None:
        stops.append("stop")
        raise AssertionError  # as Mininet's node.cmd on a shell left waiting

    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(networks.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    lab = SimpleNamespace(qdiscs={}, pids={"switch": 4242, "h1-server": 4343})
    monkeypatch.setattr(networks, "build", lambda options: lab)
    monkeypatch.setattr(networks, "p4lb_cmd", lambda lab, *args: ["true"])
    monkeypatch.setattr(networks, "start_servers", lambda lab, threaded: None)
    monkeypatch.setattr(networks, "configure", lambda lab, sc, variant: None)
    monkeypatch.setattr(networks, "one_run", one_run)
    monkeypatch.setattr(networks, "stop", failing_stop)
    with pytest.raises(KeyboardInterrupt):
        networks.run_jobs(todo, QUICK, tmp_path, None, {}, [])
    assert stops == ["stop"]
    assert killed == [(4242, networks.signal.SIGTERM)]  # the switch Mininet's stop did not reach
    assert (done.path(tmp_path) / "run.json").exists()
    assert not begun.path(tmp_path).exists()
