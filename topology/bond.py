"""A balancer's bond: its BGP speaker dies with its switch.

The speaker talks to the routers over a control link of its own, so that a switch busy with
traffic never delays its BGP or BFD packets; this process gives back what the old path gave
for free, that the routers drop a balancer whose switch is gone. It waits for the switch's
process to end (a pidfd: no polling, no CPU while it waits), then kills the speaker the
tier's state records for this balancer (whichever PID it has by then: an operator may have
restarted it). The kernel closes the speaker's TCP sessions, and the routers withdraw its
routes within about 0.1 s, whether or not `p4lb run` is running or busy.

    python -m topology.bond --switch switch-lb2 --speaker gobgpd-lb2 --state run/tier/state.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import sys
from pathlib import Path


def recorded(state: Path, name: str) -> int | None:
    """The PID state.json records under `name` (None if it records none)."""
    try:
        pid = json.loads(state.read_text())["pids"].get(name)
    except (OSError, ValueError, KeyError):
        return None
    return int(pid) if pid is not None else None


def wait_for_exit(pid: int) -> None:
    """Return once process `pid` has ended (at once if it already has)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(None):  # readable once the process has exited
            pass
    finally:
        os.close(fd)


def is_speaker(pid: int) -> bool:
    """Whether `pid` is still a gobgpd (not a PID reused since by something else)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "gobgpd"
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m topology.bond", description=__doc__)
    p.add_argument("--switch", required=True, help="the switch's name in state.json")
    p.add_argument("--speaker", required=True, help="the speaker's name in state.json")
    p.add_argument("--state", type=Path, required=True)
    a = p.parse_args(argv)
    switch = recorded(a.state, a.switch)
    if switch is None:
        print(f"bond: {a.state} records no {a.switch}", file=sys.stderr)
        return 1
    wait_for_exit(switch)
    speaker = recorded(a.state, a.speaker)
    if speaker is not None and is_speaker(speaker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(speaker, signal.SIGKILL)
        print(f"bond: {a.switch} (pid {switch}) ended: killed {a.speaker} (pid {speaker})")
    else:
        print(f"bond: {a.switch} (pid {switch}) ended; {a.speaker} was not running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
