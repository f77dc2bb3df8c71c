"""One health probe, answered by exit status, so it can run inside another network namespace.

    python -m p4lb.service.health.socket_probe HOST PORT [PATH STATUS] [--timeout SECONDS]

Connects to HOST:PORT over TCP; with PATH and STATUS it also sends `GET PATH` and expects
that HTTP status. Exit 0: healthy; 1: unhealthy; 2: bad arguments. One line on stdout says
why. p4lb.service.health.probes runs it as `ip netns exec NAME python -m
p4lb.service.health.socket_probe ...` (or under `nsenter --net=PATH`) when backends are
reachable only from a namespace, e.g. a Mininet host. Standard library only (and the packages
above it import nothing), so the process starts quickly.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

DEFAULT_TIMEOUT_S = 0.5
_MAX_STATUS_LINE = 1024


def probe(
    host: str, port: int, timeout_s: float, http_path: str = "", http_status: int = 200
) -> tuple[bool, str]:
    """(healthy, reason). The whole probe — connect, send, first response line — must finish
    within timeout_s. An HTTP status other than http_status is a failure."""
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            if not http_path:
                return True, "tcp connect ok"
            authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # RFC 3986
            request = (
                f"GET {http_path} HTTP/1.0\r\nHost: {authority}\r\n"
                "User-Agent: p4lb-health\r\nConnection: close\r\n\r\n"
            )
            s.sendall(request.encode())
            return _status_line(s, deadline, http_status)
    except TimeoutError:
        return False, f"timed out after {timeout_s:g} s"
    except ConnectionRefusedError:
        return False, "connection refused"
    except OSError as e:
        return False, e.strerror or type(e).__name__


def _status_line(s: socket.socket, deadline: float, want: int) -> tuple[bool, str]:
    data = b""
    while b"\r\n" not in data and len(data) < _MAX_STATUS_LINE:  # bounded by size and time
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        s.settimeout(left)
        chunk = s.recv(_MAX_STATUS_LINE - len(data))
        if not chunk:
            break
        data += chunk
    parts = data.split(b"\r\n", 1)[0].split()
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        return False, "no HTTP status line in the response"
    status = int(parts[1])
    if status != want:
        return False, f"HTTP status {status}, expected {want}"
    return True, f"HTTP status {status}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m p4lb.service.health.socket_probe", exit_on_error=False
    )
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("path", nargs="?", default="")
    p.add_argument("status", nargs="?", type=int, default=200)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    try:
        a = p.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as e:
        print(f"health_probe: bad arguments: {e}")
        return 2
    if not 0 < a.port < 65536 or a.timeout <= 0 or (a.path and not a.path.startswith("/")):
        print("health_probe: bad arguments: need 0 < PORT < 65536, TIMEOUT > 0, PATH from /")
        return 2
    ok, reason = probe(a.host, a.port, a.timeout, a.path, a.status)
    print(reason)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
