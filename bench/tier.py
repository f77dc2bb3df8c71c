"""`make bench-tier`: the tier of balancers (topology/tier.py) measured.

Scaling: aggregate requests/s through the VIP (ab, no keep-alive, from the client's
namespace) with 1, 2 and 3 balancers announcing, and the balancers' switch CPU (user +
system seconds of their simple_switch_grpc processes, from /proc) per request. One tier is
built; the balancers not in a point are drained (programmed, idle, announcing nothing), so
every point runs on the same processes.

Failover: for each kind of event (a balancer's switch killed, its speaker killed, a
graceful drain), with 120 keep-alive connections open (half to the round-robin VIP, half to
the Maglev VIP) and ab batches running: the time until the router's next hops follow, the
longest wait any open connection saw for an answer, connections broken or moved, and ab
requests failed in batches run while the routes were converged (after the event's
convergence, and after the balancer came back) and in batches across a route change.
A killed switch or speaker comes back by the operator's verb (`python -m topology.tier
restart`, what `make tier-restart` runs).

--ha: the tier with no single point of failure (`make run TOPO=tier HA=1`: a router pair
in front and on the return path, a standby controller) and the failover alone, with three
more kinds of event: the front router that is VRRP master dies (its daemons killed, its
links down; `python -m topology.tier router-down`), the same on the return path, and the
primary controller is killed (SIGKILL). For a router, "detection" is until its twin is
master of each of its VRRP groups, and "rejoin" until the dead one, back, has the routes
again (as the backup); for the controller, until the standby logged its takeover of every
balancer, and until the old primary, started again with the config's election id, took
every balancer back. Writes results/tier/ha.json and ha.png.

Overload: nothing killed, the tier offered 1x, 2x and 3x its capacity, and the load of the
independent check that found the cascade (3 x ab -c 64), each for --overload-seconds with
120 keep-alive connections held: served req/s, failed requests, seconds r0 had fewer next
hops than balancers (and none), the same for r1's return route, route changes, and the
longest wait of a held connection. Capacity is what the tier serves at ab -c 20; a closed
loop of C requests in flight offers C / (one request's time through the idle tier) per
second, so the point fx runs f x capacity x that time requests in flight, spread over up
to 3 ab processes.

Each part's points (or kinds of event) take turns within each repetition, in the runner's
seeded shuffled order (`order` in the file). Writes results/tier/tier.json (every
repetition, medians with min-max, provenance) and results/tier/tier.png."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bench import outdir, provenance, runner
from bench.tier_failover import FAILOVER
from bench.tier_overload import OVERLOAD_CLIENTS, overload_points
from bench.tier_plot import plot
from bench.tier_runs import SCALING, measured, set_active


def tier_facts() -> dict[str, Any]:
    """What the tier's provenance holds besides the common one (bench.provenance): the
    routing daemons' versions and the load it ran."""

    return {
        "frr": provenance.version_line(["/usr/lib/frr/bgpd", "--version"]) or "?",
        "gobgpd": provenance.version_line(["gobgpd", "--version"]) or "?",
        "else_running": "nothing else heavy (the tier's own processes only)",
        "traffic": "ab -c 4 batches of 200 (no keep-alive) plus 120 keep-alive connections asking "
        "every 0.2 s during failover; ab -c 20 for 10 s per scaling point; overload: "
        f"up to {OVERLOAD_CLIENTS} ab processes (-s 30, no keep-alive) beside the same held "
        "connections",
    }


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plot-only", action="store_true", help="redraw tier.png from tier.json")
    p.add_argument(
        "--ha",
        action="store_true",
        help="the failover alone, with a router pair and a standby controller (ha.json)",
    )
    p.add_argument("--seconds", type=int, default=10, help="ab time per scaling point")
    p.add_argument(
        "--overload-seconds", type=int, default=60, help="how long each overload point lasts"
    )
    runner.add_common(p)


def main(argv: list[str] | None = None) -> int:
    committed = ["seconds", "overload_seconds"]
    a = runner.command_line("bench-tier", __doc__, "tier", argv, options, committed, reps=3)
    name = "ha" if a.ha else "tier"
    if a.plot_only:
        plot(json.loads((a.out / f"{name}.json").read_text()), a.out / f"{name}.png")
        return 0
    from topology.bmv2 import switch_binary
    from topology.tier import RUN, missing_tools
    from topology.tier_load import start_tier

    if missing := missing_tools():
        print(f"bench-tier: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    runner.order_seed(a)
    run = runner.start_run("bench-tier", {"standard": switch_binary()}, argv)
    if run is None:
        return 2
    doc: dict[str, Any] = {"provenance": tier_facts(), "reps": a.reps, "order": {}}
    t = start_tier(3, 3, standby=a.ha, pair=a.ha)
    run.adopt(lambda: list(t.pids.values()))  # FRR's daemons leave our tree; restarts too
    trial = runner.Trial("standard", switch_binary(), a, RUN, lab=t)

    try:
        # Failover first: the scaling runs open connections faster than the controller
        # reports them (their events queue up for a while after the load stops).
        doc["failover"], doc["order"]["failover"] = measured(FAILOVER, trial, "failover")
        if not a.ha:
            doc["scaling"], doc["order"]["scaling"] = measured(SCALING, trial, "scaling")
            set_active(t, 3)
            doc["overload"], doc["order"]["overload"] = overload_points(trial)
    finally:
        t.down()
    # The tier's own facts (FRR, GoBGP, the traffic) beside the common provenance.
    order = "`order`: each part's points of each repetition, in the order they ran"
    finish = run.finish(a.reps, order=order, order_seed=a.order_seed)
    doc["provenance"] = doc["provenance"] | finish
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{name}.json").write_text(json.dumps(doc, indent=1))
    print(outdir.said(a.out))
    plot(doc, a.out / f"{name}.png")
    print(f"bench-tier: wrote {a.out / f'{name}.json'} and {name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
