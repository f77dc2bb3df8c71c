"""bench.provenance: the CPU samples of our processes, the other processes' CPU share, the
refusal or marker when the machine is busy, BMv2's build flags, the variants' order, and
the block a results file carries."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from bench import provenance as pv


def test_a_sample_holds_our_process_tree_and_adopted_daemons_only() -> None:
    """Our children are ours; an adopted process outside our tree is ours; one not adopted is
    not; a pid that ended is skipped."""
    hold = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))", "30"]
    child = subprocess.Popen(hold)
    # The daemon: started by a shell that exits at once, so it leaves our tree.
    daemon = subprocess.run(
        ["sh", "-c", f'setsid {shlex.join(hold)} >/dev/null 2>&1 & echo "$!"'],
        capture_output=True,
        text=True,
    )
    daemon_pid = int(daemon.stdout)
    try:
        assert psutil.Process(daemon_pid).ppid() != os.getpid()
        gone = subprocess.Popen(["true"])
        gone.wait()
        s = pv.sample(daemon_pid, gone.pid)
        assert {os.getpid(), child.pid, daemon_pid} <= set(s.ours)
        assert gone.pid not in s.ours and 1 not in s.ours
        assert 0 <= s.busy <= s.total and all(t >= 0 for t in s.ours.values())
        assert daemon_pid not in pv.sample().ours
    finally:
        child.kill()
        os.kill(daemon_pid, 9)
        child.wait()


def test_other_share_subtracts_our_own_tree() -> None:
    a = pv.Sample(busy=1000, total=4000, ours={1: 100})
    b = pv.Sample(busy=1600, total=5000, ours={1: 400})  # 600 busy of 1000, 300 of it ours
    assert pv.other_share(a, b) == pytest.approx(0.3)
    assert pv.other_share(a, a) == 0.0


def test_a_busy_process_of_ours_that_ended_does_not_make_the_machine_look_busy() -> None:
    # Switch 2 (5,000 CPU seconds of history) was stopped and switch 3 started in between: 600
    # busy of 1000, 300 of it by process 1 and 200 by the new switch, 100 by others.
    a = pv.Sample(busy=1000, total=4000, ours={1: 100, 2: 5000})
    b = pv.Sample(busy=1600, total=5000, ours={1: 400, 3: 200})
    assert pv.other_share(a, b) == pytest.approx(0.1)
    # A process adopted late with a long past counts at most the interval.
    c = pv.Sample(busy=2600, total=6000, ours={1: 400, 3: 200, 4: 90_000})
    assert pv.other_share(b, c) == 0.0


def test_a_child_that_ended_and_was_waited_for_counts_as_ours() -> None:
    # 600 busy of 1000: 100 by process 1; process 2 (seen at 50) ended and was waited for
    # at 250 (the kernel's children's time grew by 250); process 5 started and ended inside
    # (its 100 in the children's time too). Others: 600 - 100 - 200 - 100 = 200.
    a = pv.Sample(busy=1000, total=4000, ours={1: 100, 2: 50}, reaped=10)
    b = pv.Sample(busy=1600, total=5000, ours={1: 200}, reaped=360)
    assert pv.other_share(a, b) == pytest.approx(0.2)
    # On real processes: a child that burns CPU and is waited for between two samples.
    before = pv.sample()
    subprocess.run([sys.executable, "-c", "sum(range(3_000_000))"], check=True)
    after = pv.sample()
    assert after.reaped - before.reaped > 0.01
    blind = pv.Sample(after.busy, after.total, after.ours, before.reaped)
    assert pv.other_share(before, after) < pv.other_share(before, blind)


def test_busy_machine_refused_or_marked_and_quiet_one_passes() -> None:
    assert pv.load_verdict(0.10, 0.25, allow_busy=False) == (True, None)
    ok, why = pv.load_verdict(0.40, 0.25, allow_busy=False)
    assert not ok and "40%" in str(why) and "25%" in str(why)
    ok, marker = pv.load_verdict(0.40, 0.25, allow_busy=True)
    assert ok and str(marker).startswith("BUSY")


def test_limit_from_the_environment() -> None:
    assert pv.max_other_cpu({}) == pv.MAX_OTHER_CPU_DEFAULT
    assert pv.max_other_cpu({"P4LB_MAX_OTHER_CPU": "0.1"}) == pytest.approx(0.1)
    assert pv.max_other_cpu({"P4LB_MAX_OTHER_CPU": "40%"}) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="P4LB_MAX_OTHER_CPU"):
        pv.max_other_cpu({"P4LB_MAX_OTHER_CPU": "lots"})
    with pytest.raises(ValueError, match="0..1"):
        pv.max_other_cpu({"P4LB_MAX_OTHER_CPU": "2"})


def fake_switch(prefix: Path, version: str) -> Path:
    binary = prefix / "bin" / "simple_switch_grpc"
    binary.parent.mkdir(parents=True)
    binary.write_text(f"#!/bin/sh\necho {version}\n")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    return binary


def test_bmv2_build_flags_from_the_source_routes_stamp(tmp_path: Path) -> None:
    speed = fake_switch(tmp_path / "speed", "1.15.5-abc")
    plain = fake_switch(tmp_path / "plain", "1.15.5-def")
    src = tmp_path / "src"
    for name, prefix, extra in (
        ("bmv2-speed", tmp_path / "speed", " --disable-logging-macros CXXFLAGS=-O3"),
        ("bmv2", tmp_path / "plain", ""),
    ):
        (src / "build" / name).mkdir(parents=True)
        (src / "build" / name / ".p4lb-configure").write_text(f"{prefix} --with-pi{extra}\n")
    s = pv.bmv2_build(str(speed), (str(src),))
    assert s["version"] == "1.15.5-abc" and s["kind"] == "speed"
    assert "--disable-logging-macros" in s["configure"]
    p = pv.bmv2_build(str(plain), (str(src),))
    assert p["kind"] == "standard" and p["configure"] == ["--with-pi"]


def test_configure_arguments_keep_their_quoting_from_config_log(tmp_path: Path) -> None:
    speed = fake_switch(tmp_path / "speed", "1.15.5-abc")
    build = tmp_path / "src" / "build" / "bmv2-speed"
    build.mkdir(parents=True)
    (build / ".p4lb-configure").write_text(f"{tmp_path / 'speed'} CPPFLAGS=-Ia -Ib\n")
    (build / "config.log").write_text(
        "This file contains any messages produced by compilers\n\n"
        f"  $ /src/configure --prefix={tmp_path / 'speed'} 'CPPFLAGS=-Ia -Ib' "
        "--disable-logging-macros\n"
    )
    info = pv.bmv2_build(str(speed), (str(tmp_path / "src"),))
    assert info["configure"] == ["CPPFLAGS=-Ia -Ib", "--disable-logging-macros"]
    assert info["configure_from"].endswith("config.log") and info["kind"] == "speed"
    assert pv.configure_from_log("no such line\n") is None


def test_bmv2_build_without_a_stamp_says_unknown_and_where_it_looked(tmp_path: Path) -> None:
    b = fake_switch(tmp_path / "elsewhere", "1.15.5-x")
    info = pv.bmv2_build(str(b), (str(tmp_path / "nothing"),))
    assert info["configure"] == "unknown" and info["kind"] == "unknown"
    assert str(tmp_path / "elsewhere") in info["configure_from"]


def test_interleaved_runs_every_variant_once_per_repetition_reproducibly() -> None:
    variants = ["baseline", "iphash", "wrr", "leastconn"]
    orders = pv.interleaved(variants, 6, seed=5)
    assert len(orders) == 6 and all(sorted(o) == sorted(variants) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # shuffled, not one fixed order
    assert pv.interleaved(variants, 6, seed=5) == orders
    assert pv.interleaved(variants, 6, 5, "speed") != orders  # each build its own orders


def test_collected_facts_name_code_tools_and_machine() -> None:
    facts = pv.collect("test", {"standard": "/nonexistent/simple_switch_grpc"}, ["x", "--y"])
    assert set(facts) >= {"started", "git", "p4_stamp", "p4c", "bmv2", "machine", "command"}
    assert len(facts["git"]["commit"]) == 40 and isinstance(facts["git"]["dirty"], bool)
    assert len(facts["p4_stamp"]["sources_sha256"]) == 64
    assert facts["machine"]["cores"] == os.cpu_count() and facts["machine"]["memory_gib"] > 0
    assert facts["bmv2"]["standard"]["version"] is None  # no such binary: nothing invented
    assert facts["command"] == "x --y"


def test_finish_records_load_order_and_marks_a_busy_run() -> None:
    run = pv.Run("t", [], {"git": {}}, limit=0.25, shares=[0.1, 0.5, 0.2])
    block = run.finish(3, order="each build's `order`")
    assert block["load"]["other_cpu_max"] == 0.5 and block["load"]["samples"] == 3
    assert "BUSY" in block["load"]["marker"] and block["repetitions"] == 3
    assert block["order"] == "each build's `order`"
    quiet = pv.Run("t", [], {"git": {}}, limit=0.25, shares=[0.1]).finish(1)
    assert "marker" not in quiet["load"]


def test_describe_says_not_recorded_for_files_before_issue_33() -> None:
    assert pv.NOT_RECORDED in pv.describe({"when": "2026-11-23T00:00:00Z"})
    doc = {
        "provenance": {
            "started": "2026-11-27T00:00:00Z",
            "git": {"commit": "a" * 40, "dirty": True},
            "p4_stamp": {"sources_sha256": "b" * 64},
            "p4c": "1.2.5.16",
            "bmv2": {"speed": {"version": "1.15.5", "kind": "speed"}},
            "machine": {"cores": 2},
            "load": {"other_cpu_median": 0.05, "marker": "BUSY: x"},
            "repetitions": 5,
        }
    }
    text = pv.describe(doc)
    assert "aaaaaaaaaa (dirty)" in text and "speed 1.15.5 (speed)" in text
    assert "BUSY: x" in text and "repetitions 5" in text and "5%" in text


def scripted_samples(monkeypatch: pytest.MonkeyPatch, other: float) -> None:
    """sample() returns a machine on which other processes use `other` of the CPU."""
    state = {"n": 0}

    def sample(*adopted: int) -> pv.Sample:
        state["n"] += 1
        k = state["n"]
        return pv.Sample(busy=int(1000 * other * k), total=1000 * k, ours={})

    monkeypatch.setattr(pv, "sample", sample)
    monkeypatch.setattr(pv, "SAMPLE_S", 0.01)


def test_start_refuses_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_samples(monkeypatch, 0.6)
    monkeypatch.delenv("P4LB_ALLOW_BUSY", raising=False)
    monkeypatch.setenv("P4LB_MAX_OTHER_CPU", "0.3")
    with pytest.raises(pv.BusyMachine, match="60%.*limit 30%.*P4LB_ALLOW_BUSY"):
        pv.start("bench-x", None, [], probe_s=0)


def test_start_on_a_busy_machine_when_allowed_marks_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripted_samples(monkeypatch, 0.6)
    monkeypatch.setenv("P4LB_ALLOW_BUSY", "1")
    run = pv.start("bench-x", None, ["bench-x"], probe_s=0)
    block = run.finish(5)
    assert block["load"]["marker"].startswith("BUSY") and block["other_cpu_at_start"] == 0.6
    assert block["bench"] == "bench-x" and block["repetitions"] == 5


def test_start_on_a_quiet_machine_samples_the_load_until_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripted_samples(monkeypatch, 0.05)
    monkeypatch.delenv("P4LB_ALLOW_BUSY", raising=False)
    run = pv.start("bench-x", None, [], probe_s=0)
    for _ in range(200):  # bounded: the sampler's first readings
        if len(run.shares) >= 2:
            break
        run._stop.wait(0.01)
    block = run.finish(1)
    assert block["load"]["samples"] >= 2 and "marker" not in block["load"]
    assert block["load"]["other_cpu_max"] == pytest.approx(0.05)


def test_describe_a_computed_file_without_load() -> None:
    doc = {"provenance": pv.collect("algorithms")}
    text = pv.describe(doc)
    assert text.startswith("computed") and "no timing" in text


def test_the_dirty_flag_is_about_code_not_the_results_a_run_writes(tmp_path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text("1")
    (tmp_path / "bench.py").write_text("a")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert pv.git_state(tmp_path)["dirty"] is False
    (tmp_path / "results" / "x.json").write_text("2")
    assert pv.git_state(tmp_path)["dirty"] is False
    (tmp_path / "bench.py").write_text("b")
    assert pv.git_state(tmp_path)["dirty"] is True
