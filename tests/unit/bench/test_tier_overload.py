"""bench-tier's overload points: f x capacity x one request's time in flight, spread over
at most three ab processes, so that 1x, 2x and 3x offer those multiples even when the
tier's capacity is a few requests in flight."""

from bench.tier_overload import BASELINE, Overload


def test_each_point_offers_its_multiple_of_the_capacity_in_flight() -> None:
    # The committed run's idle tier: 573 req/s, 3.37 ms a request: 1.93 requests in flight.
    points = Overload(3, 573.15, 3.37).concurrency()
    assert points == {"1x": [1, 1], "2x": [2, 1, 1], "3x": [2, 2, 2], BASELINE: [64, 64, 64]}
    # A slow tier still gets one request in flight; a fast one spreads evenly.
    assert Overload(3, 10.0, 1.0).concurrency()["3x"] == [1]
    assert Overload(3, 2000.0, 5.0).concurrency()["1x"] == [4, 3, 3]
