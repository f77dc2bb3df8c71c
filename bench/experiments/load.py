"""Load generators run inside Mininet hosts, ab (one, or one per source address) and k6
(bench/experiments/shapes.js), their output written to the run's directory, and its parsing."""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.experiments.plan import K6Shape
from topology import ab

HERE = Path(__file__).resolve().parent
K6_SCRIPT = HERE / "shapes.js"


def k6_binary() -> str | None:
    """k6 on PATH or where `go install go.k6.io/k6@v1.8.1` puts it; None when absent."""
    homes = {os.path.expanduser("~"), os.environ.get("SUDO_HOME", ""), "/root"}
    places = [Path(h or "/nonexistent") / "go" / "bin" / "k6" for h in homes]
    if gopath := os.environ.get("GOPATH"):
        places.append(Path(gopath) / "bin" / "k6")
    found = [str(p) for p in places if p.is_file() and os.access(p, os.X_OK)]
    return shutil.which("k6") or next(iter(found), None)


def run_ab(host: Any, url: str, n: int, concurrency: int, out: Path, timeout_s: float) -> str:
    """One ab from `host`; its text report is written to out/ab.txt and returned."""
    p = host.popen(
        ab.command(url, n, concurrency, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    text = output(p, timeout_s)
    (out / "ab.txt").write_text(text)
    tsv = out / "ab.tsv"  # one row a request: gzip keeps the full profile's raw/ small
    if tsv.exists():
        tsv.with_name("ab.tsv.gz").write_bytes(gzip.compress(tsv.read_bytes(), mtime=0))
        tsv.unlink()
    return text


def run_ab_sources(
    sources: dict[Any, list[str]], url: str, per_address: int, out: Path, timeout_s: float
) -> dict[str, str]:
    """ab -c 1 -n `per_address` from every source address of every client host, all at
    once; each report goes to out/ab-<address>.txt. Returns {address: report}."""
    procs = []
    for host, addresses in sources.items():
        for a in addresses:
            cmd = ab.command(url, per_address, 1, out, source=a)
            procs.append((a, host.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    reports = {}
    for a, p in procs:
        reports[a] = output(p, timeout_s)
        (out / f"ab-{a}.txt").write_text(reports[a])
    pack(out, "ab-*", SOURCES_TAR)
    return reports


def output(p: subprocess.Popen[bytes], timeout_s: float) -> str:
    """What a client process printed; one still running after `timeout_s` is killed (said)."""
    try:
        return p.communicate(timeout=timeout_s)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()[0].decode(errors="replace") + "\n[killed: timeout]\n"


SOURCES_TAR = "ab-sources.tar.gz"


def pack(out: Path, pattern: str, name: str) -> None:
    """Move the files matching `pattern` in `out` into one tar.gz (read back by unpacked())."""
    files = sorted(p for p in out.glob(pattern) if p.name != name)
    with tarfile.open(out / name, "w:gz") as tar:
        for f in files:
            tar.add(f, arcname=f.name)
    for f in files:
        f.unlink()


def unpacked(out: Path, name: str = SOURCES_TAR) -> dict[str, bytes]:
    """{file name: content} of a run's packed files."""
    if not (out / name).exists():
        return {}
    with tarfile.open(out / name, "r:gz") as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def k6_env(shape: K6Shape, url: str, summary: Path) -> dict[str, str]:
    """What shapes.js reads: the shape's name and fields, the URL and the summary's path."""
    fields = {k.upper(): str(v) for k, v in dataclasses.asdict(shape).items() if k != "name"}
    return {"SHAPE": shape.name, **fields, "URL": url, "SUMMARY": str(summary)}


def run_k6(
    k6: str, sources: dict[Any, list[str]], shape: K6Shape, url: str, out: Path, timeout_s: float
) -> None:
    """One k6 per client host, at once, its VUs spread over the host's source addresses
    (--local-ips); per host a JSON summary and every request's duration (CSV, gzip)."""
    procs = []
    for host, addresses in sources.items():
        summary = out / f"k6-{host.name}.json"
        cmd = [k6, "run", "--quiet", "--no-color", "--no-usage-report"]
        cmd += ["--local-ips", ",".join(addresses)]
        cmd += ["--out", f"csv={out / f'k6-{host.name}.csv.gz'}"]
        for k, v in k6_env(shape, url, summary).items():
            cmd += ["-e", f"{k}={v}"]
        cmd.append(str(K6_SCRIPT))
        env = {"HOME": str(out), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        env["K6_NO_USAGE_REPORT"] = "true"
        p = host.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        procs.append((host.name, p))
    for name, p in procs:
        text = output(p, timeout_s)
        (out / f"k6-{name}.txt").write_text(text)
        trim_k6_csv(out / f"k6-{name}.csv.gz")


# The rows of k6's CSV the figures read (each request's duration and outcome, how the arrival
# rate was met), of the ~15 it writes a request.
K6_KEPT = frozenset({"http_req_duration", "http_req_failed", "dropped_iterations", "vus"})


def trim_k6_csv(csv_gz: Path) -> None:
    """Keep only K6_KEPT's rows in k6's CSV output, in place; a file cut short is left as is."""
    if not csv_gz.exists():
        return
    try:
        with gzip.open(csv_gz, "rt") as f:
            header = f.readline()
            i_name = header.rstrip("\n").split(",").index("metric_name")
            kept = [ln for ln in f if ln.split(",", i_name + 1)[i_name] in K6_KEPT]
    except (EOFError, gzip.BadGzipFile, ValueError):
        return
    tmp = csv_gz.with_name(csv_gz.name + ".tmp")
    with gzip.open(tmp, "wt") as f:
        f.write(header)
        f.writelines(kept)
    tmp.replace(csv_gz)


def ab_times_ms(tsv: Path | bytes) -> list[float]:
    """Per-request total times (ms) from ab's -g file ('ttime' column; the file or its
    .gz beside it), or its content."""
    if isinstance(tsv, Path):
        gz = tsv.with_name(tsv.name + ".gz")
        if gz.exists():
            tsv = gzip.decompress(gz.read_bytes())
        elif tsv.exists():
            tsv = tsv.read_bytes()
        else:
            return []
    rows = tsv.decode().splitlines()
    if not rows:
        return []
    col = rows[0].split("\t").index("ttime")
    return [float(r.split("\t")[col]) for r in rows[1:] if r.strip()]


def k6_requests(csv_gz: Path) -> tuple[list[float], int]:
    """(request durations in ms, failed requests) from k6's CSV output."""
    rows = list(k6_rows(csv_gz))
    durations = [value for name, _, value in rows if name == "http_req_duration"]
    return durations, sum(1 for name, _, value in rows if name == "http_req_failed" and value > 0)


def k6_outcomes(csv_gz: Path) -> list[tuple[float, bool]]:
    """(timestamp s, failed) of every request (http_req_failed row) in k6's CSV output."""
    return [(ts, value > 0) for name, ts, value in k6_rows(csv_gz) if name == "http_req_failed"]


def k6_rows(csv_gz: Path) -> Iterator[tuple[str, float, float]]:
    """(metric name, timestamp s, value) of every full row of k6's CSV output, if any."""
    if not csv_gz.exists():
        return
    with gzip.open(csv_gz, "rt") as f:
        header = f.readline().rstrip("\n").split(",")
        i_name, i_ts, i_val = (
            header.index(k) for k in ("metric_name", "timestamp", "metric_value")
        )
        for line in f:
            cells = line.rstrip("\n").split(",")
            if len(cells) > max(i_name, i_ts, i_val):
                yield cells[i_name], float(cells[i_ts]), float(cells[i_val])
