"""The experiment runner's pure parts (bench/experiments: matrix, counters, meta, run): the
part of the matrix a command line asks for, what a run counts from the access logs and the
kernels' counters, the order seed a run continues with, the output directory cleared or
kept, and when the run writes into the committed results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.experiments import counters, meta, run
from bench.experiments.matrix import jobs
from bench.experiments.plan import FULL, QUICK, Profile


def test_a_part_of_the_matrix_keeps_only_its_scenarios_and_variants() -> None:
    algs = ("iphash", "wrr")
    every = jobs(FULL, algs, True, {"ab", "clients", "k6"}, seed=3)
    part = jobs(FULL, algs, True, {"ab", "clients", "k6"}, 3, ["1:2:2"], ["wrr", "single"])
    wanted = [
        j for j in every if j.scenario.name == "1:2:2" and j.variant.name in ("wrr", "single")
    ]
    assert part == wanted
    assert {j.variant.name for j in part} == {"wrr", "single"}
    assert jobs(FULL, algs, True, {"ab"}, 3, None, ["rr"]) == [
        j for j in jobs(FULL, algs, True, {"ab"}, 3) if j.variant.name == "rr"
    ]


def test_an_access_log_is_read_from_where_the_run_began(tmp_path: Path) -> None:
    log = tmp_path / "h2.log"
    log.write_text("10.1.0.1 - 200\n10.1.0.2 - 200\n")
    start = counters.line_count(log)
    with log.open("a") as f:
        f.write("10.1.0.3 - 200\n\n10.1.0.4 - 000\n10.1.0.3 - 200\n")
    entries = counters.log_tail(log, start)
    assert start == 2
    assert [e[0] for e in entries] == ["10.1.0.3", "10.1.0.4", "10.1.0.3"]  # blank left out
    assert counters.requests(entries) == 2  # the connection without a request is not one


def test_tcp_counters_and_their_change() -> None:
    snmp = (
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Tcp: RtoAlgorithm ActiveOpens PassiveOpens RetransSegs\nTcp: 1 5 7 2\n"
    )
    host = SimpleNamespace(cmd=lambda c: snmp if c == "cat /proc/net/snmp" else "")
    got = counters.tcp_counters(host)
    assert got == {"RtoAlgorithm": 1, "ActiveOpens": 5, "PassiveOpens": 7, "RetransSegs": 2}
    assert counters.tcp_counters(SimpleNamespace(cmd=lambda c: "")) == {}
    assert counters.delta({"a": 5, "b": 3}, {"a": 2}) == {"a": 3, "b": 3}


def test_the_order_seed_is_the_resumed_runs_then_the_asked_one(tmp_path: Path) -> None:
    facts = {"profile": "full", "p4_program": "abc", "bmv2": "x"}
    assert meta.order_seed(tmp_path, facts, resume=True, asked=9) == 9  # nothing to resume
    assert meta.order_seed(tmp_path, facts, resume=False, asked=9) == 9
    assert 0 <= meta.order_seed(tmp_path, facts, resume=False, asked=None) < 1_000_000
    (tmp_path / "meta.json").write_text(json.dumps(facts | {"order_seed": 41}))
    assert meta.order_seed(tmp_path, facts, resume=True, asked=None) == 41
    assert meta.order_seed(tmp_path, facts, resume=True, asked=41) == 41
    assert meta.order_seed(tmp_path, facts, resume=False, asked=9) == 9  # not resumed
    with pytest.raises(ValueError, match="--order-seed 9, but the run in .* has 41"):
        meta.order_seed(tmp_path, facts, resume=True, asked=9)


def test_earlier_raw_runs_are_cleared_unless_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import rawstore

    (tmp_path / "raw" / "ab").mkdir(parents=True)
    (tmp_path / rawstore.ARCHIVE).write_bytes(b"x")
    meta.fresh_root(tmp_path, keep=True)
    assert (tmp_path / "raw" / "ab").is_dir() and (tmp_path / rawstore.ARCHIVE).exists()
    meta.fresh_root(tmp_path, keep=False)
    assert not (tmp_path / "raw").exists() and not (tmp_path / rawstore.ARCHIVE).exists()
    # a completed run kept as its archive: unpacked, so --resume finds its runs
    (tmp_path / rawstore.ARCHIVE).write_bytes(b"x")
    unpacked: list[Path] = []
    monkeypatch.setattr(rawstore, "unpack", unpacked.append)
    meta.fresh_root(tmp_path, keep=True)
    assert unpacked == [tmp_path]
    fresh = tmp_path / "new" / "dir"
    meta.fresh_root(fresh, keep=False)
    assert fresh.is_dir()


def test_only_the_whole_full_profile_is_the_committed_run() -> None:
    def args(*argv: str) -> tuple[argparse.Namespace, Profile]:
        a = run.arguments(list(argv))
        return a, {"quick": QUICK, "full": FULL}[a.profile]

    assert run.is_committed(*args("--profile", "full"))
    assert run.is_committed(*args("--profile", "full", "--reps", "9"))
    assert run.is_committed(*args("--profile", "full", "--only", "k6", "ab", "clients"))
    for partial in (
        (),  # the quick profile, the default
        ("--profile", "full", "--reps", "2"),
        ("--profile", "full", "--only", "ab"),
        ("--profile", "full", "--scenarios", "equal"),
        ("--profile", "full", "--variants", "wrr"),
    ):
        assert not run.is_committed(*args(*partial)), partial


def test_k6_is_found_on_path_or_where_go_install_puts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.experiments.load import k6_binary

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SUDO_HOME", raising=False)
    monkeypatch.setenv("GOPATH", str(tmp_path / "gopath"))
    if Path("/root/go/bin/k6").exists():
        pytest.skip("/root/go/bin/k6 exists: the absent case cannot be seen here")
    assert k6_binary() is None
    in_gopath = tmp_path / "gopath" / "bin" / "k6"
    in_gopath.parent.mkdir(parents=True)
    in_gopath.write_text("#!/bin/sh\n")
    assert k6_binary() is None  # not executable: not a k6 to run
    in_gopath.chmod(0o755)
    assert k6_binary() == str(in_gopath)
    on_path = tmp_path / "empty" / "k6"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert k6_binary() == str(on_path)  # PATH first
