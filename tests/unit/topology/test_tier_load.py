"""What the tier's overload figures are made of: the seconds a router had fewer next hops
than balancers (or none) from its samples, and ab's numbers from its summary; the bounded
wait every wait for the tier's routes is."""

from __future__ import annotations

import pytest

from topology.tier_load import parse_ab, route_gaps, waited

A, B, C = "10.10.0.41", "10.10.0.42", "10.10.0.43"


@pytest.mark.parametrize(
    ("description", "samples", "until", "expected"),
    [
        (
            "steady",
            [(0.0, [A, B, C]), (0.2, [A, B, C])],
            0.4,
            {"s_below_n": 0.0, "s_none": 0.0, "changes": 0, "fewest": 3},
        ),
        # Each sample holds until the next: one out from 0.2 to 0.6.
        (
            "one out, back",
            [(0.0, [A, B, C]), (0.2, [A, C]), (0.6, [A, B, C])],
            1.0,
            {"s_below_n": pytest.approx(0.4), "s_none": 0.0, "changes": 2, "fewest": 2},
        ),
        (
            "dark",
            [(0.0, [A]), (1.0, []), (2.5, [A, B, C])],
            3.0,
            {
                "s_below_n": pytest.approx(2.5),
                "s_none": pytest.approx(1.5),
                "changes": 2,
                "fewest": 0,
            },
        ),
        (
            "the last sample holds until the end",
            [(0.0, [A, B])],
            5.0,
            {"s_below_n": pytest.approx(5.0), "s_none": 0.0, "changes": 0, "fewest": 2},
        ),
    ],
)
def test_route_gaps(
    description: str, samples: list[tuple[float, list[str]]], until: float, expected: dict
) -> None:
    assert route_gaps(samples, 3, until) == expected, description


AB_OUT = """Concurrency Level:      64
Time taken for tests:   60.004 seconds
Complete requests:      37912
Failed requests:        25
Requests per second:    631.83 [#/sec] (mean)
Time per request:       101.293 [ms] (mean)
Time per request:       1.583 [ms] (mean, across all concurrent requests)
Transfer rate:          512.40 [Kbytes/sec] received

Percentage of the requests served within a certain time (ms)
  50%     98
  95%    130
  99%    160
"""


def test_parse_ab_takes_the_summary_and_the_per_request_mean() -> None:
    assert parse_ab(AB_OUT) == {
        "complete": 37912,
        "failed": 25,
        "rps": 631.83,
        "ms_per_request": 101.293,
    }
    assert parse_ab("apr_pollset_poll: The timeout specified has expired (70007)") == {
        "complete": 0.0,
        "failed": 0.0,
        "rps": 0.0,
        "ms_per_request": 0.0,
    }


def test_waited_is_the_seconds_until_a_check_holds_or_none_at_its_bound() -> None:
    calls = iter([False, False, True])
    took = waited(lambda: next(calls), 5.0)
    assert took is not None and 0.0 < took < 5.0  # two 10 ms polls before it held
    assert waited(lambda: False, 0.05) is None
