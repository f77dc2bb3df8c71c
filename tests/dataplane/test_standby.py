"""A standby controller against a real simple_switch_grpc: two `p4lb run` processes on one
switch, the primary as the config's election id and `p4lb run --standby` below it. The
primary hangs (SIGSTOP: its session stays open, so the switch keeps it primary) while the
config changes and a backend dies; then it is killed (SIGKILL). The standby must be primary
within TAKEOVER_S, its first reconcile holding both the change and the dead backend out
(its health checks ran while it waited). The old primary, started again, pre-empts it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

from p4lb.intent import edits, reader, writer
from p4lb.intent.model import Config
from p4lb.pipeline.desired import desired_entries
from p4lb.switch.client import Switch
from tests.dataplane.support import GRPC_PORT, Bmv2
from tests.support import poll_until
from topology.procs import stop_pids

# The bound asserted from the primary's SIGKILL to the switch holding the standby's first
# reconcile: the switch's arbitration update comes within milliseconds of the stream's end;
# a reconcile of this config is a read and a few writes. Generous for a loaded 2-core host.
TAKEOVER_S = 5.0
HEALTH = """
[vip.web.health]
interval_s = 0.1
timeout_s = 0.1
rise = 2
fall = 2
"""


@contextmanager
def listening(address: str, port: int) -> Iterator[socket.socket]:
    """A backend for the health checks: accepts (and closes) every connection on
    address:port until the socket is closed."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, port))
    s.listen(64)

    def serve() -> None:
        with contextlib.suppress(OSError):  # closed: the backend is gone
            while True:
                conn, _ = s.accept()
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()
        thread.join(5)


def p4lb_run(path: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("p4lb")
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(exe), "-c", str(path), "run", *extra], stdout=out, stderr=subprocess.STDOUT
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """By its PID (topology.procs): a stopped one is continued first, then TERM, then KILL
    if it hangs."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        stop_pids([proc.pid], grace_s=15)


def holds(session: Switch, cfg: Config) -> bool:
    try:
        held = session.read_entries()
    except Exception:  # noqa: BLE001 - a read refused meanwhile: not yet
        return False
    return bool(held) and sorted(held) == sorted(desired_entries(cfg, held)[1])


def test_the_standby_takes_over_with_the_gaps_changes_and_the_primary_pre_empts_it(
    bmv2: Bmv2, tmp_path: Path
) -> None:
    cfg = bmv2.cfg
    vip = cfg.vip("web")
    # Backends the controller can probe from here: loopback addresses, one listener each.
    backends = tuple(
        replace(b, address=f"127.0.0.{i}") for i, b in enumerate(vip.backends, start=2)
    )
    cfg = replace(cfg, switch=replace(cfg.switch, election_id=20))
    cfg = replace(
        cfg, vips=tuple(replace(v, backends=backends) if v is vip else v for v in cfg.vips)
    )
    path = tmp_path / "run.toml"
    writer.save(cfg, path)
    path.write_text(path.read_text() + HEALTH)
    cfg = reader.load(path)
    bmv2.sw.close()
    bmv2.sw = session = Switch(f"127.0.0.1:{GRPC_PORT}", 0, 1)  # a reader: never primary
    logs = {n: tmp_path / f"{n}.log" for n in ("primary", "standby", "again")}

    with ExitStack() as stack:
        lsocks = {b.name: stack.enter_context(listening(b.address, b.port)) for b in backends}
        primary = p4lb_run(path, logs["primary"])
        stack.callback(stop, primary)
        assert poll_until(lambda: holds(session, cfg), timeout=30), "the primary did not program"
        standby = p4lb_run(path, logs["standby"], "--standby")
        stack.callback(stop, standby)
        assert poll_until(lambda: "standby on" in logs["standby"].read_text(), timeout=30)
        assert "election id 19" in logs["standby"].read_text()

        # The primary hangs: still primary for the switch. Meanwhile a change and a death.
        os.kill(primary.pid, signal.SIGSTOP)
        changed = edits.set_weight(cfg, "web", "s2", 3)
        text = path.read_text().replace("weight = 1", "weight = 3", 1)
        path.write_text(text)
        assert reader.load(path).vip("web").backend("s2").weight == 3
        lsocks["s3"].shutdown(socket.SHUT_RDWR)
        lsocks["s3"].close()
        down = "backend s3 of VIP web (127.0.0.3:8000) is DOWN"
        assert poll_until(lambda: down in logs["standby"].read_text(), timeout=10)
        # The standby wrote nothing meanwhile: the switch still holds the primary's config.
        assert holds(session, cfg)

        killed = time.monotonic()
        print(
            f"primary SIGKILLed at {time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d}"
        )
        os.kill(primary.pid, signal.SIGKILL)
        primary.wait(10)
        expect = edits.set_weight(changed, "web", "s3", 0)
        assert poll_until(lambda: holds(session, expect), timeout=TAKEOVER_S), logs[
            "standby"
        ].read_text()
        took = time.monotonic() - killed
        print(f"takeover: SIGKILL to the standby's first reconcile held: {took * 1000:.0f} ms")
        # The log line follows the reconcile (digests are turned on in between).
        took_over = "took over from a higher election id"
        assert poll_until(lambda: took_over in logs["standby"].read_text(), timeout=5)

        # The old primary returns with the config's id: it pre-empts the standby.
        again = p4lb_run(path, logs["again"])
        stack.callback(stop, again)
        assert poll_until(lambda: "primary on" in logs["again"].read_text(), timeout=30)
        assert poll_until(
            lambda: "another controller is primary" in logs["standby"].read_text(), timeout=10
        )
        # A change now is the returning primary's to write (the standby stays backup).
        path.write_text(path.read_text().replace("weight = 1", "weight = 2", 1))
        later = reader.load(path)
        assert poll_until(
            lambda: holds(session, edits.set_weight(later, "web", "s3", 0)), timeout=15
        )
        assert logs["standby"].read_text().count("took over") == 1
