"""`make bench-tier`: the tier of balancers (topology/tier.py) measured.

Scaling: aggregate requests/s through the VIP (ab, no keep-alive, from the client's
namespace) with 1, 2 and 3 balancers announcing, and the balancers' switch CPU (user +
system seconds of their simple_switch_grpc processes, from /proc) per request. One tier is
built; the balancers not in a point are drained (programmed, idle, announcing nothing), so
every point runs on the same processes. Points are interleaved within each repetition.

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
second, so the point fx runs CLIENTS ab processes with f x capacity x that time in flight
between them. Points interleaved within each repetition.

Writes results/tier/tier.json (every repetition, medians with min-max, provenance) and
results/tier/tier.png."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import figure, outdir, provenance, runner, stats
from bench.rate import process_cpu_s

OVERLOAD_CLIENTS = 3  # ab processes offering the overload, as the independent check ran
BASELINE = "3 x ab -c 64"  # its load: r0 below 3 of 3 next hops for 56 of 60 s before
KINDS = ["switch killed", "speaker killed", "drain"]
HA_KINDS = [*KINDS, "front router died", "return router died", "controller killed"]
TAKEOVER_WAIT_S = 30.0  # bounds on a router's or a controller's takeover, and their return


def alternating(names: list[Any], reps: int) -> Iterator[tuple[int, Any]]:
    """(repetition, name): the names in their order, then reversed, and so on."""
    for rep in range(reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            yield rep, name


def over_runs(
    rs: list[dict[str, Any]], summarized: tuple[str, ...], summed: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A point's runs, the summary (bench.stats) of each of `summarized` over them and the
    total of each of `summed`; "r0_s_none" is each run's r["r0"]["s_none"]."""

    def value(r: dict[str, Any], key: str) -> Any:
        return r[key] if key in r else r[key[:2]][key[3:]]

    return (
        {"runs": rs}
        | {k: stats.summary([value(r, k) for r in rs]) for k in summarized}
        | {k: sum(r[k] for r in rs) for k in summed}
    )


def tier_facts() -> dict[str, Any]:
    """What the tier's provenance holds besides the common one (bench.provenance): the
    routing daemons' versions and the load it ran."""

    return {
        "frr": provenance.version_line(["/usr/lib/frr/bgpd", "--version"]) or "?",
        "gobgpd": provenance.version_line(["gobgpd", "--version"]) or "?",
        "else_running": "nothing else heavy (the tier's own processes only)",
        "load": "ab -c 4 batches of 200 (no keep-alive) plus 120 keep-alive connections asking "
        "every 0.2 s during failover; ab -c 20 for 10 s per scaling point; overload: "
        f"{OVERLOAD_CLIENTS} ab processes (-s 30, no keep-alive) beside the same held connections",
    }


def ab(requests: int, concurrency: int, seconds: int) -> dict[str, Any]:
    from topology.tier import ab as ab_through_vip

    r = ab_through_vip(requests, concurrency, seconds)
    if r["error"]:
        raise RuntimeError(f"ab: {r['error']}")
    return r


def held(conns: list[dict[str, Any]]) -> dict[str, Any]:
    """The connections held through a point (topology.tier_load.traffic's): how many, how
    many broke (timed out or otherwise) or moved, the longest wait any saw for an answer."""
    broken = [c["broken"]["error"] for c in conns if c["broken"]]
    return {
        "connections": len(conns),
        "broken": len(broken),
        "timed_out": sum(1 for e in broken if "timed out" in e),
        "moved": sum(1 for c in conns if c["moved"]),
        "longest_stall_s": max(c.get("longest_wait_s", 0.0) for c in conns),
    }


def set_active(t: Any, config: Path, active: int) -> None:
    """Balancers 1..active announce; the others are drained."""
    from p4lb.intent import reader, writer
    from topology.tier_load import wait_hops

    cfg = reader.load(config)
    tier = tuple(dataclasses.replace(b, drain=i > active) for i, b in enumerate(cfg.tier, 1))
    writer.save(dataclasses.replace(cfg, tier=tier), config)
    wait_hops(t, list(range(1, active + 1)))


def scaling(t: Any, config: Path, reps: int, seconds: int, points: list[int]) -> dict[str, Any]:
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in points}
    for rep, n in alternating(points, reps):
        set_active(t, config, n)
        t.reload()  # the failover's restarts gave some switches new PIDs
        pids = [t.pids[f"switch-lb{i}"] for i in range(1, max(points) + 1)]
        before = sum(process_cpu_s(p) for p in pids)
        r = ab(1_000_000, 20, seconds)
        r["switch_cpu_s"] = sum(process_cpu_s(p) for p in pids) - before
        r["switch_cpu_ms_per_request"] = 1000 * r["switch_cpu_s"] / max(1, r["complete"])
        r["rep"] = rep
        runs[n].append(r)
        print(
            f"bench-tier: {n} balancers, rep {rep}: {r['rps']:.0f} req/s, "
            f"{r['switch_cpu_ms_per_request']:.2f} ms switch CPU/request",
            flush=True,
        )
    set_active(t, config, max(points))
    return {str(n): over_runs(rs, ("rps", "switch_cpu_ms_per_request")) for n, rs in runs.items()}


