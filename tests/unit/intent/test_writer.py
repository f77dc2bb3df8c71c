"""Runtime edits write the config back keeping what the user wrote: comments, order, keys
left at their defaults; only changed values move."""

from __future__ import annotations

from pathlib import Path

from p4lb.intent import edits, reader, writer
from p4lb.intent.model import Backend
from p4lb.pipeline.desired import desired_entries
from tests.unit.support import default_config

COMMENTED = """\
# Our lab balancer. Ask Ana before changing the switch section.
[switch]
address = "127.0.0.1:9559"   # the P4Runtime server
election_id = 10

[[host]]
name = "h1"          # the client
address = "10.0.0.1"
mac = "00:00:00:00:00:01"
switch_port = 1

[vip.web]            # the web service
address = "10.0.0.100"
port = 80
mac = "00:00:00:00:01:64"

# h2 is the big box
[[vip.web.backend]]
name = "h2"
address = "10.0.0.2"
port = 8000
weight = 1           # raise with care
mac = "00:00:00:00:00:02"
switch_port = 2

[[vip.web.backend]]
address = "10.0.0.3"  # no name: named after its address
port = 8000
mac = "00:00:00:00:00:03"
switch_port = 3
"""


def test_a_weight_change_keeps_every_comment_and_touches_one_line(tmp_path: Path) -> None:
    path = tmp_path / "lb.toml"
    path.write_text(COMMENTED)
    cfg = reader.load(path)
    writer.save(edits.set_weight(cfg, "web", "h2", 3), path)
    before, after = COMMENTED.splitlines(), path.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [
        ("weight = 1           # raise with care", "weight = 3           # raise with care")
    ]
    assert reader.load(path).vip("web").backend("h2").weight == 3


def test_defaults_stay_implicit_and_unnamed_backends_stay_unnamed(tmp_path: Path) -> None:
    path = tmp_path / "lb.toml"
    path.write_text(COMMENTED)
    cfg = reader.load(path)
    writer.save(edits.set_weight(cfg, "web", "10.0.0.3", 2), path)
    text = path.read_text()
    assert "algorithm" not in text and "protocol" not in text and "device_id" not in text
    assert text.count("name =") == 2  # h1 and h2 only
    assert 'address = "10.0.0.3"  # no name: named after its address\nport = 8000\nmac' in text
    assert reader.load(path).vip("web").backend("10.0.0.3").weight == 2


def test_adding_and_removing_backends_and_vips_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "lb.toml"
    path.write_text(COMMENTED)
    cfg = reader.load(path)
    new = Backend("h5", "10.0.0.5", 8000, 2, "00:00:00:00:00:05", 5)
    cfg = edits.add_backend(cfg, "web", new)
    cfg = edits.set_algorithm(cfg, "web", "iphash")
    dns = reader.parse_vip(
        "dns",
        {"address": "10.0.0.53", "port": 53, "protocol": "udp"},
        "test",
        cfg.switch.mac,
    )
    cfg = edits.add_vip(cfg, type(dns)(**{**dns.__dict__, "backends": (new,)}))
    writer.save(cfg, path)
    assert reader.load(path).vips == cfg.vips
    text = path.read_text()
    for line in COMMENTED.splitlines():
        if "#" in line:
            assert line in text
    cfg = edits.remove_backend(reader.load(path), "web", "h2")
    cfg = edits.remove_vip(cfg, "dns")
    writer.save(cfg, path)
    again = reader.load(path)
    assert again.vips == cfg.vips
    assert [b.name for b in again.vip("web").backends] == ["10.0.0.3", "h5"]
    assert "# Our lab balancer." in path.read_text()


def test_a_saved_config_produces_the_same_entries(tmp_path: Path) -> None:
    path = tmp_path / "lb.toml"
    path.write_text(COMMENTED)
    cfg = edits.set_weight(reader.load(path), "web", "h2", 7)
    writer.save(cfg, path)
    assert desired_entries(reader.load(path), []) == desired_entries(cfg, [])


def test_a_new_file_is_written_whole(tmp_path: Path) -> None:
    cfg = default_config()
    path = tmp_path / "new.toml"
    writer.save(cfg, path)
    assert reader.load(path).vips == cfg.vips and reader.load(path).hosts == cfg.hosts
    assert path.read_text().startswith("# p4lb config.")
