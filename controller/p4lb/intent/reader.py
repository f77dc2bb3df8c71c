"""Reading the intent: a TOML file of VIPs, backends and hosts -> a validated Config.

Field-level checks happen here as each key is read; checks across keys in p4lb.intent.validate.
Nothing here knows about P4: whether the compiled program offers a VIP's algorithm and has room
for the whole config is the pipeline's question (p4lb.pipeline.capacity). Errors name the file
and the key and end up as one line for the user."""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from p4lb.intent import qos
from p4lb.intent.model import (
    CHOICES_ALL,
    MAX_WEIGHT,
    MODES,
    PROTOCOLS,
    Backend,
    Balancer,
    Config,
    ConfigError,
    HealthSettings,
    Host,
    MetricsSettings,
    SwitchConfig,
    TlsSettings,
    Vip,
    address_bits,
    switch_configs,
)
from p4lb.intent.validate import validate

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

# The keys each table accepts: the unknown-key checks below and accepted_keys() (which
# docs/configuration.md is tested against) both read them from here.
TOP_KEYS = ("switch", "host", "vip", "tier", "metrics", "qos")
SWITCH_KEYS = ("address", "device_id", "election_id", "mac", "ports", "tls", "insecure")
TLS_KEYS = ("ca", "cert", "key", "server_name")
HOST_KEYS = ("name", "address", "mac", "switch_port", "prefix_len")
VIP_KEYS = (
    "address",
    "protocol",
    "port",
    "algorithm",
    "choices",
    "mac",
    "mode",
    "backend",
    "health",
)
BACKEND_KEYS = ("name", "address", "port", "weight", "mac", "switch_port")
METRICS_KEYS = ("listen", "insecure", "history_s")
TIER_KEYS = ("announce", "state_ttl_s", "balancer")
BALANCER_KEYS = (
    "name",
    "address",
    "device_id",
    "mac",
    "ports",
    "speaker_netns",
    "speaker_api",
    "nexthop",
    "nexthop6",
    "drain",
    "host",
    "tls",
    "insecure",
)


def accepted_keys() -> list[str]:
    """Every key path the config file may hold, as docs/configuration.md names them:
    `switch.tls.ca`, `host.prefix_len`, `vip.NAME.backend.weight`, `qos.port.N.limit`, ...
    (a table's own path included: `vip.NAME.health`)."""
    health = [f.name for f in fields(HealthSettings)]
    tables: list[tuple[str, tuple[str, ...] | list[str]]] = [
        ("", TOP_KEYS),
        ("switch", SWITCH_KEYS),
        ("switch.tls", TLS_KEYS),
        ("host", HOST_KEYS),
        ("vip", ("NAME",)),
        ("vip.NAME", VIP_KEYS),
        ("vip.NAME.backend", BACKEND_KEYS),
        ("vip.NAME.health", health),
        ("metrics", METRICS_KEYS),
        ("tier", TIER_KEYS),
        ("tier.balancer", BALANCER_KEYS),
        ("tier.balancer.tls", TLS_KEYS),
        ("tier.balancer.host", HOST_KEYS),
        ("qos", qos.TOP_KEYS),
        ("qos.port", ("N",)),
        ("qos.port.N", qos.port_keys()),
    ]
    return sorted({f"{where}.{k}" if where else k for where, keys in tables for k in keys})


def load(path: str | os.PathLike[str]) -> Config:
    """Read and validate a config file; raise ConfigError with one line on any problem."""
    src = str(path)
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if mode & stat.S_IWOTH:
                raise ConfigError(
                    f"{src}: writable by others (mode {stat.S_IMODE(mode):04o}): anyone on "
                    f"this host could change what the switch does; run chmod o-w {src}"
                )
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{src}: file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{src}: not valid TOML: {e}") from None
    return parse(data, src)


