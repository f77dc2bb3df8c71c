"""Processes the labs started, stopped by the PID they were started with (never by name):
TERM, a bounded wait, then KILL."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone_by(pid: int, deadline: float) -> bool:
    """Wait (until `deadline`) for a process we started to be gone, reaping it if it is our
    child; whether it is."""
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)
    return False


def stop_pids(pids: Iterable[int], grace_s: float = 3.0) -> None:
    """TERM each, in order; KILL those still there `grace_s` later. Returns once every one
    is gone, so a caller that returns has left nothing running."""
    order = [int(p) for p in pids if p]
    for pid in order:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for pid in order:
        if not gone_by(pid, deadline):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            gone_by(pid, time.monotonic() + 2)


def set_group_nice(pid: int, nice: int) -> None:
    """Give `pid`'s scheduling group the niceness `nice`. A process started in a session of
    its own (every process the labs start, and every daemon) is in an autogroup of its own
    (kernel.sched_autogroup_enabled), and the CPU is shared between autogroups by the
    groups' niceness: a process's own nice orders it only within its group. Without this,
    `nice -n -10` on the control plane and `nice -n 5` on the switches change nothing."""
    # No autogroups on this kernel (no such file): nice alone applies.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as f:
        f.write(str(nice))
