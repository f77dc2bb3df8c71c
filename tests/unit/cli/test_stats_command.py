"""`p4lb stats` over gRPC against the fake switch: shares since each VIP's last runtime change
(the baseline every change stores), lifetime totals on request, connection rates when
watching, health as `p4lb run` publishes it (`?` once it stopped), and never taking part in
arbitration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from p4lb.cli.main import main
from p4lb.intent import reader, writer
from p4lb.pipeline.ids import ids_on_switch
from p4lb.stats import baselines
from tests.unit.fake_switch import FakeSwitch
from tests.unit.support import HEALTH_TABLE, held, publish_health


def set_conns(fake: FakeSwitch, counts: dict[str, int]) -> None:
    """Set backend_conns by backend name (h<last octet>), ids as the switch holds them."""
    for (_, addr, _), bid in ids_on_switch(held(fake)).backends.items():
        name = f"h{addr & 0xFF}"
        if name in counts:
            fake.set_counter("backend_conns", bid, counts[name], counts[name] * 100)


def stats_json(cfg: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["-c", str(cfg), "stats", "--json", *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def web_of(doc: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in doc["vips"] if v["name"] == "web")


def conns(vip: dict[str, Any]) -> dict[str, int]:
    return {b["name"]: b["connections"] for b in vip["backends"]}


def test_stats_after_a_weight_change_over_grpc(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_conns(fake, {"h2": 10, "h3": 10, "h4": 10})
    assert main(["-c", str(fake_cfg), "weight", "set", "web", "h2", "3"]) == 0
    assert baselines.state_path(fake_cfg).exists()
    set_conns(fake, {"h2": 16, "h3": 12, "h4": 12})

    (window,) = stats_json(fake_cfg, capsys=capsys)
    web = window["vips"][0]
    assert [b["connections"] for b in web["backends"]] == [6, 2, 2]
    assert [b["share"] for b in web["backends"]] == pytest.approx([0.6, 0.2, 0.2])
    assert [b["wanted_share"] for b in web["backends"]] == pytest.approx([0.6, 0.2, 0.2])
    assert web["weighted_jain"] == pytest.approx(1.0) and web["since"] is not None

    (total,) = stats_json(fake_cfg, "--lifetime", capsys=capsys)
    web = total["vips"][0]
    assert [b["connections"] for b in web["backends"]] == [16, 12, 12]
    assert web["since"] is None and web["weighted_jain"] < 0.95

    first, second = stats_json(fake_cfg, "--watch", "0.01", "--count", "2", capsys=capsys)
    assert first["vips"][0]["backends"][0]["connections_per_s"] is None
    assert second["vips"][0]["backends"][0]["connections_per_s"] == 0.0


def test_the_window_is_stored_before_the_file_shows_the_change(
    fake: FakeSwitch, fake_cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader (the stats page) that reads the new weights from the file also reads the
    window they started: the window is stored first."""
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_conns(fake, {"h2": 10, "h3": 10, "h4": 10})
    seen: list[dict[str, Any]] = []
    save = writer.save

    def save_and_look(cfg: Any, path: Any) -> None:
        seen.append(baselines.load_baselines(path))
        save(cfg, path)

    monkeypatch.setattr(writer, "save", save_and_look)
    assert main(["-c", str(fake_cfg), "weight", "set", "web", "h2", "3"]) == 0
    (before_the_file,) = seen
    assert before_the_file["web"] == baselines.load_baselines(fake_cfg)["web"]


ADD_H5 = ["--address", "10.0.0.5", "--port", "8000", "--mac", "00:00:00:00:00:05"]


