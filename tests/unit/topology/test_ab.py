from __future__ import annotations

from pathlib import Path

import pytest

from topology import ab
from topology.ab import parse

REPORT = """This is ApacheBench, Version 2.3 <$Revision: 1903618 $>
Server Software:        BaseHTTP/0.6
Server Hostname:        10.0.0.100
Server Port:            80

Document Path:          /
Document Length:        859 bytes

Concurrency Level:      10
Time taken for tests:   2.513 seconds
Complete requests:      1000
Failed requests:        3
   (Connect: 0, Receive: 0, Length: 3, Exceptions: 0)
Non-2xx responses:      2
Total transferred:      982000 bytes
HTML transferred:       859000 bytes
Requests per second:    397.93 [#/sec] (mean)
Time per request:       25.130 [ms] (mean)
Time per request:       2.513 [ms] (mean, across all concurrent requests)
Transfer rate:          381.61 [Kbytes/sec] received

Percentage of the requests served within a certain time (ms)
  50%     24
  66%     26
  75%     27
  80%     28
  90%     31
  95%     35
  98%     41
  99%     47
 100%     63 (longest request)
"""


def test_parse_reads_every_figure() -> None:
    r = parse(REPORT)
    assert (r.complete, r.failed, r.non_2xx) == (1000, 3, 2)
    assert (r.rps, r.mean_ms, r.transfer_kbps) == (397.93, 25.13, 381.61)
    assert (r.p50_ms, r.p95_ms, r.p99_ms) == (24, 35, 47)


def test_parse_without_non_2xx_line_means_zero() -> None:
    assert parse(REPORT.replace("Non-2xx responses:      2\n", "")).non_2xx == 0


def test_truncated_report_is_an_error_naming_the_missing_line() -> None:
    with pytest.raises(ValueError, match="'rps'"):
        parse(REPORT.split("Requests per second")[0])


def test_access_counts_tell_requests_from_connections(tmp_path: Path) -> None:
    log = tmp_path / "h2.log"
    log.write_text("10.0.0.1 40000 200\n10.0.0.1 40001 -\n10.0.0.1 40002 200\n\n")
    paths = {"h2": str(log)}
    assert ab.access_counts(paths) == {"h2": 2}
    assert ab.access_counts(paths, connections=True) == {"h2": 3}


def test_the_command_keeps_per_request_data_only_when_asked() -> None:
    assert ab.command("http://v/", 10, 2) == [
        "ab",
        "-r",
        "-s",
        "30",
        "-n",
        "10",
        "-c",
        "2",
        "http://v/",
    ]
    cmd = ab.command("http://v/", 10, 1, Path("/r"), source="10.1.0.7")
    assert cmd[cmd.index("-g") + 1] == "/r/ab-10.1.0.7.tsv"
    assert cmd[cmd.index("-e") + 1] == "/r/ab-10.1.0.7.csv"
    assert cmd[cmd.index("-B") + 1] == "10.1.0.7" and cmd[-1] == "http://v/"
