"""What the tests of every layer share: a bounded poll, and reading a metrics endpoint.

Each layer's own scaffolding is its `support.py` (tests/unit/support.py, tests/dataplane/
support.py, tests/e2e/support.py); a module that is one thing is named for it (the fake
switch, the docs' commands, the stand-in apt repository)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

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


# A Prometheus exposition's samples, by (sample name, labels).
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int, path: str = "/metrics") -> str:
    """GET a page of a local metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=20) as r:
        return str(r.read().decode())


def samples(text: str) -> Samples:
    """Every sample of an exposition, by (sample name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
