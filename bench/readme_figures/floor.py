"""The regions of switch/floor.json: the floor's programs against baseline.p4, step by step."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.floor_program import LEVELS
from bench.readme_figures.common import Slots, builds, load


def floor_order(names: Iterable[str]) -> list[str]:
    """The floor's programs level by level, then lb.p4's."""
    return sorted(names, key=lambda n: (n not in LEVELS, LEVELS.get(n, 0), n))


def floor_ratio(fl: dict[str, Any], build: str, name: str, kind: str = "all") -> float:
    return float(fl["builds"][build]["programs"][name][f"{kind}_vs_baseline_per_rep"]["median"])


def floor_work(fl: dict[str, Any], build: str, name: str) -> float:
    """A program's instructions per packet, all threads (median) in switch/floor.json."""
    return float(fl["builds"][build]["programs"][name]["all"]["median"])


def floor_table(root: Path) -> Slots:
    fl = load(root, "switch/floor.json")
    spread = max(
        (r["max"] - r["min"]) / r["median"]
        for b in fl["builds"].values()
        for n, p in b["programs"].items()
        if n != "baseline"
        for r in (p["all_vs_baseline_per_rep"], p["busiest_vs_baseline_per_rep"])
    )
    names = floor_order(n for n in fl["builds"]["standard"]["programs"] if n != "baseline")
    pair = builds(fl)
    rows = [
        (n, [floor_ratio(fl, b, n, k) for b in pair for k in ("all", "busiest")]) for n in names
    ]
    return {"spread": spread, "rows": rows}


def floor_bullets(root: Path) -> Slots:
    """results/README.md's reading of the floor table (switch/floor.json)."""
    fl = load(root, "switch/floor.json")
    std, spd = builds(fl)

    def steps(b: str) -> Slots:
        r = [1.0] + [floor_ratio(fl, b, n) for n in floor_order(LEVELS)]
        return {
            "cost": [100 * (r[i] - r[i + 1]) for i in range(len(LEVELS))],
            "state": r[-1],
            "state_busiest": floor_ratio(fl, b, "floor-state", "busiest"),
            "nat_busiest": floor_ratio(fl, b, "floor-nat", "busiest"),
        }

    progs = fl["builds"][spd]["programs"]
    zero_loss = {
        n: progs[n]["zero_loss_vs_baseline_per_rep"]
        for n in floor_order(progs)
        if "zero_loss_vs_baseline_per_rep" in progs[n]
    }
    work = [(b, floor_work(fl, b, "wrr"), floor_work(fl, b, "floor-state")) for b in (spd, std)]
    return {
        "speed": steps(spd),
        "standard": steps(std),
        "zero_loss": zero_loss,
        "base_rate": progs["baseline"]["zero_loss"] if zero_loss else {},
        "work": work,
    }
