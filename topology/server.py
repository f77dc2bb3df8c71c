"""The HTTP backend of the seed paper: a fixed document on port 8000, threaded or not.

The access log has one line per accepted TCP connection, `client_ip client_port status`:
status 200 for a served request, `-` for a connection closed before it sent one (ab opens
a few of those at the end of a run). So the log counts both what the switch counts (new
connections) and what ab counts (requests)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer

DOCUMENT = (
    "<html><head><title>p4lb backend</title></head><body>"
    + "p4lb test document. " * 40
    + "</body></html>\n"
).encode()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log", required=True)
    p.add_argument("--threaded", action="store_true")
    args = p.parse_args(argv)
    log = open(args.log, "a", buffering=1)  # noqa: SIM115 - lives as long as the server
    body = DOCUMENT.replace(b"p4lb backend", f"p4lb backend {args.name}".encode())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.logged = True
            log.write(f"{self.client_address[0]} {self.client_address[1]} 200\n")

        def handle(self) -> None:
            self.logged = False
            super().handle()
            if not self.logged:
                log.write(f"{self.client_address[0]} {self.client_address[1]} -\n")

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            pass

    base = ThreadingHTTPServer if args.threaded else HTTPServer

    class Server(base):  # type: ignore[valid-type,misc]
        # A deep accept queue: with socketserver's default of 5, a burst of SYNs (ab -c 10)
        # overflows it and the kernel drops SYNs the switch has already balanced and counted.
        request_queue_size = 1024

    server = Server(("0.0.0.0", args.port), Handler)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
