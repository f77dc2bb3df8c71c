"""k6's breakpoint as the highest completed rate with failures below the threshold, the
planned rate beside it (bench.experiments.breakpoint), from k6's CSV output."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bench.experiments import breakpoint as bp
from bench.experiments.load import k6_outcomes


def test_per_second_counts_and_clients_merged() -> None:
    a = bp.per_second([(100.2, False), (100.9, True), (101.0, False)])
    assert a == {100: (1, 1), 101: (1, 0)}
    assert bp.merge([a, {101: (2, 0), 102: (1, 0)}]) == {100: (1, 1), 101: (3, 0), 102: (1, 0)}


def test_highest_completed_rate_skips_windows_with_failures() -> None:
    # A ramp: 10, 20, ... 80 completed per second; seconds 6-8 fail a tenth of theirs.
    counts = {s: (10 * (s + 1), 0) for s in range(10)}
    for s in (6, 7, 8):
        counts[s] = (10 * (s + 1), 8)
    r = bp.completed_rate(counts, window_s=3, max_fail=0.01)
    # First and last second left out (partial); windows touching 6..8 fail: 3-5 is best.
    assert r["completed_rps"] == pytest.approx((40 + 50 + 60) / 3)
    assert r["at_s"] == 3
    lenient = bp.completed_rate(counts, window_s=3, max_fail=0.5)
    assert lenient["completed_rps"] == pytest.approx((70 + 80 + 90) / 3)


def test_no_qualifying_window_is_none_not_a_number() -> None:
    assert bp.completed_rate({1: (1, 5), 2: (1, 5)}, window_s=1)["completed_rps"] is None
    assert bp.completed_rate({})["completed_rps"] is None


def test_planned_rate_is_the_ramp_at_the_stop() -> None:
    assert bp.planned_rate(101, 10, 5.0, 3) == 3 * 51.0
    assert bp.planned_rate(101, 10, 60.0, 1) == 101.0  # capped at the target


def test_k6_outcomes_read_the_failed_rows_of_the_csv(tmp_path: Path) -> None:
    csv = tmp_path / "k6.csv.gz"
    header = "metric_name,timestamp,metric_value,check\n"
    rows = [
        "http_reqs,100,1.000000,\n",
        "http_req_duration,100,29.5,\n",
        "http_req_failed,100,0.000000,\n",
        "http_req_failed,101,1.000000,\n",
    ]
    with gzip.open(csv, "wt") as f:
        f.write(header + "".join(rows))
    assert k6_outcomes(csv) == [(100.0, False), (101.0, True)]
    assert k6_outcomes(tmp_path / "missing.csv.gz") == []


def test_trimmed_k6_csv_keeps_what_the_figures_read(tmp_path: Path) -> None:
    from bench.experiments.load import k6_requests, trim_k6_csv

    csv = tmp_path / "k6.csv.gz"
    rows = [
        "http_reqs,100,1.000000,\n",
        "http_req_waiting,100,29.1,\n",
        "http_req_duration,100,29.5,\n",
        "http_req_failed,100,0.000000,\n",
        "vus,100,8,\n",
        "iteration_duration,101,31.0,\n",
        "http_req_duration,101,40.0,\n",
        "http_req_failed,101,1.000000,\n",
    ]
    with gzip.open(csv, "wt") as f:
        f.write("metric_name,timestamp,metric_value,check\n" + "".join(rows))
    before = (k6_requests(csv), k6_outcomes(csv))
    trim_k6_csv(csv)
    assert (k6_requests(csv), k6_outcomes(csv)) == before
    with gzip.open(csv, "rt") as f:
        kept = [ln.split(",")[0] for ln in f]
    assert kept == ["metric_name", "http_req_duration", "http_req_failed", "vus"] + [
        "http_req_duration",
        "http_req_failed",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["k6.csv.gz"]
    trim_k6_csv(tmp_path / "missing.csv.gz")  # a k6 that wrote nothing: nothing to trim
    cut = gzip.compress(("metric_name,timestamp\n" + "".join(rows)).encode())[:-12]
    (tmp_path / "cut.csv.gz").write_bytes(cut)  # k6 killed at the timeout
    trim_k6_csv(tmp_path / "cut.csv.gz")
    assert (tmp_path / "cut.csv.gz").read_bytes() == cut
