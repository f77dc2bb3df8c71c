"""The pages bench.report and bench.experiments.report write under results/ are what their
Markdown templates make of the committed raw files: regenerating changes nothing, so a page
never drifts from its figures."""

from __future__ import annotations

import json

from bench import outdir, report, templates
from bench.experiments import report as experiments


def test_the_switch_page_is_what_its_template_makes_of_the_committed_files() -> None:
    out = outdir.RESULTS / "switch"
    model = json.loads((out / "collision_model.json").read_text())
    assert report.page(out, model) == (out / "README.md").read_text()


def test_the_switch_page_leaves_out_what_a_partial_run_lacks(tmp_path) -> None:
    model = [{"live": 1000, "before": 0.0142, "after": 0.0}]
    text = report.page(tmp_path, model)
    assert "| 1000 | 1.42% | 0.000% |" in text and text.endswith("(collisions.png)\n")
    assert "## Packet rate" not in text and "## The floor" not in text


def test_the_experiments_summary_is_what_its_template_makes_of_the_raw_files() -> None:
    root = outdir.RESULTS / "experiments"
    runs, meta, algorithms = experiments.loaded(root)
    made = [m for m in experiments.PLOTS if (root / m).exists()]
    page = experiments.summary(root, runs, meta, algorithms, made)
    assert page == (root / "summary.md").read_text()


def test_a_wrapped_paragraph_comes_out_on_one_line() -> None:
    text = templates.unwrap("one\n  two\n; three\n(four)\n")
    assert text == "one two; three (four)"
    share = {"median": 0.5, "min": 0.25, "max": 1.0}
    assert templates.mmm(share, ".1f", 100) == "50.0 (25.0–100.0)"
