"""Runtime changes from the command line (weight, backend, algorithm, vip).

Each goes through `runtime_change`: under the config file's lock it re-reads the file, edits
the intent, checks the compiled program can hold it, writes the switch (waiting, bounded, to
become primary), writes the file, and records a stats baseline. Exit status 0 means the change
is on the switch and in the file."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from p4lb.intent import edits, qos, reader, writer
from p4lb.intent.lock import config_lock
from p4lb.intent.model import Backend, Config, ConfigError, switch_configs
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import Limits
from p4lb.service import operations
from p4lb.service.health.overlay import overlay_from_file
from p4lb.stats import baselines
from p4lb.stats.windows import baseline_of
from p4lb.switch.client import Switch
from p4lb.switch.errors import SwitchError

log = logging.getLogger("p4lb")

# An edit returns the new intent and the VIPs it changed (their stats windows restart).
Edit = Callable[[argparse.Namespace, Config], tuple[Config, tuple[str, ...]]]
Handler = Callable[[argparse.Namespace, Limits], int]


def runtime_change(edit: Edit) -> Handler:
    """A handler that applies `edit` safely against concurrent operators."""

    def handler(args: argparse.Namespace, limits: Limits) -> int:
        path = args.config
        with config_lock(path, wait_s=args.wait):
            cfg = capacity.load(path, limits)  # inside the lock: the latest file
            new, vips = edit(args, cfg)
            capacity.check(new, limits)
            if new.tier:
                return _tier_change(args, new, vips)
            with operations.connect(new, one_shot=True, wait_s=args.wait) as sw:
                # DOWN backends stay at weight 0 while `p4lb run` checks them.
                result = operations.apply(sw, overlay_from_file(new, path))
                # The window before the file: whoever reads the new weights (after the
                # file) also reads the window they started.
                _record_baselines(sw, new, vips, path)
                _save(new, path)  # only after the switch took it
        print(f"{path}: {' '.join(args.path)} done, {result.writes} entries written")
        return 0

    return handler


def _save(new: Config, path: str) -> None:
    try:
        writer.save(new, path)
    except OSError as e:
        raise ConfigError(
            f"{path}: the switch took the change but the file could not be "
            f"written ({e.strerror}); `p4lb apply` returns the switch to the file"
        ) from None


def _tier_change(args: argparse.Namespace, new: Config, vips: tuple[str, ...]) -> int:
    """The change on every balancer, one line each; the file is written once any took it
    (`p4lb run` brings the others in line when they return, before they announce again);
    exit 1 when one did not."""
    path = args.config
    took: list[str] = []
    for name, scfg in switch_configs(new):
        try:
            with operations.connect(scfg, one_shot=True, wait_s=args.wait) as sw:
                result = operations.apply(sw, overlay_from_file(scfg, path))
                if not took:
                    _record_baselines(sw, scfg, vips, path)
                    _save(new, path)
            took.append(name)
            print(f"{path}: {name}: {' '.join(args.path)} done, {result.writes} entries written")
        except SwitchError as e:
            print(f"{path}: {name}: not changed: {e}")
    if not took:
        raise SwitchError("no balancer of the tier took the change; the file is unchanged")
    return 0 if len(took) == len(new.tier) else 1


def _record_baselines(sw: Switch, cfg: Config, vips: tuple[str, ...], path: str) -> None:
    """Remember the changed VIPs' counts now, so stats can show shares since the change.
    Best effort: the change itself has landed, so a failed read only costs the window."""
    try:
        now = operations.read_stats(sw, cfg)
    except SwitchError as e:
        log.warning("stats baseline not recorded: %s", e)
        return
    kept = baselines.load_baselines(path)
    for name in vips:
        kept[name] = baseline_of(now.vip(name), time.time())
    for gone in [n for n in kept if n not in {v.name for v in cfg.vips}]:
        del kept[gone]
    try:
        baselines.save_baselines(path, kept)
    except OSError as e:
        log.warning("stats baseline not recorded: %s", e)


def set_weight(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    return edits.set_weight(cfg, a.vip, a.backend, a.weight), (cfg.vip(a.vip).name,)


def drain(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    return edits.drain(cfg, a.vip, a.name), (cfg.vip(a.vip).name,)


def remove_backend(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    return edits.remove_backend(cfg, a.vip, a.name), (cfg.vip(a.vip).name,)


def add_backend(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    new = _backend_from_fields(
        {
            "name": a.name,
            "address": a.address,
            "port": a.port,
            "weight": a.weight,
            "mac": a.mac,
            "switch_port": a.switch_port,
        }
    )
    return edits.add_backend(cfg, a.vip, new), (cfg.vip(a.vip).name,)


def set_algorithm(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    return edits.set_algorithm(cfg, a.vip, a.algorithm, a.choices), (cfg.vip(a.vip).name,)


def add_vip(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    fields: dict[str, Any] = {
        "address": a.address,
        "port": a.port,
        "protocol": a.protocol,
        "algorithm": a.algorithm,
        "mode": a.mode,
    }
    if a.mac:
        fields["mac"] = a.mac
    vip = reader.parse_vip(a.name, fields, "command line", cfg.switch.mac)
    vip = replace(vip, backends=tuple(parse_backend_option(t) for t in a.backend))
    return edits.add_vip(cfg, vip), (vip.name,)


def remove_vip(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    return edits.remove_vip(cfg, a.name), ()


def _backend_from_fields(fields: dict[str, Any]) -> Backend:
    """A backend typed on the command line, under the same rules as the file."""
    return reader.parse_backend(fields, "command line", f"backend {fields['name']!r}")


def parse_backend_option(text: str) -> Backend:
    """`vip add`'s `--backend NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT`."""
    try:
        name, rest = text.split("=", 1)
        addr, weight, mac, sport = rest.split(",")
        host, port = addr.rsplit(":", 1)
        fields = {
            "name": name,
            "address": host,
            "port": int(port),
            "weight": int(weight),
            "mac": mac,
            "switch_port": int(sport),
        }
    except ValueError:
        msg = f"--backend {text!r}: expected NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT"
        raise ConfigError(msg) from None
    return _backend_from_fields(fields)


def qos_params(pairs: list[str], where: str) -> dict[str, Any]:
    """`KEY=VALUE` words as a port table: integers where the value is one."""
    out: dict[str, Any] = {}
    for word in pairs:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ConfigError(f"{where}: {word!r}: parameters are KEY=VALUE (e.g. rate_pps=1000)")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def set_qos(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    where = f"qos.port.{a.port}"
    fields = {"discipline": a.discipline, **qos_params(a.params, "command line")}
    return qos.with_port(cfg, qos.parse_port(a.port, fields, "command line", where)), ()


def remove_qos(a: argparse.Namespace, cfg: Config) -> tuple[Config, tuple[str, ...]]:
    return qos.without_port(cfg, a.port), ()
