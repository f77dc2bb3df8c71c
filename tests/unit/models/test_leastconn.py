from __future__ import annotations

import pytest

from p4lb.models.leastconn import (
    POLICIES,
    Scenario,
    argmin,
    first_lightest,
    lighter,
    simulate,
)


def test_lighter_compares_load_after_adding_by_weight() -> None:
    # (3+1)/2 = 2 against (1+1)/1 = 2: a tie goes to the first candidate.
    assert lighter([3, 1], [2, 1], 0, 1) == 0
    assert lighter([1, 3], [1, 2], 0, 1) == 0
    assert lighter([4, 1], [2, 1], 0, 1) == 1
    # Idle backends: the heavier one is the less loaded after adding.
    assert lighter([0, 0], [1, 4], 0, 1) == 1


def test_argmin_is_the_exact_weighted_minimum() -> None:
    assert argmin([5, 2, 9], [1, 1, 1]) == 1
    assert argmin([5, 2, 9], [10, 1, 1]) == 0
    assert argmin([0, 0, 0], [1, 3, 2]) == 1
    assert argmin([0, 0], [0, 1]) == 1
    with pytest.raises(ValueError):
        argmin([0], [0])


SMALL = Scenario((1, 1, 4), mean_active=60.0, arrivals=8000, seed=3)


def test_simulation_is_deterministic() -> None:
    assert simulate(SMALL, "p2c") == simulate(SMALL, "p2c")


def test_exact_argmin_balances_best_and_follows_the_weights() -> None:
    out = {p: simulate(SMALL, p) for p in POLICIES}
    assert out["argmin"].max_over_mean <= min(o.max_over_mean for o in out.values())
    assert out["argmin"].max_over_mean < 1.1
    assert out["argmin"].jain > 0.99
    for share, w in zip(out["argmin"].shares, (1, 1, 4), strict=True):
        assert abs(share - w / 6) < 0.02


def test_p2c_needs_weighted_candidates_when_weights_are_skewed() -> None:
    uniform = simulate(SMALL, "p2c")
    weighted = simulate(SMALL, "p2c_weighted")
    # Uniform candidates propose the weight-4 backend in only 5/9 of pairs: under-served.
    assert uniform.shares[2] < 0.6
    assert abs(weighted.shares[2] - 4 / 6) < 0.03
    assert weighted.max_over_mean < uniform.max_over_mean


def test_the_data_planes_distinct_pairs_follow_the_weights_near_the_argmin() -> None:
    pairs, exact = simulate(SMALL, "p2c_pairs"), simulate(SMALL, "argmin")
    assert abs(pairs.shares[2] - 4 / 6) < 0.03
    assert pairs.max_over_mean < simulate(SMALL, "hash").max_over_mean
    assert pairs.max_over_mean < exact.max_over_mean * 1.1


def test_load_feedback_beats_plain_hashing() -> None:
    assert simulate(SMALL, "p2c_weighted").max_over_mean < simulate(SMALL, "hash").max_over_mean


def test_bad_scenarios_are_rejected() -> None:
    with pytest.raises(ValueError):
        simulate(SMALL, "random")
    with pytest.raises(ValueError):
        simulate(Scenario((1, 0), 10.0, 100), "argmin")


def test_the_data_planes_exact_choice_balances_like_argmin() -> None:
    """choices = "all": every backend in every slot, so the same minimum as argmin; only
    the tie-breaking differs (the hash's rotation, not the lowest index)."""
    exact, argmin_ = simulate(SMALL, "exact"), simulate(SMALL, "argmin")
    assert exact.max_over_mean < argmin_.max_over_mean * 1.02
    assert exact.max_over_mean < simulate(SMALL, "p2c_pairs").max_over_mean


def test_more_choices_balance_better_on_many_backends() -> None:
    """With 16 equal backends, d = 2, 4, 8 and all: the imbalance falls as d grows."""
    sc = Scenario((1,) * 16, mean_active=64.0, arrivals=8000, seed=5)
    ratios = [simulate(sc, p).max_over_mean for p in ("p2c_pairs", "d4", "d8", "exact")]
    assert ratios == sorted(ratios, reverse=True), ratios
    assert ratios[-1] < ratios[0]


def test_first_lightest_keeps_the_first_of_equals() -> None:
    assert first_lightest([2, 1, 1], [1, 1, 1], [0, 2, 1]) == 2
    assert first_lightest([0, 0, 0], [1, 1, 1], [1, 0, 2]) == 1
    assert first_lightest([3, 0, 0], [4, 1, 1], [0, 1]) == 0  # 4/4 = 1 ties 1/1
