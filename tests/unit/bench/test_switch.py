"""bench-switch's pure parts: the collisions it reads from `p4lb stats --json`."""

from bench.switch_growth import collisions


def test_collisions_are_summed_wherever_the_stats_nest_them() -> None:
    stats = {
        "vips": [
            {"name": "web", "collisions": 3, "backends": [{"collisions": 4}]},
            {"name": "dns", "collisions": 2},
        ],
        "switch": {"collisions": 1, "other": 9},
    }
    assert collisions(stats) == 10


def test_a_collisions_key_that_is_not_a_count_is_looked_into_not_added() -> None:
    assert collisions({"collisions": {"tcp": 2, "collisions": 5}}) == 5
    assert collisions({"collisions": "n/a", "x": [1, 2]}) == 0
