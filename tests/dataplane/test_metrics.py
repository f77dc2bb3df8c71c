"""`p4lb run` with `[metrics]` against a real simple_switch_grpc: /metrics, parsed with the
Prometheus text parser, agrees with `p4lb stats --json` on the same switch after real
packets; the stats page, loaded in headless Chromium, shows the weights and shares and
follows `p4lb weight set`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from p4lb.cli.main import main
from p4lb.intent import writer
from p4lb.intent.model import MetricsSettings
from p4lb.models.hashing import Flow
from tests.dataplane.support import VIP, WEB_SERVICE_ID, Bmv2, Wire, flow_syn, flush
from tests.support import poll_until, samples, scrape

FLOWS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _primary(port: int) -> bool:
    try:
        got = samples(scrape(port))
    except OSError:
        return False
    return got.get(("p4lb_primary", frozenset({("switch", "switch")}))) == 1


@pytest.fixture
def running(bmv2: Bmv2, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """`p4lb run` (the console script, in a process of its own) with [metrics] on a free
    loopback port, as election id 20; stopped by its PID."""
    port = free_port()
    cfg = replace(
        bmv2.cfg,
        switch=replace(bmv2.cfg.switch, election_id=20),
        metrics=MetricsSettings(f"127.0.0.1:{port}"),
    )
    path = bmv2.cfg_path.with_name("run.toml")
    writer.save(cfg, path)
    log = tmp_path / "run.log"
    exe = Path(sys.executable).with_name("p4lb")
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe), "-c", str(path), "run"], stdout=out, stderr=out)
    try:
        assert poll_until(lambda: _primary(port), timeout=30), log.read_text()
        yield path, port
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def new_connections(wire: Wire, n: int, first_sport: int) -> None:
    """`n` new TCP connections (SYNs) from the client to the web VIP, all through the switch
    before this returns."""
    flows = [Flow("10.0.0.1", VIP, 6, first_sport + i, 80, WEB_SERVICE_ID) for i in range(n)]
    wire.send_all(1, [flow_syn(f) for f in flows])
    flush(wire)


def stats_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-c", str(path), "stats", "--json", *extra]) == 0
    return dict(json.loads(capsys.readouterr().out)["vips"][0])


def test_metrics_match_stats_json_on_bmv2(
    running: tuple[Path, int], wire: Wire, capsys: pytest.CaptureFixture[str]
) -> None:
    path, port = running
    new_connections(wire, FLOWS, 31000)
    got = samples(scrape(port))
    life = stats_json(path, capsys, "--lifetime")
    window = stats_json(path, capsys)
    assert life["name"] == "web"
    assert sum(b["connections"] for b in life["backends"]) == FLOWS
    assert sum(b["packets"] for b in life["backends"]) == FLOWS
    for b, w in zip(life["backends"], window["backends"], strict=True):
        at = {"switch": "switch", "vip": "web", "backend": b["name"]}

        def v(name: str, at: dict[str, str] = at, **more: str) -> float:
            return got[(name, frozenset((at | more).items()))]

        assert v("p4lb_backend_connections_total") == b["connections"]
        assert v("p4lb_backend_active_connections") == b["active"]
        assert v("p4lb_backend_packets_total", direction="to_backend") == b["packets"]
        assert v("p4lb_backend_bytes_total", direction="to_backend") == b["bytes"]
        assert v("p4lb_backend_packets_total", direction="from_backend") == b["reply_packets"]
        assert v("p4lb_backend_bytes_total", direction="from_backend") == b["reply_bytes"]
        assert v("p4lb_backend_share_ratio") == pytest.approx(w["share"])
        web_b = frozenset({("vip", "web"), ("backend", b["name"])})
        assert got[("p4lb_backend_weight", web_b)] == b["weight"]
        assert got[("p4lb_backend_wanted_share_ratio", web_b)] == pytest.approx(w["wanted_share"])
    sw = frozenset({("switch", "switch"), ("vip", "web")})
    assert got[("p4lb_vip_jain_index", sw)] == pytest.approx(window["jain"])
    assert got[("p4lb_vip_collisions_total", sw)] == life["collisions"]
    for reason, n in life["drops"].items():
        assert got[("p4lb_vip_drops_total", sw | {("reason", reason)})] == n
    assert got[("p4lb_reconcile_duration_seconds_count", frozenset({("switch", "switch")}))] >= 1


class Rows(HTMLParser):
    """The stats page's backend rows: backend -> {cell class: text}."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self._row: str | None = None
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("data-vip") == "web":
            self._row = a.get("data-backend")
            self.rows[str(self._row)] = {}
        elif tag == "td" and self._row is not None:
            self._cell = (a.get("class") or "").split(" ")[0]

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        elif tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell:
            cells = self.rows[self._row]
            cells[self._cell] = cells.get(self._cell, "") + data


def page_rows(port: int, profile: Path) -> dict[str, dict[str, str]]:
    """The page as headless Chromium renders it (its script run, stats.json fetched)."""
    out = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            f"http://127.0.0.1:{port}/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    parser = Rows()
    parser.feed(out.stdout)
    return parser.rows


@pytest.mark.skipif(shutil.which("chromium") is None, reason="browser test: missing chromium")
def test_stats_page_in_headless_chromium_follows_a_weight_change(
    running: tuple[Path, int], wire: Wire, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, port = running
    new_connections(wire, FLOWS, 32000)
    window = stats_json(path, capsys)
    # The page reads the switch at most once a second: a reading from before the last
    # connections landed may still be served for a load or two.
    for _ in range(5):
        rows = page_rows(port, tmp_path / "chromium")
        if sum(int(c["connections"]) for c in rows.values()) == FLOWS:
            break
    assert set(rows) == {"s2", "s3", "s4"}
    for b in window["backends"]:
        cells = rows[b["name"]]
        assert cells["weight"] == "1" and cells["wanted"] == "33.3%"
        assert cells["share"] == f"{100 * b['share']:.1f}%"
        assert cells["connections"] == str(b["connections"])
    assert sum(int(rows[n]["connections"]) for n in rows) == FLOWS

    assert main(["-c", str(path), "weight", "set", "web", "s2", "3"]) == 0
    # The page reads the switch at most once a second: a few loads at most.
    for _ in range(5):
        rows = page_rows(port, tmp_path / "chromium")
        if rows["s2"]["weight"] == "3":
            break
    assert {n: (c["weight"], c["wanted"]) for n, c in rows.items()} == {
        "s2": ("3", "60.0%"),
        "s3": ("1", "20.0%"),
        "s4": ("1", "20.0%"),
    }
    # The change started web's window: no connection counted in it yet.
    assert {c["connections"] for c in rows.values()} == {"0"}
