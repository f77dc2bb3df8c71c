"""The tier bench's steady points (bench.tier): the repetitions' order, a point's summary,
ab through the VIP, the connections held through a point; the scaling points (1, 2 and 3
balancers announcing) and the overload points (1x, 2x, 3x capacity and the load of the
independent check, nothing killed)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import stats
from bench.rate import process_cpu_s

OVERLOAD_CLIENTS = 3  # ab processes offering the overload, as the independent check ran
BASELINE = "3 x ab -c 64"  # its load: r0 below 3 of 3 next hops for 56 of 60 s before


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
