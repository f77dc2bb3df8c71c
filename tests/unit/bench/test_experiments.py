"""The experiment suite's pure parts (bench/experiments), run everywhere: every algorithm of
the program joins the plan by name, variants take turns within each repetition in a
shuffled order, many-source runs draw their addresses anew per repetition, and the report's
percentiles and bands."""

from __future__ import annotations

from pathlib import Path

from bench.experiments.plan import SCENARIOS


def test_every_algorithm_of_the_program_joins_by_name() -> None:
    from bench.experiments.matrix import jobs
    from bench.experiments.plan import QUICK, variants

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
    from bench.experiments.matrix import jobs
    from bench.experiments.plan import QUICK

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
    from bench.experiments.matrix import draw_sources

    pool = [f"10.1.0.{i}" for i in range(1, 33)]
    draws = {tuple(draw_sources(pool, 8, seed)) for seed in range(5)}
    assert len(draws) == 5 and all(len(d) == 8 and set(d) <= set(pool) for d in draws)
    assert draw_sources(pool, 8, 3) == draw_sources(pool, 8, 3)
    assert draw_sources(pool[:2], 8, 0) == sorted(pool[:2])


def test_percentiles_and_bands() -> None:
    from bench.experiments.points import delay_band, throughput_band
    from bench.stats import percentile

    xs = [float(x) for x in range(1, 101)]
    assert (percentile(xs, 50), percentile(xs, 95), percentile(xs, 100)) == (50.0, 95.0, 100.0)
    assert delay_band(149) == "Excellent / TIPHON very good"
    assert (delay_band(150), delay_band(449), delay_band(450)) == ("Good", "Fair / medium", "Poor")
    assert (throughput_band(100), throughput_band(2100)) == ("Bad", "Excellent")


def test_fairness_verdict_needs_the_hash_below_the_rotation_in_every_repetition() -> None:
    from bench.experiments.claims import unfair_verdict

    wrr = [1.0] * 5
    # This run's figures: the hash below 1 in each repetition, as random placement gives.
    assert unfair_verdict([0.9922, 0.9995, 0.9673, 0.9966, 0.9966], wrr) == "reproduced, but small"
    # One repetition where the hash placed 400 requests exactly evenly: no difference shown.
    assert unfair_verdict([0.9922, 1.0, 0.9673, 0.9966, 0.9966], wrr) == "not reproduced"
    assert unfair_verdict([], wrr) == "not reproduced"


def test_random_placement_jain_matches_a_seeded_simulation() -> None:
    import random

    from bench.experiments.claims import random_jain
    from p4lb.stats.fairness import jain

    rng = random.Random(7)
    draws = []
    for _ in range(2000):
        counts = [0, 0, 0]
        for _ in range(400):
            counts[rng.randrange(3)] += 1
        draws.append(jain(counts))
    assert abs(sum(draws) / len(draws) - random_jain(400, 3)) < 0.001
    assert random_jain(400, 3) < random_jain(4000, 3) < 1


def test_least_time_of_a_run_follows_capacity_and_concurrency() -> None:
    from bench.experiments.matrix import Job, run_seconds
    from bench.experiments.plan import SCENARIOS, SINGLE, AbLoad, ClientsLoad, K6Shape, Variant

    eq, wrr = SCENARIOS["equal"], Variant("wrr", "wrr")
    # -c 10 on 6 workers of 25 ms: the servers' 240 requests/s bound it
    assert run_seconds(Job("ab", eq, wrr, AbLoad(400, 10), 0), 3) == 400 / 240
    # no load balancer: one server of 2 workers answers 80 requests/s
    assert run_seconds(Job("ab", eq, SINGLE, AbLoad(400, 10), 0), 3) == 400 / 80
    # srchash sees one source address in ab: one server of 2 workers, as `single`
    srchash = Variant("srchash", "srchash")
    assert run_seconds(Job("ab", eq, srchash, AbLoad(400, 10), 0), 3) == 400 / 80
    # 1:1:4: 40, 40 or 160 requests/s, a third of the time each
    uneven = run_seconds(Job("ab", SCENARIOS["1:1:4"], srchash, AbLoad(480, 10), 0), 3)
    assert abs(uneven - (480 / 40 + 480 / 40 + 480 / 160) / 3) < 1e-9
    # -c 1: one request at a time, 25 ms each, whatever the capacity
    assert run_seconds(Job("ab", eq, wrr, AbLoad(100, 1), 0), 3) == 100 * 0.025
    # 3 clients x 8 addresses x 10 requests = 240 requests at 240/s; each address's 10 in
    # sequence take 0.25 s
    assert run_seconds(Job("clients", eq, wrr, ClientsLoad(8, 10), 0), 3) == 1.0
    k6 = K6Shape("stress", vus=16, ramp_s=5, hold_s=10, down_s=3)
    assert run_seconds(Job("k6", eq, wrr, k6, 0), 3) == 18


