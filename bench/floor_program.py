"""The floor programs (p4src/bench/floor.p4, one per level) and their table entries, as
bench-floor measures them and bench-peers and bench-cost set them beside the peer."""

from __future__ import annotations

import re
from pathlib import Path

from bench import lab, runner
from bench.outdir import ROOT
from bench.toolchain import compile_p4

FLOOR_P4 = ROOT / "p4src" / "bench" / "floor.p4"
LEVELS = {"floor-nat": 1, "floor-hash": 2, "floor-read": 3, "floor-state": 4}


def p4c_flags() -> list[str]:
    """The flags the Makefile compiles lb.p4 with (its P4C_FLAGS), unused names allowed."""
    found = re.search(r"^P4C_FLAGS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    if found is None:
        raise RuntimeError("Makefile: no P4C_FLAGS line")
    return [*found.group(1).split(), "--Wdisable=unused"]


def compile_floor(level: int, workdir: Path) -> Path:
    return compile_p4(
        FLOOR_P4,
        workdir / f"floor{level}.json",
        [*p4c_flags(), f"-DFLOOR_LEVEL={level}"],
        f"floor.p4 level {level}",
    )


def floor_entries(shape: lab.Shape) -> list[str]:
    """The first VIP's TCP service to its first backend, every backend's replies back to
    the VIP, and a route for the VIP's address (its UDP is routed, not rewritten)."""
    vip, backends = lab.vip_addr(0), shape.backends
    cmds = [
        f"table_add ipv4_route_table forward {vip}/32 => 2 {lab.SWITCH_MAC} {lab.port_mac(2)}",
        f"table_add floor_vip dnat {vip} 80 => {lab.backend_addr(0, 0, backends)} 8000",
    ]
    cmds += [
        f"table_add floor_reverse snat {lab.backend_addr(0, k, backends)} 8000 => {vip} 80"
        for k in range(backends)
    ]
    return cmds


def program_floor(shape: lab.Shape) -> None:
    lab.program_baseline(shape)
    lab.thrift_cli(floor_entries(shape))


def program(t: runner.Trial, name: str, shape: lab.Shape) -> lab.Program:
    """baseline, a floor level (compiled into the run's directory once), or lb.p4."""
    if name not in LEVELS:
        return lab.Program(name, shape)
    json_path = t.workdir / f"floor{LEVELS[name]}.json"
    if not json_path.exists():
        json_path = compile_floor(LEVELS[name], t.workdir)
    return lab.Program(name, shape, json_path, program_floor)
