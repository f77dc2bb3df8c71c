"""The load-balancing intent: a TOML file of VIPs, backends and hosts, validated whole.

Nothing here knows about P4 tables. Errors name the file and the key and end up as one
line for the user; the switch is never touched before a config is valid.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # p4lb.health imports ConfigError from here
    from p4lb.health import HealthSettings

PROTOCOLS = ("tcp", "udp")
MAX_WEIGHT = 1000
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ConfigError(Exception):
    """A config the user wrote (or asked for) is not valid; the message is one line."""


@dataclass(frozen=True)
class Limits:
    """What the compiled data plane offers: table capacities and the algorithm names, all
    read from the P4Info (`compiled_limits`); nothing here repeats a P4 constant."""

    algorithms: tuple[str, ...]
    max_services: int
    max_backends: int
    pool_table_size: int
    wrr_table_size: int
    route_table_size: int
    max_slots_per_vip: int


def compiled_limits() -> Limits:
    """The limits of the committed P4 program."""
    from p4lb.p4info import schema  # the P4Info codec imports this module

    return schema().limits()


@dataclass(frozen=True)
class SwitchConfig:
    address: str = "127.0.0.1:9559"
    device_id: int = 0
    election_id: int = 1
    mac: str = "00:00:00:00:01:00"
    # Ports that take part in ARP flooding; empty: every port named in the config.
    ports: tuple[int, ...] = ()


@dataclass(frozen=True)
class Host:
    """A machine the switch routes to that is not a backend (a client, a router)."""

    name: str
    address: str
    mac: str
    switch_port: int
    prefix_len: int = 32


@dataclass(frozen=True)
class Backend:
    name: str
    address: str
    port: int
    weight: int
    mac: str
    switch_port: int

    @property
    def active(self) -> bool:
        return self.weight > 0


@dataclass(frozen=True)
class Vip:
    name: str
    address: str
    protocol: str
    port: int
    algorithm: str
    mac: str
    backends: tuple[Backend, ...] = ()
    # `[vip.NAME.health]`: check the backends from `p4lb run`; None: no checks.
    health: HealthSettings | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.address, self.protocol, self.port)

    def backend(self, name: str) -> Backend:
        for b in self.backends:
            if b.name == name:
                return b
        raise ConfigError(f"VIP {self.name!r} has no backend {name!r}")


@dataclass(frozen=True)
class Config:
    switch: SwitchConfig = field(default_factory=SwitchConfig)
    hosts: tuple[Host, ...] = ()
    vips: tuple[Vip, ...] = ()
    source: str = "<config>"

    def vip(self, name: str) -> Vip:
        for v in self.vips:
            if v.name == name or f"{v.address}:{v.port}" == name:
                return v
        raise ConfigError(f"{self.source}: no VIP {name!r}")

    def with_vip(self, vip: Vip) -> Config:
        """A copy with `vip` replacing the VIP of the same name (or appended)."""
        vips = [vip if v.name == vip.name else v for v in self.vips]
        if not any(v.name == vip.name for v in self.vips):
            vips.append(vip)
        return replace(self, vips=tuple(vips))

    def without_vip(self, name: str) -> Config:
        self.vip(name)
        return replace(self, vips=tuple(v for v in self.vips if v.name != name))


# ---------------------------------------------------------------- parsing


def load(path: str | os.PathLike[str], limits: Limits | None = None) -> Config:
    """Read and validate a config file; raise ConfigError with one line on any problem."""
    src = str(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{src}: file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{src}: not valid TOML: {e}") from None
    return parse(data, src, limits)


def parse(data: dict[str, Any], source: str = "<config>", limits: Limits | None = None) -> Config:
    """Turn decoded TOML into a validated Config."""
    _only(data, {"switch", "host", "vip"}, source, "")
    sw = _switch(data.get("switch", {}), source)
    hosts = tuple(
        parse_host(h, source, f"host[{i}]") for i, h in enumerate(_list(data, "host", source, ""))
    )
    vips_raw = data.get("vip", {})
    if not isinstance(vips_raw, dict):
        raise ConfigError(f"{source}: vip: must be a table of named VIPs ([vip.NAME])")
    limits = limits or compiled_limits()
    vips = tuple(parse_vip(name, v, source, sw.mac, limits) for name, v in vips_raw.items())
    cfg = Config(switch=sw, hosts=hosts, vips=vips, source=source)
    from p4lb.validate import validate  # the checks import this module's model

    validate(cfg, limits)
    return cfg


def _only(table: dict[str, Any], allowed: set[str], src: str, where: str) -> None:
    for k in table:
        if k not in allowed:
            key = f"{where}.{k}" if where else k
            raise ConfigError(f"{src}: {key}: unknown key (expected one of {sorted(allowed)})")


def _list(table: dict[str, Any], key: str, src: str, where: str) -> list[dict[str, Any]]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise ConfigError(f"{src}: {where}{key}: must be an array of tables ([[{key}]])")
    return value


def _get(
    table: dict[str, Any], key: str, typ: type, src: str, where: str, default: Any = None
) -> Any:
    if key not in table:
        if default is None:
            raise ConfigError(f"{src}: {where}.{key}: missing")
        return default
    value = table[key]
    if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{src}: {where}.{key}: must be an integer, got {value!r}")
    if typ is str and not isinstance(value, str):
        raise ConfigError(f"{src}: {where}.{key}: must be a string, got {value!r}")
    return value


def _ipv4(value: str, src: str, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ConfigError(f"{src}: {where}: not an IPv4 address: {value!r}") from None


def _mac(value: str, src: str, where: str) -> str:
    if not _MAC_RE.match(value):
        raise ConfigError(f"{src}: {where}: not a MAC address (aa:bb:cc:dd:ee:ff): {value!r}")
    return value.lower()


def _range(value: int, lo: int, hi: int, src: str, where: str) -> int:
    if not lo <= value <= hi:
        raise ConfigError(f"{src}: {where}: {value} is outside {lo}..{hi}")
    return value


def _name(value: str, src: str, where: str) -> str:
    if not _NAME_RE.match(value):
        raise ConfigError(f"{src}: {where}: bad name {value!r} (letters, digits, _ . -)")
    return value


def _switch(t: Any, src: str) -> SwitchConfig:
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: switch: must be a table")
    _only(t, {"address", "device_id", "election_id", "mac", "ports"}, src, "switch")
    d = SwitchConfig()
    address = _get(t, "address", str, src, "switch", d.address)
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{src}: switch.address: expected HOST:PORT, got {address!r}")
    ports = t.get("ports", [])
    if not isinstance(ports, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 <= p < 511 for p in ports
    ):
        raise ConfigError(f"{src}: switch.ports: must be a list of port numbers 0..510")
    return SwitchConfig(
        address=address,
        device_id=_range(
            _get(t, "device_id", int, src, "switch", 0), 0, 2**64 - 1, src, "switch.device_id"
        ),
        election_id=_range(
            _get(t, "election_id", int, src, "switch", 1), 1, 2**64 - 1, src, "switch.election_id"
        ),
        mac=_mac(_get(t, "mac", str, src, "switch", d.mac), src, "switch.mac"),
        ports=tuple(ports),
    )


def parse_host(t: dict[str, Any], src: str, where: str) -> Host:
    _only(t, {"name", "address", "mac", "switch_port", "prefix_len"}, src, where)
    return Host(
        name=_name(_get(t, "name", str, src, where), src, f"{where}.name"),
        address=_ipv4(_get(t, "address", str, src, where), src, f"{where}.address"),
        mac=_mac(_get(t, "mac", str, src, where), src, f"{where}.mac"),
        switch_port=_range(
            _get(t, "switch_port", int, src, where), 0, 510, src, f"{where}.switch_port"
        ),
        prefix_len=_range(
            _get(t, "prefix_len", int, src, where, 32), 0, 32, src, f"{where}.prefix_len"
        ),
    )


def parse_vip(name: str, t: Any, src: str, default_mac: str, limits: Limits) -> Vip:
    where = f"vip.{name}"
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: {where}: must be a table")
    _name(name, src, where)
    _only(t, {"address", "protocol", "port", "algorithm", "mac", "backend", "health"}, src, where)
    protocol = _get(t, "protocol", str, src, where, "tcp").lower()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{src}: {where}.protocol: {protocol!r} is not one of {PROTOCOLS}")
    algorithm = _get(t, "algorithm", str, src, where, "wrr").lower()
    if algorithm not in limits.algorithms:
        raise ConfigError(
            f"{src}: {where}.algorithm: unknown algorithm {algorithm!r} "
            f"(known: {', '.join(limits.algorithms)})"
        )
    backends = tuple(
        parse_backend(b, src, f"{where}.backend[{i}]")
        for i, b in enumerate(_list(t, "backend", src, f"{where}."))
    )
    return Vip(
        name=name,
        address=_ipv4(_get(t, "address", str, src, where), src, f"{where}.address"),
        protocol=protocol,
        port=_range(_get(t, "port", int, src, where), 1, 65535, src, f"{where}.port"),
        algorithm=algorithm,
        mac=_mac(_get(t, "mac", str, src, where, default_mac), src, f"{where}.mac"),
        backends=backends,
        health=_health(t, src, where),
    )


def _health(t: dict[str, Any], src: str, where: str) -> HealthSettings | None:
    """The VIP's `[vip.NAME.health]` table, checked key by key (None when absent)."""
    if "health" not in t:
        return None
    table = t["health"]
    if not isinstance(table, dict):
        raise ConfigError(f"{src}: {where}.health: must be a table ([{where}.health])")
    if str(t.get("protocol", "tcp")).lower() != "tcp":
        raise ConfigError(f"{src}: {where}.health: checks connect over TCP; this VIP is not tcp")
    from p4lb.health import parse_settings  # it imports this module's ConfigError

    return parse_settings(table, src, f"{where}.health")


def parse_backend(t: dict[str, Any], src: str, where: str) -> Backend:
    _only(t, {"name", "address", "port", "weight", "mac", "switch_port"}, src, where)
    address = _ipv4(_get(t, "address", str, src, where), src, f"{where}.address")
    return Backend(
        name=_name(_get(t, "name", str, src, where, address), src, f"{where}.name"),
        address=address,
        port=_range(_get(t, "port", int, src, where), 1, 65535, src, f"{where}.port"),
        weight=_range(_get(t, "weight", int, src, where, 1), 0, MAX_WEIGHT, src, f"{where}.weight"),
        mac=_mac(_get(t, "mac", str, src, where), src, f"{where}.mac"),
        switch_port=_range(
            _get(t, "switch_port", int, src, where), 0, 510, src, f"{where}.switch_port"
        ),
    )


# ---------------------------------------------------------------- writing back


def save(cfg: Config, path: str | os.PathLike[str]) -> None:
    """Write `cfg` to `path`, keeping the file's comments (see p4lb.config_file)."""
    from p4lb import config_file  # the writer parses tables with this module's rules

    config_file.save(cfg, path)
