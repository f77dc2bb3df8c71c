"""The HTTP listener of `[metrics]`: /metrics (prometheus_client's WSGI app over a registry
holding the stats collector and the controller's own metrics), / (the stats page, one static
file of the package) and /stats.json (what the page draws). Read-only: GET and HEAD only."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import prometheus_client
from prometheus_client.exposition import ThreadingWSGIServer

from p4lb.intent.model import Config, ConfigError, MetricsSettings
from p4lb.pipeline.p4info import schema
from p4lb.service.metrics.exposition import ControllerMetrics, StatsCollector
from p4lb.service.metrics.sampler import Sample, Sampler

StartResponse = Callable[..., Any]
PAGE_MAX_AGE_S = 1.0  # /stats.json reads the switches at most once a second, whoever asks


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Log nothing: a scrape every few seconds is not news."""


def page_document(
    sample: Sample, history: list[dict[str, Any]], interval_s: float
) -> dict[str, Any]:
    """/stats.json: per switch what `p4lb stats --json` shows, the weights programmed, the
    history points (lifetime connections and active ones, per backend)."""
    effective: dict[str, dict[str, int]] = {}
    for (vip, backend), w in sample.effective.items():
        effective.setdefault(vip, {})[backend] = w
    return {
        "at": sample.at,
        "interval_s": interval_s,
        "switches": [
            {
                "name": s.name,
                "address": s.address,
                "error": s.error,
                "stats": None if s.shown is None else s.shown.to_json(),
            }
            for s in sample.switches
        ],
        "effective": effective,
        "history": history,
    }


def router(metrics_app: Callable[..., Iterable[bytes]], sampler: Sampler) -> Callable[..., Any]:
    """The WSGI app: /, /stats.json, /metrics; 404 elsewhere, 405 for anything but GET."""
    page = resources.files("p4lb.service.metrics").joinpath("page.html").read_bytes()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b"read-only\n"]
        if path == "/metrics":
            return metrics_app(environ, start_response)
        if path in ("/", "/index.html"):
            body, kind = page, "text/html; charset=utf-8"
        elif path == "/stats.json":
            try:
                doc = page_document(
                    sampler.latest(PAGE_MAX_AGE_S), sampler.history(), sampler.interval_s
                )
            except ConfigError as e:
                doc = {"error": str(e)}
            body, kind = json.dumps(doc).encode(), "application/json"
        else:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: / (stats page), /metrics, /stats.json\n"]
        start_response(
            "200 OK",
            [
                ("Content-Type", kind),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [body]

    return app


def _host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


class MetricsServer:
    """Listens from construction (an address in use fails here, as one line); `start()`
    serves and samples in threads of their own, `close()` stops both."""

    def __init__(
        self,
        settings: MetricsSettings,
        load_config: Callable[[], Config],
        config_path: str | None,
        own: ControllerMetrics,
        source: str = "<config>",
    ) -> None:
        # One series per counter, not two (no _created).
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.sampler = Sampler(load_config, config_path, settings.history_s)
        own.registry.register(StatsCollector(self.sampler, schema().drop_reasons().values()))
        app = router(prometheus_client.make_wsgi_app(own.registry), self.sampler)
        host, port = _host_port(settings.listen)
        if ":" in host:  # an IPv6 address
            server_class = type(
                "V6Server", (ThreadingWSGIServer,), {"address_family": socket.AF_INET6}
            )
        else:
            server_class = ThreadingWSGIServer
        try:
            self.httpd: WSGIServer = make_server(
                host, port, app, server_class, handler_class=_Quiet
            )
        except OSError as e:
            raise ConfigError(
                f"{source}: metrics.listen: cannot listen on {settings.listen}: {e.strerror or e}"
            ) from None
        self.port: int = self.httpd.server_port
        self.listen = settings.listen
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> MetricsServer:
        for target, args, name in (
            (self.httpd.serve_forever, (), "p4lb-metrics"),
            (self.sampler.run, (self._stop,), "p4lb-sampler"),
        ):
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for t in self._threads:
            t.join(10)
        self.sampler.close()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
