"""`p4lb`: the command-line tool's entry point. Every user error ends in one line and exit
status 1; the commands themselves are the table in p4lb.cli.commands."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from p4lb.cli.commands import COMMANDS, Command
from p4lb.intent.model import ConfigError
from p4lb.pipeline.p4info import Limits, compiled_limits
from p4lb.switch.errors import SwitchError

DEFAULT_WAIT_S = 15.0


def default_config() -> str:
    """The config file when `-c` is not given: $P4LB_CONFIG, else p4lb.toml."""
    return os.environ.get("P4LB_CONFIG", "p4lb.toml")


def build_parser(limits: Limits, commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4lb", description="P4 Layer-4 load balancer controller")
    config = default_config()
    p.add_argument(
        "-c",
        "--config",
        default=config,
        help=f"config file (default {config}; env P4LB_CONFIG)",
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
    try:
        limits = compiled_limits()
    except OSError as e:
        print(f"p4lb: cannot read the compiled P4Info: {e}", file=sys.stderr)
        return 1
    args = build_parser(limits).parse_args(argv)
    try:
        return int(args.handler(args, limits))
    except (ConfigError, SwitchError) as e:
        print(f"p4lb: {e}", file=sys.stderr)
        return 1
