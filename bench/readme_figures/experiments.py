"""The regions of experiments/ and algorithms/: the papers' claims, the two profiles side by
side, and the algorithm studies."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import rawstore
from bench.readme_figures.common import MissingFile, Slots, load


def experiments_dir(root: Path) -> Path:
    """The experiments the READMEs quote: the full profile's once all its runs are recorded,
    else the quick profile's."""
    full = root / "experiments-full"
    planned = rawstore.read_meta(full).get("runs_planned")
    if isinstance(planned, int) and rawstore.run_count(full) >= planned:
        return full
    return root / "experiments"


@functools.cache
def _block(where: Path) -> Any:
    from bench.experiments import report

    try:
        block = report.readme_block(where)
    except rawstore.RawError as e:
        raise MissingFile(str(e)) from None
    if block is None:
        raise MissingFile(f"{where.name}/raw")
    return block


def experiments(root: Path) -> Slots:
    return {"text": _block(experiments_dir(root)).text}


def verdicts(root: Path) -> Slots:
    """README.md's list of the seeds' claims with their verdicts and what decided them."""
    return {"claims": _block(experiments_dir(root)).claims}


def profiles_compared(root: Path) -> Slots:
    """Each seed claim on the quick profile beside the full profile's, and what changed."""
    full = root / "experiments-full"
    if experiments_dir(root) != full:
        return {"complete": False}
    quick = {c.claim: c for c in _block(root / "experiments").claims}
    pairs = [(c, quick.get(c.claim)) for c in _block(full).claims]
    changed = [c.claim for c, q in pairs if q is not None and q.verdict != c.verdict]
    return {"complete": True, "pairs": pairs, "changed": changed}


def maglev_plain(root: Path) -> Slots:
    """Plain Maglev's removal disruption over the ideal, over every N (>= 100N tables)."""
    rows = load(root, "algorithms/maglev.json")["disruption"]
    return {"xs": [r["maglev_ladder"]["remove_vs_ideal"] for r in rows]}


def over_argmin(policy: str) -> Callable[[Path], Slots]:
    """A least-connections policy's max/mean over the exact argmin's, over every case of
    algorithms/leastconn.json."""

    def slots(root: Path) -> Slots:
        runs = load(root, "algorithms/leastconn.json")["runs"]
        by = {(r["weights"], r["mean_active_per_backend"], r["policy"]): r for r in runs}
        xs = [
            r["max_over_mean"] / by[(w, n, "argmin")]["max_over_mean"]
            for (w, n, pol), r in by.items()
            if pol == policy
        ]
        return {"xs": xs}

    return slots


def choices_cost(root: Path) -> Slots:
    """What comparing every backend adds to a new connection over two choices, per build and
    pool size (algorithms/choices.json)."""
    doc = load(root, "algorithms/choices.json")

    def more(v: dict[str, Any]) -> float:
        per_syn = {
            k: v[f"leastconn choices={k}"]["busiest_thread_per_syn"]["median"] for k in ("all", "2")
        }
        return float(per_syn["all"] / per_syn["2"] - 1)

    return {
        "builds": [
            (b, [(n, more(v)) for n, v in by_n.items()]) for b, by_n in doc["builds"].items()
        ]
    }


def restore_peer(root: Path) -> Slots:
    """HAProxy's leastconn in the restore scenario: new connections on the restored server."""
    runs = load(root, "algorithms/restore.json")["builds"]["haproxy"]["runs"]
    return {
        "got": sorted({r["new"]["s3"] for r in runs}),
        "total": sum(runs[0]["new"].values()),
        "runs": len(runs),
    }
