"""`[metrics]`: off unless configured, its address checked as it is read (one line naming the
key), a listen address off this host refused unless `insecure = true` (the metrics and the
stats page have no authentication), and kept by the writer through runtime changes."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from p4lb.cli.main import main
from p4lb.intent import reader, writer
from p4lb.intent.model import Config, ConfigError, MetricsSettings
from tests.unit.support import DEFAULT_CONFIG

BASE = DEFAULT_CONFIG.read_text()


def parse(text: str) -> Config:
    return reader.parse(tomllib.loads(text), "t.toml")


def test_off_unless_configured() -> None:
    assert parse(BASE).metrics is None
    assert parse(BASE + "\n[metrics]\n").metrics == MetricsSettings()


@pytest.mark.parametrize("listen", ["127.0.0.1:9100", "localhost:9100", "[::1]:9100"])
def test_loopback_listen_addresses(listen: str) -> None:
    got = parse(BASE + f'\n[metrics]\nlisten = "{listen}"\nhistory_s = 600\n').metrics
    assert got == MetricsSettings(listen=listen, history_s=600)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('listen = "9100"', "t.toml: metrics.listen: expected IP:PORT"),
        ('listen = "127.0.0.1:0"', "t.toml: metrics.listen: expected IP:PORT"),
        ('listen = "127.0.0.1:70000"', "t.toml: metrics.listen: expected IP:PORT"),
        ('listen = "metrics.example:9100"', "t.toml: metrics.listen: expected IP:PORT"),
        ("listen = 9100", "t.toml: metrics.listen: must be a string, got 9100"),
        ('listen = "127.0.0.1:9100"\nport = 1', "t.toml: metrics.port: unknown key"),
        ("history_s = 5", "t.toml: metrics.history_s: 5 is outside 30..3600"),
        ('insecure = "yes"', "t.toml: metrics.insecure: must be true or false"),
    ],
)
def test_bad_metrics_tables_are_one_line(table: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(BASE + f"\n[metrics]\n{table}\n")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize("listen", ["0.0.0.0:9100", "192.0.2.7:9100", "[::]:9100"])
def test_a_listen_address_off_loopback_needs_insecure(listen: str) -> None:
    with pytest.raises(ConfigError, match=r"is not a loopback address .* no authentication"):
        parse(BASE + f'\n[metrics]\nlisten = "{listen}"\n')
    got = parse(BASE + f'\n[metrics]\nlisten = "{listen}"\ninsecure = true\n').metrics
    assert got == MetricsSettings(listen=listen, insecure=True)


def test_check_names_the_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lb.toml"
    path.write_text(BASE + '\n[metrics]\nlisten = "0.0.0.0:9100"\n')
    assert main(["-c", str(path), "check"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"p4lb: {path}: metrics.listen: 0.0.0.0:9100 is not a loopback")


def test_the_writer_keeps_metrics_through_a_runtime_change(tmp_path: Path) -> None:
    path = tmp_path / "lb.toml"
    path.write_text(BASE + "\n[metrics]   # scraped by the local Prometheus\nhistory_s = 120\n")
    cfg = reader.load(path)
    writer.save(cfg.with_vip(cfg.vip("web")), path)
    text = path.read_text()
    assert "# scraped by the local Prometheus" in text
    assert reader.load(path).metrics == MetricsSettings(history_s=120)
    fresh = parse(writer.dumps(cfg))
    assert fresh.metrics == cfg.metrics
    writer.save(Config(vips=cfg.vips, hosts=cfg.hosts, switch=cfg.switch), path)
    assert reader.load(path).metrics is None
    assert not any(line.startswith("[metrics]") for line in path.read_text().splitlines())
