"""The backends' HTTP server (topology/server.py) on loopback: a one-at-a-time server must not
wait for ever on a connection that never asks, as ab leaves a few at the end of a run; the
request queued behind it at the same server would otherwise hang the run (CI saw one: 599 of
600 answered, then ab's 30 s timeout)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import poll_until

ROOT = Path(__file__).resolve().parents[3]
CLIENT_TIMEOUT_S = 30.0  # what ab waits (topology/ab.py); far above the server's idle timeout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connect(port: int) -> socket.socket:
    """A connection to the server, retried (bounded) until it listens."""

    def attempt() -> socket.socket | None:
        with contextlib.suppress(ConnectionRefusedError):
            return socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S)
        return None

    sock = poll_until(attempt, 10, every=0.05)
    assert sock is not None, f"the server never listened on {port}"
    return sock


@pytest.fixture
def plain_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port, log = free_port(), tmp_path / "access.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "topology.server", "--name", "s1", "--port", str(port)]
        + ["--log", str(log), "--idle-timeout", "0.5"],
        cwd=ROOT,
    )
    try:
        yield port, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_request_behind_an_idle_connection_is_served(plain_server: tuple[int, Path]) -> None:
    port, log = plain_server
    idle = connect(port)  # accepted first: the one-at-a-time server reads it first
    asking = connect(port)
    asking.sendall(b"GET / HTTP/1.0\r\n\r\n")
    reply = b""
    while chunk := asking.recv(65536):
        reply += chunk
    assert reply.startswith(b"HTTP/1.0 200"), reply[:80]
    assert idle.recv(1) == b""  # the server closed the idle one
    ports = [idle.getsockname()[1], asking.getsockname()[1]]
    idle.close()
    asking.close()
    # One line per accepted connection: the idle one logged unserved, before the request.
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [(int(x[1]), x[2]) for x in lines] == [(ports[0], "-"), (ports[1], "200")]


def test_a_negative_idle_timeout_is_refused(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "topology.server", "--name", "s1", "--log", str(tmp_path / "l")]
        + ["--idle-timeout", "-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "--idle-timeout" in r.stderr.splitlines()[-1]
