"""`p4lb`: the command-line tool. Every user error ends in one line and exit status 1.

The command tree is data (`COMMANDS`): each leaf names its arguments and its handler.
Runtime changes (weight, backend, algorithm, vip) all go through `_runtime_change`: under
the config file's lock it re-reads the file, edits the intent, writes the switch (waiting,
bounded, to become primary), writes the file, and records a stats baseline. Exit status 0
means the change is on the switch and in the file."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from p4lb import config as configmod
from p4lb import intent
from p4lb.config import PROTOCOLS, Backend, Config, ConfigError, Limits

DEFAULT_CONFIG = os.environ.get("P4LB_CONFIG", "p4lb.toml")
DEFAULT_WAIT_S = 15.0


@dataclass(frozen=True)
class Command:
    """One leaf of the command tree: `p4lb <path...> ARGS`."""

    path: tuple[str, ...]
    help: str
    handler: Callable[[argparse.Namespace, Limits], int]
    arguments: Callable[[argparse.ArgumentParser, Limits], object] = lambda p, limits: None
    group_help: str = ""


# ---------------------------------------------------------------- runtime changes

Edit = Callable[[argparse.Namespace, Config, Limits], tuple[Config, tuple[str, ...]]]


def _runtime_change(edit: Edit) -> Callable[[argparse.Namespace, Limits], int]:
    """A handler that applies `edit` (which returns the new intent and the VIPs it changed)
    safely against concurrent operators."""

    def handler(args: argparse.Namespace, limits: Limits) -> int:
        from p4lb import control, health
        from p4lb.lock import config_lock

        path = args.config
        with config_lock(path, wait_s=args.wait):
            cfg = configmod.load(path, limits)  # inside the lock: the latest file
            new, vips = edit(args, cfg, limits)
            with control.connect(new, one_shot=True, wait_s=args.wait) as sw:
                # DOWN backends stay at weight 0 while `p4lb run` checks them.
                result = control.apply(sw, health.overlay_from_file(new, path))
                try:
                    configmod.save(new, path)  # only after the switch took it
                except OSError as e:
                    raise ConfigError(
                        f"{path}: the switch took the change but the file could not be "
                        f"written ({e.strerror}); `p4lb apply` returns the switch to the file"
                    ) from None
                _record_baselines(sw, new, vips, path)
        print(f"{path}: {' '.join(args.path)} done, {result.writes} entries written")
        return 0

    return handler


def _record_baselines(sw: Any, cfg: Config, vips: tuple[str, ...], path: str) -> None:
    """Remember the changed VIPs' counts now, so stats can show shares since the change.
    Best effort: the change itself has landed, so a failed read only costs the window."""
    from p4lb import control, stats
    from p4lb.adapter import SwitchError

    try:
        now = control.read_stats(sw, cfg)
    except SwitchError as e:
        logging.getLogger("p4lb").warning("stats baseline not recorded: %s", e)
        return
    baselines = stats.load_baselines(path)
    for name in vips:
        baselines[name] = stats.baseline_of(now.vip(name), time.time())
    for gone in [n for n in baselines if n not in {v.name for v in cfg.vips}]:
        del baselines[gone]
    try:
        stats.save_baselines(path, baselines)
    except OSError as e:
        logging.getLogger("p4lb").warning("stats baseline not recorded: %s", e)


def _set_weight(a: argparse.Namespace, cfg: Config, lim: Limits) -> tuple[Config, tuple[str, ...]]:
    return intent.set_weight(cfg, a.vip, a.backend, a.weight, lim), (cfg.vip(a.vip).name,)


def _drain(a: argparse.Namespace, cfg: Config, lim: Limits) -> tuple[Config, tuple[str, ...]]:
    return intent.drain(cfg, a.vip, a.name, lim), (cfg.vip(a.vip).name,)


def _remove_backend(
    a: argparse.Namespace, cfg: Config, lim: Limits
) -> tuple[Config, tuple[str, ...]]:
    return intent.remove_backend(cfg, a.vip, a.name, lim), (cfg.vip(a.vip).name,)


def _add_backend(a: argparse.Namespace, cfg: Config, lim: Limits) -> tuple[Config, tuple[str, ...]]:
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
    return intent.add_backend(cfg, a.vip, new, lim), (cfg.vip(a.vip).name,)


def _set_algorithm(
    a: argparse.Namespace, cfg: Config, lim: Limits
) -> tuple[Config, tuple[str, ...]]:
    return intent.set_algorithm(cfg, a.vip, a.algorithm, lim), (cfg.vip(a.vip).name,)


def _add_vip(a: argparse.Namespace, cfg: Config, lim: Limits) -> tuple[Config, tuple[str, ...]]:
    fields: dict[str, Any] = {
        "address": a.address,
        "port": a.port,
        "protocol": a.protocol,
        "algorithm": a.algorithm,
    }
    if a.mac:
        fields["mac"] = a.mac
    vip = configmod.parse_vip(a.name, fields, "command line", cfg.switch.mac, lim)
    vip = replace(vip, backends=tuple(_parse_backend_option(t) for t in a.backend))
    return intent.add_vip(cfg, vip, lim), (vip.name,)


def _remove_vip(a: argparse.Namespace, cfg: Config, lim: Limits) -> tuple[Config, tuple[str, ...]]:
    return intent.remove_vip(cfg, a.name, lim), ()


def _backend_from_fields(fields: dict[str, Any]) -> Backend:
    """A backend typed on the command line, under the same rules as the file."""
    return configmod.parse_backend(fields, "command line", f"backend {fields['name']!r}")


def _parse_backend_option(text: str) -> Backend:
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


# ---------------------------------------------------------------- other commands


def _check(args: argparse.Namespace, limits: Limits) -> int:
    cfg = configmod.load(args.config, limits)
    n_backends = sum(len(v.backends) for v in cfg.vips)
    print(f"{args.config}: ok ({len(cfg.vips)} VIPs, {n_backends} backends)")
    return 0


def _apply(args: argparse.Namespace, limits: Limits) -> int:
    from p4lb import control, health
    from p4lb.lock import config_lock

    with config_lock(args.config, wait_s=args.wait):
        cfg = health.overlay_from_file(configmod.load(args.config, limits), args.config)
        with control.connect(cfg, one_shot=True, wait_s=args.wait) as sw:
            result = control.apply(sw, cfg, dry_run=args.dry_run)
    if args.dry_run:
        for batch in result.batches:
            for u in batch:
                print(
                    f"{u.op} {u.entry.table} {dict(u.entry.match)} -> {u.entry.action} "
                    f"{dict(u.entry.params)}"
                )
    verb = "would write" if args.dry_run else "wrote"
    print(
        f"{args.config}: {verb} {result.writes} entries in {len(result.batches)} batches"
        + ("; pipeline pushed" if result.pipeline_pushed else "")
    )
    return 0


def _stats(args: argparse.Namespace, limits: Limits) -> int:
    from p4lb import control, health, stats

    cfg = configmod.load(args.config, limits)
    rounds = 0
    previous: tuple[float, stats.Stats] | None = None
    with control.connect_reader(cfg) as sw:
        while True:
            lifetime = control.read_stats(sw, cfg)
            now = time.monotonic()
            shown = lifetime
            if not args.lifetime:
                baselines = stats.load_baselines(args.config)
                shown = replace(
                    lifetime,
                    vips=tuple(
                        stats.since(v, baselines[v.name]) if v.name in baselines else v
                        for v in lifetime.vips
                    ),
                )
            if previous is not None:
                before = {v.name: v for v in previous[1].vips}
                shown = replace(
                    shown,
                    vips=tuple(
                        stats.with_rates(v, before[v.name], now - previous[0])
                        if v.name in before
                        else v
                        for v in shown.vips
                    ),
                )
            shown = stats.with_health(shown, health.load_state(args.config), time.time())
            print(json.dumps(shown.to_json()) if args.json else stats.render(shown), flush=True)
            previous = (now, lifetime)
            rounds += 1
            if args.watch <= 0 or (args.count and rounds >= args.count):
                return 0
            time.sleep(args.watch)
            cfg = configmod.load(args.config, limits)


def _run(args: argparse.Namespace, limits: Limits) -> int:
    from p4lb.daemon import Controller

    def load() -> Config:
        return configmod.load(args.config, limits)

    load()  # a bad config is a one-line error before anything starts
    return Controller(load, config_path=args.config).run(args.duration)


_drain_change = _runtime_change(_drain)
DRAIN_TIMEOUT_S = 60.0
DRAIN_POLL_S = 0.5


def _backend_drain(args: argparse.Namespace, limits: Limits) -> int:
    """Drain (weight 0), then report the backend's open connections; with --wait, poll
    (bounded in time and count) until none is left, so `backend remove` cuts nothing."""
    from p4lb import control

    code = _drain_change(args, limits)
    if code:
        return code
    cfg = configmod.load(args.config, limits)
    vip = cfg.vip(args.vip)
    who = f"backend {args.name} of VIP {vip.name}"
    started = time.monotonic()
    deadline = started + args.timeout
    polls = int(args.timeout / DRAIN_POLL_S) + 2  # the deadline ends it first; a cap anyway
    with control.connect_reader(cfg) as sw:
        active = control.active_connections(sw, cfg, vip.name, args.name)
        print(f"{who}: {active} active connections")
        for _ in range(polls):
            if not args.wait_drained or active == 0:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(DRAIN_POLL_S, left))
            active = control.active_connections(sw, cfg, vip.name, args.name)
    if not args.wait_drained:
        return 0
    if active:
        print(
            f"p4lb: {who}: still {active} active connections after {args.timeout:g} s "
            "(the drain stays in place; wait longer or remove it anyway)",
            file=sys.stderr,
        )
        return 1
    print(f"{who}: drained (0 active connections) after {time.monotonic() - started:.1f} s")
    return 0


def _drain_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    _vip_backend(p, limits)
    p.add_argument(
        "--wait",
        dest="wait_drained",
        action="store_true",
        help="then wait until the backend has no active connections",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=DRAIN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"with --wait: give up (exit 1) after SECONDS (default {DRAIN_TIMEOUT_S:.0f})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in 0..86400")
    return value


def _shell(args: argparse.Namespace, limits: Limits) -> int:
    from p4lb import shell

    cfg = configmod.load(args.config, limits)
    return shell.open_shell(cfg, primary=args.primary, election_id=args.election_id)


# ---------------------------------------------------------------- the command tree


def _vip_backend(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("vip")
    p.add_argument("name")


def _weight_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("vip")
    p.add_argument("backend")
    p.add_argument("weight", type=int)


def _backend_add_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    _vip_backend(p, limits)
    p.add_argument("--address", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--weight", type=int, default=1)
    p.add_argument("--mac", required=True)
    p.add_argument("--switch-port", type=int, required=True)


def _algorithm_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("vip")
    p.add_argument("algorithm", choices=limits.algorithms)


def _vip_add_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("name")
    p.add_argument("--address", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--protocol", choices=PROTOCOLS, default="tcp")
    p.add_argument("--algorithm", choices=limits.algorithms, default="wrr")
    p.add_argument("--mac", default=None)
    p.add_argument(
        "--backend",
        action="append",
        default=[],
        metavar="NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT",
        help="a backend (repeatable)",
    )


def _stats_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--lifetime",
        action="store_true",
        help="totals since the switch started (default: since each VIP's last runtime change)",
    )
    p.add_argument(
        "--watch",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="repeat every SECONDS, with connections per second",
    )
    p.add_argument("--count", type=int, default=0, help="with --watch: stop after N rounds")


def _shell_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument(
        "--primary",
        action="store_true",
        help="take the switch as primary (election id above every p4lb writer) to write",
    )
    p.add_argument(
        "--election-id", type=int, default=None, help="as reader: election id (default 1)"
    )


COMMANDS: tuple[Command, ...] = (
    Command(("check",), "validate the config; touch nothing", _check),
    Command(
        ("apply",),
        "program the switch to match the config",
        _apply,
        lambda p, lim: p.add_argument(
            "--dry-run", action="store_true", help="print the writes, send none"
        ),
    ),
    Command(
        ("weight", "set"),
        "set a backend's weight",
        _runtime_change(_set_weight),
        _weight_args,
        "change a backend's weight",
    ),
    Command(
        ("backend", "add"),
        "add a backend to a VIP",
        _runtime_change(_add_backend),
        _backend_add_args,
        "add, remove or drain a backend",
    ),
    Command(
        ("backend", "remove"), "remove a backend", _runtime_change(_remove_backend), _vip_backend
    ),
    Command(
        ("backend", "drain"),
        "weight 0: no new connections, open ones stay; reports (--wait: waits for) them",
        _backend_drain,
        _drain_args,
    ),
    Command(
        ("algorithm", "set"),
        "set a VIP's algorithm",
        _runtime_change(_set_algorithm),
        _algorithm_args,
        "change a VIP's algorithm",
    ),
    Command(
        ("vip", "add"),
        "add a VIP",
        _runtime_change(_add_vip),
        _vip_add_args,
        "add or remove a VIP",
    ),
    Command(
        ("vip", "remove"),
        "remove a VIP",
        _runtime_change(_remove_vip),
        lambda p, lim: p.add_argument("name"),
    ),
    Command(
        ("stats",),
        "per-backend connections, shares, Jain's index, drops",
        _stats,
        _stats_args,
    ),
    Command(
        ("run",),
        "the long-running controller (digests, aging, restarts)",
        _run,
        lambda p, lim: p.add_argument(
            "--duration", type=float, default=None, help="stop after SECONDS"
        ),
    ),
    Command(
        ("shell",),
        "p4runtime-shell on the switch (a reader unless --primary)",
        _shell,
        _shell_args,
    ),
)


def build_parser(limits: Limits, commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4lb", description="P4 Layer-4 load balancer controller")
    p.add_argument(
        "-c",
        "--config",
        default=DEFAULT_CONFIG,
        help=f"config file (default {DEFAULT_CONFIG}; env P4LB_CONFIG)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_S,
        metavar="SECONDS",
        help=f"how long a change waits for the config lock and to become primary "
        f"(default {DEFAULT_WAIT_S:.0f})",
    )
    groups: dict[tuple[str, ...], Any] = {(): p.add_subparsers(dest="command", required=True)}
    for cmd in commands:
        for depth in range(1, len(cmd.path)):
            prefix = cmd.path[:depth]
            if prefix not in groups:
                parent = groups[prefix[:-1]]
                sub = parent.add_parser(prefix[-1], help=cmd.group_help or None)
                groups[prefix] = sub.add_subparsers(dest=f"action{depth}", required=True)
        leaf = groups[cmd.path[:-1]].add_parser(cmd.path[-1], help=cmd.help)
        cmd.arguments(leaf, limits)
        leaf.set_defaults(handler=cmd.handler, path=cmd.path)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s p4lb %(message)s", stream=sys.stderr
    )
    from p4lb.adapter import SwitchError

    try:
        limits = configmod.compiled_limits()
    except OSError as e:
        print(f"p4lb: cannot read the compiled P4Info: {e}", file=sys.stderr)
        return 1
    args = build_parser(limits).parse_args(argv)
    try:
        return int(args.handler(args, limits))
    except (ConfigError, SwitchError) as e:
        print(f"p4lb: {e}", file=sys.stderr)
        return 1
