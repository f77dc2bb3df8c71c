"""BMv2's egress queues: rates and depths per (port, priority), which P4Runtime cannot set.

They are set over BMv2's Thrift server with its own client, simple_switch_CLI, always on
127.0.0.1: Thrift has no authentication, so the project keeps it reachable from this host
only (topology/thrift_guard.py), and the controller must run on the switch's host to shape
its queues. A queue's rate is in packets per second (0: unshaped), its depth in packets."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable

from p4lb.pipeline.qos import PRIORITY_QUEUES, QueueSetting
from p4lb.switch.errors import SwitchError

CLI_TIMEOUT_S = 30.0
# What simple_switch_CLI prints when a command fails (it still exits 0).
_FAILURES = ("Error", "error", "Exception", "exception", "Invalid", "Traceback")


def cli_binary() -> str:
    return os.environ.get("P4LB_SWITCH_CLI") or shutil.which("simple_switch_CLI") or ""


def commands(settings: Iterable[QueueSetting]) -> list[str]:
    """simple_switch_CLI lines for `settings`, a port's sparse queue (priority above 0)
    first: on a switch started without `--priority-queues` that command fails before any
    other changed anything."""
    out: list[str] = []
    for s in sorted(settings, key=lambda s: (-s.priority, s.port)):
        out.append(f"set_queue_rate {s.rate_pps} {s.port} {s.priority}")
        out.append(f"set_queue_depth {s.depth} {s.port} {s.priority}")
    return out


def _run(thrift_port: int, lines: list[str]) -> str:
    cli = cli_binary()
    if not cli:
        raise SwitchError(
            "simple_switch_CLI is not installed: queue rates and depths need BMv2's Thrift client"
        )
    try:
        r = subprocess.run(
            [cli, "--thrift-ip", "127.0.0.1", "--thrift-port", str(thrift_port)],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise SwitchError(
            f"BMv2's Thrift server on 127.0.0.1:{thrift_port} did not answer"
        ) from None
    text = r.stdout + r.stderr
    if r.returncode != 0 or "Could not connect" in text:
        raise SwitchError(f"BMv2's Thrift server on 127.0.0.1:{thrift_port} is unreachable")
    return text


def zero_registers(thrift_port: int, cells: list[tuple[str, int]]) -> None:
    """register_write NAME INDEX 0 for every cell, in one CLI session."""
    if not cells:
        return
    text = _run(thrift_port, [f"register_write {name} {index} 0" for name, index in cells])
    if any(f in text for f in _FAILURES):
        raise SwitchError(f"BMv2 refused to reset the QoS registers: {text.strip()[-200:]}")


def apply(thrift_port: int, settings: list[QueueSetting]) -> None:
    """Set every queue in `settings`, one CLI session per command so a failure is named;
    a sparse queue on a switch without priority queues fails first, nothing else changed."""
    for line in commands(settings):
        text = _run(thrift_port, [line])
        if any(f in text for f in _FAILURES):
            prio = int(line.split()[-1])
            hint = (
                f" (the switch has no priority queue {prio}: start simple_switch_grpc with "
                f"`-- --priority-queues {PRIORITY_QUEUES}`)"
                if prio > 0
                else ""
            )
            raise SwitchError(f"BMv2 refused `{line}`{hint}")
