"""The experiments' runs grouped into points (bench.experiments.points): which points ran,
in the tables' order, and a point's figure as its median with min and max."""

from __future__ import annotations

from bench.experiments.points import Key, axis, groups, med, points, stat, variants


def run(exp: str, sc: str, n: str, ld: str, rps: float) -> dict[str, object]:
    return {"experiment": exp, "scenario": sc, "variant": n, "load": ld, "rps": rps}


RUNS = [
    run("ab", "equal", "single", "n400-c10", 80.0),
    run("ab", "equal", "zeta", "n400-c10", 200.0),
    run("ab", "equal", "wrr", "n400-c10", 230.0),
    run("ab", "equal", "wrr", "n400-c10", 250.0),
    run("ab", "equal", "wrr", "n400-c10", 240.0),
    run("ab", "1:1:4", "rr", "n400-c10", 150.0),
    run("ab", "equal", "iphash", "n100-c1", 39.0),
    run("k6", "1:2:2", "rr", "breakpoint", 1.0),
    run("k6", "1:2:2", "rr", "stress", 1.0),
]


def test_the_program_s_algorithms_come_first_then_rr_single_and_the_rest() -> None:
    g = groups(RUNS)
    assert variants(g, ["wrr", "iphash"], exp="ab") == ["wrr", "iphash", "rr", "single", "zeta"]
    assert variants(g, ["wrr", "iphash"], exp="ab", sc="equal", ld="n400-c10") == [
        "wrr",
        "single",
        "zeta",
    ]
    assert axis(g, "ld", exp="ab", sc="equal") == {"n400-c10", "n100-c1"}


def test_a_point_is_its_repetitions_median_min_and_max() -> None:
    g = groups(RUNS)
    wrr = Key("ab", "equal", "wrr", "n400-c10")
    assert len(g[wrr]) == 3 and stat(g[wrr], "rps") == (240.0, 230.0, 250.0)
    assert stat(g[wrr], "rps", 0.5) == (120.0, 115.0, 125.0)
    assert stat(g[wrr], "no such figure") == (0.0, 0.0, 0.0)
    assert med(g, wrr, "rps") == 240.0 and med(g, wrr._replace(n="maglev"), "rps") is None


def test_points_come_by_scenario_then_load_k6_by_shape() -> None:
    g = groups(RUNS)
    ab = [(p.sc, p.ld, p.n) for p in points(g, "ab", ["wrr", "iphash"])]
    assert ab[0] == ("1:1:4", "n400-c10", "rr") and ab[1] == ("equal", "n100-c1", "iphash")
    assert [p.ld for p in points(g, "k6", [], by_shape=True)] == ["stress", "breakpoint"]
    assert [p.ld for p in points(g, "k6", [])] == ["breakpoint", "stress"]
