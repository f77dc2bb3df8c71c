"""The experiment run's directory and its meta.json: earlier raw runs kept or cleared, what a
resumed run must share with the one it continues, and how a run's invocations are chained."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from bench import provenance, rawstore
from bench.experiments import load as loadgen
from bench.experiments.counters import busiest
from bench.experiments.matrix import Job
from bench.provenance import now as now  # bench.experiments.run reads it


def versions() -> dict[str, Any]:
    """The facts a resumed run must share with the one it continues (bench.provenance's)."""
    k6 = loadgen.k6_binary()
    machine = provenance.machine()
    bmv2 = shutil.which("simple_switch_grpc") or ""
    return {
        "commit": provenance.git_state()["commit"],
        # The program that ran (the work tree's, which may be ahead of the commit).
        "p4_program": provenance.p4_stamp()["sources_sha256"],
        "bmv2": f"{bmv2} {provenance.version_line(['simple_switch_grpc', '--version']) or ''}",
        "ab": provenance.version_line(["ab", "-V"]) or "missing",
        "k6": (provenance.version_line([k6, "version"]) or "") if k6 else "missing",
        "kernel": machine["kernel"],
        "cpus": machine["cores"],
        "python": machine["python"],
    }


def resumed_seed(root: Path, facts: dict[str, Any]) -> int | None:
    """The order seed of the run in `root` that --resume continues (None: none yet); ValueError
    when its runs could not be one run with this one's (another profile, P4 program, BMv2)."""
    meta_p = root / "meta.json"
    if not meta_p.exists():
        return None
    meta = json.loads(meta_p.read_text())
    for key, what in (("profile", "profile"), ("p4_program", "P4 program"), ("bmv2", "BMv2")):
        if meta.get(key) != facts.get(key):
            raise ValueError(
                f"{meta_p}: its runs have {what} {meta.get(key)!r}, this one {facts.get(key)!r}; "
                "--resume continues a run only on the same (start one in another --out)"
            )
    if "order_seed" not in meta:
        raise ValueError(f"{meta_p}: no order_seed, so the variants' order cannot be continued")
    return int(meta["order_seed"])


def order_seed(root: Path, facts: dict[str, Any], resume: bool, asked: int | None) -> int:
    """The seed of the variants' order: the resumed run's, else `asked` (--order-seed), else
    the clock's; ValueError when `asked` is not the resumed run's."""
    earlier = resumed_seed(root, facts) if resume else None
    if earlier is not None and asked not in (None, earlier):
        raise ValueError(f"--order-seed {asked}, but the run in {root} has {earlier}")
    return next(x for x in (earlier, asked, int(time.time()) % 1_000_000) if x is not None)


def opening(
    facts: dict[str, Any], algs: tuple[str, ...], invocation: list[str], todo: list[Job], seed: int
) -> dict[str, Any]:
    """What an invocation records at its start (main adds its end)."""
    return facts | {
        "algorithms": list(algs),
        "invocation": invocation,
        "started": now(),
        "invocation_started": now(),
        "finished": None,
        "loadavg_at_start": list(os.getloadavg()),
        "busiest_processes_at_start": busiest(),
        "runs_planned": len(todo),
        "order_seed": seed,
        "order": [[j.scenario.name, j.rep, j.variant.name, j.load.name] for j in todo],
    }


def fresh_root(root: Path, keep: bool) -> None:
    """Without `keep` earlier raw runs go; with it an archived run is unpacked into raw/."""
    if not keep:
        shutil.rmtree(root / "raw", ignore_errors=True)
        (root / rawstore.ARCHIVE).unlink(missing_ok=True)
    elif not (root / "raw").is_dir() and (root / rawstore.ARCHIVE).exists():
        rawstore.unpack(root)
    root.mkdir(parents=True, exist_ok=True)


def chained(meta: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """This invocation's meta continuing `earlier` (the meta.json already in --out): the
    earlier invocations in order, the start the first's, the same plan's order kept once."""
    earlier = dict(earlier)
    if earlier.get("order") == meta["order"]:
        del earlier["order"]
    return meta | {
        "earlier_invocations": earlier.pop("earlier_invocations", []) + [earlier],
        "started": earlier["started"],
        "loadavg_at_start": earlier["loadavg_at_start"],
        "busiest_processes_at_start": earlier.get("busiest_processes_at_start", []),
    }
