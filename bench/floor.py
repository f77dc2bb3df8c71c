"""`make bench-floor`: what BMv2 charges any NAT load balancer with connection state,
measured on the least such program (p4src/floor.p4), beside plain forwarding and lb.p4.

floor.p4 is plain forwarding with lb.p4's parser and checksums (the transport header
parsed, as a NAT balancer must; baseline.p4 parses none) plus, level by level, the steps
every stateful NAT load balancer takes per packet, and nothing else (one backend per VIP,
nothing expires):
  nat    a VIP table rewrites the client's TCP packets to a backend, a reverse table
         rewrites the replies to the VIP, and the TCP checksum is recomputed both ways;
  hash   + a CRC32 of the client's address and port on every client packet;
  read   + one read of a 64-bit register entry indexed by it;
  state  + a compare with the signature and one write back.
Each level is compiled from the one source with FLOOR_LEVEL (p4c at run time, the flags
the Makefile gives lb.p4). The programs take turns within each repetition on the same
binary and the same packets as `make bench-switch` (baseline: addressed to the servers;
the others: to the VIP), and each figure is given per repetition as a ratio to the
baseline's:
  - instructions per packet under callgrind, all threads and the busiest
    (bench.instructions.instructions_once): exact counts, the measure this comparison rests on;
  - the zero-loss packet rate (bench.rate.zero_loss_rate), which the machine's noise
    moves; --no-timed leaves it out.
A ratio the floor cannot reach, no load balancer of this kind can reach on that build.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import instructions, lab, outdir, profiles, provenance, rate, runner, stats, traffic
from bench.toolchain import p4c_problem

ROOT = Path(__file__).resolve().parents[1]
FLOOR_P4 = ROOT / "p4src" / "floor.p4"
LEVELS = {"floor-nat": 1, "floor-hash": 2, "floor-read": 3, "floor-state": 4}
# As the Makefile compiles lb.p4 (see P4C_FLAGS there).
P4C_FLAGS = [
    "--arch",
    "v1model",
    "--std",
    "p4-16",
    "--Werror",
    "--Wdisable=unused",
    "--excludeMidendPasses",
    "P4::LocalCopyPropagation",
]


def p4c() -> str:
    return os.environ.get("P4C", "p4c-bm2-ss")


def compile_floor(level: int, workdir: Path) -> Path:
    out = workdir / f"floor{level}.json"
    r = subprocess.run(
        [p4c(), *P4C_FLAGS, f"-DFLOOR_LEVEL={level}", "-o", str(out), str(FLOOR_P4)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        raise RuntimeError(f"{p4c()} failed on floor.p4 level {level}: {r.stderr.strip()[-500:]}")
    return out


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


def programs(args: argparse.Namespace, workdir: Path, shape: lab.Shape) -> list[lab.Program]:
    out = [lab.Program("baseline", shape)]
    for name in args.levels:
        json_path = compile_floor(LEVELS[name], workdir)
        out.append(lab.Program(name, shape, json_path, program_floor))
    out += [lab.Program(a, shape) for a in args.algorithms]
    return out


def ratios(values: dict[str, list[float]], higher_is_better: bool) -> dict[str, Any]:
    """Each program's figure over the baseline's, repetition by repetition; for a cost
    (instructions) the baseline's over the program's, so that 1 is 'as cheap'."""
    base = values["baseline"]
    out = {}
    for name, v in values.items():
        if name == "baseline":
            continue
        pairs = zip(v, base, strict=True)
        out[name] = stats.summary([x / b if higher_is_better else b / x for x, b in pairs])
    return out


def measure(build: str, binary: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    instr_shape = lab.Shape(flows=args.instr_flows)
    timed_shape = lab.Shape(flows=args.flows)
    figures: dict[str, dict[str, list[float]]] = {"busiest": {}, "all": {}, "zero_loss": {}}
    instr_progs = programs(args, workdir, instr_shape)
    timed_progs = [lab.Program(p.name, timed_shape, p.json, p.setup) for p in instr_progs]
    by_name = {p.name: p for p in instr_progs}
    timed_by_name = {p.name: p for p in timed_progs}
    orders = provenance.interleaved(list(by_name), args.reps, args.order_seed, build)
    for rep, order in enumerate(orders):
        for prog in (by_name[n] for n in order):
            runner.progress(f"{build} rep {rep + 1}/{args.reps} instructions {prog.name}")
            pcap = traffic.pcap_for(instr_shape, prog.name == "baseline", workdir)
            b, t = instructions.instructions_once(prog.name, binary, args, workdir, pcap, prog)
            figures["busiest"].setdefault(prog.name, []).append(b)
            figures["all"].setdefault(prog.name, []).append(t)
        for prog in (timed_by_name[n] for n in order) if args.timed else []:
            runner.progress(f"{build} rep {rep + 1}/{args.reps} zero-loss rate {prog.name}")
            pcap = traffic.pcap_for(timed_shape, prog.name == "baseline", workdir)
            cm, _ = lab.start_program(prog, binary, workdir, None)
            try:
                figures["zero_loss"].setdefault(prog.name, []).append(rate.zero_loss_rate(pcap)[0])
            finally:
                cm.__exit__(None, None, None)
    res: dict[str, Any] = {"binary": binary, "order": orders, "programs": {}}
    for key, per_prog in figures.items():
        for name, values in per_prog.items():
            res["programs"].setdefault(name, {})[key] = stats.summary(values)
        if per_prog:
            for name, r in ratios(per_prog, key == "zero_loss").items():
                res["programs"][name][f"{key}_vs_baseline_per_rep"] = r
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-floor", description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--levels", nargs="+", choices=list(LEVELS), default=list(LEVELS))
    ap.add_argument("--algorithms", nargs="*", default=["wrr"], help="lb.p4 beside them")
    ap.add_argument("--instr-flows", type=int, default=100)
    ap.add_argument("--flows", type=int, default=1000, help="for the timed figure")
    ap.add_argument("--timed", action=argparse.BooleanOptionalAction, default=True)
    runner.add_common(ap)
    ap.add_argument(
        "--out", type=Path, default=None, help=f"default: {outdir.RESULTS / 'switch'} or scratch"
    )
    profiles.add_argument(ap)
    args = ap.parse_args(profiles.expand("bench-floor", argv))
    committed = outdir.is_committed_profile(
        ap, args, ["levels", "algorithms", "instr_flows", "flows", "timed"]
    )
    args.out = outdir.destination("switch", committed, args.out)
    tools = ["tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"]
    builds = runner.builds_to_measure("bench-floor", args.build, [*tools, p4c()])
    if builds is None:
        return 2
    if problem := p4c_problem(p4c()):
        print(f"bench-floor: {problem}", file=sys.stderr)
        return 2
    runner.order_seed(args)
    run = runner.start_run("bench-floor", builds, argv)
    if run is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": runner.machine(),
        "method": __doc__,
        "reps": args.reps,
        "instr_pps": instructions.INSTR_PPS,
        "instr_flows": args.instr_flows,
        "timed_flows": args.flows if args.timed else None,
        "builds": {},
    }
    out = args.out / "floor.json"
    with lab.veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-floor-") as tmp:
        workdir = Path(tmp)  # compiled levels, traffic, callgrind dumps
        for build, binary in builds.items():
            result["builds"][build] = measure(build, binary, args, workdir)
            out.write_text(json.dumps(result, indent=2) + "\n")  # what is done so far
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    result["provenance"] = run.finish(
        args.reps,
        order="each build's `order`: the variants of each repetition, in the order they ran",
        order_seed=args.order_seed,
    )
    out.write_text(json.dumps(result, indent=2) + "\n")
    runner.progress(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
