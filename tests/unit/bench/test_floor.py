"""bench-floor's run, with the switch, callgrind and p4c replaced by scripted results: the
programs take turns within each repetition, each floor level runs its own compiled JSON
with its own table entries, and the ratios are taken repetition by repetition, inverted
for a cost."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench import floor, floor_program, instructions, lab, rate, runner, traffic

# Instructions per packet by program, one value per repetition. Median of the ratios:
# 0.8; ratio of the medians: 150 / 250 = 0.6.
INSTR = {"baseline": [100.0, 200.0, 150.0], "floor-nat": [125.0, 250.0, 300.0]}
ZERO_LOSS = {"baseline": [1000.0, 2000.0, 1000.0], "floor-nat": [900.0, 1000.0, 800.0]}


def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    order: list[str] = []
    reps: dict[str, int] = {}

    def compile_floor(level: int, workdir: Path) -> Path:
        return workdir / f"floor{level}.json"

    def instructions_once(
        name: str, binary: str, args: Any, workdir: Path, pcap: Path, prog: lab.Program
    ) -> tuple[float, float]:
        order.append(f"instr {name} {pcap.name.split('-')[0]}")
        if name != "baseline":
            assert prog.json == workdir / "floor1.json"
            assert prog.setup is floor_program.program_floor
        i = reps.setdefault(name, 0)
        reps[name] += 1
        return INSTR[name][i] / 2, INSTR[name][i]

    running: list[str] = []

    @contextmanager
    def switch_running(prog: lab.Program, *a: Any) -> Iterator[int]:
        running.append(prog.name)
        order.append(f"timed {prog.name}")
        yield 1

    def zero_loss_rate(pcap: Path) -> tuple[float, float]:
        name = running[-1]
        return ZERO_LOSS[name][order.count(f"timed {name}") - 1], 0.0

    monkeypatch.setattr(floor_program, "compile_floor", compile_floor)
    monkeypatch.setattr(instructions, "instructions_once", instructions_once)
    monkeypatch.setattr(lab, "running", switch_running)
    monkeypatch.setattr(rate, "zero_loss_rate", zero_loss_rate)
    monkeypatch.setattr(
        traffic, "pcap_for", lambda shape, direct, wd: wd / ("direct" if direct else "vip")
    )
    args = argparse.Namespace(
        reps=3,
        levels=["floor-nat"],
        algorithms=[],
        instr_flows=10,
        flows=10,
        timed=True,
        order_seed=1,
    )
    trial = runner.Trial("fast", "simple_switch_grpc", args, tmp_path)
    return runner.measure_build(floor.SPEC, trial), order


def test_programs_take_turns_and_only_the_baseline_is_sent_to_the_servers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    res, order = run(monkeypatch, tmp_path)
    assert len(res["order"]) == 3
    for rep, names in enumerate(res["order"]):
        assert sorted(names) == ["baseline", "floor-nat"]
        kind = {"baseline": "direct", "floor-nat": "vip"}
        want = [f"instr {n} {kind[n]}" for n in names] + [f"timed {n}" for n in names]
        assert order[4 * rep : 4 * rep + 4] == want


def test_ratios_are_per_repetition_and_inverted_for_instructions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    res, _ = run(monkeypatch, tmp_path)
    nat = res["programs"]["floor-nat"]
    assert nat["all"]["median"] == 250.0
    assert nat["all_vs_baseline_per_rep"]["median"] == pytest.approx(0.8)
    assert nat["all_vs_baseline_per_rep"]["min"] == pytest.approx(0.5)
    assert nat["busiest_vs_baseline_per_rep"]["median"] == pytest.approx(0.8)
    assert nat["zero_loss_vs_baseline_per_rep"]["median"] == pytest.approx(0.8)
    assert nat["zero_loss_vs_baseline_per_rep"]["max"] == pytest.approx(0.9)
    assert "all_vs_baseline_per_rep" not in res["programs"]["baseline"]


def test_floor_entries_send_the_vip_to_one_backend_and_every_reply_back() -> None:
    shape = lab.Shape(backends=3)
    cmds = floor_program.floor_entries(shape)
    vip = lab.vip_addr(0)
    dnat = [c for c in cmds if c.startswith("table_add floor_vip")]
    snat = [c for c in cmds if c.startswith("table_add floor_reverse")]
    assert len(dnat) == 1
    words = dnat[0].split()
    assert (words[3:5], words[-2:]) == ([vip, "80"], [lab.backend_addr(0, 0, 3), "8000"])
    sources = {c.split()[3] for c in snat}
    assert sources == {lab.backend_addr(0, k, 3) for k in range(3)}
    assert all(c.endswith(f"=> {vip} 80") for c in snat)
