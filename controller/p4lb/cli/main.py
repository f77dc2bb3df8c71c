"""`p4lb`: the command-line tool's entry point. Every user error ends in one line and exit
status 1; the commands themselves are the table in p4lb.cli.commands."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from p4lb.cli.commands import COMMANDS, Command
from p4lb.intent.model import ConfigError
from p4lb.intent.running import pointer_path, running_config
from p4lb.pipeline.p4info import Limits, compiled_limits
from p4lb.switch.errors import SwitchError

DEFAULT_WAIT_S = 15.0


def config_origin() -> tuple[str, str]:
    """The config file when `-c` is not given, and where that choice came from:
    $P4LB_CONFIG, else the running lab's config (named by /run/p4lb/config, written by
    `make run`), else p4lb.toml in the current directory."""
    env = os.environ.get("P4LB_CONFIG")
    if env:
        return env, "from $P4LB_CONFIG"
    running = running_config()
    if running is not None:
        return str(running), f"the running lab's, named by {pointer_path()}"
    return "p4lb.toml", "no $P4LB_CONFIG and no running lab"


def default_config() -> str:
    """The config file when `-c` is not given (see config_origin)."""
    return config_origin()[0]


def permission_line(e: PermissionError, config: str, argv: Sequence[str]) -> str:
    """One line for a file p4lb may not read or write: which, whose, and the command again
    with sudo (the running lab's files are root's, owner-only). An unreadable config is the
    cause whichever file failed first (a runtime change takes the lock before it reads)."""
    unreadable = Path(config).exists() and not os.access(config, os.R_OK)
    path = config if unreadable else str(e.filename or config)
    verb = "read" if Path(path).exists() and not os.access(path, os.R_OK) else "write"
    line = f"p4lb: cannot {verb} {path}: permission denied"
    if os.geteuid() == 0:
        return line
    owner = _owner(Path(path))
    if os.path.abspath(path) == os.path.abspath(config):
        whose = f"the running balancer's config belongs to {owner}"
    else:
        whose = f"it belongs to {owner}"
    return f"{line} ({whose}: use sudo p4lb {shlex.join(argv)})"


def _owner(path: Path) -> str:
    """The owner's name of `path`, or of the nearest directory above it that exists."""
    import pwd

    for p in (path, *path.absolute().parents):
        try:
            uid = p.stat().st_uid
        except OSError:
            continue
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"
    return "another user"


def build_parser(limits: Limits, commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="p4lb", description="P4 Layer-4 load balancer controller")
    config, origin = config_origin()
    p.add_argument(
        "-c",
        "--config",
        default=config,
        help=f"config file (default {config}: {origin}. Without -c: $P4LB_CONFIG, else "
        f"the running lab's config named by {pointer_path()}, else p4lb.toml)",
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
    except PermissionError as e:
        given = sys.argv[1:] if argv is None else argv
        print(permission_line(e, args.config, given), file=sys.stderr)
        return 1
