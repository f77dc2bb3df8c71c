"""Processes the labs started, stopped by the PID they were started with (never by name):
TERM, a bounded wait, then KILL. And the one bounded poll the labs, the benches and the
tests wait with, for what nothing signals."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def poll_until(
    check: Callable[[], T], timeout: float = 10.0, what: str | None = None, *, every: float = 0.01
) -> T:
    """Call `check()` every `every` seconds until it returns something true, for at most
    `timeout` seconds; what it returned last (false if it never held; it is called once more
    at the deadline). With `what`, a check that never held raises AssertionError naming it
    (a test fails). For
    state that nothing signals: a file another process writes, a switch's counter, a route."""
    deadline = time.monotonic() + timeout
    while not (got := check()) and time.monotonic() < deadline:
        time.sleep(max(0.0, min(every, deadline - time.monotonic())))
    if not got and what is not None:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return got


def gone(pid: int) -> bool:
    """Whether a process we started is gone; reaped if it is our child and has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False


def gone_by(pid: int, deadline: float) -> bool:
    """Wait (until `deadline`) for a process we started to be gone, reaping it if it is our
    child; whether it is."""
    return poll_until(lambda: gone(pid), max(0.0, deadline - time.monotonic()))


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
