"""The regions of tier/: failover and HA events, scaling, the SYN cookies' cost, overload."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench import provenance
from bench.readme_figures.common import Slots, load

COOKIE_REF = "single switch, no TCP options"


def events(t: dict[str, Any]) -> dict[str, Slots]:
    """Each kind of failover event in tier/tier.json: its times over the runs and its counts
    summed over them (connections held, broken or moved; ab requests, failed or given up)."""

    def event(kind: str, v: dict[str, Any]) -> Slots:
        def total(key: str) -> int:
            return sum(r[key] for r in v["runs"])

        return {
            "kind": kind,
            **{k: v[k] for k in ("detection_s", "longest_stall_s", "rejoin_s", "broken", "moved")},
            "held": total("connections"),
            "converged": total("ab_requests_while_converged"),
            "failed_converged": v["ab_failed_while_converged"],
            "across": total("ab_requests_across_route_changes"),
            "failed_across": v["ab_failed_across_route_changes"],
            "gave_up": v["ab_gave_up_across_route_changes"],
        }

    return {kind: event(kind, v) for kind, v in t["failover"].items()}


def failover(doc: dict[str, Any]) -> Slots:
    """The events of a results file with failover runs, and the connections the first held."""
    ev = list(events(doc).values())
    return {"events": ev, "held": ev[0]["held"]}


def tier_failover(root: Path) -> Slots:
    return failover(load(root, "tier/tier.json"))


def tier_ha(root: Path) -> Slots:
    doc = load(root, "tier/ha.json")
    return failover(doc) | {"reps": doc["reps"], "how": provenance.describe(doc)}


def tier_scaling(root: Path) -> Slots:
    return {"scaling": load(root, "tier/tier.json")["scaling"]}


def cookie_more(c: dict[str, Any], build: str, name: str) -> float:
    """A variant's instructions per packet (busiest thread) over COOKIE_REF's, less one."""
    v = c["builds"][build]
    return float(
        v[name]["busiest_thread_per_packet"]["median"]
        / v[COOKIE_REF]["busiest_thread_per_packet"]["median"]
        - 1
    )


def tier_cookie(root: Path) -> Slots:
    c = load(root, "tier/cookie.json")
    builds = list(c["builds"])
    rows = [
        (
            name,
            [
                (
                    c["builds"][b][name]["busiest_thread_per_packet"]["median"],
                    cookie_more(c, b, name) if "timestamps" in name else None,
                )
                for b in builds
            ],
        )
        for name in c["builds"][builds[0]]
    ]
    return {"builds": builds, "rows": rows}


def tier_overload(root: Path) -> Slots:
    """docs/tier.md's overload figures (tier/tier.json's "overload"), if measured."""
    t = load(root, "tier/tier.json")
    o = t.get("overload")
    if not o:
        return {"o": None}
    pts = o["points"]
    runs = [r for v in pts.values() for r in v["runs"]]
    points = [
        {
            "name": name,
            "v": v,
            "offered": statistics.median(r["offered_rps"] for r in v["runs"]) if v["runs"] else 0.0,
            "concurrency": v["runs"][0]["concurrency"] if v["runs"] else [],
            "held": sum(r.get("held", 0) for r in v["runs"]),
            "timed_out": sum(r.get("held_timed_out", 0) for r in v["runs"]),
        }
        for name, v in pts.items()
    ]
    return {
        "o": o,
        "points": points,
        "seconds": statistics.median(r["seconds"] for r in runs) if runs else 0.0,
        "reps": t.get("reps", max((len(v["runs"]) for v in pts.values()), default=0)),
    }


def tier_summary(root: Path) -> Slots:
    """docs/tier.md's paragraph on what the tier measured (tier/tier.json, tier/cookie.json)."""
    t, c = load(root, "tier/tier.json"), load(root, "tier/cookie.json")
    f, scal = events(t), t["scaling"]
    std, spd = list(c["builds"])[:2]
    kinds = ("tier balancer, timestamps", "single switch, timestamps")
    return {
        "f": f,
        "reps": t.get("reps", len(next(iter(t["failover"].values()))["runs"])),
        **{k: sum(e[k] for e in f.values()) for k in ("held", "failed_across", "across")},
        "broken": sum(e["broken"] + e["moved"] for e in f.values()),
        "conv_failed": sum(e["failed_converged"] for e in f.values()),
        "pct": {b: {k: 100 * cookie_more(c, b, k) for k in kinds} for b in (std, spd)},
        "std": std,
        "spd": spd,
        "scaling": scal,
        "most": max(scal),
        "cpu": [v["switch_cpu_ms_per_request"]["median"] for v in scal.values()],
    }
