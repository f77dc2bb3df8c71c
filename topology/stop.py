"""`make stop`: stop what `make run` started, the single-switch lab and the tier alike, by
the PIDs they recorded, remove the interfaces and namespace names they made, and the pointer
to the running config (/run/p4lb/config). Never kills by name. Needs root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from p4lb.intent.running import clear_pointer
from topology import thrift_guard
from topology import tier_plan as plan
from topology.procs import alive, stop_pids
from topology.tier_procs import stop_from_state

STATE = Path(__file__).resolve().parents[1] / "run" / "state.json"
NEEDS_ROOT = "make stop: needs root: sudo make stop"


def stop_lab(state_file: Path) -> bool:
    """The single-switch lab (`make run`), from its state file; whether one was recorded."""
    if not state_file.exists():
        return False
    state = json.loads(state_file.read_text())
    pids = state.get("pids", {})
    running = {name: int(pid) for name, pid in pids.items() if pid and alive(int(pid))}
    stop_pids(running.values())
    for name, pid in running.items():
        print(f"stopped {name} (pid {pid})")
    for intf in state.get("interfaces", []):
        subprocess.run(["ip", "link", "del", intf], capture_output=True)
    for port in state.get("thrift_ports", []):
        thrift_guard.release(int(port))
    for name in state.get("netns", []):  # only the names: the namespaces were the hosts'
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    state_file.unlink()
    return True


def main() -> int:
    if os.geteuid() != 0:
        print(NEEDS_ROOT, file=sys.stderr)
        return 1
    try:
        lab = stop_lab(STATE)
        if lab:
            print("stopped the single-switch lab")
        the_tier = stop_from_state(plan.STATE)
        clear_pointer()
    except PermissionError:
        print(NEEDS_ROOT, file=sys.stderr)
        return 1
    if the_tier:
        print("stopped the tier")
    if not (lab or the_tier):
        print("make stop: nothing recorded as running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
