"""`p4lb`: the command-line tool. Every user error ends in one line and exit status 1."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable

from p4lb import config as configmod
from p4lb import intent
from p4lb.config import ALGORITHMS, PROTOCOLS, Backend, Config, ConfigError, Limits, Vip

DEFAULT_CONFIG = os.environ.get("P4LB_CONFIG", "p4lb.toml")


def _limits() -> Limits:
    from p4lb.p4info import schema

    try:
        return schema().limits()
    except (OSError, KeyError):
        return Limits()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4lb", description="P4 Layer-4 load balancer controller")
    p.add_argument(
        "-c",
        "--config",
        default=DEFAULT_CONFIG,
        help=f"config file (default {DEFAULT_CONFIG}; env P4LB_CONFIG)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("check", help="validate the config; touch nothing")
    a = sub.add_parser("apply", help="program the switch to match the config")
    a.add_argument("--dry-run", action="store_true", help="print the writes, send none")

    w = sub.add_parser("weight", help="change a backend's weight").add_subparsers(
        dest="action", required=True
    )
    ws = w.add_parser("set")
    ws.add_argument("vip")
    ws.add_argument("backend")
    ws.add_argument("weight", type=int)

    b = sub.add_parser("backend", help="add, remove or drain a backend").add_subparsers(
        dest="action", required=True
    )
    ba = b.add_parser("add")
    ba.add_argument("vip")
    ba.add_argument("name")
    ba.add_argument("--address", required=True)
    ba.add_argument("--port", type=int, required=True)
    ba.add_argument("--weight", type=int, default=1)
    ba.add_argument("--mac", required=True)
    ba.add_argument("--switch-port", type=int, required=True)
    for name in ("remove", "drain"):
        x = b.add_parser(name)
        x.add_argument("vip")
        x.add_argument("name")

    al = sub.add_parser("algorithm", help="change a VIP's algorithm").add_subparsers(
        dest="action", required=True
    )
    als = al.add_parser("set")
    als.add_argument("vip")
    als.add_argument("algorithm", choices=ALGORITHMS)

    v = sub.add_parser("vip", help="add or remove a VIP").add_subparsers(
        dest="action", required=True
    )
    va = v.add_parser("add")
    va.add_argument("name")
    va.add_argument("--address", required=True)
    va.add_argument("--port", type=int, required=True)
    va.add_argument("--protocol", choices=PROTOCOLS, default="tcp")
    va.add_argument("--algorithm", choices=ALGORITHMS, default="wrr")
    va.add_argument("--mac", default=None)
    va.add_argument(
        "--backend",
        action="append",
        default=[],
        metavar="NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT",
        help="a backend (repeatable)",
    )
    vr = v.add_parser("remove")
    vr.add_argument("name")

    s = sub.add_parser("stats", help="per-backend connections, shares, Jain's index, drops")
    s.add_argument("--json", action="store_true")
    s.add_argument(
        "--watch", type=float, default=0.0, metavar="SECONDS", help="repeat every SECONDS"
    )
    s.add_argument("--count", type=int, default=0, help="with --watch: stop after N rounds")

    r = sub.add_parser("run", help="the long-running controller (digests, aging, restarts)")
    r.add_argument("--duration", type=float, default=None, help="stop after SECONDS")
    return p


def _parse_backend(text: str) -> Backend:
    try:
        name, rest = text.split("=", 1)
        addr, weight, mac, sport = rest.split(",")
        host, port = addr.rsplit(":", 1)
        return Backend(
            name=name,
            address=host,
            port=int(port),
            weight=int(weight),
            mac=mac,
            switch_port=int(sport),
        )
    except ValueError:
        msg = f"--backend {text!r}: expected NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT"
        raise ConfigError(msg) from None


def _edit(args: argparse.Namespace, cfg: Config, limits: Limits) -> Config:
    """The config after the runtime change the command asks for (validated, pure)."""
    cmd, action = args.command, getattr(args, "action", None)
    if cmd == "weight":
        return intent.set_weight(cfg, args.vip, args.backend, args.weight, limits)
    if cmd == "backend" and action == "add":
        new = Backend(
            name=args.name,
            address=args.address,
            port=args.port,
            weight=args.weight,
            mac=args.mac,
            switch_port=args.switch_port,
        )
        _recheck(cfg, new)
        return intent.add_backend(cfg, args.vip, new, limits)
    if cmd == "backend" and action == "remove":
        return intent.remove_backend(cfg, args.vip, args.name, limits)
    if cmd == "backend" and action == "drain":
        return intent.drain(cfg, args.vip, args.name, limits)
    if cmd == "algorithm":
        return intent.set_algorithm(cfg, args.vip, args.algorithm, limits)
    if cmd == "vip" and action == "add":
        backends = tuple(_parse_backend(t) for t in args.backend)
        for nb in backends:
            _recheck(cfg, nb)
        fields = {
            "address": args.address,
            "port": args.port,
            "protocol": args.protocol,
            "algorithm": args.algorithm,
        }
        if args.mac:
            fields["mac"] = args.mac
        vip = configmod._vip(args.name, fields, "command line", cfg.switch.mac)  # noqa: SLF001
        vip = Vip(**{**vip.__dict__, "backends": backends})
        return intent.add_vip(cfg, vip, limits)
    if cmd == "vip" and action == "remove":
        return intent.remove_vip(cfg, args.name, limits)
    raise ConfigError(f"unknown command {cmd} {action}")


def _recheck(cfg: Config, b: Backend) -> None:
    """Field checks for a backend typed on the command line (same rules as the file)."""
    configmod._backend(  # noqa: SLF001 - one set of rules for file and CLI
        {
            "name": b.name,
            "address": b.address,
            "port": b.port,
            "weight": b.weight,
            "mac": b.mac,
            "switch_port": b.switch_port,
        },
        "command line",
        f"backend {b.name!r}",
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s p4lb %(message)s", stream=sys.stderr
    )
    try:
        return _dispatch(args)
    except ConfigError as e:
        print(f"p4lb: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001
        from p4lb.adapter import SwitchError

        if isinstance(e, SwitchError):
            print(f"p4lb: {e}", file=sys.stderr)
            return 1
        raise


def _dispatch(args: argparse.Namespace) -> int:
    limits = _limits()
    path = args.config

    def load() -> Config:
        return configmod.load(path, limits)

    cfg = load()
    if args.command == "check":
        n_backends = sum(len(v.backends) for v in cfg.vips)
        print(f"{path}: ok ({len(cfg.vips)} VIPs, {n_backends} backends)")
        return 0

    from p4lb import control

    if args.command == "apply":
        with control.connect(cfg, one_shot=True) as sw:
            result = control.apply(sw, cfg, dry_run=args.dry_run)
        for batch in result.batches:
            for u in batch:
                if args.dry_run:
                    print(
                        f"{u.op} {u.entry.table} {dict(u.entry.match)} -> {u.entry.action} "
                        f"{dict(u.entry.params)}"
                    )
        verb = "would write" if args.dry_run else "wrote"
        print(
            f"{path}: {verb} {result.writes} entries in {len(result.batches)} batches"
            + ("; pipeline pushed" if result.pipeline_pushed else "")
        )
        return 0

    if args.command == "stats":
        return _stats(args, cfg, load)

    if args.command == "run":
        return control.Controller(load).run(args.duration)

    new = _edit(args, cfg, limits)
    with control.connect(new, one_shot=True) as sw:
        result = control.apply(sw, new)
    configmod.save(new, path)  # only after the switch took it
    print(
        f"{path}: {args.command} {getattr(args, 'action', '')} done, "
        f"{result.writes} entries written"
    )
    return 0


def _stats(args: argparse.Namespace, cfg: Config, load: Callable[[], Config]) -> int:
    from p4lb import control
    from p4lb.stats import render

    rounds = 0
    with control.connect(cfg, one_shot=True) as sw:
        while True:
            st = control.read_stats(sw, cfg)
            print(json.dumps(st.to_json()) if args.json else render(st), flush=True)
            rounds += 1
            if args.watch <= 0 or (args.count and rounds >= args.count):
                return 0
            time.sleep(args.watch)
            cfg = load()
