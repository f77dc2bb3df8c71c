"""Which balancers announce: a gone switch is withdrawn at once, a silent one only after the
hold and never below the floor, one withdrawn for silence returns only once settled."""

from __future__ import annotations

import pytest

from p4lb.service.announce import Policy, View, decide, floor

P = Policy(hold_s=3.0, settle_s=2.0)


def serving(
    name: str, announced: bool = True, withdrawn_silent: bool = False, serving_s: float = 60.0
) -> View:
    return View(
        name,
        announced,
        serving=True,
        drained=False,
        gone=False,
        serving_s=serving_s,
        withdrawn_silent=withdrawn_silent,
    )


def silent(name: str, for_s: float) -> View:
    return View(name, True, serving=False, drained=False, gone=False, silent_s=for_s)


def gone(name: str) -> View:
    return View(name, True, serving=False, drained=False, gone=True)


@pytest.mark.parametrize(("n", "least"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (16, 8)])
def test_the_floor_is_a_majority(n: int, least: int) -> None:
    assert floor(n) == least


@pytest.mark.parametrize(
    ("description", "views", "announced"),
    [
        ("all serving", [serving("a"), serving("b"), serving("c")], {"a", "b", "c"}),
        ("a gone switch goes at once", [gone("a"), serving("b"), serving("c")], {"b", "c"}),
        ("every switch gone: nothing to announce", [gone("a"), gone("b")], set()),
        (
            "silent within the hold stays",
            [silent("a", 2.9), serving("b"), serving("c")],
            {"a", "b", "c"},
        ),
        (
            "silent past the hold goes, above the floor",
            [silent("a", 3.0), serving("b"), serving("c")],
            {"b", "c"},
        ),
        # 3 balancers, floor 2: of two silent ones only the longest silent goes.
        ("two silent: one goes", [silent("a", 5.0), silent("b", 9.0), serving("c")], {"a", "c"}),
        (
            "all silent: the floor stays",
            [silent("a", 5.0), silent("b", 9.0), silent("c", 7.0)],
            {"a", "c"},
        ),
        # Gone switches count toward n but not toward what is announced.
        ("gone ones do not lower the floor", [gone("a"), gone("b"), silent("c", 30.0)], {"c"}),
        (
            "drained ones do not count",
            [
                View("a", True, serving=True, drained=True, gone=False, serving_s=9.0),
                silent("b", 30.0),
                serving("c"),
            ],
            {"c"},
        ),
        (
            "never announced, silent: stays out",
            [
                View("a", False, serving=False, drained=False, gone=False, silent_s=1.0),
                serving("b"),
            ],
            {"b"},
        ),
        (
            "joined for the first time: announces at once",
            [View("a", False, serving=True, drained=False, gone=False, serving_s=0.0)],
            {"a"},
        ),
        (
            "back from silence, not settled: waits",
            [serving("a", announced=False, withdrawn_silent=True, serving_s=1.9), serving("b")],
            {"b"},
        ),
        (
            "back from silence, settled: announces",
            [serving("a", announced=False, withdrawn_silent=True, serving_s=2.0), serving("b")],
            {"a", "b"},
        ),
        (
            "back after a restart (gone): announces at once",
            [serving("a", announced=False, withdrawn_silent=False, serving_s=0.1), serving("b")],
            {"a", "b"},
        ),
    ],
)
def test_decide(description: str, views: list[View], announced: set[str]) -> None:
    assert decide(views, P) == announced, description


def test_overload_never_withdraws_below_the_floor_whatever_the_order() -> None:
    """Silence arriving at every balancer in turn (an overload cascading): at every step at
    least a majority stays announced, and only silence past the hold withdraws any."""
    names = [f"lb{i}" for i in range(1, 6)]
    for start in range(5):
        views = [serving(n) for n in names]
        for k in range(5):
            i = (start + k) % 5
            views[i] = silent(names[i], 3.0 + k)
            chosen = decide(views, P)
            assert len(chosen) >= floor(5)
            views = [
                View(
                    v.name, v.name in chosen, v.serving, v.drained, v.gone, v.silent_s, v.serving_s
                )
                for v in views
            ]
