"""Writing the intent back to its TOML file after a runtime change, keeping what the user
wrote: comments, order, layout and keys left at their defaults. Only values that differ
from the new intent are touched; VIPs, backends and hosts are matched by name."""

from __future__ import annotations

import os
import tempfile
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Table

from p4lb.intent import qos as qos_intent
from p4lb.intent.model import (
    CHOICES_ALL,
    CHOICES_DEFAULT,
    Backend,
    Config,
    HealthSettings,
    Host,
    MetricsSettings,
    SwitchConfig,
    TlsSettings,
)
from p4lb.intent.reader import parse_backend, parse_choices, parse_health_settings, parse_host

HEADER = (
    "# p4lb config. Runtime commands (p4lb weight/backend/vip/algorithm) update this file\n"
    "# in place so that `p4lb apply` never undoes them; comments are kept.\n"
)


def save(cfg: Config, path: str | os.PathLike[str]) -> None:
    """Write `cfg` to `path` atomically (temp file + rename), editing the existing file's
    document when there is one so the user's comments survive."""
    target = Path(path)
    try:
        doc = tomlkit.parse(target.read_text())
    except FileNotFoundError:
        doc = tomlkit.parse(HEADER)
    update(doc, cfg)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(tomlkit.dumps(doc))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(cfg: Config) -> str:
    """TOML text for a config from scratch; parse(tomllib.loads(dumps(c))) == c."""
    doc = tomlkit.parse(HEADER)
    update(doc, cfg)
    return tomlkit.dumps(doc)


def update(doc: tomlkit.TOMLDocument, cfg: Config) -> None:
    """Edit `doc` in place until it describes `cfg`."""
    sw = doc.get("switch")
    if not isinstance(sw, Table):
        sw = tomlkit.table()
        doc["switch"] = sw
    _set_fields(sw, _current_switch(sw), cfg.switch)
    _sync_tls(sw, cfg.switch.tls)
    if cfg.switch.ports and list(sw.get("ports", [])) != list(cfg.switch.ports):
        sw["ports"] = list(cfg.switch.ports)

    _sync_aot(doc, "host", cfg.hosts, _host_table, lambda t: parse_host(t, "", ""))

    vips = doc.get("vip")
    if not isinstance(vips, Table):
        vips = tomlkit.table(is_super_table=True)
        doc["vip"] = vips
    wanted = {v.name: v for v in cfg.vips}
    for name in [n for n in vips if n not in wanted]:
        del vips[name]
    for v in cfg.vips:
        t = vips.get(v.name)
        if not isinstance(t, Table):
            t = tomlkit.table()
            vips[v.name] = t
        current = {
            "address": t.get("address"),
            "protocol": t.get("protocol", "tcp"),
            "port": t.get("port"),
            "algorithm": t.get("algorithm", "wrr"),
            "mac": t.get("mac", cfg.switch.mac),
        }
        for key in current:
            value = getattr(v, key)
            if current[key] != value or (key in ("address", "port") and key not in t):
                t[key] = value
        if "mac" not in t and v.mac != cfg.switch.mac:
            t["mac"] = v.mac
        if str(t.get("mode", "nat")).lower() != v.mode:
            if v.mode == "nat":
                t.pop("mode")  # back to the default: implicit again
            else:
                t["mode"] = v.mode
        if parse_choices(t.get("choices", "all"), "", "") != v.choices:
            if v.choices == CHOICES_DEFAULT:
                t.pop("choices")  # back to the default: implicit again
            else:
                t["choices"] = "all" if v.choices == CHOICES_ALL else v.choices
        _sync_aot(t, "backend", v.backends, _backend_table, lambda b: parse_backend(b, "", ""))
        _sync_health(t, v.health)
    _sync_tier(doc, cfg)
    _sync_metrics(doc, cfg.metrics)
    _sync_qos(doc, cfg)


def _sync_metrics(doc: tomlkit.TOMLDocument, metrics: MetricsSettings | None) -> None:
    """Make `[metrics]` say `metrics`: keys left at their defaults stay implicit."""
    if metrics is None:
        if "metrics" in doc:
            del doc["metrics"]
        return
    t = doc.get("metrics")
    if not isinstance(t, Table):
        t = tomlkit.table()
        doc["metrics"] = t
    d = MetricsSettings()
    current = MetricsSettings(
        listen=str(t.get("listen", d.listen)),
        insecure=bool(t.get("insecure", d.insecure)),
        history_s=int(t.get("history_s", d.history_s)),
    )
    _set_fields(t, current, metrics)
    if "listen" not in t:  # where it listens is worth seeing in the file
        t["listen"] = metrics.listen


def _sync_qos(doc: tomlkit.TOMLDocument, cfg: Config) -> None:
    """Make `[qos]` say cfg's disciplines: a port's table rewritten only where it no longer
    reads back as the wanted discipline, gone ports dropped."""
    if cfg.qos is None:
        if "qos" in doc:
            del doc["qos"]
        return
    q = doc.get("qos")
    if not isinstance(q, Table):
        q = tomlkit.table()
        doc["qos"] = q
    if q.get("thrift_port", 9090) != cfg.qos.thrift_port:
        q["thrift_port"] = cfg.qos.thrift_port
    ports = q.get("port")
    if not isinstance(ports, Table):
        ports = tomlkit.table(is_super_table=True)
        q["port"] = ports
    wanted = {str(p.port): p for p in cfg.qos.ports}
    for name in [n for n in ports if n not in wanted]:
        del ports[name]
    for name, p in wanted.items():
        t = ports.get(name)
        if isinstance(t, Table) and qos_intent.parse_port(name, t, "", "") == p:
            continue
        if not isinstance(t, Table):
            t = tomlkit.table()
            ports[name] = t
        keys = qos_intent.to_table(p)
        for k in [k for k in t if k not in keys]:
            del t[k]
        for k, v in keys.items():
            if t.get(k) != v:
                t[k] = v


