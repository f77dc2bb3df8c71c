"""The tier bench's overload points (bench.tier): nothing killed, the tier offered 1x, 2x
and 3x its capacity and the load of the independent check that found the cascade, with
connections held; what it served and failed, and how long the routers had fewer next hops
than balancers (bench.tier's docstring has the method)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time
from typing import Any

from bench import runner
from bench.tier_runs import ab, held, measured, over_runs

OVERLOAD_CLIENTS = 3  # ab processes offering the overload, as the independent check ran
BASELINE = "3 x ab -c 64"  # its load: r0 below 3 of 3 next hops for 56 of 60 s before


@dataclasses.dataclass(frozen=True)
class Overload:
    """What the idle tier serves (ab -c 20) and one request's time through it (ab -c 1),
    and the requests in flight per ab process that offer each point's load."""

    balancers: int
    capacity_rps: float
    unloaded_ms: float

    def concurrency(self) -> dict[str, list[int]]:
        """Each point's requests in flight per ab process: f x capacity x one request's
        time in flight (at least 1), as evenly as can be over at most OVERLOAD_CLIENTS
        processes; the independent check's 3 x 64."""
        inflight = {
            f"{f}x": max(1, round(f * self.capacity_rps * self.unloaded_ms / 1000))
            for f in (1, 2, 3)
        }
        k = OVERLOAD_CLIENTS
        spread = {
            p: [c for i in range(k) if (c := n // k + (i < n % k))] for p, n in inflight.items()
        }
        return spread | {BASELINE: [64] * k}


def overload_of(t: Any) -> Overload:
    from topology.tier_load import unloaded_ms_per_request

    o = Overload(len(t.lbs), ab(1_000_000, 20, 10)["rps"], unloaded_ms_per_request())
    if not o.capacity_rps or not o.unloaded_ms:
        raise RuntimeError("the idle tier answered nothing: no capacity to offer multiples of")
    return o


def overload_point(trial: runner.Trial, name: str, o: Overload) -> dict[str, Any]:
    """The overload figures (bench.tier's docstring) of one point."""
    from topology.tier_load import overload, route_gaps, sampling_routes, traffic, wait_hops

    t = trial.lab
    c, n, seconds = o.concurrency()[name], o.balancers, trial.args.overload_seconds
    with sampling_routes(every_s=0.2) as routes, traffic(1.0, 4) as (result, _load):
        with overload(c, seconds) as results:
            started = time.monotonic()
            time.sleep(seconds)
        ended = time.monotonic()
    window = [s for s in routes.samples if started <= s[0] < ended]
    r0 = route_gaps([(at, h) for at, h, _ in window], n, ended)
    r1 = route_gaps([(at, h) for at, _, h in window], n, ended)
    h = held(result["connections"])
    r = {
        "rep": trial.rep,
        "concurrency": c,  # per ab process
        "offered_rps": sum(c) / (o.unloaded_ms / 1000),
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
    runner.progress(
        f"overload {name}: offered {r['offered_rps']:.0f}, served {r['served_rps']:.0f} req/s, "
        f"failed {r['failed']:.0f}; r0 below {n} for {r0['s_below_n']:.1f} s, none "
        f"{r0['s_none']:.1f} s; longest stall {r['longest_stall_s']:.2f} s"
    )
    wait_hops(t, list(t.lbs))  # whole again before the next point (bounded)
    return r


def figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    summarized = ("served_rps", "r0_s_below_n", "r0_s_none", "r1_s_none", "longest_stall_s")
    return {k: over_runs(rs, summarized, ("failed", "held_broken")) for k, rs in values.items()}


def overload_points(trial: runner.Trial) -> tuple[dict[str, Any], Any]:
    """The idle tier's capacity, then every point, each repetition's points interleaved."""
    o = overload_of(trial.lab)
    measure = functools.partial(overload_point, o=o)
    spec = runner.part("bench-tier overload", lambda a: list(o.concurrency()), measure, figures)
    points, order = measured(spec, trial, "overload")
    head = {"balancers": o.balancers, "capacity_rps": o.capacity_rps}
    return head | {"unloaded_ms_per_request": o.unloaded_ms, "points": points}, order
