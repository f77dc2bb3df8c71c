"""The provenance region: how each results file says it was measured, one row a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import provenance, rawstore, templates
from bench.provenance import NOT_RECORDED
from bench.readme_figures.common import Slots

PROVENANCE_FILES = (
    "dsr/dsr.json",
    "tier/ha.json",
    "experiments/meta.json",
    "experiments-full/meta.json",
    "switch/switch.json",
    "switch/ab.json",
    "switch/floor.json",
    "switch/flood.json",
    "controller.json",
    "algorithms/maglev.json",
    "algorithms/leastconn.json",
    "algorithms/choices.json",
    "algorithms/restore.json",
    "switch/peers.json",
    "switch/cost_breakdown.json",
    "tier/tier.json",
    "tier/cookie.json",
    "meta.json",
)


def describe_file(doc: Any) -> str:
    """How a results file says it was measured, or what an older one lacks."""

    def file(kind: str, p: Any) -> str:
        text = templates.render("regions/_file.md", kind=kind, p=p, not_recorded=NOT_RECORDED)
        return text.rstrip("\n")

    if isinstance(doc, dict) and isinstance(doc.get("meta"), dict):
        doc = doc["meta"]  # algorithms/*.json
    if isinstance(doc, dict) and isinstance(doc.get("provenance"), dict):
        p = doc["provenance"]
        if "git" not in p and "commit" in p:  # the tier's own record, from before
            return file("tier", p)
        return provenance.describe(doc)
    if isinstance(doc, dict) and isinstance(doc.get("commit"), str):  # meta.json files
        return file("meta", doc)
    return provenance.describe(doc if isinstance(doc, dict) else {})


def provenance_table(root: Path) -> Slots:
    """Each results file with how it was measured (None: not in this tree) and, for a run
    kept as raw files, how many of its planned runs are recorded."""
    from bench.experiments.report import parts_text

    rows = []
    for rel in PROVENANCE_FILES:
        p = root / rel
        if not p.exists():
            rows.append((rel, None, ""))
            continue
        doc = json.loads(p.read_text())
        parts = ""
        if p.name == "meta.json" and rawstore.has_raw(p.parent):
            parts = parts_text(doc, rawstore.run_count(p.parent)).replace("**", "")
        rows.append((rel, describe_file(doc), parts))
    return {"rows": rows}