def wait_for(what: str, done: Callable[[], bool], timeout_s: float = TAKEOVER_WAIT_S) -> float:
    """Seconds until `done()` (bounded)."""
    from topology.tier_load import waited

    if (took := waited(done, timeout_s)) is None:
        raise TimeoutError(f"bench-tier: {what} not within {timeout_s} s")
    return took


def leave(t: Any, kind: str, victim: int, rep: int) -> tuple[float, Callable[[], None]]:
    """One event: (seconds until the router's next hops, the twin or the standby took over,
    what brings the victim back and, for a router or the controller, waits for it)."""
    from topology import tier_plan as plan
    from topology.tier_load import log_of, p4lb, start_controller, verb, wait_hops
    from topology.tier_procs import next_hops

    if kind in KINDS:  # the balancer `victim`; it comes back by the operator's verb
        if kind == "drain":
            p4lb("tier", "drain", f"lb{victim}")
        else:
            t.kill(f"{'switch' if kind == 'switch killed' else 'gobgpd'}-lb{victim}")

        def restart() -> None:
            if kind == "drain":
                p4lb("tier", "restore", f"lb{victim}")
            else:
                speaker = ["--speaker"] if kind == "speaker killed" else []
                verb(t, "restart", f"lb{victim}", *speaker)

        return wait_hops(t, [i for i in (1, 2, 3) if i != victim]), restart
    if kind == "controller killed":
        # Each balancer a controller becomes primary on is logged "in the tier" (a standby
        # may have been primary before: on a restarted switch it can connect first).
        def taken(name: str, at_least: int) -> Callable[[], bool]:
            return lambda: log_of(name).count(": in the tier") >= at_least

        before = log_of("standby").count(": in the tier")
        t.kill("controller")
        took = wait_for("the standby's takeover", taken("standby", before + len(t.lbs)))

        def back() -> None:
            start_controller(t, plan.config_file())  # the config's id: primary again at once
            wait_for("the old primary's return", taken("controller", len(t.lbs)))  # a new log

        return took, back
    front = kind == "front router died"
    pair = ("r0", "r0b") if front else ("r1", "r1b")
    victim_r, twin = pair if rep % 2 == 0 else pair[::-1]  # the master: it alternates
    groups = {vrid for _, vrid, _ in plan.vrrp_groups(twin, t.clients)}
    t.router_down(victim_r)
    took = wait_for(f"{twin} master", lambda: t.vrrp_masters(twin) == groups)

    def back_router() -> None:
        t.router_up(victim_r)
        if front:
            wait_hops(t, list(t.lbs), router=victim_r)
        else:
            want = sorted(plan.nexthop_addr(i) for i in t.lbs)
            wait_for(f"{victim_r}'s routes", lambda: next_hops(victim_r, "0.0.0.0/0") == want)

    return took, back_router


def ab_batches(batches: list[dict[str, Any]], when: str) -> dict[str, int]:
    """The ab batches' failed requests, ab processes that gave up, and requests done."""
    return {
        f"ab_failed_{when}": sum(b["failed"] for b in batches),
        f"ab_gave_up_{when}": sum(1 for b in batches if b["error"]),
        f"ab_requests_{when}": sum(b["complete"] for b in batches),
    }