def parse(data: dict[str, Any], source: str = "<config>") -> Config:
    """Turn decoded TOML into a Config valid as an intent."""
    _only(data, TOP_KEYS, source, "")
    sw = _switch(data.get("switch", {}), source, "switch")
    hosts = tuple(
        parse_host(h, source, f"host[{i}]") for i, h in enumerate(_list(data, "host", source, ""))
    )
    vips_raw = data.get("vip", {})
    if not isinstance(vips_raw, dict):
        raise ConfigError(f"{source}: vip: must be a table of named VIPs ([vip.NAME])")
    vips = tuple(parse_vip(name, v, source, sw.mac) for name, v in vips_raw.items())
    tier, announce, ttl = _tier(data.get("tier", {}), source, sw)
    cfg = Config(
        switch=sw,
        hosts=hosts,
        vips=vips,
        source=source,
        tier=tier,
        tier_announce=announce,
        tier_state_ttl_s=ttl,
        metrics=_metrics(data.get("metrics"), source),
        qos=qos.parse(data["qos"], source) if "qos" in data else None,
    )
    validate(cfg)
    for name, member in switch_configs(cfg):
        where = "switch" if name == "switch" else f"tier.balancer {name!r}"
        _refuse_clear_text(member.switch, source, where)
    return cfg


def is_loopback(address: str) -> bool:
    """Whether HOST:PORT names this host's loopback (localhost, 127/8, ::1)."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost: it may resolve anywhere


def _refuse_clear_text(sw: SwitchConfig, src: str, where: str) -> None:
    """P4Runtime in clear text only to this host, unless the config says `insecure`."""
    if sw.tls is None and not sw.insecure and not is_loopback(sw.address):
        raise ConfigError(
            f"{src}: {where}.address: {sw.address} is not a loopback address and P4Runtime "
            f"would be clear text: give {where}.tls = {{ ca = ..., cert = ..., key = ... }} "
            f"(or insecure = true to accept that anyone on the network can program it)"
        )


def _metrics(t: Any, src: str) -> MetricsSettings | None:
    """`[metrics]`: listen (an IP address or localhost, and a port), insecure, history_s. The
    metrics and the stats page have no authentication: a listen address other than loopback
    is refused unless `insecure = true` says the operator accepts that."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: metrics: must be a table ([metrics])")
    _only(t, METRICS_KEYS, src, "metrics")
    d = MetricsSettings()
    listen = _get(t, "listen", str, src, "metrics", d.listen)
    host, sep, port = listen.rpartition(":")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ok_host = bare == "localhost" or bool(ipaddress.ip_address(bare))
    except ValueError:
        ok_host = False
    if not sep or not ok_host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{src}: metrics.listen: expected IP:PORT (an address of this host, e.g. "
            f"127.0.0.1:9100 or [::1]:9100), got {listen!r}"
        )
    insecure = _get(t, "insecure", bool, src, "metrics", False)
    if not insecure and not is_loopback(listen):
        raise ConfigError(
            f"{src}: metrics.listen: {listen} is not a loopback address and the metrics and "
            f"stats page have no authentication: listen on 127.0.0.1 (scrape through a proxy "
            f"that authenticates) or set metrics.insecure = true to let anyone on the network "
            f"read them"
        )
    history = _range(
        _get(t, "history_s", int, src, "metrics", d.history_s), 30, 3600, src, "metrics.history_s"
    )
    return MetricsSettings(listen=listen, insecure=insecure, history_s=history)


