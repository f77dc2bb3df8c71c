"""Tables and plots for results/switch/ from the raw switch.json that `bench.switch` wrote,
plus the connection-state collision model (the data plane's placement, on p4lb.model's
hashing); the page is the template bench/templates/switch/README.md."""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from bench import figure, outdir, provenance, templates
from p4lb.models.hashing import CONN_BUCKETS, CONN_WAYS, Flow, flow_hash

LIVE_POINTS = (1_000, 5_000, 10_000, 20_000, 40_000, 60_000)
MODEL_SEED = 7
PROBE_FLOWS = 20_000
# The overhead goals (lb.p4 against plain forwarding), by the build names results/ uses.
GOALS = {"standard": 0.75, "fast": 0.9, "speed": 0.9}


def turned_away(live: list[Flow], probes: list[Flow], buckets: int, ways: int) -> float:
    """Fraction of `probes` whose bucket is already full with the `live` flows stored (first
    come, first stored)."""
    fill: dict[int, int] = {}
    for f in live:
        i = flow_hash(f) % buckets
        if fill.get(i, 0) < ways:
            fill[i] = fill.get(i, 0) + 1
    full = sum(1 for f in probes if fill.get(flow_hash(f) % buckets, 0) >= ways)
    return full / len(probes)


def collision_model() -> list[dict[str, float]]:
    """New flows turned away by a full bucket, with n connections live, for the former design
    (65,536 single slots) and this one (131,072 buckets x 4 ways)."""
    rng = random.Random(MODEL_SEED)

    def flow() -> Flow:  # the draws in this order: the model's figures are committed
        src = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        return Flow(src, "10.0.0.100", 6, rng.randrange(1024, 65536), 80, 1)

    flows = [flow() for _ in range(max(LIVE_POINTS) + PROBE_FLOWS)]
    probes = flows[max(LIVE_POINTS) :]
    return [
        {
            "live": n,
            "before": turned_away(flows[:n], probes, 65536, 1),
            "after": turned_away(flows[:n], probes, CONN_BUCKETS, CONN_WAYS),
        }
        for n in LIVE_POINTS
    ]


templates.ENV.filters["describe"] = provenance.describe


def plots(data: dict[str, Any], model: list[dict[str, float]], out: Path) -> None:
    plt = figure.pyplot()
    builds = data.get("builds", {})

    fig, ax = plt.subplots(figsize=(6, 3.5))
    live = [r["live"] for r in model]
    ax.plot(live, [r["before"] * 100 for r in model], "o-", label="before: 65,536 x 1 slot")
    ax.plot(live, [max(r["after"], 1e-4) * 100 for r in model], "s-", label="after: 131,072 x 4")
    for build, b in builds.items():
        pts = [g for g in b.get("growth", []) if g["dimension"] == "live" and "collisions" in g]
        if pts:
            xs, ys = [g["value"] for g in pts], [max(g["collision_rate"], 1e-4) * 100 for g in pts]
            ax.plot(xs, ys, "x", markersize=9, label=f"measured on BMv2 ({build})")
    ax.set_yscale("log")
    ax.set_xlabel("live connections")
    ax.set_ylabel("new flows finding no slot (%)")
    ax.legend(fontsize=8)
    figure.save(fig, out / "collisions.png", 120)

    if not builds:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(next(iter(builds.values()))["programs"])
    width = 0.8 / len(builds)
    for i, (build, b) in enumerate(builds.items()):
        z = [b["programs"][n]["zero_loss_pps"] for n in names]
        err = [[s["median"] - s["min"] for s in z], [s["max"] - s["median"] for s in z]]
        xs = [x + i * width for x in range(len(names))]
        ax.bar(xs, [s["median"] for s in z], width, yerr=err, capsize=3, label=build)
    ax.set_xticks([x + width * (len(builds) - 1) / 2 for x in range(len(names))], names)
    ax.set_ylabel("zero-loss packets/s")
    ax.legend()
    figure.save(fig, out / "zero_loss.png", 120)


def floor_plot(data: dict[str, Any], out: Path) -> None:
    """Each program's instructions per packet over plain forwarding's, per build, and its goal."""
    plt = figure.pyplot()

    builds = data["builds"]
    names = [n for n in next(iter(builds.values()))["programs"] if n != "baseline"]
    width = 0.8 / len(builds)
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    for i, (build, b) in enumerate(builds.items()):
        ratios = [b["programs"][n]["all_vs_baseline_per_rep"]["median"] for n in names]
        bars = ax.bar([x + i * width for x in range(len(names))], ratios, width, label=build)
        if build in GOALS:
            ax.axhline(GOALS[build], color=bars.patches[0].get_facecolor(), linestyle="--")
    labels = [n if n.startswith("floor") else f"lb.p4 {n}" for n in names]
    ax.set_xticks([x + width * (len(builds) - 1) / 2 for x in range(len(names))], labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel("plain forwarding's instructions\n/ the program's (all threads)")
    ax.set_title("dashed: the goal for that build", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    figure.save(fig, out / "floor.png", 120)


def raw(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / name).read_text()) if (out / name).exists() else {}


def page(out: Path, model: list[dict[str, float]]) -> str:
    """switch/README.md from the raw files in `out` and the collision model."""
    text = templates.render(
        "switch/README.md",
        seed=MODEL_SEED,
        model=model,
        data=raw(out, "switch.json"),
        **{k: raw(out, f"{k}.json") for k in ("floor", "peers", "ab", "flood")},
    )
    return text.rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the switch/ results directory (default: $P4LB_RESULTS_DIR/switch or results/switch)",
    )
    a = ap.parse_args(argv)
    out: Path = a.dir or outdir.results_root(True) / "switch"

    model = collision_model()
    out.mkdir(parents=True, exist_ok=True)
    (out / "collision_model.json").write_text(json.dumps(model, indent=2) + "\n")
    plots(raw(out, "switch.json"), model, out)
    if (out / "floor.json").exists():
        floor_plot(raw(out, "floor.json"), out)
    (out / "README.md").write_text(page(out, model))
    print(f"wrote {out / 'README.md'}; {outdir.said(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
