"""bench.flood's figures: every repetition kept in the order the file promises (1:1:1's
exactness runs, then 1:2:3's), and the time until a round split exactly again summarized
over the floods that reached it."""

from __future__ import annotations

import argparse

from bench import flood


def test_figures_keep_every_repetition_and_summarize_the_floods_that_split_again() -> None:
    exact = {
        name: [{"weights": w, "rep": r} for r in range(2)] for name, w in flood.WEIGHTS.items()
    }
    floods = [
        {"exact_again_after_s": 3.0},
        {"exact_again_after_s": None},
        {"exact_again_after_s": 1.0},
    ]
    got = flood.figures(argparse.Namespace(), {**exact, "flood": floods})
    assert [r["weights"] for r in got["exactness"]] == [[1, 1, 1]] * 2 + [[1, 2, 3]] * 2
    assert got["flood"] == floods
    again = got["exact_again_after_s"]
    assert (again["n"], again["median"], again["values"]) == (2, 2.0, [3.0, 1.0])
    assert (
        flood.figures(argparse.Namespace(), {**exact, "flood": floods[1:2]})["exact_again_after_s"]
        is None
    )


def test_every_variant_is_measured_by_the_spec() -> None:
    assert flood.SPEC.variants(argparse.Namespace()) == ["exact 1:1:1", "exact 1:2:3", "flood"]
