"""`[qos]`: queueing disciplines on switch ports, read and checked (the same checks for the
config file and `p4lb qos set`), and edited. Nothing here knows about P4 tables.

    [qos]
    thrift_port = 9090                  # BMv2's Thrift port on this host
    [qos.port.2]                        # switch port 2
    discipline = "fq_codel-approx"
    rate_pps = 1000                     # the port's rate (BMv2 shapes in packets/s)
    limit = 1000                        # packets queued toward the port, tail drop above
    target_us = 5000                    # codel, fq_codel-approx, cake-approx
    interval_us = 100000
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from p4lb.intent.model import CLASSIFIERS, DISCIPLINES, Config, ConfigError, QosPort, QosSettings

MAX_PORT = 510  # BMv2's port numbers are 9 bits; 511 is its drop port
MAX_PACKETS = 65535  # limits and shares: 16 bits in the data plane
MAX_RATE_PPS = 10_000_000
MAX_US = 10_000_000  # CoDel times: at most 10 s

# Every discipline's keys and their defaults (None: required). Shares default to a fraction
# of the limit: a flow (or host) holding that much of the queue loses its next packet.
_COMMON: dict[str, Any] = {"rate_pps": None}
_CODEL = {"target_us": 5000, "interval_us": 100000}  # RFC 8289's defaults
KEYS: dict[str, dict[str, Any]] = {
    "fifo": {**_COMMON, "limit": 1000},
    "codel": {**_COMMON, "limit": 1000, **_CODEL},
    "sfq-approx": {**_COMMON, "limit": 127, "flow_limit": "limit/8"},  # Linux sfq's limit
    "pcq-approx": {
        **_COMMON,
        "limit": 2000,  # MikroTik's pcq-total-limit
        "host_limit": 50,  # MikroTik's pcq-limit (per class)
        "class_rate_pps": 0,
        "classifier": "src",
    },
    "fq_codel-approx": {**_COMMON, "limit": 1000, "flow_limit": "limit/8", **_CODEL},
    "cake-approx": {
        **_COMMON,
        "limit": 1000,
        "host_limit": "limit/4",
        "classifier": "src",
        **_CODEL,
    },
}


TOP_KEYS = ("thrift_port", "port")


def port_keys() -> list[str]:
    """Every key a `[qos.port.N]` table may hold, whatever its discipline."""
    return sorted({"discipline", *(k for keys in KEYS.values() for k in keys)})


def parse_port(number: Any, raw: Mapping[str, Any], src: str, where: str) -> QosPort:
    """One port's discipline from its table (or `p4lb qos set`'s arguments); ConfigError, one
    line naming the key, for anything wrong."""
    port = _port_number(number, src, where)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{src}: {where}: must be a table")
    discipline = raw.get("discipline")
    if discipline not in DISCIPLINES:
        raise ConfigError(
            f"{src}: {where}.discipline: {discipline!r} is not one of {', '.join(DISCIPLINES)}"
        )
    keys = KEYS[discipline]
    for k in raw:
        if k != "discipline" and k not in keys:
            raise ConfigError(
                f"{src}: {where}.{k}: not a parameter of {discipline} "
                f"(it takes {', '.join(sorted(keys))})"
            )
    values: dict[str, Any] = {}
    for k, default in keys.items():
        if k in raw:
            values[k] = raw[k]
        elif default is None:
            raise ConfigError(f"{src}: {where}.{k}: missing ({discipline} needs it)")
        elif not (isinstance(default, str) and default.startswith("limit/")):
            values[k] = default
    for k, v in values.items():
        if k == "classifier":
            if v not in CLASSIFIERS:
                raise ConfigError(f"{src}: {where}.classifier: must be src or dst, got {v!r}")
            continue
        lo, hi = _RANGES[k]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ConfigError(f"{src}: {where}.{k}: must be an integer in {lo}..{hi}, got {v!r}")
    for k, default in keys.items():
        if k not in values:  # a share of the limit
            values[k] = max(2, values["limit"] // int(default.split("/")[1]))
    for k in ("flow_limit", "host_limit"):
        if values.get(k, 0) > values["limit"]:
            raise ConfigError(
                f"{src}: {where}.{k}: {values[k]} is above the port's limit {values['limit']}"
            )
    if "target_us" in values and values["target_us"] >= values["interval_us"]:
        raise ConfigError(f"{src}: {where}.target_us: must be below interval_us")
    if discipline == "cake-approx":  # a host's flows share its place first come
        values["flow_limit"] = values["host_limit"]
    return QosPort(port=port, discipline=discipline, **values)


_RANGES = {
    "rate_pps": (1, MAX_RATE_PPS),
    "limit": (1, MAX_PACKETS),
    "flow_limit": (1, MAX_PACKETS),
    "host_limit": (1, MAX_PACKETS),
    "class_rate_pps": (0, MAX_RATE_PPS),
    "target_us": (1, MAX_US),
    "interval_us": (1, MAX_US),
}


def _port_number(number: Any, src: str, where: str) -> int:
    try:
        port = int(number)
    except (TypeError, ValueError):
        port = -1
    if isinstance(number, bool) or not 1 <= port <= MAX_PORT:
        raise ConfigError(f"{src}: {where}: {number!r} is not a switch port (1..{MAX_PORT})")
    return port


def parse(raw: Any, src: str) -> QosSettings:
    """The `[qos]` table."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{src}: qos: must be a table")
    for k in raw:
        if k not in TOP_KEYS:
            raise ConfigError(f"{src}: qos.{k}: unknown key (expected thrift_port or port)")
    thrift = raw.get("thrift_port", 9090)
    if isinstance(thrift, bool) or not isinstance(thrift, int) or not 1 <= thrift <= 65535:
        raise ConfigError(f"{src}: qos.thrift_port: must be a TCP port, got {thrift!r}")
    ports_raw = raw.get("port", {})
    if not isinstance(ports_raw, Mapping):
        raise ConfigError(f"{src}: qos.port: must be a table of ports ([qos.port.N])")
    ports = tuple(
        sorted(
            (parse_port(n, t, src, f"qos.port.{n}") for n, t in ports_raw.items()),
            key=lambda p: p.port,
        )
    )
    return QosSettings(thrift_port=thrift, ports=ports)


def to_table(p: QosPort) -> dict[str, Any]:
    """The keys a port's table needs to read back as `p` (defaults left out)."""
    out: dict[str, Any] = {"discipline": p.discipline}
    given = {"discipline": p.discipline, "rate_pps": p.rate_pps, "limit": p.limit}
    defaults = parse_port(p.port, given, "", "")
    for k in KEYS[p.discipline]:
        value = getattr(p, k)
        if k in ("rate_pps", "limit") or value != getattr(defaults, k):
            out[k] = value
    return out


def with_port(cfg: Config, port: QosPort) -> Config:
    """`cfg` with `port`'s discipline set (replacing the port's former one)."""
    qos = cfg.qos or QosSettings()
    ports = tuple(
        sorted([p for p in qos.ports if p.port != port.port] + [port], key=lambda p: p.port)
    )
    return replace(cfg, qos=replace(qos, ports=ports))


def without_port(cfg: Config, port: int) -> Config:
    """`cfg` with no discipline on `port` (ConfigError if it had none)."""
    if cfg.qos is None or cfg.qos.port(port) is None:
        raise ConfigError(f"{cfg.source}: qos: switch port {port} has no discipline")
    qos = cfg.qos
    return replace(cfg, qos=replace(qos, ports=tuple(p for p in qos.ports if p.port != port)))
