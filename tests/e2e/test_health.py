"""End to end: `p4lb run` health checks take a killed server out of rotation and bring it
back when it listens again, while a client keeps sending requests through the VIP.

Mininet hosts, BMv2, `p4lb run` (a process of its own, as users run it) with the default
check settings (interval 1 s, fall 2, rise 2), probing each backend with an HTTP GET from
the backend's own host namespace, and a small HTTP client in h1 that records when every
request started and whether it succeeded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from p4lb.service.health import state_file
from tests.e2e.support import running_lab
from tests.support import poll_until
from topology.net import (
    ROOT,
    RUN_DIR,
    SERVER_PORT,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    name_server_namespaces,
    p4lb_cmd,
)

URL = f"http://{VIP_ADDR}:{VIP_PORT}/"
FALL = 2  # the default check settings' (the config below sets none)
CLIENT_MAX_S = 90.0  # the client stops by itself after this, whatever happens to the test

# Sequential requests, one connection each (so WRR walks the backends), until the stop
# file exists or CLIENT_MAX_S passes; one JSON line per request.
CLIENT = """
import json, os, sys, time, urllib.request
url, out, stop_file, max_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
end = time.monotonic() + max_s
with open(out, "w", buffering=1) as f:
    while time.monotonic() < end and not os.path.exists(stop_file):
        start = time.time()
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                ok, why = r.status == 200 and len(r.read()) > 0, str(r.status)
        except Exception as e:
            ok, why = False, f"{type(e).__name__}: {e}"
        f.write(json.dumps({"start": start, "end": time.time(), "ok": ok, "why": why}) + "\\n")
"""


@dataclass
class Request:
    start: float
    end: float
    ok: bool
    why: str


def start_server(lab: Lab, host: Any) -> None:
    """(Re)start one backend's HTTP server as start_servers does; its PID goes into
    lab.pids so stop() ends it."""
    log = RUN_DIR / "access" / f"{host.name}.log"
    out = host.cmd(
        f"PYTHONPATH={ROOT} {sys.executable} -m topology.server --name {host.name} "
        f"--port {SERVER_PORT} --log {log} --threaded > /dev/null 2>&1 & echo $!"
    )
    lab.pids[f"server-{host.name}"] = int(out.strip().split()[-1])


def served_to(lab: Lab, host: Any, client: Any) -> int:
    """Requests `host` answered for `client` (its access log; probes come from the host)."""
    log = RUN_DIR / "access" / f"{host.name}.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if line.split()[:1] == [client.IP()] and line.endswith(" 200"))


def backend_health(lab: Lab, name: str) -> dict[str, Any]:
    doc = state_file.load_state(lab.config_path)
    if not state_file.is_fresh(doc, time.time()):
        return {}
    return dict(doc.get("vips", {}).get("web", {}).get(name, {}))


def requests(path: Path) -> list[Request]:
    text = path.read_text() if path.exists() else ""
    return [Request(**json.loads(line)) for line in text.splitlines() if line.endswith("}")]


@pytest.fixture
def lab() -> Iterator[Lab]:
    """The default topology with servers and `p4lb apply` done, each server host's
    namespace named for the probes (as `make run` does), and the health table added."""
    with running_lab(Options(), threaded=True) as built:
        namespace = name_server_namespaces(built)
        with open(built.config_path, "a") as f:
            f.write(
                "\n[vip.web.health]           # the defaults: interval 1 s, fall 2, rise 2\n"
                'http_path = "/"\n'
                f'namespace = "{namespace}"\n'
            )
        yield built


@pytest.fixture
def p4lb_run(lab: Lab) -> Iterator[Path]:
    """`p4lb run` as its own process; its log file. Stopped by its PID."""
    log = RUN_DIR / "p4lb-run-health.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(p4lb_cmd(lab, "run"), stdout=out, stderr=subprocess.STDOUT)
    try:
        yield log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_a_killed_server_leaves_rotation_after_fall_checks_and_comes_back(
    lab: Lab, p4lb_run: Path
) -> None:
    client, h3 = lab.clients[0], lab.servers[1]
    for s in lab.servers:  # p4lb run checks every backend and has programmed its weight
        poll_until(
            lambda s=s: (
                backend_health(lab, s.name).get("weight") == 1
                and backend_health(lab, s.name).get("checks", 0) >= 1
            ),
            30,
            f"p4lb run to check {s.name}",
            every=0.05,
        )
    out, stop_file = RUN_DIR / "health-client.jsonl", RUN_DIR / "health-client.stop"
    stop_file.unlink(missing_ok=True)
    out.unlink(missing_ok=True)  # a previous run's requests are not this run's
    proc = client.popen(
        [sys.executable, "-c", CLIENT, URL, str(out), str(stop_file), str(CLIENT_MAX_S)]
    )
    try:
        poll_until(
            lambda: served_to(lab, h3, client) >= 10, 30, "h3 to serve the client", every=0.05
        )

        checks_before = backend_health(lab, "h3")["checks"]
        os.kill(lab.pids["server-h3"], signal.SIGKILL)
        killed = time.time()
        down = poll_until(
            lambda: (h := backend_health(lab, "h3")).get("weight") == 0 and h,
            15,
            "h3 DOWN",
            every=0.05,
        )
        assert down["state"] == "down"
        out_at = float(down["weight_at"])
        # The rise/fall arithmetic: DOWN at the FALL-th failed check after the kill (one
        # check in flight at the kill may still have passed). Checks since then failed too.
        assert down["consecutive_failures"] >= FALL
        checks_at_down = down["checks"] - (down["consecutive_failures"] - FALL)
        assert FALL <= checks_at_down - checks_before <= FALL + 1, (checks_before, down)
        assert out_at >= killed
        # How long that takes is measured, not asserted (one check interval per failure).
        print(f"h3 out of rotation {out_at - killed:.2f} s after the kill")
        st = subprocess.run(
            p4lb_cmd(lab, "stats", "--json"), check=True, capture_output=True, timeout=30, text=True
        )
        rows = {r["name"]: r for r in json.loads(st.stdout)["vips"][0]["backends"]}
        assert rows["h3"]["health"]["state"] == "down" and rows["h2"]["health"]["state"] == "up"
        poll_until(
            lambda: sum(1 for r in requests(out) if r.start > out_at + 2) >= 20,
            30,
            "20 requests started 2 s after h3 left rotation",
            every=0.05,
        )

        before = served_to(lab, h3, client)
        start_server(lab, h3)
        back = poll_until(
            lambda: (h := backend_health(lab, "h3")).get("weight") == 1 and h,
            15,
            "h3 UP",
            every=0.05,
        )
        assert back["state"] == "up"
        poll_until(lambda: served_to(lab, h3, client) > before, 15, "h3 to serve again", every=0.05)
    finally:
        stop_file.touch()
        proc.wait(CLIENT_MAX_S)
        stop_file.unlink(missing_ok=True)

    done = requests(out)
    after = [r for r in done if r.start >= out_at]
    failed_after = [r for r in after if not r.ok]
    assert len(after) >= 20 and failed_after == [], failed_after[:5]
    # The kill really cost requests until the switch took h3 out (else this proves nothing).
    assert any(not r.ok for r in done if killed <= r.start < out_at)
    assert all(r.ok for r in done if r.end < killed)
    log = p4lb_run.read_text()
    assert "backend h3 of VIP web (10.0.0.3:8000) is DOWN" in log
    assert "backend h3 of VIP web (10.0.0.3:8000) is UP" in log