def test_resume_continues_one_run_and_skips_what_finished(tmp_path: Path) -> None:
    import json

    import pytest

    from bench.experiments.matrix import jobs, pending
    from bench.experiments.meta import resumed_seed
    from bench.experiments.plan import FULL

    facts = {"profile": "full", "p4_program": "abc", "bmv2": "/usr/local/bin/x 1.15"}
    assert resumed_seed(tmp_path, facts) is None  # nothing there yet: start afresh
    (tmp_path / "meta.json").write_text(json.dumps(facts | {"order_seed": 41}))
    assert resumed_seed(tmp_path, facts) == 41
    with pytest.raises(ValueError, match="P4 program"):
        resumed_seed(tmp_path, facts | {"p4_program": "def"})
    with pytest.raises(ValueError, match="profile"):
        resumed_seed(tmp_path, facts | {"profile": "quick"})

    todo = jobs(FULL, ("iphash", "wrr"), True, {"ab", "clients", "k6"}, seed=41)
    finished, stopped = todo[:7], todo[7]
    for j in finished:
        j.path(tmp_path).mkdir(parents=True)
        (j.path(tmp_path) / "run.json").write_text("{}")
    stopped.path(tmp_path).mkdir(parents=True)  # begun, never recorded: runs again
    assert pending(todo, tmp_path) == todo[7:]


def test_each_part_is_chained_and_the_plan_order_kept_once() -> None:
    from bench.experiments.meta import chained

    order = [["equal", 0, "wrr", "n300-c1"], ["equal", 0, "iphash", "n300-c1"]]
    first = {"started": "T0", "loadavg_at_start": [0.1], "order": order, "commit": "a"}
    second = chained({"started": "T1", "loadavg_at_start": [0.9], "order": order}, first)
    third = chained({"started": "T2", "loadavg_at_start": [0.5], "order": order}, second)
    assert third["started"] == "T0" and third["loadavg_at_start"] == [0.1]
    assert [e["started"] for e in third["earlier_invocations"]] == ["T0", "T0"]
    assert third["earlier_invocations"][0]["commit"] == "a"
    assert all("order" not in e for e in third["earlier_invocations"])
    assert third["order"] == order and first["order"] == order  # the caller's dict untouched
    other = chained({"started": "T3", "loadavg_at_start": [0.2], "order": order[:1]}, first)
    assert other["earlier_invocations"][0]["order"] == order  # another plan keeps its own


def test_a_run_in_parts_says_so() -> None:
    from bench.experiments.measured import parts_text

    first = {"commit": "a" * 40, "started": "T0", "finished": None}
    second = {"commit": "a" * 40, "started": "T0", "finished": "T1", "interrupted": True}
    last = {"commit": "b" * 40, "started": "T0", "finished": "T2"}
    assert parts_text(last, 9) == ""
    text = parts_text(last | {"earlier_invocations": [first, second]}, 9)
    assert "3 parts" in text and "aaaaaaaaaa, bbbbbbbbbb" in text and "T2" in text
    assert "2 of them stopped" in text and "Under way" not in text
    # one part, stopped: how far it got
    one = parts_text(second | {"runs_planned": 2260}, 250)
    assert "250 of the plan's 2260 runs" in one and "1 part " in one
    assert "Under way" not in parts_text(last | {"runs_planned": 9}, 9)


def test_ab_times_read_the_same_from_the_gzipped_file(tmp_path: Path) -> None:
    import gzip

    from bench.experiments.load import ab_times_ms

    tsv = b"starttime\tseconds\tctime\tdtime\tttime\twait\nx\t1\t0\t5\t26\t25\nx\t1\t0\t9\t31\t30\n"
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "ab.tsv").write_bytes(tsv)
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "ab.tsv.gz").write_bytes(gzip.compress(tsv))
    assert ab_times_ms(tmp_path / "plain" / "ab.tsv") == [26.0, 31.0]
    assert ab_times_ms(tmp_path / "gz" / "ab.tsv") == [26.0, 31.0]
    assert ab_times_ms(tmp_path / "none" / "ab.tsv") == []
