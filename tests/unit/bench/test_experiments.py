"""The experiment suite's pure parts (bench/experiments), run everywhere: every algorithm of
the program joins the plan by name, variants take turns within each repetition in a
shuffled order, many-source runs draw their addresses anew per repetition, and the report's
percentiles and bands."""

from __future__ import annotations

from bench.experiments.plan import SCENARIOS


def test_every_algorithm_of_the_program_joins_by_name() -> None:
    from bench.experiments.plan import QUICK, variants
    from bench.experiments.run import jobs

    algs = ("iphash", "wrr", "some_new_algorithm")
    assert [v.name for v in variants(algs, SCENARIOS["equal"])] == list(algs)
    assert [v.name for v in variants(algs, SCENARIOS["1:2:2"])] == [*algs, "rr"]
    planned = {(j.experiment, j.variant.name) for j in jobs(QUICK, algs, True, {"ab", "clients"})}
    assert ("ab", "some_new_algorithm") in planned
    assert ("clients", "some_new_algorithm") in planned
    assert ("ab", "single") in planned and ("clients", "single") not in planned
    reps = [j.rep for j in jobs(QUICK, algs, False, {"ab"})]
    assert set(reps) == set(range(QUICK.reps)) and QUICK.reps >= 5


def test_variants_take_turns_within_each_repetition_in_a_seeded_shuffled_order() -> None:
    from bench.experiments.plan import QUICK
    from bench.experiments.run import jobs

    algs = ("iphash", "wrr", "srchash", "maglev")
    todo = [j for j in jobs(QUICK, algs, False, {"ab"}, seed=7) if j.scenario.name == "equal"]
    orders = []
    for r in range(QUICK.reps):
        in_rep = [j for j in todo if j.rep == r]
        # a repetition is contiguous: every variant's loads, then the next variant
        assert todo[r * len(in_rep) : (r + 1) * len(in_rep)] == in_rep
        order = list(dict.fromkeys(j.variant.name for j in in_rep))
        assert sorted(order) == sorted([*algs, "single"])
        orders.append(order)
    assert len({tuple(o) for o in orders}) > 1
    assert jobs(QUICK, algs, False, {"ab"}, seed=7) == jobs(QUICK, algs, False, {"ab"}, seed=7)


def test_each_repetition_draws_other_client_addresses() -> None:
    from bench.experiments.run import draw_sources

    pool = [f"10.1.0.{i}" for i in range(1, 33)]
    draws = {tuple(draw_sources(pool, 8, seed)) for seed in range(5)}
    assert len(draws) == 5 and all(len(d) == 8 and set(d) <= set(pool) for d in draws)
    assert draw_sources(pool, 8, 3) == draw_sources(pool, 8, 3)
    assert draw_sources(pool[:2], 8, 0) == sorted(pool[:2])


def test_percentiles_and_bands() -> None:
    from bench.experiments.load import percentile
    from bench.experiments.report import delay_band, throughput_band

    xs = [float(x) for x in range(1, 101)]
    assert (percentile(xs, 50), percentile(xs, 95), percentile(xs, 100)) == (50.0, 95.0, 100.0)
    assert percentile([], 95) == 0.0
    assert delay_band(149) == "Excellent / TIPHON very good"
    assert (delay_band(150), delay_band(449), delay_band(450)) == ("Good", "Fair / medium", "Poor")
    assert (throughput_band(100), throughput_band(2100)) == ("Bad", "Excellent")