def failover(t: Any, config: Path, reps: int, kinds: list[str] = KINDS) -> dict[str, Any]:
    from topology.tier_load import steady_batches, traffic, wait_hops

    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for rep, kind in alternating(kinds, reps):
        victim = 1 + (rep % 3)
        # Connections open a second before the event (the bar), ab -c 4 running.
        with traffic(1.0, 4) as (result, load):
            detect, come_back = leave(t, kind, victim, rep)
            # Converged now: the event's start plus the wait would leave out the event's
            # own time (the drain's CLI process) and count batches begun before the
            # route change as steady.
            converged = time.monotonic()
            time.sleep(2)
            t1 = time.monotonic()  # the balancer comes back: routes change again
            come_back()  # a balancer's verb is not timed: the wait for the routes is
            back = 0.0 if kind in KINDS else time.monotonic() - t1
            back = max(back, wait_hops(t, [1, 2, 3]))
            back_at = time.monotonic()  # not t1 + back: starting a switch takes seconds
            time.sleep(2)
        conns = result["connections"]
        h = held(conns)
        errors = Counter(
            f"port {c['port']}: {c['broken']['error'][:40]}" for c in conns if c["broken"]
        )
        # Routes converged: after the event's convergence until the balancer comes back,
        # and after it is back; the rest overlaps a route change.
        after, during = steady_batches(load, (converged, t1), (back_at, float("inf")))
        r = {
            "rep": rep,
            "victim": f"lb{victim}" if kind in KINDS else kind,
            "detection_s": detect,
            "rejoin_s": back,
            **{k: h[k] for k in ("longest_stall_s", "connections", "broken", "moved")},
            "broken_by": dict(errors),
            "drops": result.get("drops", {}),
            **ab_batches(during, "across_route_changes"),
            **ab_batches(after, "while_converged"),
        }
        runs[kind].append(r)
        print(
            f"bench-tier: {kind} (rep {rep}): detected {detect:.2f} s, longest stall "
            f"{r['longest_stall_s']:.2f} s, broken {r['broken']}, moved {r['moved']}, "
            f"ab failed {r['ab_failed_while_converged']} while converged, "
            f"{r['ab_failed_across_route_changes']} across route changes",
            flush=True,
        )
    ab_counts: tuple[str, ...] = ("ab_failed_while_converged", "ab_gave_up_while_converged")
    ab_counts += ("ab_failed_across_route_changes", "ab_gave_up_across_route_changes")
    timed = ("detection_s", "longest_stall_s", "rejoin_s")
    return {k: over_runs(rs, timed, ("broken", "moved", *ab_counts)) for k, rs in runs.items()}


def overload_points(t: Any, reps: int, seconds: int) -> dict[str, Any]:
    """The overload figures (module docstring): per point and repetition, interleaved."""
    from topology.tier_load import (
        overload,
        route_gaps,
        sampling_routes,
        traffic,
        unloaded_ms_per_request,
        wait_hops,
    )

    n = len(t.lbs)
    capacity = ab(1_000_000, 20, 10)["rps"]
    unloaded_ms = unloaded_ms_per_request()
    if not capacity or not unloaded_ms:
        raise RuntimeError("the idle tier answered nothing: no capacity to offer multiples of")
    # Requests in flight per ab process for f x capacity at the idle tier's speed.
    concurrency = {
        f"{f}x": max(1, round(f * capacity * unloaded_ms / 1000 / OVERLOAD_CLIENTS))
        for f in (1, 2, 3)
    }
    concurrency[BASELINE] = 64
    names = list(concurrency)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in names}
    for rep, name in alternating(names, reps):
        c = concurrency[name]
        with sampling_routes(every_s=0.2) as routes, traffic(1.0, 4) as (result, _load):
            with overload(OVERLOAD_CLIENTS, c, seconds) as results:
                started = time.monotonic()
                time.sleep(seconds)
            ended = time.monotonic()
        window = [s for s in routes.samples if started <= s[0] < ended]
        r0 = route_gaps([(at, h) for at, h, _ in window], n, ended)
        r1 = route_gaps([(at, h) for at, _, h in window], n, ended)
        h = held(result["connections"])
        r = {
            "rep": rep,
            "concurrency_per_client": c,
            "offered_rps": OVERLOAD_CLIENTS * c / (unloaded_ms / 1000),
            "served_rps": sum(x["complete"] for x in results) / (ended - started),
            "failed": sum(x["failed"] for x in results),
            "ab_gave_up": sum(1 for x in results if not x["complete"]),
            "r0": r0,
            "r1": r1,
            "seconds": ended - started,
            "longest_stall_s": h["longest_stall_s"],
            "held": h["connections"],
            "held_timed_out": h["timed_out"],
            "held_broken": h["broken"] - h["timed_out"],
            "held_moved": h["moved"],
        }
        runs[name].append(r)
        print(
            f"bench-tier: overload {name} (rep {rep}): offered {r['offered_rps']:.0f}, "
            f"served {r['served_rps']:.0f} req/s, failed {r['failed']:.0f}; r0 below "
            f"{n} for {r0['s_below_n']:.1f} s, none {r0['s_none']:.1f} s; longest stall "
            f"{r['longest_stall_s']:.2f} s",
            flush=True,
        )
        wait_hops(t, list(t.lbs))  # whole again before the next point (bounded)
    summarized = ("served_rps", "r0_s_below_n", "r0_s_none", "r1_s_none", "longest_stall_s")
    return {
        "balancers": n,
        "capacity_rps": capacity,
        "unloaded_ms_per_request": unloaded_ms,
        "points": {
            k: over_runs(rs, summarized, ("failed", "held_broken")) for k, rs in runs.items()
        },
    }


def medians(table: dict[str, Any], key: str) -> list[float]:
    return [v[key]["median"] for v in table.values()]


