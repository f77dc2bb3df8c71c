"""bench-peers' counts (bench.peers): each program's instructions per packet on the client
mix, interleaved per repetition (its runner spec), or, with --breakdown, each path's
instructions by BMv2's phases."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench import floor_program, instructions, lab, peer_program, runner, stats, templates, traffic
from bench.peer_program import PATHS, client_traffic, interleaved, pcap, program_names, programs


def instructions_of(t: runner.Trial, name: str) -> tuple[float, float]:
    """One program's instructions per packet on the client mix (compiled once a run)."""
    shape = lab.Shape(flows=t.args.flows)
    compiled = t.workdir / "programs.json"
    if not compiled.exists():  # the floor and the peer, compiled into the run's directory
        paths = {p.name: str(p.json) for p in programs(t.args, t.workdir, shape) if p.json}
        compiled.write_text(json.dumps(paths))
    json_path = json.loads(compiled.read_text()).get(name)
    setup = floor_program.program_floor if name == "floor-state" else peer_program.program_peer
    prog = (
        lab.Program(name, shape, Path(json_path), setup) if json_path else lab.Program(name, shape)
    )
    direct = name == "baseline"
    mix = t.workdir / f"client-{'direct' if direct else 'vip'}.pcap"
    if not mix.exists():  # built once a run
        traffic.write_pcap(client_traffic(t.args.flows, direct), mix)
    return instructions.instructions_once(name, t.binary, t.args, t.workdir, mix, prog)


def figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    total = {name: [a for _, a in v] for name, v in values.items()}
    res: dict[str, Any] = {}
    for name, v in values.items():
        p = res[name] = {
            "all_threads": stats.summary(total[name]),
            "busiest_thread": stats.summary([b for b, _ in v]),
        }
        for other in ("baseline", "peer", "peer-log-free"):
            if other in total and other != name:
                p[f"all_vs_{other}_per_rep"] = stats.summary(
                    [x / o for x, o in zip(total[name], total[other], strict=True)]
                )
    return {"programs": res}


# The interleaved repetitions, run by bench.runner.measure_build (main below keeps the
# command line: the breakdown shares it).
SPEC = runner.Spec(
    prog="bench-peers",
    doc=__doc__ or "",
    subdir="switch",
    filename="peers.json",
    reps=3,
    tools=(),
    options=lambda ap: None,
    committed=(),
    variants=program_names,
    measure=instructions_of,
    figures=figures,
    order_in_build=True,
)


def measure(build: str, binary: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    return runner.measure_build(SPEC, runner.Trial(build, binary, args, workdir))


def path_groups(workdir: Path, flows: int, direct: bool) -> list[dict[str, tuple[Path, int]]]:
    """Per group of 50 connections, each path's pcap and the port it is sent on (a reply
    on its backend's)."""
    per_flow = [peer_program.flow_paths(i, direct) for i in range(flows)]
    kind = "direct" if direct else "vip"
    return [
        {
            path: (
                pcap(
                    workdir,
                    f"{kind}-{g}-{path}",
                    interleaved([p[path] for p in per_flow[g : g + 50]]),
                ),
                2 if path == "reply" else 1,
            )
            for path in PATHS
        }
        for g in range(0, flows, 50)
    ]


def breakdown(build: str, binary: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Per program, each path's instructions per packet by phase (bench.instructions)."""
    shape = lab.Shape(flows=args.flows)
    res: dict[str, Any] = {"binary": binary, "programs": {}}
    for prog in programs(args, workdir, shape):
        groups = path_groups(workdir, args.flows, prog.name == "baseline")
        runner.progress(f"{build} breakdown {prog.name}")
        res["programs"][prog.name] = instructions.breakdown_once(prog, binary, workdir, groups)
    return res


def breakdown_markdown(result: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """The breakdown as tables: per build, each path's phases per program (thousands of
    instructions per packet); with `before` (an earlier breakdown), its totals beside."""
    text = templates.render(
        "switch/cost_breakdown.md", r=result, before=before, paths=PATHS, phases=instructions.PHASES
    )
    return text.rstrip("\n") + "\n"
