"""The HTTP backend of the seed paper: a fixed document on port 8000, one access-log line
per request (`client_ip client_port status`), threaded or not."""

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
            log.write(f"{self.client_address[0]} {self.client_address[1]} 200\n")

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            pass

    cls = ThreadingHTTPServer if args.threaded else HTTPServer
    server = cls(("0.0.0.0", args.port), Handler)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
