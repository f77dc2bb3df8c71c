"""The one bounded poll of the labs, the benches and the tests (topology.procs): it returns
what the check returned as soon as that is true, gives up at the deadline having checked
once more there, and with `what` fails naming what it waited for."""

from __future__ import annotations

import time

import pytest

from topology.procs import poll_until


def test_returns_the_first_true_value_without_waiting_out_the_timeout() -> None:
    calls = iter([0, [], {"up": True}, "never asked"])
    started = time.monotonic()
    assert poll_until(lambda: next(calls), timeout=30) == {"up": True}
    assert time.monotonic() - started < 5


def test_gives_up_at_the_deadline_with_the_last_value_having_checked_there() -> None:
    seen: list[float] = []

    def check() -> int:
        seen.append(time.monotonic())
        return 0

    started = time.monotonic()
    assert poll_until(check, timeout=0.3, every=0.05) == 0
    assert seen[-1] - started >= 0.3  # the last check is at the deadline, not before it
    assert 2 <= len(seen) <= 10  # every 50 ms, not a busy loop
    assert time.monotonic() - started < 5


def test_with_what_a_check_that_never_held_fails_naming_it() -> None:
    with pytest.raises(AssertionError, match=r"^timed out after 0.1 s waiting for h3 DOWN$"):
        poll_until(lambda: False, 0.1, "h3 DOWN")
    assert poll_until(lambda: 7, 0.1, "never needed") == 7
