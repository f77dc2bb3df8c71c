"""`[metrics]`: the Prometheus metrics, parsed with prometheus_client's own text parser,
against `p4lb stats --json` on the same (fake) switch; the controller's own metrics from a
running `p4lb run`; the stats page's JSON and its read-only router; the Grafana dashboard's
PromQL naming only metrics the exporter produces."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p4lb.cli.main import main
from p4lb.intent import reader, writer
from p4lb.intent.model import MetricsSettings
from p4lb.pipeline.ids import ids_on_switch
from p4lb.pipeline.p4info import schema
from p4lb.service.daemon import Controller
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.metrics.server import MetricsServer
from tests.support import Samples, poll_until, samples, scrape
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import (
    HEALTH_TABLE,
    ROOT,
    config_for,
    held,
    publish_health,
    run_in_thread,
)

DASHBOARD = ROOT / "dashboards" / "p4lb.json"


def value(got: Samples, name: str, **labels: str) -> float:
    return got[(name, frozenset(labels.items()))]


def stats_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-c", str(path), "stats", "--json", *extra]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def bids(fake: FakeSwitch) -> dict[str, int]:
    """Backend name (h<last octet>) -> the id the switch holds it under."""
    return {f"h{a & 0xFF}": bid for (_, a, _), bid in ids_on_switch(held(fake)).backends.items()}


def load_traffic(fake: FakeSwitch, lifetime: dict[str, int]) -> None:
    """Distinct counts per backend (new connections n, established n, closes n // 2, n
    packets and 100 n bytes out per backend id, replies 5/50), collisions and drops of web."""
    for name, bid in bids(fake).items():
        n = lifetime[name]
        fake.set_counter("backend_conns", bid, n, 60 * n)
        fake.set_counter("backend_established", bid, n)
        fake.set_counter("backend_closes", bid, n // 2)
    for te in fake.entries("backend_table"):
        bid = te.match[0].exact.value[-1]
        fake.set_direct_counter("backend_table", lambda x, t=te: x == t, 7 * bid, 700 * bid)
    fake.set_direct_counter("reverse_nat_table", lambda te: True, 5, 50)
    stride = schema().drop_counter_stride()
    reasons = {n: c for c, n in schema().drop_reasons().items()}
    fake.set_counter("drops", 1 * stride + reasons["no_backend"], 3)  # web is service 1
    fake.set_counter("drops", 0 * stride + reasons["no_route"], 4)
    fake.set_counter("collisions", 1, 2)


@pytest.fixture
def served(fake: FakeSwitch, fake_cfg: Path) -> Iterator[MetricsServer]:
    """The metrics listener of `p4lb run` on a free port, over the config at the fake."""
    with MetricsServer(
        MetricsSettings("127.0.0.1:0"),
        lambda: reader.load(fake_cfg),
        str(fake_cfg),
        ControllerMetrics(),
    ) as server:
        yield server


def test_metrics_match_stats_json_on_the_same_switch(
    fake: FakeSwitch, fake_cfg: Path, served: MetricsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cfg.write_text(fake_cfg.read_text() + HEALTH_TABLE)
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    load_traffic(fake, {"h2": 10, "h3": 20, "h4": 30})
    # A runtime change starts web's window: shares and Jain count from here.
    assert main(["-c", str(fake_cfg), "weight", "set", "web", "h2", "3"]) == 0
    load_traffic(fake, {"h2": 40, "h3": 24, "h4": 36})
    publish_health(fake_cfg, {"h2": "up", "h3": "down", "h4": "up"})

    got = samples(scrape(served.port))
    window = stats_json(fake_cfg, capsys)["vips"][0]
    lifetime = stats_json(fake_cfg, capsys, "--lifetime")["vips"][0]
    assert window["since"] is not None and lifetime["since"] is None
    sw = {"switch": "switch", "vip": "web"}
    for life, seen in zip(lifetime["backends"], window["backends"], strict=True):
        at = sw | {"backend": life["name"]}
        assert value(got, "p4lb_backend_connections_total", **at) == life["connections"]
        assert value(got, "p4lb_backend_active_connections", **at) == life["active"]
        for direction, p, n in (
            ("to_backend", "packets", "bytes"),
            ("from_backend", "reply_packets", "reply_bytes"),
        ):
            assert value(got, "p4lb_backend_packets_total", **at, direction=direction) == life[p]
            assert value(got, "p4lb_backend_bytes_total", **at, direction=direction) == life[n]
        assert value(got, "p4lb_backend_share_ratio", **at) == pytest.approx(seen["share"])
        web_b = {"vip": "web", "backend": life["name"]}
        assert value(got, "p4lb_backend_wanted_share_ratio", **web_b) == pytest.approx(
            seen["wanted_share"]
        )
        assert value(got, "p4lb_backend_weight", **web_b) == seen["weight"]
        assert value(got, "p4lb_backend_up", **web_b) == (seen["health"]["state"] == "up")
    # The figures themselves, so that agreeing on nothing cannot pass.
    assert [b["connections"] for b in lifetime["backends"]] == [40, 24, 36]
    assert [b["connections"] for b in window["backends"]] == [30, 4, 6]
    assert [b["active"] for b in lifetime["backends"]] == [20, 12, 18]
    # h3 DOWN: programmed at weight 0, configured 1.
    effective = {
        b: value(got, "p4lb_backend_effective_weight", vip="web", backend=b) for b in bids(fake)
    }
    assert effective == {"h2": 3, "h3": 0, "h4": 1}
    assert value(got, "p4lb_vip_jain_index", **sw) == pytest.approx(window["jain"])
    assert value(got, "p4lb_vip_weighted_jain_index", **sw) == pytest.approx(
        window["weighted_jain"]
    )
    assert value(got, "p4lb_vip_window_start_timestamp_seconds", **sw) == window["since"]
    assert value(got, "p4lb_vip_collisions_total", **sw) == lifetime["collisions"] == 2
    assert value(got, "p4lb_vip_drops_total", **sw, reason="no_backend") == 3
    assert lifetime["drops"] == {"no_backend": 3}
    assert value(got, "p4lb_vip_drops_total", **sw, reason="fragment") == 0
    assert value(got, "p4lb_drops_total", switch="switch", reason="no_route") == 4
    assert value(got, "p4lb_switch_up", switch="switch") == 1
    assert (
        value(
            got,
            "p4lb_vip_info",
            vip="web",
            address="10.0.0.100",
            port="80",
            protocol="tcp",
            algorithm="wrr",
        )
        == 1
    )


def test_an_unreachable_switch_is_a_zero_not_a_failed_scrape(
    fake: FakeSwitch, fake_cfg: Path, served: MetricsServer
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    assert value(samples(scrape(served.port)), "p4lb_switch_up", switch="switch") == 1
    fake.stop()
    got = samples(scrape(served.port))
    assert value(got, "p4lb_switch_up", switch="switch") == 0
    assert not any(name == "p4lb_backend_connections_total" for name, _ in got)
    assert value(got, "p4lb_backend_weight", vip="web", backend="h2") == 1  # the config's


def test_stats_json_and_page_follow_a_weight_change(
    fake: FakeSwitch, fake_cfg: Path, served: MetricsServer
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0

    def weights() -> dict[str, tuple[int, float]]:
        doc = json.loads(scrape(served.port, "/stats.json"))
        (web,) = doc["switches"][0]["stats"]["vips"]
        return {b["name"]: (b["weight"], round(b["wanted_share"], 3)) for b in web["backends"]}

    assert weights() == {"h2": (1, 0.333), "h3": (1, 0.333), "h4": (1, 0.333)}
    assert main(["-c", str(fake_cfg), "weight", "set", "web", "h2", "3"]) == 0
    # /stats.json reuses a read for up to a second: the change shows within that.
    assert poll_until(lambda: weights()["h2"] == (3, 0.6), timeout=5)
    page = scrape(served.port, "/")
    assert "<title>p4lb stats</title>" in page and 'fetch("stats.json"' in page
    assert not re.search(r"(src|href)=\"https?://", page), "the page must work offline"


def test_the_listener_is_read_only(served: MetricsServer) -> None:
    url = f"http://127.0.0.1:{served.port}"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(f"{url}/metrics", b"x", method="POST"))
    assert e.value.code == 405
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{url}/admin")
    assert e.value.code == 404


def test_the_history_is_bounded(fake: FakeSwitch, fake_cfg: Path) -> None:
    from p4lb.service.metrics.sampler import Sampler

    assert main(["-c", str(fake_cfg), "apply"]) == 0
    sampler = Sampler(lambda: reader.load(fake_cfg), str(fake_cfg), history_s=30, interval_s=10)
    try:
        for _ in range(5):
            sampler.record(sampler.read())
    finally:
        sampler.close()
    assert len(sampler.history()) == 3  # 30 s of points 10 s apart


@pytest.fixture
def running(fake: FakeSwitch, tmp_path: Path) -> Iterator[tuple[Controller, int]]:
    """`p4lb run` with [metrics] on a free port, in a thread, against the fake switch."""
    path = tmp_path / "run.toml"
    writer.save(config_for(fake), path)
    own = ControllerMetrics()
    ctl = Controller(
        lambda: reader.load(path),
        poll_s=0.02,
        check_s=0.1,
        config_path=str(path),
        retry_s=0.05,
        metrics=own,
    )
    settings = MetricsSettings("127.0.0.1:0")
    with (
        MetricsServer(settings, lambda: reader.load(path), str(path), own) as server,
        run_in_thread(ctl, 60),
    ):
        assert ctl.ready.wait(10), "p4lb run did not take the switch"
        yield ctl, server.port


def _digest(src_port: int) -> dict[str, int]:
    packed = (0x0A000001 << 104) | (0x0A000064 << 72) | (6 << 64) | (src_port << 48)
    return {"entry": packed | (80 << 32) | 2}


def test_the_controllers_own_metrics(fake: FakeSwitch, running: tuple[Controller, int]) -> None:
    ctl, port = running
    got = samples(scrape(port))
    assert value(got, "p4lb_primary", switch="switch") == 1
    assert value(got, "p4lb_reconcile_duration_seconds_count", switch="switch") >= 1
    assert fake.send_digest("conn_digest_t", [_digest(40000), _digest(40001)]) is not None
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 2)
    got = samples(scrape(port))
    assert value(got, "p4lb_digests_total", switch="switch", kind="collision") == 2
    assert ("p4lb_write_errors_total", frozenset({("switch", "switch")})) not in got
    fake.full_tables.add("conn_table")  # the next pin is refused
    fake.send_digest("conn_digest_t", [_digest(40002)])
    assert poll_until(
        lambda: (
            samples(scrape(port)).get(
                ("p4lb_write_errors_total", frozenset({("switch", "switch")}))
            )
            == 1
        )
    )


def test_dashboard_queries_name_only_metrics_the_exporter_produces(
    fake: FakeSwitch, running: tuple[Controller, int]
) -> None:
    _, port = running
    fake.send_digest("conn_digest_t", [_digest(40000)])
    assert fake.wait_for(lambda: len(fake.entries("conn_table")) == 1)
    # Every series name the exporter declares (a family with no series yet, such as write
    # errors before the first, counts: its name is fixed by the code).
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    produced = {
        fam.name + suffix
        for fam in text_string_to_metric_families(scrape(port))
        for suffix in suffixes[fam.type]
    }
    doc = json.loads(DASHBOARD.read_text())

    def exprs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr" or (k == "query" and isinstance(v, str)):
                    yield v
                yield from exprs(v)
        elif isinstance(node, list):
            for v in node:
                yield from exprs(v)

    queries = list(exprs(doc))
    named = {m for q in queries for m in re.findall(r"\bp4lb_[a-z0-9_]+", q)}
    assert len(queries) >= 10 and len(named) >= 12
    assert named <= produced, f"not exported: {sorted(named - produced)}"
    # What the issue asks the dashboard to show.
    for must in ("p4lb_backend_wanted_share_ratio", "p4lb_vip_jain_index", "p4lb_vip_drops_total"):
        assert must in named


def test_run_refuses_a_listen_address_in_use(
    fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fake_cfg.write_text(fake_cfg.read_text() + f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
        assert main(["-c", str(fake_cfg), "run", "--duration", "5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"p4lb: {fake_cfg}: metrics.listen: cannot listen on 127.0.0.1:{port}: "
        "Address already in use"
    )


def test_a_tier_is_labelled_per_balancer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each balancer's counts under its own `switch` label, as `p4lb stats --json` gives
    them per balancer; the controller's own metrics per balancer too."""
    from p4lb.service.tier import TierController
    from tests.unit.tier.test_tier_controller import tier_config

    a, b = FakeSwitch(device_id=1).start(), FakeSwitch(device_id=2).start()
    try:
        path = tmp_path / "tier.toml"
        writer.save(tier_config(a, b), path)
        own = ControllerMetrics()
        ctl = TierController(lambda: reader.load(path), str(path), check_s=0.2, metrics=own)
        settings = MetricsSettings("127.0.0.1:0")
        with (
            MetricsServer(settings, lambda: reader.load(path), str(path), own) as server,
            run_in_thread(ctl, 60),  # type: ignore[arg-type]  # a TierController runs alike
        ):
            assert poll_until(
                lambda: (
                    len(ctl.members) == 2 and all(m.ready.is_set() for m in ctl.members.values())
                )
            )
            for fake, n in ((a, 5), (b, 7)):
                for name, bid in bids(fake).items():
                    fake.set_counter("backend_conns", bid, n * int(name[1:]))
            got = samples(scrape(server.port))
            doc = stats_json(path, capsys)
        for lb in ("lb1", "lb2"):
            assert value(got, "p4lb_primary", switch=lb) == 1
            web = next(v for v in doc["balancers"][lb]["vips"] if v["name"] == "web")
            for row in web["backends"]:
                at = {"switch": lb, "vip": "web", "backend": row["name"]}
                assert value(got, "p4lb_backend_connections_total", **at) == row["connections"]
        assert (
            value(got, "p4lb_backend_connections_total", switch="lb2", vip="web", backend="h3")
            == 21
        )
    finally:
        a.stop()
        b.stop()


def test_make_run_tells_whether_p4lb_run_serves_its_metrics(fake_cfg: Path) -> None:
    """`make run` waits for `p4lb run` to say it serves its metrics, and notices at once
    when it exited instead (a port taken by someone else would still answer a connect)."""
    import subprocess
    import sys

    from topology.run import metrics_started

    exe = Path(sys.executable).with_name("p4lb")
    base = fake_cfg.read_text()
    with socket.socket() as free:  # a port nobody holds once this block ends
        free.bind(("127.0.0.1", 0))
        free_port = free.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        for port, want in ((taken.getsockname()[1], False), (free_port, True)):
            listen = f"127.0.0.1:{port}"
            fake_cfg.write_text(base + f'\n[metrics]\nlisten = "{listen}"\n')
            log = fake_cfg.with_name(f"run-{want}.log")
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [str(exe), "-c", str(fake_cfg), "run"], stdout=out, stderr=out
                )
            try:
                assert metrics_started(log, proc, timeout_s=30) is want, log.read_text()
                if not want:
                    assert proc.wait(10) == 1 and "cannot listen" in log.read_text()
            finally:
                proc.terminate()
                proc.wait(20)
