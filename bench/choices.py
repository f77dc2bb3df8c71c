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
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import outdir, profiles, provenance
from bench import switch as sw

OUT = sw.ROOT / "results" / "algorithms"


def syn_packets(shape: sw.Shape) -> list[bytes]:
    """The first packet (the SYN) of each of the shape's flows, all TCP to the VIP."""
    return [sw.flow_packets(i, shape, direct=False)[0] for i in range(shape.flows)]


def setup(algorithm: str, choices: str, workdir: Path) -> Any:
    def program(shape: sw.Shape) -> None:
        text = sw.lb_config(algorithm, shape)
        if choices:
            line = f'algorithm = "{algorithm}"'
            text = text.replace(line, f"{line}\nchoices = {choices}")
        sw.program_lb(text, workdir)

    return program


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-choices", description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--reps", type=int, default=5)  # variants compared: five a side
    ap.add_argument("--flows", type=int, default=200)
    ap.add_argument("--backends", type=int, nargs="+", default=[3, 8, 16])
    sw.add_common(ap)
    ap.add_argument("--out", type=Path, default=None, help=f"default: {OUT} or the scratch tree")
    profiles.add_argument(ap)
    args = ap.parse_args(profiles.expand("bench-choices", argv))
    committed = outdir.is_committed_profile(ap, args, ["flows", "backends"])
    args.out = outdir.destination("algorithms", committed, args.out)
    tools = ["tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"]
    builds = sw.builds_to_measure("bench-choices", args.build, tools)
    if builds is None:
        return 2
    sw.order_seed(args)
    run = sw.start_run("bench-choices", builds, argv)
    if run is None:
        return 2
    result: dict[str, Any] = {
        "method": __doc__,
        "reps": args.reps,
        "instr_pps": sw.INSTR_PPS,
        "flows": args.flows,
        "builds": {},
        "order": {},
    }
    variants = {"wrr": ("wrr", ""), "leastconn choices=all": ("leastconn", '"all"')}
    variants["leastconn choices=2"] = ("leastconn", "2")
    with sw.veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-choices-") as tmp:
        workdir = Path(tmp)
        for build, binary in builds.items():
            figures: dict[str, dict[str, list[tuple[float, float]]]] = {}
            names = [f"{n} {v}" for n in args.backends for v in variants]
            orders = provenance.interleaved(names, args.reps, args.order_seed, build)
            for rep, order in enumerate(orders):
                for label in order:
                    n_text, _, name = label.partition(" ")
                    n = int(n_text)
                    shape = sw.Shape(backends=n, flows=args.flows, udp_every=0)
                    pcap = workdir / f"syn-{n}.pcap"
                    if not pcap.exists():
                        sw.write_pcap(syn_packets(shape), pcap)
                    algorithm, choices = variants[name]
                    sw.progress(f"bench-choices {build} rep {rep + 1}/{args.reps}: {label}")
                    prog = sw.Program(
                        algorithm,
                        shape,
                        sw.COMPILED / "lb.json",
                        setup(algorithm, choices, workdir),
                    )
                    b, t = sw.instructions_once("c", binary, args, workdir, pcap, prog)
                    figures.setdefault(n_text, {}).setdefault(name, []).append((b, t))
            result["order"][build] = orders
            result["builds"][build] = {
                n: {
                    name: {
                        "busiest_thread_per_syn": sw.summary([b for b, _ in v]),
                        "all_threads_per_syn": sw.summary([t for _, t in v]),
                    }
                    for name, v in by_name.items()
                }
                for n, by_name in sorted(figures.items(), key=lambda kv: int(kv[0]))
            }
    result["provenance"] = run.finish(
        args.reps, order="`order`: the variants of each repetition", order_seed=args.order_seed
    )
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "choices.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    sw.progress(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
