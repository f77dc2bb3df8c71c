"""k6's breakpoint as a measured figure: the highest rate of requests that
completed, over a sliding window of seconds, while the share of failed requests in that
window stayed below a threshold. The planned arrival rate at the moment k6 stopped is
reported beside it, labelled as planned: it is what k6 was asked to send, not what the
servers answered. Pure functions over per-second counts from k6's CSV output."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

WINDOW_S = 3
MAX_FAIL = 0.01  # k6's own threshold in shapes.js: http_req_failed rate < 1 %


def per_second(rows: Iterable[tuple[float, bool]]) -> dict[int, tuple[int, int]]:
    """{second: (completed, failed)} from (timestamp s, failed) per request."""
    out: dict[int, tuple[int, int]] = {}
    for ts, failed in rows:
        ok, bad = out.get(int(ts), (0, 0))
        out[int(ts)] = (ok + (not failed), bad + bool(failed))
    return out


def merge(counts: Iterable[dict[int, tuple[int, int]]]) -> dict[int, tuple[int, int]]:
    """Several clients' per-second counts added (the clients share a clock)."""
    out: dict[int, tuple[int, int]] = {}
    for c in counts:
        for s, (ok, bad) in c.items():
            o, b = out.get(s, (0, 0))
            out[s] = (o + ok, b + bad)
    return out


def completed_rate(
    counts: dict[int, tuple[int, int]], window_s: int = WINDOW_S, max_fail: float = MAX_FAIL
) -> dict[str, Any]:
    """The highest completed requests/s over any `window_s` consecutive seconds (seconds
    without a request count as 0) whose failed share is below `max_fail`; None when no
    window qualifies. The first and last second are partial and left out when there are
    more than window_s + 2 seconds."""
    if not counts:
        return {"completed_rps": None, "window_s": window_s, "max_fail": max_fail, "at_s": None}
    first, last = min(counts), max(counts)
    if last - first + 1 > window_s + 2:
        first, last = first + 1, last - 1
    best: float | None = None
    at = None
    for start in range(first, last - window_s + 2):
        cells = [counts.get(s, (0, 0)) for s in range(start, start + window_s)]
        ok = sum(c[0] for c in cells)
        bad = sum(c[1] for c in cells)
        if ok + bad and bad / (ok + bad) < max_fail and (best is None or ok / window_s > best):
            best, at = ok / window_s, start - min(counts)
    return {"completed_rps": best, "window_s": window_s, "max_fail": max_fail, "at_s": at}


def planned_rate(rate: int, ramp_s: float, stopped_s: float, clients: int) -> float:
    """The arrival rate (all clients) k6 had been asked for when it stopped: each client
    ramps linearly from 1 to `rate` requests/s over `ramp_s`."""
    return (1 + (rate - 1) * min(1.0, stopped_s / ramp_s)) * clients
