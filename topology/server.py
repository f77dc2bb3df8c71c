"""The labs' HTTP backend: a fixed document on port 8000, threaded or not, or a
server with a capacity: `--workers N --service-ms T` serves at most N requests at a time, each
taking T ms (a fixed pool of N threads that each sleep T ms per request; connections beyond N
wait in a queue in arrival order), so it answers at most N * 1000 / T requests per second
whatever the machine, and the server rather than the switch is the bottleneck.

The access log has one line per accepted TCP connection, `client_ip client_port status`:
status 200 for a served request, `-` for a connection closed before it sent one (ab opens
a few of those at the end of a run). So the log counts both what the switch counts (new
connections) and what ab counts (requests). It listens on IPv6 and IPv4 at once; an IPv4
client is logged by its IPv4 address.

A connection that sends no request for `--idle-timeout` seconds (default 5, as Apache's
KeepAliveTimeout) is closed and logged `-`. Without it a one-at-a-time server that accepted
one of ab's unused connections would wait on it for ever, while ab waits for the answer to a
request queued behind it at the same server (until its own -s timeout fails the run)."""

from __future__ import annotations

import argparse
import contextlib
import queue
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

DOCUMENT = (
    "<html><head><title>p4lb backend</title></head><body>"
    + "p4lb test document. " * 40
    + "</body></html>\n"
).encode()


class DualStack(HTTPServer):
    """Listens on `::` for IPv6 and IPv4 clients alike (as `python -m http.server` does)."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        with contextlib.suppress(OSError):  # the kernel's default may already be dual
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def client(address: tuple[Any, ...]) -> str:
    """The client's address as logged: an IPv4 client as IPv4, not as ::ffff:a.b.c.d."""
    return str(address[0]).removeprefix("::ffff:")


class PoolServer(DualStack):
    """Accepts every connection at once and hands it to one of `workers` threads in arrival
    order; a connection waits in the queue while all workers are busy."""

    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], handler: Any, workers: int) -> None:
        super().__init__(address, handler)
        self.pending: queue.Queue[tuple[socket.socket, Any] | None] = queue.Queue()
        self.workers = [
            threading.Thread(target=self._work, daemon=True, name=f"worker-{i}")
            for i in range(workers)
        ]
        for t in self.workers:
            t.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.pending.put((request, client_address))

    def _work(self) -> None:
        while (item := self.pending.get()) is not None:
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 - one broken connection must not stop a worker
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log", required=True)
    p.add_argument("--threaded", action="store_true")
    p.add_argument(
        "--workers", type=int, default=0, help="requests served at once (0: --threaded or one)"
    )
    p.add_argument("--service-ms", type=float, default=0.0, help="time each request takes")
    p.add_argument(
        "--body-bytes",
        type=int,
        default=0,
        help="answer with a body of this many bytes (0: the short page naming the server)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=5.0,
        help="seconds a connection may wait before (or between) requests; 0: for ever",
    )
    p.add_argument(
        "--keep-alive",
        action="store_true",
        help="HTTP/1.1: a client may send many requests on one connection (ab's stay 1.0)",
    )
    args = p.parse_args(argv)
    if min(args.workers, args.service_ms, args.idle_timeout, args.body_bytes) < 0:
        p.error("--workers, --service-ms, --idle-timeout and --body-bytes must be >= 0")
    service_s = args.service_ms / 1000
    log = open(args.log, "a", buffering=1)  # noqa: SIM115 - lives as long as the server
    body = DOCUMENT.replace(b"p4lb backend", f"p4lb backend {args.name}".encode())
    if args.body_bytes:
        body = (body * (args.body_bytes // len(body) + 1))[: args.body_bytes]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if args.keep_alive else "HTTP/1.0"
        # The socket timeout StreamRequestHandler sets; handle_one_request closes the
        # connection when reading a request line times out.
        timeout = args.idle_timeout or None

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if service_s:
                time.sleep(service_s)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.logged = True
            log.write(f"{client(self.client_address)} {self.client_address[1]} 200\n")

        def handle(self) -> None:
            self.logged = False
            super().handle()
            if not self.logged:
                log.write(f"{client(self.client_address)} {self.client_address[1]} -\n")

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            pass

    base = ThreadingHTTPServer if args.threaded else HTTPServer

    class Server(DualStack, base):  # type: ignore[valid-type,misc]
        # A deep accept queue: with socketserver's default of 5, a burst of SYNs (ab -c 10)
        # overflows it and the kernel drops SYNs the switch has already balanced and counted.
        request_queue_size = 1024

    server: HTTPServer
    if args.workers:
        server = PoolServer(("::", args.port), Handler, args.workers)
    else:
        server = Server(("::", args.port), Handler)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
