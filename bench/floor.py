"""`make bench-floor`: what BMv2 charges any NAT load balancer with connection state,
measured on the least such program (p4src/bench/floor.p4), beside plain forwarding and lb.p4.

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
import shutil
import sys
import time
from typing import Any

from bench import instructions, lab, rate, runner, stats, traffic
from bench.floor_program import LEVELS, program
from bench.toolchain import p4c, p4c_problem


def instructions_of(t: runner.Trial, name: str) -> tuple[float, float]:
    shape = lab.Shape(flows=t.args.instr_flows)
    pcap = traffic.pcap_for(shape, name == "baseline", t.workdir)
    prog = program(t, name, shape)
    return instructions.instructions_once(name, t.binary, t.args, t.workdir, pcap, prog)


def zero_loss_of(t: runner.Trial, name: str) -> float:
    shape = lab.Shape(flows=t.args.flows)
    pcap = traffic.pcap_for(shape, name == "baseline", t.workdir)
    with lab.running(program(t, name, shape), t.binary, t.workdir):
        return rate.zero_loss_rate(pcap)[0]


def passes(args: argparse.Namespace) -> dict[str, runner.Measure]:
    """Each repetition: every program's instructions, then (--timed) every zero-loss rate."""
    return {"instructions": instructions_of} | (
        {"zero-loss rate": zero_loss_of} if args.timed else {}
    )


def figures(args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    """Each program's summaries and, repetition by repetition, its figure over the
    baseline's; for a cost (instructions) the baseline's over the program's, so that 1 is
    'as cheap'."""
    instr = values["instructions"]
    by_key = {
        "busiest": {n: [b for b, _ in v] for n, v in instr.items()},
        "all": {n: [t for _, t in v] for n, v in instr.items()},
        "zero_loss": values.get("zero-loss rate", {}),
    }
    programs: dict[str, Any] = {}
    for key, per_prog in by_key.items():
        for name, v in per_prog.items():
            p = programs.setdefault(name, {})
            p[key] = stats.summary(v)
            if name != "baseline":
                base = per_prog["baseline"]
                pair = (v, base) if key == "zero_loss" else (base, v)
                p[f"{key}_vs_baseline_per_rep"] = stats.per_rep(*pair)
    return {"programs": programs}


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--levels", nargs="+", choices=list(LEVELS), default=list(LEVELS))
    ap.add_argument("--algorithms", nargs="*", default=["wrr"], help="lb.p4 beside them")
    ap.add_argument("--instr-flows", type=int, default=100)
    ap.add_argument("--flows", type=int, default=1000, help="for the timed figure")
    ap.add_argument("--timed", action=argparse.BooleanOptionalAction, default=True)


def check(args: argparse.Namespace) -> str | None:
    return p4c_problem(p4c()) if shutil.which(p4c()) else f"needs {p4c()}"


SPEC = runner.Spec(
    prog="bench-floor",
    doc=__doc__,
    subdir="switch",
    filename="floor.json",
    reps=5,
    tools=("tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"),
    options=options,
    committed=("levels", "algorithms", "instr_flows", "flows", "timed"),
    variants=lambda args: ["baseline", *args.levels, *args.algorithms],
    measure=passes,
    passes=True,
    figures=figures,
    head=lambda args: {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": runner.machine(),
        "instr_pps": instructions.INSTR_PPS,
        "instr_flows": args.instr_flows,
        "timed_flows": args.flows if args.timed else None,
    },
    order_in_build=True,
    check=check,
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
