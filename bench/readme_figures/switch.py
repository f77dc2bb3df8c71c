"""The regions of switch/: lb.p4 against baseline.p4, the instructions per path, the
collisions, the flood, and the public course balancer beside lb.p4."""

from __future__ import annotations

from pathlib import Path

from bench.readme_figures.common import Slots, builds, load, speed_build
from bench.readme_figures.floor import floor_ratio, floor_work

ALGS = ("iphash", "wrr", "leastconn")


def ratios(per_alg: list[dict[str, float]]) -> Slots:
    """lb.p4 over baseline.p4 for ALGS (medians), and the lowest and highest repetition."""
    lo, hi = min(s["min"] for s in per_alg), max(s["max"] for s in per_alg)
    return {"med": [s["median"] for s in per_alg], "lo": lo, "hi": hi}


def goal(root: Path) -> Slots:
    """The rows both switch tables quote, per build (switch/switch.json, switch/ab.json)."""
    sw, ab = load(root, "switch/switch.json"), load(root, "switch/ab.json")
    rows: dict[str, dict[str, Slots]] = {k: {} for k in ("zero", "ab", "cpu", "all", "busiest")}
    for build, b in sw["builds"].items():
        p, instr = b["programs"], b["instructions"]["programs"]
        base_all = instr["baseline"]["all_threads_per_packet"]["median"]
        rows["zero"][build] = ratios([p[a]["zero_loss_vs_baseline_per_rep"] for a in ALGS])
        abp = ab["builds"][build]["programs"]
        rows["ab"][build] = ratios([abp[a]["vs_baseline_per_rep"] for a in ALGS])
        rows["cpu"][build] = ratios([p[a]["cpu_capacity_vs_baseline_per_rep"] for a in ALGS])
        # Counted, not timed: no repetitions' range.
        all_ = [base_all / instr[a]["all_threads_per_packet"]["median"] for a in ALGS]
        rows["all"][build] = {"med": all_}
        busiest = [instr[a]["capacity_vs_baseline_per_rep"]["median"] for a in ALGS]
        rows["busiest"][build] = {"med": busiest}
    return {"g": rows | {"builds": builds(sw), "n": ab["n"], "c": ab["c"], "reps": ab["reps"]}}


def path_instructions(root: Path) -> Slots:
    sw = load(root, "switch/switch.json")
    pi = sw["builds"][speed_build(sw["builds"])]["path_instructions"]["programs"]
    names = list(pi)
    rows = [
        (
            kind,
            [
                (pi[n][kind]["all_threads"]["median"], pi[n][kind]["busiest_thread"]["median"])
                for n in names
            ],
        )
        for kind in pi[names[0]]
    ]
    return {"names": names, "rows": rows}


def switch_prose(root: Path) -> Slots:
    """README.md's paragraph after the switch table: the floor, the collisions, the flood."""
    fl, sw = load(root, "switch/floor.json"), load(root, "switch/switch.json")
    fd = load(root, "switch/flood.json")
    std, spd = builds(fl)
    floor = {
        name: {k: floor_ratio(fl, b, "floor-state", k) for k in ("all", "busiest")}
        for name, b in (("standard", std), ("speed", spd))
    }
    work = [floor_work(fl, b, "wrr") / floor_work(fl, b, "floor-state") for b in (std, spd)]

    def ingress(c: dict[str, int]) -> dict[str, int]:  # older runs did not split the ingress
        return {k: c.get(f"ingress_{k}", c[k]) for k in ("tables", "conditions", "primitives")}

    trace = sw["trace"]["counts"]
    growth = [
        g
        for b in sw["builds"].values()
        for g in b.get("growth", [])
        if g["dimension"] == "live" and "collisions" in g
    ]
    b0 = next(iter(fd["builds"].values()))
    exact, flood = b0["exactness"], b0["flood"][0]
    return {
        "floor": floor,
        "work": work,
        "known": ingress(trace["wrr"]["established"]),
        "base": ingress(trace["baseline"]["established"]),
        "g": max(growth, key=lambda g: g["value"]),
        "exact_ok": all(r["max_deviation"] == 0 and r["collisions"] == 0 for r in exact),
        "exact_weights": [
            ":".join(map(str, r["weights"])) for r in exact[:: max(1, len(exact) // 2)]
        ],
        "flood": flood,
        "first": flood["rounds"][0] if flood["rounds"] else None,
    }


def collision_rate(root: Path) -> Slots:
    """New flows finding their bucket full at switch/collision_model.json's largest live count."""
    return {"last": load(root, "switch/collision_model.json")[-1]}


def peers(root: Path) -> Slots:
    """lb.p4 beside the public course balancer (results/switch/peers.json), per build."""
    return {"doc": load(root, "switch/peers.json")}
