"""Reading a config file: field-level checks as each key is read, checks across keys, one
line naming the file and the key for every problem."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from p4lb.intent import reader, writer
from p4lb.intent.model import ConfigError
from tests.unit.support import DEFAULT_CONFIG as DEFAULT


def base() -> dict[str, Any]:
    return tomllib.loads(DEFAULT.read_text())


def test_default_config_parses_into_intent() -> None:
    cfg = reader.load(DEFAULT)
    web = cfg.vip("web")
    assert (web.address, web.protocol, web.port, web.algorithm) == ("10.0.0.100", "tcp", 80, "wrr")
    assert [b.name for b in web.backends] == ["h2", "h3", "h4"]
    assert cfg.switch.address == "127.0.0.1:9559"


def test_dump_then_parse_round_trips() -> None:
    cfg = reader.load(DEFAULT)
    again = reader.parse(tomllib.loads(writer.dumps(cfg)), cfg.source)
    assert again == cfg


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        *keys, last = path.split("/")
        node: Any = d
        for k in keys:
            node = node[int(k)] if isinstance(node, list) else node[k]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def _dup_backend(d: dict[str, Any]) -> None:
    d["vip"]["web"]["backend"].append(copy.deepcopy(d["vip"]["web"]["backend"][0]))


def _dup_backend_addr(d: dict[str, Any]) -> None:
    b = copy.deepcopy(d["vip"]["web"]["backend"][0])
    b["name"] = "other"
    d["vip"]["web"]["backend"].append(b)


def _dup_vip(d: dict[str, Any]) -> None:
    d["vip"]["web2"] = copy.deepcopy(d["vip"]["web"])


def _all_drained(d: dict[str, Any]) -> None:
    for b in d["vip"]["web"]["backend"]:
        b["weight"] = 0


def _shared_backend(d: dict[str, Any]) -> None:
    other = copy.deepcopy(d["vip"]["web"])
    other["port"] = 81
    d["vip"]["web2"] = other


def _no_backends(d: dict[str, Any]) -> None:
    d["vip"]["web"]["backend"] = []


def _dsr(
    algorithm: str = "wrr", port: int = 80, behind_router: bool = False
) -> Callable[[dict[str, Any]], None]:
    """The default VIP in dsr mode, its backends on the VIP's port unless `port`."""

    def edit(d: dict[str, Any]) -> None:
        web = d["vip"]["web"]
        web["mode"], web["algorithm"] = "dsr", algorithm
        for b in web["backend"]:
            b["port"] = port
        if behind_router:  # a host entry for a whole prefix is a router: h2 is behind it
            gw = copy.deepcopy(d["host"][0])
            gw.update(name="gw", address="10.9.0.0", prefix_len=16)
            gw["mac"] = web["backend"][0]["mac"]
            d["host"].append(gw)

    return edit


BAD = [
    ("malformed VIP address", _set("vip/web/address", "10.0.0"), "vip.web.address"),
    (
        "malformed backend address",
        _set("vip/web/backend/0/address", "10.0.0.300"),
        "vip.web.backend[0].address",
    ),
    ("malformed MAC", _set("vip/web/backend/1/mac", "00:11"), "vip.web.backend[1].mac"),
    ("bad switch address", _set("switch/address", "localhost"), "switch.address"),
    ("weight above 1000", _set("vip/web/backend/0/weight", 1001), "vip.web.backend[0].weight"),
    ("negative weight", _set("vip/web/backend/0/weight", -1), "vip.web.backend[0].weight"),
    ("weight not an integer", _set("vip/web/backend/0/weight", "2"), "vip.web.backend[0].weight"),
    ("port 0", _set("vip/web/port", 0), "vip.web.port"),
    ("unknown protocol", _set("vip/web/protocol", "sctp"), "vip.web.protocol"),
    ("unknown key (typo)", _set("vip/web/algoritm", "wrr"), "vip.web.algoritm: unknown key"),
    ("duplicate backend name", _dup_backend, "duplicate backend name"),
    ("duplicate backend address", _dup_backend_addr, "duplicate backend 10.0.0.2:8000"),
    ("duplicate VIP", _dup_vip, "duplicate VIP 10.0.0.100:80/tcp"),
    ("total weight 0", _all_drained, "total weight is 0"),
    ("backend serving two VIPs", _shared_backend, "already serves vip.web"),
    ("VIP without backends", _no_backends, "no backends"),
    ("choices 1", _set("vip/web/choices", 1), 'vip.web.choices: 1 is not "all"'),
    ("choices a word", _set("vip/web/choices", "most"), "vip.web.choices: 'most'"),
    ("choices a float", _set("vip/web/choices", 2.5), "vip.web.choices: 2.5"),
    ("unknown mode", _set("vip/web/mode", "tunnel"), "vip.web.mode: 'tunnel' is not one of"),
    ("dsr with leasttime", _dsr(algorithm="leasttime"), "algorithm leasttime needs the backends"),
    ("dsr backend on another port", _dsr(port=8000), "port 8000 differs from the VIP's 80"),
    ("dsr backend behind a router", _dsr(behind_router=True), "a dsr backend must be on a"),
    (
        "missing backend mac",
        lambda d: d["vip"]["web"]["backend"][0].pop("mac"),
        "vip.web.backend[0].mac: missing",
    ),
]


@pytest.mark.parametrize(("desc", "edit", "needle"), BAD, ids=[b[0] for b in BAD])
def test_invalid_config_gives_one_line_naming_file_and_key(
    desc: str, edit: Callable[[dict[str, Any]], None], needle: str
) -> None:
    data = base()
    edit(data)
    with pytest.raises(ConfigError) as err:
        reader.parse(data, "lb.toml")
    msg = str(err.value)
    assert msg.startswith("lb.toml: ")
    assert needle in msg
    assert "\n" not in msg


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[vip.web\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        reader.load(bad)
    with pytest.raises(ConfigError, match="file not found"):
        reader.load(tmp_path / "nope.toml")


def test_save_is_atomic_and_loadable(tmp_path: Path) -> None:
    cfg = reader.load(DEFAULT)
    out = tmp_path / "lb.toml"
    writer.save(cfg, out)
    assert reader.load(out).vips == cfg.vips
    assert [p.name for p in tmp_path.iterdir()] == ["lb.toml"]


def test_dsr_mode_reads_writes_and_defaults_to_nat() -> None:
    data = base()
    assert reader.parse(data, "lb.toml").vip("web").mode == "nat"
    _dsr()(data)
    cfg = reader.parse(data, "lb.toml")
    assert cfg.vip("web").mode == "dsr"
    again = reader.parse(tomllib.loads(writer.dumps(cfg)), cfg.source)
    assert again.vip("web").mode == "dsr"
    assert again == cfg
