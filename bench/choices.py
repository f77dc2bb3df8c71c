"""`make bench-choices`: what a new connection costs the switch when leastconn compares
every backend ("all") against two of them, at 3, 8 and 16 backends.

Instructions per packet (callgrind, BMv2's busiest thread and all threads, counting only
while the traffic is replayed: a count, not a time) of lb.p4 with one leastconn VIP,
on new connections only: one SYN from each of --flows clients, every one a new
connection that takes the selection stage (set_candidates) and a state slot. Beside
them, wrr on the same SYNs (one slot read, no candidates): what selection costs at all.
Variants take turns within each repetition; each figure is the median with min and max.
Writes results/algorithms/choices.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench import instructions, lab, runner, stats, traffic

# name: (algorithm, the VIP's `choices` line, none when empty)
VARIANTS = {
    "wrr": ("wrr", ""),
    "leastconn choices=all": ("leastconn", '"all"'),
    "leastconn choices=2": ("leastconn", "2"),
}


def setup(algorithm: str, choices: str, workdir: Path) -> Any:
    def program(shape: lab.Shape) -> None:
        text = lab.lb_config(algorithm, shape)
        if choices:
            line = f'algorithm = "{algorithm}"'
            text = text.replace(line, f"{line}\nchoices = {choices}")
        lab.program_lb(text, workdir)

    return program


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--flows", type=int, default=200)
    ap.add_argument("--backends", type=int, nargs="+", default=[3, 8, 16])


def variants(args: argparse.Namespace) -> list[str]:
    return [f"{n} {v}" for n in args.backends for v in VARIANTS]


def measure(t: runner.Trial, label: str) -> tuple[float, float]:
    """(busiest thread, all threads) instructions per SYN of one variant at n backends."""
    n, _, name = label.partition(" ")
    shape = lab.Shape(backends=int(n), flows=t.args.flows, udp_every=0)
    pcap = t.workdir / f"syn-{n}.pcap"
    if not pcap.exists():
        syns = [traffic.flow_packets(i, shape, direct=False)[0] for i in range(shape.flows)]
        traffic.write_pcap(syns, pcap)  # each flow's first packet, its SYN
    algorithm, choices = VARIANTS[name]
    prog = lab.Program(
        algorithm, shape, lab.COMPILED / "lb.json", setup(algorithm, choices, t.workdir)
    )
    return instructions.instructions_once("c", t.binary, t.args, t.workdir, pcap, prog)


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    """{backends: {variant: per-SYN figures}}, fewest backends first."""
    return {
        str(n): {
            name: {
                "busiest_thread_per_syn": stats.summary([b for b, _ in values[f"{n} {name}"]]),
                "all_threads_per_syn": stats.summary([t for _, t in values[f"{n} {name}"]]),
            }
            for name in VARIANTS
        }
        for n in sorted(set(args.backends))
    }


SPEC = runner.Spec(
    prog="bench-choices",
    doc=__doc__,
    subdir="algorithms",
    filename="choices.json",
    reps=5,  # variants compared: five a side
    tools=("tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"),
    options=options,
    committed=("flows", "backends"),
    variants=variants,
    measure=measure,
    figures=figures,
    head=lambda args: {"instr_pps": instructions.INSTR_PPS, "flows": args.flows},
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
