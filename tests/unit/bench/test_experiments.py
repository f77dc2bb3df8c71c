"""The experiment suite's pure parts (bench/experiments), run everywhere: every algorithm of
the program joins the plan by name, and the report's percentiles, bands and breakpoint rate."""

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
    assert set(reps) == set(range(QUICK.reps)) and QUICK.reps >= 3


def test_percentiles_bands_and_breakpoint_rate() -> None:
    from bench.experiments.load import percentile
    from bench.experiments.report import breakpoint_rate, delay_band, throughput_band

    xs = [float(x) for x in range(1, 101)]
    assert (percentile(xs, 50), percentile(xs, 95), percentile(xs, 100)) == (50.0, 95.0, 100.0)
    assert percentile([], 95) == 0.0
    assert delay_band(149) == "Excellent / TIPHON very good"
    assert (delay_band(150), delay_band(449), delay_band(450)) == ("Good", "Fair / medium", "Poor")
    assert (throughput_band(100), throughput_band(2100)) == ("Bad", "Excellent")
    rec = {"load": {"name": "breakpoint", "rate": 101, "ramp_s": 10}}
    half = [{"state": {"testRunDurationMs": 5000.0}}] * 3
    assert breakpoint_rate(rec, half) == 3 * 51.0