def _tls(t: Any, src: str, where: str) -> TlsSettings | None:
    """`tls = { ca, cert, key, server_name }`: files resolved against the config's folder,
    each one checked to exist now (a typo fails here, not at the first connection)."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ConfigError(
            f"{src}: {where}.tls: must be a table {{ ca = ..., cert = ..., key = ... }}"
        )
    _only(t, TLS_KEYS, src, f"{where}.tls")
    base = Path(src).parent if Path(src).is_file() else Path.cwd()
    paths = {}
    for key in ("ca", "cert", "key"):
        value = _get(t, key, str, src, f"{where}.tls", None if key == "ca" else "")
        if not value:
            paths[key] = ""
            continue
        p = Path(value).expanduser()
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise ConfigError(f"{src}: {where}.tls.{key}: no such file {p}")
        paths[key] = str(p)
    if bool(paths["cert"]) != bool(paths["key"]):
        raise ConfigError(f"{src}: {where}.tls: give cert and key together (or neither)")
    return TlsSettings(
        ca=paths["ca"],
        cert=paths["cert"],
        key=paths["key"],
        server_name=_get(t, "server_name", str, src, f"{where}.tls", ""),
    )


def _tier(
    t: Any, src: str, sw: SwitchConfig
) -> tuple[tuple[Balancer, ...], tuple[str, ...], float]:
    """`[tier]`: `announce` (prefixes every speaker announces besides the VIPs),
    `state_ttl_s`, and `[[tier.balancer]]` tables (name, address, device_id, mac, ports,
    speaker_netns, speaker_api, nexthop, nexthop6, drain, and `[[tier.balancer.host]]`)."""
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: tier: must be a table")
    _only(t, TIER_KEYS, src, "tier")
    announce = t.get("announce", [])
    if not isinstance(announce, list) or not all(isinstance(p, str) for p in announce):
        raise ConfigError(f"{src}: tier.announce: must be a list of prefixes")
    announce = [_prefix(p, src) for p in announce]
    ttl = t.get("state_ttl_s", 3600.0)
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 1 <= ttl <= 86400:
        raise ConfigError(f"{src}: tier.state_ttl_s: must be a number of seconds, 1..86400")
    out = []
    for i, b in enumerate(_list(t, "balancer", src, "tier")):
        where = f"tier.balancer[{i}]"
        _only(b, BALANCER_KEYS, src, where)
        one = _switch(
            {k: b[k] for k in ("address", "device_id", "mac", "ports", "tls", "insecure") if k in b}
            | {"election_id": sw.election_id},
            src,
            where,
        )
        hosts = tuple(
            parse_host(h, src, f"{where}.host[{k}]")
            for k, h in enumerate(_list(b, "host", src, where))
        )
        nexthop = _get(b, "nexthop", str, src, where, "")
        nexthop6 = _get(b, "nexthop6", str, src, where, "")
        out.append(
            Balancer(
                name=_name(_get(b, "name", str, src, where), src, f"{where}.name"),
                address=one.address,
                device_id=one.device_id,
                mac=one.mac,
                ports=one.ports,
                hosts=hosts,
                speaker_netns=_get(b, "speaker_netns", str, src, where, ""),
                speaker_api=_get(b, "speaker_api", str, src, where, "127.0.0.1:50051"),
                nexthop=_ipv4(nexthop, src, f"{where}.nexthop") if nexthop else "",
                nexthop6=_ipv6(nexthop6, src, f"{where}.nexthop6") if nexthop6 else "",
                drain=_get(b, "drain", bool, src, where, False),
                tls=one.tls,
                insecure=one.insecure,
            )
        )
    for key in ("name", "address"):
        values = [getattr(b, key) for b in out]
        dup = next((v for v in values if values.count(v) > 1), None)
        if dup is not None:
            raise ConfigError(f"{src}: tier.balancer: two balancers have {key} {dup!r}")
    return tuple(out), tuple(announce), float(ttl)


def _only(table: dict[str, Any], allowed: tuple[str, ...], src: str, where: str) -> None:
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
    if typ is bool and not isinstance(value, bool):
        raise ConfigError(f"{src}: {where}.{key}: must be true or false, got {value!r}")
    return value


def _ipv4(value: str, src: str, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        pass
    raise ConfigError(f"{src}: {where}: not an IPv4 address: {value!r}")


def _ipv6(value: str, src: str, where: str) -> str:
    """An IPv6 address in its canonical text (compressed, lower case)."""
    try:
        return str(ipaddress.IPv6Address(value))
    except ValueError:
        raise ConfigError(f"{src}: {where}: not an IPv6 address: {value!r}") from None


def _prefix(value: str, src: str) -> str:
    """A `tier.announce` prefix: IPv4 as written; IPv6 in its canonical text, as the
    speaker lists what it announces (`::/0`, not `0::0/0`)."""
    try:
        net = ipaddress.ip_network(value)
    except ValueError:
        raise ConfigError(
            f"{src}: tier.announce: {value!r} is not an IPv4 or IPv6 prefix"
        ) from None
    return value if net.version == 4 else str(net)


def _ip(value: str, src: str, where: str) -> str:
    """An IPv4 or IPv6 address, in its canonical text (IPv6 compressed, lower case)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ConfigError(f"{src}: {where}: not an IPv4 or IPv6 address: {value!r}") from None


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


def _switch(t: Any, src: str, where: str) -> SwitchConfig:
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: switch: must be a table")
    _only(t, SWITCH_KEYS, src, where)
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
        tls=_tls(t.get("tls"), src, where),
        insecure=_get(t, "insecure", bool, src, where, False),
    )


