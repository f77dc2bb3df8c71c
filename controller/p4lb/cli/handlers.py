"""What each `p4lb` command does (the runtime changes are in p4lb.cli.changes). A handler takes
the parsed arguments and the compiled program's limits and returns the exit status."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from p4lb.cli import changes, output, shell
from p4lb.intent import qos, writer
from p4lb.intent.lock import config_lock
from p4lb.intent.model import Config, ConfigError, switch_configs
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import Limits
from p4lb.service import observe, operations
from p4lb.service.daemon import Controller
from p4lb.service.health import state_file
from p4lb.service.health.overlay import overlay_from_file
from p4lb.service.metrics.exposition import ControllerMetrics
from p4lb.service.metrics.server import MetricsServer
from p4lb.service.session import standby_ids
from p4lb.service.tier import TierController
from p4lb.stats import windows
from p4lb.stats.counters import Stats, tier_total
from p4lb.switch.errors import SwitchError

DRAIN_TIMEOUT_S = 60.0
DRAIN_POLL_S = 0.5


def check(args: argparse.Namespace, limits: Limits) -> int:
    cfg = capacity.load(args.config, limits)
    n_backends = sum(len(v.backends) for v in cfg.vips)
    print(f"{args.config}: ok ({len(cfg.vips)} VIPs, {n_backends} backends)")
    return 0


def apply(args: argparse.Namespace, limits: Limits) -> int:
    """Every switch of the config (the tier's balancers, or the one switch) to the file's
    intent; in a tier, one line per balancer, and exit 1 if any did not take it."""
    failed = 0
    with config_lock(args.config, wait_s=args.wait):
        cfg = overlay_from_file(capacity.load(args.config, limits), args.config)
        for name, scfg in switch_configs(cfg):
            who = f"{args.config}" + (f" ({name})" if cfg.tier else "")
            try:
                with operations.connect(scfg, one_shot=True, wait_s=args.wait) as sw:
                    result = operations.apply(sw, scfg, dry_run=args.dry_run)
            except SwitchError as e:
                if not cfg.tier:
                    raise
                print(f"{who}: not applied: {e}")
                failed += 1
                continue
            if args.dry_run:
                for batch in result.batches:
                    for u in batch:
                        print(output.update_line(u))
            verb = "would write" if args.dry_run else "wrote"
            print(
                f"{who}: {verb} {result.writes} entries in {len(result.batches)} batches"
                + ("; pipeline pushed" if result.pipeline_pushed else "")
            )
    return 1 if failed else 0


def qos_show(args: argparse.Namespace, limits: Limits) -> int:
    cfg = capacity.load(args.config, limits)
    with operations.connect_reader(cfg) as sw:
        held = operations.qos_on_switch(sw, cfg)
        lifetime = operations.read_stats(sw, cfg)
    if args.json:
        ports = cfg.qos.ports if cfg.qos else ()
        print(
            json.dumps(
                {
                    "ports": [
                        {"port": p.port, "switch": held.get(p.port, "missing"), **qos.to_table(p)}
                        for p in ports
                    ],
                    "drops": output.qos_drops(lifetime),
                }
            )
        )
    else:
        print(output.render_qos(cfg, held, lifetime))
    return 0


def stats(args: argparse.Namespace, limits: Limits) -> int:
    cfg = capacity.load(args.config, limits)
    if cfg.tier:
        return tier_stats(args, cfg)
    rounds = 0
    previous: tuple[float, Stats] | None = None
    with operations.connect_reader(cfg) as sw:
        while True:
            lifetime = operations.read_stats(sw, cfg)
            now = time.monotonic()
            if args.lifetime:
                shown = windows.with_health(
                    lifetime, state_file.load_state(args.config), time.time()
                )
            else:
                shown = observe.shown(lifetime, args.config, time.time())
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

    cfg = load()  # a bad config is a one-line error before anything starts
    settings = cfg.metrics
    if args.standby:
        if not standby_ids(cfg.switch.election_id):
            raise ConfigError(
                f"{args.config}: switch.election_id = {cfg.switch.election_id} leaves no id "
                "below it for a standby (--standby); give the primary 2 or more"
            )
        # The primary binds [metrics] listen: a standby serves its own port, or none.
        if args.metrics_port is not None and settings is None:
            raise ConfigError(f"{args.config}: --metrics-port needs a [metrics] table")
        settings = (
            replace(settings, listen=f"{settings.listen.rpartition(':')[0]}:{args.metrics_port}")
            if settings is not None and args.metrics_port is not None
            else None
        )
    elif args.metrics_port is not None:
        raise ConfigError("--metrics-port is a standby's (--standby); the primary uses [metrics]")
    own = ControllerMetrics()
    # [metrics]: listening (or failing, in one line) before the controller starts.
    served = (
        MetricsServer(settings, load, args.config, own, source=args.config)
        if settings is not None
        else None
    )
    try:
        if served is not None:
            served.start()
            print(
                f"{args.config}: metrics at http://{served.listen}/metrics, "
                f"stats page at http://{served.listen}/",
                file=sys.stderr,
                flush=True,
            )
        if cfg.tier:
            tier = TierController(load, config_path=args.config, metrics=own, standby=args.standby)
            return tier.run(args.duration)
        controller = Controller(load, config_path=args.config, metrics=own, standby=args.standby)
        return controller.run(args.duration)
    finally:
        if served is not None:
            served.close()


def tier_stats(args: argparse.Namespace, cfg: Config) -> int:
    """Each balancer's lifetime counts, then the tier's: shares and Jain's index over the
    whole tier. A balancer that cannot be read is named and left out of the total."""
    per: dict[str, Stats] = {}
    unreachable: dict[str, str] = {}
    for name, scfg in switch_configs(cfg):
        try:
            with operations.connect_reader(scfg) as sw:
                per[name] = operations.read_stats(sw, scfg)
        except SwitchError as e:
            unreachable[name] = str(e)
            if not args.json:
                print(f"{name}: unreachable: {e}")
    total = tier_total(list(per.values())) if per else None
    if args.json:  # one document, the unreachable balancers in it
        doc = {
            "balancers": {n: st.to_json() for n, st in per.items()},
            "unreachable": unreachable,
            "tier": total.to_json() if total else None,
        }
        print(json.dumps(doc))
        return 1 if unreachable else 0
    for name, st in per.items():
        print(f"== balancer {name}")
        print(output.render_stats(st))
    if total is not None:
        print(f"== tier ({len(per)} of {len(cfg.tier)} balancers)")
        print(output.render_stats(total))
    return 0 if len(per) == len(cfg.tier) else 1


def _set_drain(drain: bool) -> Callable[[argparse.Namespace, Limits], int]:
    def handler(args: argparse.Namespace, limits: Limits) -> int:
        with config_lock(args.config, wait_s=args.wait):
            cfg = capacity.load(args.config, limits)
            b = cfg.balancer(args.name)
            tier = tuple(replace(x, drain=drain) if x.name == b.name else x for x in cfg.tier)
            writer.save(replace(cfg, tier=tier), args.config)
        state = "draining: its speaker withdraws" if drain else "back: its speaker announces"
        print(f"{args.config}: balancer {b.name} {state} (p4lb run acts within a round)")
        return 0

    return handler


tier_drain = _set_drain(True)
tier_restore = _set_drain(False)


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
