"""`make results`' plan (bench.results): every bench in order, then the generators; the
quick profile's short arguments into the scratch tree, the full profile's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import outdir, results

BUILDS = {"standard": "/usr/local/bin/simple_switch_grpc", "speed": "/opt/s/simple_switch_grpc"}


def test_quick_plan_runs_every_bench_in_order_then_the_generators() -> None:
    steps = results.plan("quick", outdir.SCRATCH, BUILDS, "py")
    names = [s.name for s in steps]
    assert names == [
        "experiments",
        "switch",
        "ab",
        "floor",
        "flood",
        "controller",
        "tier",
        "cookie",
        "choices",
        "restore peer",
        "qos",
        "peers",
        "cost breakdown",
        "algorithms",
        "switch tables",
        "experiments tables",
        "README regions",
    ]
    switch = next(s for s in steps if s.name == "switch").argv
    assert switch[switch.index("--reps") : switch.index("--reps") + 2] == ["--reps", "1"]
    assert f"speed={BUILDS['speed']}" in switch
    flood = next(s for s in steps if s.name == "flood").argv  # every build in one run
    assert f"standard={BUILDS['standard']}" in flood and f"speed={BUILDS['speed']}" in flood
    assert steps[-1].argv[-2:] == ["--results", str(outdir.SCRATCH)]
    assert not any(s.switch for s in steps[-4:])
    qos = next(s for s in steps if s.name == "qos").argv
    assert qos[qos.index("--out") + 1] == str(outdir.SCRATCH / "qos")  # never results/qos
    # Without the peer's source the comparison is named as skipped, not run.
    assert all(
        s.skip and "PEER_P4" in s.skip for s in steps if s.name in ("peers", "cost breakdown")
    )


def test_the_peer_is_passed_to_both_cost_steps() -> None:
    steps = results.plan("quick", outdir.SCRATCH, BUILDS, "py", "/tmp/peer.p4")
    for s in (s for s in steps if s.name in ("peers", "cost breakdown")):
        assert not s.skip and s.argv[s.argv.index("--peer") + 1] == "/tmp/peer.p4"


def test_full_plan_uses_each_benchs_defaults() -> None:
    steps = results.plan("full", outdir.RESULTS, BUILDS, "py")
    flat = [a for s in steps for a in s.argv]
    assert "--reps" not in flat and "--no-timed" not in flat
    assert "full" in next(s for s in steps if s.name == "experiments").argv
    assert "--path-instructions" in next(s for s in steps if s.name == "switch").argv


def test_where_each_profile_writes_and_a_bad_profile() -> None:
    assert results.default_dir("quick", None) == outdir.SCRATCH
    assert results.default_dir("full", None) == outdir.RESULTS
    assert results.default_dir("quick", "results") == outdir.ROOT / "results"
    assert results.default_dir("full", "/tmp/r") == Path("/tmp/r")
    with pytest.raises(ValueError, match="profile"):
        results.plan("medium", outdir.SCRATCH, {}, "py")
    assert results.main(["--profile", "medium"]) == 2


def test_default_builds_find_the_speed_build_by_its_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "speed"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "simple_switch_grpc").write_text("")
    env = {"PATH": str(tmp_path / "empty"), "P4LB_SPEED_PREFIX": str(prefix)}
    assert results.default_builds(env) == {"speed": str(prefix / "bin" / "simple_switch_grpc")}