def parse_host(t: dict[str, Any], src: str, where: str) -> Host:
    """A host's table: its address IPv4 or IPv6, its prefix at most that address's width."""
    _only(t, HOST_KEYS, src, where)
    address = _ip(_get(t, "address", str, src, where), src, f"{where}.address")
    bits = address_bits(address)
    return Host(
        name=_name(_get(t, "name", str, src, where), src, f"{where}.name"),
        address=address,
        mac=_mac(_get(t, "mac", str, src, where), src, f"{where}.mac"),
        switch_port=_range(
            _get(t, "switch_port", int, src, where), 0, 510, src, f"{where}.switch_port"
        ),
        prefix_len=_range(
            _get(t, "prefix_len", int, src, where, bits), 0, bits, src, f"{where}.prefix_len"
        ),
    )


def parse_vip(name: str, t: Any, src: str, default_mac: str) -> Vip:
    where = f"vip.{name}"
    if not isinstance(t, dict):
        raise ConfigError(f"{src}: {where}: must be a table")
    _name(name, src, where)
    _only(t, VIP_KEYS, src, where)
    protocol = _get(t, "protocol", str, src, where, "tcp").lower()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{src}: {where}.protocol: {protocol!r} is not one of {PROTOCOLS}")
    # Which algorithms exist is the compiled program's business (p4lb.pipeline.capacity).
    algorithm = _get(t, "algorithm", str, src, where, "wrr").lower()
    mode = _get(t, "mode", str, src, where, "nat").lower()
    if mode not in MODES:
        raise ConfigError(f"{src}: {where}.mode: {mode!r} is not one of {MODES}")
    backends = tuple(
        parse_backend(b, src, f"{where}.backend[{i}]")
        for i, b in enumerate(_list(t, "backend", src, f"{where}."))
    )
    return Vip(
        name=name,
        address=_ip(_get(t, "address", str, src, where), src, f"{where}.address"),
        protocol=protocol,
        port=_range(_get(t, "port", int, src, where), 1, 65535, src, f"{where}.port"),
        algorithm=algorithm,
        mac=_mac(_get(t, "mac", str, src, where, default_mac), src, f"{where}.mac"),
        backends=backends,
        health=_health(t, src, where),
        choices=parse_choices(t.get("choices", "all"), src, f"{where}.choices"),
        mode=mode,
    )


def parse_choices(value: object, src: str, where: str) -> int:
    """A VIP's `choices`: "all" (CHOICES_ALL) or a number of candidates, 2 or more. How many
    a slot can hold is the compiled program's business (p4lb.pipeline.capacity)."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return CHOICES_ALL
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ConfigError(f'{src}: {where}: {value!r} is not "all" or a whole number >= 2')
    return value


def _health(t: dict[str, Any], src: str, where: str) -> HealthSettings | None:
    """The VIP's `[vip.NAME.health]` table, checked key by key (None when absent)."""
    if "health" not in t:
        return None
    table = t["health"]
    if not isinstance(table, dict):
        raise ConfigError(f"{src}: {where}.health: must be a table ([{where}.health])")
    if str(t.get("protocol", "tcp")).lower() != "tcp":
        raise ConfigError(f"{src}: {where}.health: checks connect over TCP; this VIP is not tcp")
    return parse_health_settings(table, src, f"{where}.health")


def parse_backend(t: dict[str, Any], src: str, where: str) -> Backend:
    _only(t, BACKEND_KEYS, src, where)
    address = _ip(_get(t, "address", str, src, where), src, f"{where}.address")
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


def parse_health_settings(table: Mapping[str, Any], source: str, where: str) -> HealthSettings:
    """Validate a decoded `[vip.NAME.health]` table (`where` is e.g. "vip.web.health")."""
    known = {f.name: f.type for f in fields(HealthSettings)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(
                f"{source}: {where}.{key}: unknown key (expected one of {sorted(known)})"
            )
        want = known[key]
        if want == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        ok = {
            "float": isinstance(value, float),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "str": isinstance(value, str),
        }[str(want)]
        if not ok:
            raise ConfigError(f"{source}: {where}.{key}: must be a {want}, got {value!r}")
        values[key] = value
    try:
        return HealthSettings(**values)
    except ValueError as e:
        raise ConfigError(f"{source}: {where}.{e}") from None