@pytest.mark.parametrize(
    ("command", "after"),
    [
        (["backend", "drain", "web", "h3"], {"h2": 15, "h3": 10, "h4": 15}),
        (["algorithm", "set", "web", "iphash"], {"h2": 13, "h3": 14, "h4": 15}),
        (["backend", "add", "web", "h5", *ADD_H5, "--switch-port", "5"], {"h2": 11, "h5": 4}),
        (["backend", "remove", "web", "h4"], {"h2": 12, "h3": 13}),
    ],
    ids=["drain", "algorithm", "backend add", "backend remove"],
)
def test_every_runtime_change_starts_the_vips_window(
    fake: FakeSwitch,
    fake_cfg: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    after: dict[str, int],
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    set_conns(fake, {"h2": 10, "h3": 10, "h4": 10})
    assert main(["-c", str(fake_cfg), *command]) == 0
    assert set(baselines.load_baselines(fake_cfg)) == {"web"}
    set_conns(fake, after)

    (window,) = stats_json(fake_cfg, capsys=capsys)
    web = web_of(window)
    names = [b.name for b in reader.load(fake_cfg).vip("web").backends]
    # Counted from the change: 10 each before it; a backend added by it counts from 0.
    want = {n: after.get(n, 10) - (0 if n == "h5" else 10) for n in names}
    assert conns(web) == want and web["since"] is not None
    (total,) = stats_json(fake_cfg, "--lifetime", capsys=capsys)
    assert conns(web_of(total)) == {n: after.get(n, 10) for n in names}


def test_vip_add_and_remove_keep_a_baseline_per_vip_that_exists(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    assert main(["-c", str(fake_cfg), "weight", "set", "web", "h2", "2"]) == 0
    web_at = baselines.load_baselines(fake_cfg)["web"]["at"]
    add = ["vip", "add", "dns", "--address", "10.0.0.53", "--port", "53", "--protocol", "udp"]
    assert (
        main(["-c", str(fake_cfg), *add, "--backend", "d1=10.0.0.2:5353,1,00:00:00:00:00:02,2"])
        == 0
    )
    kept = baselines.load_baselines(fake_cfg)
    assert set(kept) == {"web", "dns"} and kept["web"]["at"] == web_at  # web's window stays
    (window,) = stats_json(fake_cfg, capsys=capsys)
    assert {v["name"]: v["since"] is not None for v in window["vips"]} == {"web": True, "dns": True}

    assert main(["-c", str(fake_cfg), "vip", "remove", "dns"]) == 0
    kept = baselines.load_baselines(fake_cfg)
    assert set(kept) == {"web"} and kept["web"]["at"] == web_at


def test_stats_marks_health_with_a_question_mark_once_run_stops_publishing(
    fake: FakeSwitch, fake_cfg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cfg.write_text(fake_cfg.read_text() + HEALTH_TABLE)
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    rows = {}
    for fresh in (True, False):
        publish_health(fake_cfg, {"h2": "up", "h3": "down", "h4": "up"}, fresh=fresh)
        (doc,) = stats_json(fake_cfg, capsys=capsys)
        assert [b["health"]["stale"] for b in web_of(doc)["backends"]] == [not fresh] * 3
        assert main(["-c", str(fake_cfg), "stats"]) == 0
        table = capsys.readouterr().out.splitlines()
        # A backend's row: its name, address:port, ..., the health column last.
        rows[fresh] = {
            cells[0]: cells[-1]
            for cells in (line.split() for line in table)
            if len(cells) > 2 and cells[1].startswith("10.0.0.")
        }
        rows[fresh]["stale note"] = str(any("health: stale" in line for line in table))
    assert rows[True] == {"h2": "up", "h3": "DOWN", "h4": "up", "stale note": "False"}
    assert rows[False] == {"h2": "up?", "h3": "DOWN?", "h4": "up?", "stale note": "True"}


def test_stats_reads_without_taking_the_switch(fake: FakeSwitch, fake_cfg: Path) -> None:
    assert main(["-c", str(fake_cfg), "apply"]) == 0
    before = fake.arbitrations
    assert main(["-c", str(fake_cfg), "stats"]) == 0
    assert fake.arbitrations == before
