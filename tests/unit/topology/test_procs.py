"""Stopping by PID and the scheduling group's niceness (topology/procs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topology.procs import alive, set_group_nice, stop_pids


def test_stop_pids_returns_with_every_process_gone_even_one_that_ignores_term() -> None:
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, "
            "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    polite = subprocess.Popen(["sleep", "60"], start_new_session=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
    stop_pids([stubborn.pid, polite.pid], grace_s=0.5)
    # The stubborn one ignores TERM: only the KILL after the grace can have ended it (and
    # stop_pids reaped both, its children, so nothing is left even as a zombie).
    assert not alive(stubborn.pid) and not alive(polite.pid)


@pytest.mark.skipif(
    not Path("/proc/self/autogroup").exists() or os.geteuid() != 0,
    reason="needs autogroups (kernel.sched_autogroup_enabled) and root",
)
def test_set_group_nice_sets_the_niceness_of_the_process_s_own_autogroup() -> None:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        set_group_nice(proc.pid, 7)
        assert Path(f"/proc/{proc.pid}/autogroup").read_text().split()[-1] == "7"
        set_group_nice(proc.pid, -10)
        assert Path(f"/proc/{proc.pid}/autogroup").read_text().split()[-1] == "-10"
        # Our own group is another one, untouched.
        assert (
            Path("/proc/self/autogroup").read_text()
            != Path(f"/proc/{proc.pid}/autogroup").read_text()
        )
    finally:
        stop_pids([proc.pid])