def failover_panel(b: Any, doc: dict[str, Any]) -> None:
    """Per kind of event: until the router (or the twin, or the standby) took over, and the
    longest wait of an open connection; how many broke, under each."""
    fo = doc["failover"]
    ticks = [
        f"{k}\nbroken {v['broken']} of {sum(r['connections'] for r in v['runs'])}"
        for k, v in fo.items()
    ]
    series = {
        "taken over: routes, twin, standby (s)": medians(fo, "detection_s"),
        "longest stall of an open connection (s)": medians(fo, "longest_stall_s"),
    }
    figure.bars(b, series, 0.4, ticks)
    b.legend()


def overload_panel(c: Any, over: dict[str, Any], reps: int) -> None:
    """Per overload point: seconds r0 had fewer next hops than balancers, and none, and the
    longest wait of a held connection; the served rate under each."""
    pts = over["points"]
    below, none = medians(pts, "r0_s_below_n"), medians(pts, "r0_s_none")
    series = {
        "s r0 below all next hops": below,
        "s r0 without a route": none,
        "longest held-connection stall (s)": medians(pts, "longest_stall_s"),
    }
    served = medians(pts, "served_rps")
    figure.bars(c, series, 0.27, [f"{p}\n{r:.0f} req/s" for p, r in zip(pts, served, strict=True)])
    for i in range(len(pts)):  # the seconds written out: a bar of 0 s is the finding
        at = (i - 0.13, max(below[i], none[i]))
        c.annotate(f"{below[i]:.1f}/{none[i]:.1f}", at, ha="center", va="bottom", fontsize=7)
    c.set_title(
        f"Overload, nothing killed (capacity {over['capacity_rps']:.0f} req/s; median of {reps})"
    )
    c.legend(fontsize=8)


def plot(doc: dict[str, Any], path: Path) -> None:
    plt = figure.pyplot()
    if "scaling" not in doc:  # --ha: the failover alone
        fig, b = plt.subplots(1, 1, figsize=(11, 4.4))
        failover_panel(b, doc)
        b.set_title(
            f"Failover with a router pair and a standby controller (median of {doc['reps']})"
        )
        figure.save(fig, path, 110)
        return
    over = doc.get("overload")
    fig, axes = plt.subplots(1, 3 if over else 2, figsize=(16.5 if over else 11, 4))
    a, b = axes[0], axes[1]
    ns = sorted(doc["scaling"], key=int)
    rps = [doc["scaling"][n]["rps"] for n in ns]
    med = [r["median"] for r in rps]
    err = [
        [m - r["min"] for m, r in zip(med, rps, strict=True)],
        [r["max"] - m for m, r in zip(med, rps, strict=True)],
    ]
    a.bar(ns, med, yerr=err, capsize=4, color="#4a7")
    a.set_xlabel("balancers announcing the VIP")
    a.set_ylabel("requests/s (median, min-max)")
    a.set_title("Tier throughput (ab -c 20, no keep-alive)")
    failover_panel(b, doc)
    b.set_title(f"Failover (median of {doc['reps']} repetitions)")
    if over:
        overload_panel(axes[2], over, doc["reps"])
    figure.save(fig, path, 110)


def main(argv: list[str] | None = None) -> int:
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
    run = runner.start_run("bench-tier", {"standard": switch_binary()}, argv)
    if run is None:
        return 2
    doc: dict[str, Any] = {"provenance": tier_facts(), "reps": a.reps}
    t = start_tier(3, 3, standby=a.ha, pair=a.ha)
    run.adopt(lambda: list(t.pids.values()))  # FRR's daemons leave our tree; restarts too
    config = RUN / "lb.toml"
    try:
        if a.ha:
            doc["failover"] = failover(t, config, a.reps, HA_KINDS)
        else:
            # Failover first: the scaling runs open connections faster than the controller
            # reports them (their events queue up for a while after the load stops).
            doc["failover"] = failover(t, config, a.reps)
            doc["scaling"] = scaling(t, config, a.reps, a.seconds, [1, 2, 3])
            doc["overload"] = overload_points(t, a.reps, a.overload_seconds)
    finally:
        t.down()
    # The tier's own facts (FRR, GoBGP, the load) beside the common provenance; the
    # points' order: scaling alternates 1-2-3 and 3-2-1, failover the kinds and reversed.
    order = "failover kinds, then reversed"
    if not a.ha:
        order += "; scaling 1-2-3 / 3-2-1 alternating; overload 1x-2x-3x-baseline, then reversed"
    doc["provenance"] = doc["provenance"] | run.finish(a.reps, order=order)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{name}.json").write_text(json.dumps(doc, indent=1))
    print(outdir.said(a.out))
    plot(doc, a.out / f"{name}.png")
    print(f"bench-tier: wrote {a.out / f'{name}.json'} and {name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
