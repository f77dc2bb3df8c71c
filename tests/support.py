"""What the tests of every layer share: the labs' bounded poll (topology.procs.poll_until),
and reading a metrics endpoint.

Each layer's own scaffolding is its `support.py` (tests/unit/support.py, tests/dataplane/
support.py, tests/e2e/support.py); a module that is one thing is named for it (the fake
switch, the docs' commands, the stand-in apt repository)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from topology.procs import poll_until

__all__ = ["poll_until", "samples", "scrape"]

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
