"""What the tests of every layer share: a bounded poll.

Each layer's own scaffolding is its `support.py` (tests/unit/support.py, tests/dataplane/
support.py, tests/e2e/support.py); a module that is one thing is named for it (the fake
switch, the docs' commands, the stand-in apt repository)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(
    check: Callable[[], T], timeout: float = 10.0, what: str | None = None, *, every: float = 0.01
) -> T:
    """Call `check()` every `every` seconds until it returns something true, for at most
    `timeout` seconds; what it returned last (false if it never held; it is called once more
    at the deadline). With `what`, a check that never held fails the test, naming it. For
    state that nothing signals: a file another process writes, a switch's counter, a route."""
    deadline = time.monotonic() + timeout
    while not (got := check()) and time.monotonic() < deadline:
        time.sleep(max(0.0, min(every, deadline - time.monotonic())))
    if not got and what is not None:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
    return got
