"""ApacheBench, once for the benches and the tier: its command line, running it from a Mininet
host, and reading its report."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_FIELDS = {
    "complete": r"^Complete requests:\s+(\d+)",
    "failed": r"^Failed requests:\s+(\d+)",
    "non_2xx": r"^Non-2xx responses:\s+(\d+)",
    "rps": r"^Requests per second:\s+([\d.]+)",
    "mean_ms": r"^Time per request:\s+([\d.]+) \[ms\] \(mean\)",
    "transfer_kbps": r"^Transfer rate:\s+([\d.]+) \[Kbytes/sec\]",
    "p50_ms": r"^\s+50%\s+(\d+)",
    "p95_ms": r"^\s+95%\s+(\d+)",
    "p99_ms": r"^\s+99%\s+(\d+)",
}


@dataclass(frozen=True)
class AbResult:
    complete: int
    failed: int
    non_2xx: int
    rps: float
    mean_ms: float
    transfer_kbps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    raw: str


def parse(text: str) -> AbResult:
    """ab's text report -> numbers; a missing line (ab died) is an error naming it."""
    values: dict[str, float] = {}
    for key, pattern in _FIELDS.items():
        m = re.search(pattern, text, re.MULTILINE)
        if m is None:
            if key == "non_2xx":
                values[key] = 0
                continue
            raise ValueError(f"ab output has no {key!r} line:\n{text[-500:]}")
        values[key] = float(m.group(1))
    return AbResult(
        complete=int(values["complete"]),
        failed=int(values["failed"]),
        non_2xx=int(values["non_2xx"]),
        rps=values["rps"],
        mean_ms=values["mean_ms"],
        transfer_kbps=values["transfer_kbps"],
        p50_ms=values["p50_ms"],
        p95_ms=values["p95_ms"],
        p99_ms=values["p99_ms"],
        raw=text,
    )


def command(
    url: str,
    n: int,
    concurrency: int,
    out: Path | None = None,
    source: str | None = None,
    timeout_s: int = 30,
    seconds: int | None = None,
) -> list[str]:
    """`ab -n N -c C`; -r keeps going on socket errors so they are counted. With `out`,
    its per-request data (-g, TSV) and percentile table (-e, CSV) are kept there (as
    ab[-SOURCE].tsv/.csv); `source`: the client address to send from (-B); `seconds`: stop
    after that long (-t) if the N requests are not done by then."""
    cmd = ["ab", "-r", "-s", str(timeout_s), "-n", str(n), "-c", str(concurrency)]
    if seconds:
        cmd += ["-t", str(seconds)]
    if out is not None:
        stem = f"ab-{source}" if source else "ab"
        cmd += ["-g", str(out / f"{stem}.tsv"), "-e", str(out / f"{stem}.csv")]
    if source:
        cmd += ["-B", source]
    return [*cmd, url]


def run(host: Any, url: str, n: int, concurrency: int, timeout_s: int = 30) -> AbResult:
    """`ab -n N -c C` from `host`, its report read."""
    return parse(host.cmd(shlex.join(command(url, n, concurrency, timeout_s=timeout_s)) + " 2>&1"))


def access_counts(log_paths: dict[str, str], connections: bool = False) -> dict[str, int]:
    """Requests each server served (status 200 lines), or with `connections` every TCP
    connection it accepted, with or without a request (what the switch counts)."""
    counts = {}
    for name, path in log_paths.items():
        with open(path) as f:
            lines = [line.split() for line in f if line.strip()]
        counts[name] = sum(1 for x in lines if connections or x[-1] == "200")
    return counts