def _sync_tier(doc: tomlkit.TOMLDocument, cfg: Config) -> None:
    """Make `[tier]` say cfg's tier: its balancers matched by name (a balancer's fields set
    where they differ, e.g. `drain`), new ones appended, gone ones dropped."""
    if not cfg.tier and "tier" not in doc:
        return
    t = doc.get("tier")
    if not isinstance(t, Table):
        t = tomlkit.table()
        doc["tier"] = t
    if list(t.get("announce", [])) != list(cfg.tier_announce):
        t["announce"] = list(cfg.tier_announce)
    if t.get("state_ttl_s", 3600.0) != cfg.tier_state_ttl_s:
        t["state_ttl_s"] = cfg.tier_state_ttl_s
    aot = t.get("balancer")
    tables = {str(b.get("name")): b for b in aot} if isinstance(aot, AoT) else {}
    kept = []
    for b in cfg.tier:
        bt = tables.get(b.name) or tomlkit.table()
        for f in fields(b):
            value = getattr(b, f.name)
            if f.name == "tls":
                _sync_tls(bt, value)
                continue
            if f.name == "hosts":
                current = tuple(parse_host(h, "", "") for h in bt.get("host", []))
                if current != value:
                    bt["host"] = tomlkit.aot()
                    for h in value:
                        bt["host"].append(_host_table(h))
                continue
            if isinstance(value, tuple):
                value = list(value)
            default = f.default if f.default is not MISSING else None
            if bt.get(f.name, default) != value and not (
                value in ("", [], False) and f.name not in bt
            ):
                bt[f.name] = value
        kept.append(bt)
    if isinstance(aot, AoT) and [id(b) for b in aot] == [id(b) for b in kept]:
        return  # the same balancers in the same order: edited in place
    fresh = tomlkit.aot()
    for bt in kept:
        fresh.append(bt)
    if kept:
        t["balancer"] = fresh
    elif "balancer" in t:
        del t["balancer"]


def _sync_health(vip: Table, health: HealthSettings | None) -> None:
    """Make `[vip.NAME.health]` say `health`: keys left at their defaults stay implicit."""
    if health is None:
        if "health" in vip:
            del vip["health"]
        return
    t = vip.get("health")
    if not isinstance(t, Table):
        t = tomlkit.table()
        vip["health"] = t
    current = parse_health_settings(dict(t), "", "")
    _set_fields(t, current, health)


def _sync_tls(t: Table, tls: TlsSettings | None) -> None:
    """`tls` as an inline table when the file has none; one the file has stays as the user
    wrote it (relative paths included: no runtime change touches it)."""
    if tls is None:
        if "tls" in t:
            del t["tls"]
        return
    if "tls" in t:
        return
    inline = tomlkit.inline_table()
    for f in fields(tls):
        if getattr(tls, f.name):
            inline[f.name] = getattr(tls, f.name)
    t["tls"] = inline


def _current_switch(t: Table) -> SwitchConfig:
    d = SwitchConfig()
    return SwitchConfig(
        address=t.get("address", d.address),
        device_id=t.get("device_id", d.device_id),
        election_id=t.get("election_id", d.election_id),
        mac=str(t.get("mac", d.mac)).lower(),
        ports=tuple(t.get("ports", ())),
        insecure=bool(t.get("insecure", d.insecure)),
    )


def _set_fields(t: Table, current: Any, new: Any) -> None:
    """Assign each dataclass field of `new` that differs from `current` (what `t` says)."""
    for f in fields(new):
        if f.name in ("ports", "tls"):
            continue
        value = getattr(new, f.name)
        if getattr(current, f.name) != value:  # `current` has the defaults of absent keys
            t[f.name] = value


def _sync_aot(parent: Any, key: str, items: tuple[Any, ...], fresh: Any, current_of: Any) -> None:
    """Make the array of tables parent[key] hold `items` (by name): update the tables that
    exist, append new ones, drop the ones no longer wanted."""
    aot = parent.get(key)
    if not isinstance(aot, AoT):
        if not items:
            return
        aot = tomlkit.aot()
        parent[key] = aot
    by_name = {i.name: i for i in items}
    kept = []
    for t in list(aot):
        cur = current_of(t)
        if cur.name in by_name:
            _set_fields(t, cur, by_name.pop(cur.name))
            kept.append(t)
    have = {current_of(t).name for t in kept}
    for i in items:
        if i.name not in have:
            kept.append(fresh(i))
    if [id(t) for t in kept] != [id(t) for t in aot]:
        while len(aot):
            del aot[0]
        for t in kept:
            aot.append(t)
    if not items:
        del parent[key]


def _host_table(h: Host) -> Table:
    t = tomlkit.table()
    for f in fields(h):
        value = getattr(h, f.name)
        if f.name != "prefix_len" or value != h.address_bits:
            t[f.name] = value
    return t


def _backend_table(b: Backend) -> Table:
    t = tomlkit.table()
    for f in fields(b):
        t[f.name] = getattr(b, f.name)
    return t
