"""The `p4lb` command tree as data: each leaf names its path, its arguments and its handler."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from p4lb.cli import changes, handlers
from p4lb.cli.changes import runtime_change
from p4lb.intent import reader
from p4lb.intent.model import DISCIPLINES, MODES, PROTOCOLS, ConfigError
from p4lb.pipeline.p4info import Limits


@dataclass(frozen=True)
class Command:
    """One leaf of the command tree: `p4lb <path...> ARGS`."""

    path: tuple[str, ...]
    help: str
    handler: Callable[[argparse.Namespace, Limits], int]
    arguments: Callable[[argparse.ArgumentParser, Limits], object] = lambda p, limits: None
    group_help: str = ""


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
        default=handlers.DRAIN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"with --wait: give up (exit 1) after SECONDS "
        f"(default {handlers.DRAIN_TIMEOUT_S:.0f})",
    )


def _choices(text: str) -> int:
    try:
        return reader.parse_choices(text, "command line", "--choices")
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in 0..86400")
    return value


def _algorithm_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("vip")
    p.add_argument("algorithm", choices=limits.algorithms)
    p.add_argument(
        "--choices",
        type=_choices,
        default=None,
        metavar="all|D",
        help="least-* algorithms: compare every active backend (all) or D drawn by weight "
        f"(2..{limits.max_candidates}); default: keep the VIP's setting",
    )


def _vip_add_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("name")
    p.add_argument("--address", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--protocol", choices=PROTOCOLS, default="tcp")
    p.add_argument("--algorithm", choices=limits.algorithms, default="wrr")
    p.add_argument("--mac", default=None)
    p.add_argument(
        "--mode",
        choices=MODES,
        default="nat",
        help="nat (default) or dsr: direct server return, the replies bypass the switch",
    )
    p.add_argument(
        "--backend",
        action="append",
        default=[],
        metavar="NAME=ADDR:PORT,WEIGHT,MAC,SWITCH_PORT",
        help="a backend (repeatable)",
    )


def _qos_set_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("port", type=int, help="the switch port")
    p.add_argument("discipline", choices=DISCIPLINES)
    p.add_argument(
        "params",
        nargs="*",
        metavar="KEY=VALUE",
        help="rate_pps (required), limit, flow_limit, host_limit, classifier=src|dst, "
        "class_rate_pps, target_us, interval_us (which ones: README, Queueing)",
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


def _run_args(p: argparse.ArgumentParser, limits: Limits) -> None:
    p.add_argument("--duration", type=float, default=None, help="stop after SECONDS")
    p.add_argument(
        "--standby",
        action="store_true",
        help="wait as a backup below [switch] election_id; take over when the primary's "
        "session ends",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="a standby's own metrics port ([metrics] listen's host; default: none served)",
    )


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
    Command(("check",), "validate the config; touch nothing", handlers.check),
    Command(
        ("apply",),
        "program the switch to match the config",
        handlers.apply,
        lambda p, lim: p.add_argument(
            "--dry-run", action="store_true", help="print the writes, send none"
        ),
    ),
    Command(
        ("weight", "set"),
        "set a backend's weight",
        runtime_change(changes.set_weight),
        _weight_args,
        "change a backend's weight",
    ),
    Command(
        ("backend", "add"),
        "add a backend to a VIP",
        runtime_change(changes.add_backend),
        _backend_add_args,
        "add, remove or drain a backend",
    ),
    Command(
        ("backend", "remove"),
        "remove a backend",
        runtime_change(changes.remove_backend),
        _vip_backend,
    ),
    Command(
        ("backend", "drain"),
        "weight 0: no new connections, open ones stay; reports (--wait: waits for) them",
        handlers.backend_drain,
        _drain_args,
    ),
    Command(
        ("algorithm", "set"),
        "set a VIP's algorithm",
        runtime_change(changes.set_algorithm),
        _algorithm_args,
        "change a VIP's algorithm",
    ),
    Command(
        ("vip", "add"),
        "add a VIP",
        runtime_change(changes.add_vip),
        _vip_add_args,
        "add or remove a VIP",
    ),
    Command(
        ("vip", "remove"),
        "remove a VIP",
        runtime_change(changes.remove_vip),
        lambda p, lim: p.add_argument("name"),
    ),
    Command(
        ("stats",),
        "per-backend connections, shares, Jain's index, drops",
        handlers.stats,
        _stats_args,
    ),
    Command(
        ("qos", "set"),
        "give a switch port a queueing discipline (its rate, limit and parameters)",
        runtime_change(changes.set_qos),
        _qos_set_args,
        "queueing disciplines on switch ports",
    ),
    Command(
        ("qos", "off"),
        "remove a port's discipline (its queue back to BMv2's default)",
        runtime_change(changes.remove_qos),
        lambda p, lim: p.add_argument("port", type=int),
    ),
    Command(
        ("qos", "show"),
        "each port's discipline, whether the switch holds it, drops by cause",
        handlers.qos_show,
        lambda p, lim: p.add_argument("--json", action="store_true"),
    ),
    Command(
        ("run",),
        "the long-running controller (digests, aging, restarts)",
        handlers.run,
        _run_args,
    ),
    Command(
        ("tier", "drain"),
        "a balancer of the tier stops announcing the VIPs (it stays programmed)",
        handlers.tier_drain,
        lambda p, lim: p.add_argument("name"),
        "drain a balancer of the tier, or bring it back",
    ),
    Command(
        ("tier", "restore"),
        "a drained balancer announces the VIPs again",
        handlers.tier_restore,
        lambda p, lim: p.add_argument("name"),
    ),
    Command(
        ("shell",),
        "p4runtime-shell on the switch (a reader unless --primary)",
        handlers.open_shell,
        _shell_args,
    ),
)
