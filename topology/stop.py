"""`make stop`: stop what `make run` started, by the PIDs it recorded, and remove the
switch interfaces it made. Never kills by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from topology import thrift_guard

STATE = Path(__file__).resolve().parents[1] / "run" / "state.json"


def main() -> int:
    if not STATE.exists():
        print("make stop: nothing recorded as running")
        return 0
    state = json.loads(STATE.read_text())
    for name, pid in state.get("pids", {}).items():
        try:
            os.kill(int(pid), 15)
            print(f"stopped {name} (pid {pid})")
        except ProcessLookupError:
            pass
    for intf in state.get("interfaces", []):
        subprocess.run(["ip", "link", "del", intf], capture_output=True)
    for port in state.get("thrift_ports", []):
        thrift_guard.release(int(port))
    for name in state.get("netns", []):  # only the names: the namespaces were the hosts'
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    STATE.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
