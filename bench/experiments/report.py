"""Every table and plot of the experiment suite, rebuilt from the raw files alone: writes
results/experiments/{summary.md, runs.json, *.png}; `readme_block` is results/README.md's
experiments region. The sentences are templates in bench/templates/experiments/."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import outdir, rawstore, templates
from bench.experiments.claims import Claim, claims
from bench.experiments.measured import head, switch_ceiling
from bench.experiments.measured import parts_text as parts_text  # bench.readme_figures reads it
from bench.experiments.metrics import load_runs
from bench.experiments.plots import PLOTS, plots
from bench.experiments.points import Groups, Key, Run, axis, groups, load_count, med, points, spread
from bench.experiments.points import variants as variants_of


def seed_figures(g: Groups, algorithms: list[str]) -> tuple[str, list[Claim]]:
    """The papers' figures next to ours, and the claimed / found table (its claims too)."""
    ab_loads = sorted(axis(g, "ld", exp="ab"))
    c10, c1 = (
        max((ld for ld in ab_loads if ld.endswith(c)), key=load_count, default="")
        for c in ("-c10", "-c1")
    )
    fields = {"rps": "rps", "mean": "mean_ms", "p95": "p95_ms", "band": "p95_ms"}
    fields |= {"loss": "loss_pct", "kbps": "kbps"}

    def pair(sc: str, k: str, ld: str) -> tuple[float, float] | None:
        """WRR's and IP hash's medians of one of Usman et al.'s metrics (None: one missing)."""
        f = ("jain" if sc == "equal" else "capacity_jain") if k == "jain" else fields[k]
        w, i = med(g, Key("ab", sc, "wrr", ld), f), med(g, Key("ab", sc, "iphash", ld), f)
        ok = w is not None and i is not None if k == "loss" else bool(w and i)
        return (w, i) if ok else None  # type: ignore[return-value]

    def vs_single(n: str) -> list[tuple[float | None, float | None]]:
        return [
            (med(g, Key("ab", sc, n, c10), f), med(g, Key("ab", sc, "single", c10), f))
            for sc in ("equal", "1:1:4")
            for f in ("rps", "p95_ms")
        ]

    def small(n: str) -> list[tuple[float, int]]:
        """The 1-worker server's median share, %, and the sources, per source count on 1:2:2."""
        keys = [Key("clients", "1:2:2", n, ld) for ld in sorted(axis(g, "ld", exp="clients"))]
        return [
            (spread([100 * r["shares"][0] for r in g[k]])[0], 3 * load_count(k.ld))
            for k in keys
            if k in g
        ]

    shares = [(n, small(n)) for n in variants_of(g, algorithms, exp="clients", sc="1:2:2")]
    found = claims(g, algorithms, c10, c1)
    text = templates.render(
        "experiments/seeds.md",
        c10=c10,
        c1=c1,
        pair=pair,
        vs_single=[
            (n, vs_single(n)) for n in variants_of(g, algorithms, exp="ab", ld=c10) if n != "single"
        ],
        k6=points(g, "k6", algorithms),
        shares=shares,
        claims=found,
    )
    return text, found


@dataclass(frozen=True)
class Block:
    """results/README.md's experiments region, and the claims it decides."""

    text: str
    claims: list[Claim]


def loaded(root: Path) -> tuple[list[Run], dict[str, Any], list[str]]:
    """Every run's figures under `root`, its meta.json, and the algorithms it compared."""
    runs = load_runs(root)
    meta = rawstore.read_meta(root)
    return runs, meta, meta.get("algorithms") or sorted({r["variant"] for r in runs})


def readme_block(root: Path) -> Block | None:
    """results/README.md's experiments region, from the raw files under `root` alone."""
    runs, meta, algorithms = loaded(root)
    if not runs:
        return None
    seeds, found = seed_figures(groups(runs), algorithms)
    text = templates.render(
        "experiments/block.md",
        head=head(root, runs, meta),
        seeds=seeds,
        where=root.name,
        plots=[m for m in PLOTS if (root / m).exists()],
    )
    return Block(text, found)


def summary(
    root: Path, runs: list[Run], meta: dict[str, Any], algorithms: list[str], made: list[str]
) -> str:
    """summary.md: how the runs were measured, every point's table, the plots `made`."""
    g = groups(runs)
    return templates.render(
        "experiments/summary.md",
        head=head(root, runs, meta),
        ab=points(g, "ab", algorithms),
        clients=[(p, p.per_server()) for p in points(g, "clients", algorithms)],
        k6=points(g, "k6", algorithms, by_shape=True),
        plots=made,
        rps_of=lambda p, n: med(g, Key("ab", p.sc, n, p.ld), "rps"),
        zip=zip,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.experiments.report")
    p.add_argument("--out", default=str(outdir.RESULTS / "experiments"))
    a = p.parse_args(argv)
    root = Path(a.out)
    try:
        runs, meta, algorithms = loaded(root)
    except rawstore.RawError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    if not runs:
        print(f"report: no runs under {root / 'raw'}", file=sys.stderr)
        return 1
    zero = switch_ceiling(root.parent)["zero"]
    made = plots(groups(runs), algorithms, root, zero["median"] if zero else None)
    (root / "summary.md").write_text(summary(root, runs, meta, algorithms, made))
    (root / "runs.json").write_text(json.dumps(runs, indent=1))
    print(f"report: {len(runs)} runs -> {root / 'summary.md'}, {', '.join(made)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
