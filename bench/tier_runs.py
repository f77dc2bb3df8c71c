"""The tier bench's parts (bench.tier), each a spec the runner interleaves, and what they
share: a point's summary, ab through the VIP, the connections held through a point, the
balancers announcing; and the scaling points (1, 2 and 3 balancers announcing)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from bench import runner, stats
from bench.rate import process_cpu_s

SCALING_POINTS = ["1", "2", "3"]  # balancers announcing


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


def set_active(t: Any, active: int) -> None:
    """Balancers 1..active announce; the others are drained."""
    from p4lb.intent import reader, writer
    from topology.tier_load import wait_hops
    from topology.tier_plan import RUN

    config = RUN / "lb.toml"
    cfg = reader.load(config)
    tier = tuple(dataclasses.replace(b, drain=i > active) for i, b in enumerate(cfg.tier, 1))
    writer.save(dataclasses.replace(cfg, tier=tier), config)
    wait_hops(t, list(range(1, active + 1)))


def scaling_point(trial: runner.Trial, name: str) -> dict[str, Any]:
    """`name` balancers announce; ab -c 20 for --seconds, and their switches' CPU."""
    t = trial.lab
    set_active(t, int(name))
    t.reload()  # the failover's restarts gave some switches new PIDs
    pids = [t.pids[f"switch-lb{i}"] for i in t.lbs]
    before = sum(process_cpu_s(p) for p in pids)
    r = ab(1_000_000, 20, trial.args.seconds)
    r["switch_cpu_s"] = sum(process_cpu_s(p) for p in pids) - before
    r["switch_cpu_ms_per_request"] = 1000 * r["switch_cpu_s"] / max(1, r["complete"])
    r["rep"] = trial.rep
    runner.progress(
        f"{name} balancers: {r['rps']:.0f} req/s, "
        f"{r['switch_cpu_ms_per_request']:.2f} ms switch CPU/request"
    )
    return r


def scaling_figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    return {n: over_runs(rs, ("rps", "switch_cpu_ms_per_request")) for n, rs in values.items()}


SCALING = runner.part(
    "bench-tier scaling", lambda a: SCALING_POINTS, scaling_point, scaling_figures
)


def measured(spec: runner.Spec, trial: runner.Trial, key: str) -> tuple[dict[str, Any], Any]:
    """A part's figures and its order (each repetition's points as they ran)."""
    res = runner.measure_build(spec, trial, salt=key)
    del res["binary"]
    return res, res.pop("order")
