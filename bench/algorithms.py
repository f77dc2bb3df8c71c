"""Computed (not timed) figures for the hash algorithms and the least-connections choice.

    python -m bench.algorithms [--out results/algorithms] [--only maglev|leastconn]

From the controller's own code, with fixed seeds and no switch: a re-run writes the same
numbers. maglev.json/.md/.png: Maglev's and srchash's share per backend against weight, and
the flows moved when one of N backends is removed or added (bench.maglev).
leastconn.json/.md: the exact weighted argmin against power of d choices
(p4lb.models.leastconn). The pages are the templates under bench/templates/algorithms/."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

from bench import figure, maglev, outdir, provenance, templates
from p4lb.models.leastconn import POLICIES, Scenario, simulate
from p4lb.pipeline.maglev import MAGLEV_MAX_TABLE_SIZE

COMMAND = "python -m bench.algorithms"
WEIGHTS = {
    "equal x3": (1, 1, 1),
    "equal x8": (1,) * 8,
    "equal x16": (1,) * 16,
    "1:2:3": (1, 2, 3),
    "1:1:4": (1, 1, 4),
    "1:2:2": (1, 2, 2),
}
PER_BACKEND = (4, 64)  # mean open connections per backend: light and heavy load
ARRIVALS, LEASTCONN_SEED = 50_000, 1


def leastconn() -> list[dict[str, Any]]:
    """Every policy of the model on each weight vector at each load."""
    rows = []
    for label, weights in WEIGHTS.items():
        for per in PER_BACKEND:
            scenario = Scenario(weights, per * len(weights), ARRIVALS, LEASTCONN_SEED)
            for policy in POLICIES:
                o = simulate(scenario, policy)
                row = {"weights": label, "mean_active_per_backend": per, "policy": policy}
                row |= {"max_over_mean": o.max_over_mean, "max_over_mean_p99": o.max_over_mean_p99}
                row |= {"jain": o.jain, "shares": list(o.shares)}
                rows.append(row | {"weight_share": [w / sum(weights) for w in weights]})
    return rows


def against_argmin(rows: list[dict[str, Any]], policy: str) -> list[float]:
    """`policy`'s max/mean over argmin's, per case (weights, load)."""
    by = {(r["weights"], r["mean_active_per_backend"], r["policy"]): r for r in rows}
    cases = [(w, p) for w in WEIGHTS for p in PER_BACKEND]
    return [by[(*c, policy)]["max_over_mean"] / by[(*c, "argmin")]["max_over_mean"] for c in cases]


def maglev_page(shares: list[dict[str, Any]], disr: list[dict[str, Any]]) -> str:
    m = maglev
    slots = {"flows": m.FLOWS, "seed": m.SEED, "vip": m.VIP, "removals": m.REMOVALS}
    slots |= {"goal": m.GOAL, "max_size": MAGLEV_MAX_TABLE_SIZE, "reference": m.REFERENCE_SIZE}
    return templates.render(
        "algorithms/maglev.md", command=COMMAND, **slots, shares=shares, disr=disr
    )


def leastconn_page(rows: list[dict[str, Any]]) -> str:
    ratio = {p: against_argmin(rows, p) for p in ("exact", "p2c_pairs", "p2c_weighted", "p2c")}
    slots = {"command": COMMAND, "arrivals": ARRIVALS, "seed": LEASTCONN_SEED, "ratio": ratio}
    return templates.render("algorithms/leastconn.md", **slots, rows=rows)


def write_json(path: Path, data: Any) -> None:
    """`data` as indented JSON, every float rounded to six places."""
    rounded = json.loads(json.dumps(data), parse_float=lambda s: round(float(s), 6))
    path.write_text(json.dumps(rounded, indent=1) + "\n")


def plot(shares: list[dict[str, Any]], disr: list[dict[str, Any]], path: Path) -> None:
    """Share error per backend against its weight share; flows moved per N on a removal."""
    plt = figure.pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key, marker, label in (
        ("maglev_table_share", "o", "Maglev table (exact)"),
        ("maglev_flow_share", "x", f"Maglev, {maglev.FLOWS // 1000}k flows"),
        ("srchash_flow_share", "+", f"srchash, {maglev.FLOWS // 1000}k sources"),
    ):
        xs = [w for r in shares for w in r["weight_share"]]
        ys = [100 * (s - w) for r in shares for s, w in zip(r[key], r["weight_share"], strict=True)]
        a.scatter(xs, ys, marker=marker, label=label, s=28)
    a.axhline(0, color="grey", linewidth=0.8)
    a.set(ylim=(-1, 1), xlabel="weight share")
    a.set_ylabel("measured share - weight share (percentage points)")
    a.set_title("Share error per backend (equal x3, x8, 1:2:3, 1:1:4, 1:2:2)\nplot limits = 1 pp")
    a.legend(fontsize=8)
    ns = [r["n"] for r in disr]
    b.plot(ns, [r["ideal_remove"] for r in disr], "k--", label="ideal 1/N")
    for key, style, label in (
        ("modulo", "s-", "hash mod N"),
        ("p4lb_update", "D-", "p4lb maglev (update)"),
        ("maglev_ladder", "o-", "Maglev, >=100N"),
        ("maglev_max", "^-", f"Maglev, {MAGLEV_MAX_TABLE_SIZE}"),
    ):
        b.plot(ns, [r[key]["remove_mean"] for r in disr], style, label=label)
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xticks(ns, [str(n) for n in ns])
    b.set(xlabel="backends N (one removed)", ylabel="fraction of flows moved")
    b.set_title("Flows moved when one of N backends is removed")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no matplotlib version: same bytes
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="default: results/algorithms")
    ap.add_argument("--only", choices=["maglev", "leastconn"], default=None)
    a = ap.parse_args(argv)
    # Computed, not timed: the same code gives the same figures, so every run is the
    # committed profile (P4LB_RESULTS_DIR or --out still send it elsewhere).
    out = outdir.destination("algorithms", True, a.out)
    out.mkdir(parents=True, exist_ok=True)
    said = [*COMMAND.split(), *(sys.argv[1:] if argv is None else argv)]
    meta: dict[str, Any] = {"python": platform.python_version(), "command": COMMAND}
    meta["provenance"] = provenance.collect("algorithms", None, said)
    if a.only in (None, "maglev"):
        keys, sources = maglev.flows(maglev.FLOWS, maglev.SEED)
        shares, disr = maglev.share_rows(WEIGHTS, keys, sources), maglev.disruption(keys)
        head = meta | {"flows": maglev.FLOWS, "seed": maglev.SEED, "hash": maglev.HASH}
        write_json(out / "maglev.json", {"meta": head, "shares": shares, "disruption": disr})
        (out / "maglev.md").write_text(maglev_page(shares, disr))
        plot(shares, disr, out / "maglev.png")
    if a.only in (None, "leastconn"):
        rows = leastconn()
        head = meta | {"arrivals": ARRIVALS, "seed": LEASTCONN_SEED, "per_backend": [*PER_BACKEND]}
        write_json(out / "leastconn.json", {"meta": head, "runs": rows})
        (out / "leastconn.md").write_text(leastconn_page(rows))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
