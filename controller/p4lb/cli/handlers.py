"""What each `p4lb` command does (the runtime changes are in p4lb.cli.changes). A handler takes
the parsed arguments and the compiled program's limits and returns the exit status."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

from p4lb.cli import changes, output, shell
from p4lb.intent.lock import config_lock
from p4lb.intent.model import Config
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import Limits
from p4lb.service import operations
from p4lb.service.daemon import Controller
from p4lb.service.health import state_file
from p4lb.service.health.overlay import overlay_from_file
from p4lb.stats import baselines, windows
from p4lb.stats.counters import Stats

DRAIN_TIMEOUT_S = 60.0
DRAIN_POLL_S = 0.5


def check(args: argparse.Namespace, limits: Limits) -> int:
    cfg = capacity.load(args.config, limits)
    n_backends = sum(len(v.backends) for v in cfg.vips)
    print(f"{args.config}: ok ({len(cfg.vips)} VIPs, {n_backends} backends)")
    return 0


def apply(args: argparse.Namespace, limits: Limits) -> int:
    with config_lock(args.config, wait_s=args.wait):
        cfg = overlay_from_file(capacity.load(args.config, limits), args.config)
        with operations.connect(cfg, one_shot=True, wait_s=args.wait) as sw:
            result = operations.apply(sw, cfg, dry_run=args.dry_run)
    if args.dry_run:
        for batch in result.batches:
            for u in batch:
                print(output.update_line(u))
    verb = "would write" if args.dry_run else "wrote"
    print(
        f"{args.config}: {verb} {result.writes} entries in {len(result.batches)} batches"
        + ("; pipeline pushed" if result.pipeline_pushed else "")
    )
    return 0


def stats(args: argparse.Namespace, limits: Limits) -> int:
    cfg = capacity.load(args.config, limits)
    rounds = 0
    previous: tuple[float, Stats] | None = None
    with operations.connect_reader(cfg) as sw:
        while True:
            lifetime = operations.read_stats(sw, cfg)
            now = time.monotonic()
            shown = lifetime
            if not args.lifetime:
                kept = baselines.load_baselines(args.config)
                shown = replace(
                    lifetime,
                    vips=tuple(
                        windows.since(v, kept[v.name]) if v.name in kept else v
                        for v in lifetime.vips
                    ),
                )
            if previous is not None:
                before = {v.name: v for v in previous[1].vips}
                shown = replace(
                    shown,
                    vips=tuple(
                        windows.with_rates(v, before[v.name], now - previous[0])
                        if v.name in before
                        else v
                        for v in shown.vips
                    ),
                )
            health = state_file.load_state(args.config)
            shown = windows.with_health(shown, health, time.time())
            text = json.dumps(shown.to_json()) if args.json else output.render_stats(shown)
            print(text, flush=True)
            previous = (now, lifetime)
            rounds += 1
            if args.watch <= 0 or (args.count and rounds >= args.count):
                return 0
            time.sleep(args.watch)
            cfg = capacity.load(args.config, limits)


def run(args: argparse.Namespace, limits: Limits) -> int:
    def load() -> Config:
        return capacity.load(args.config, limits)

    load()  # a bad config is a one-line error before anything starts
    return Controller(load, config_path=args.config).run(args.duration)


_drain = changes.runtime_change(changes.drain)


def backend_drain(args: argparse.Namespace, limits: Limits) -> int:
    """Drain (weight 0), then report the backend's open connections; with --wait, poll
    (bounded in time and count) until none is left, so `backend remove` cuts nothing."""
    code = _drain(args, limits)
    if code:
        return code
    cfg = capacity.load(args.config, limits)
    vip = cfg.vip(args.vip)
    who = f"backend {args.name} of VIP {vip.name}"
    started = time.monotonic()
    deadline = started + args.timeout
    polls = int(args.timeout / DRAIN_POLL_S) + 2  # the deadline ends it first; a cap anyway
    with operations.connect_reader(cfg) as sw:
        active = operations.active_connections(sw, cfg, vip.name, args.name)
        print(f"{who}: {active} active connections")
        for _ in range(polls):
            if not args.wait_drained or active == 0:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(DRAIN_POLL_S, left))
            active = operations.active_connections(sw, cfg, vip.name, args.name)
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


def open_shell(args: argparse.Namespace, limits: Limits) -> int:
    cfg = capacity.load(args.config, limits)
    return shell.open_shell(cfg, primary=args.primary, election_id=args.election_id)
