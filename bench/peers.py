"""`make bench-peers PEER_P4=path`: lb.p4 beside a public stateful NAT load balancer for
BMv2 (the peer), plain forwarding (baseline.p4) and the floor (floor.p4), per build.

The peer is a P4_16 v1model L4 balancer published for a course (its tables virtual_ip,
vip_to_backend, backend_to_vip; its per-connection backend in the register
r_assigned_backend; least connections over four fixed backends on ports 2..5; NAT of
address, port and MAC both ways; the TCP checksum recomputed). It is never part of p4lb:
the bench compiles it from PEER_P4 at run time (p4c, the flags its authors' p4-utils
gives), and also a log-free variant, the same source with its log_msg calls taken out.

Traffic: client-direction TCP only, the peer's whole job: FLOWS connections of a SYN,
DATA_SEGMENTS segments of DATA_BYTES bytes (PSH+ACK) and a FIN+ACK, interleaved 50 at a
time as bench-switch does, injected on port 1 (the peer's client port). The baseline gets
the same packets addressed straight to the servers. Each program's figure is instructions
per delivered packet under callgrind (bench.instructions.instructions_once: all threads, and the
busiest), the programs taking turns within each repetition on one binary per build.

--breakdown: instead, per program, where the instructions of each path go: one switch
under callgrind counts the SYNs, then the data segments, then one reply per connection
(an ACK with DATA_BYTES bytes from the backend, on its port), then the FINs, each in a
dump of its own; callgrind_annotate's inclusive costs split each dump into BMv2's phases
(PHASES).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import instructions, lab, outdir, runner
from bench.peer_costs import breakdown, breakdown_markdown, measure
from bench.toolchain import p4c, p4c_problem, tool_version

FLOWS = 200
BREAKDOWN_FLOWS = 100  # the breakdown's default: 1,100 packets a program, each path's dump


def summary_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts the README's region and the breakdown's page quote, from the run's own
    (`provenance`, which keeps them all)."""
    git = facts["git"]
    return {
        "when": facts["started"],
        "commit": git["commit"] + ("+uncommitted" if git["dirty"] else ""),
        "p4c": facts["p4c"],
        "machine": runner.machine(),
    }


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--peer", type=Path, default=None, help="the peer's P4 source (PEER_P4)")
    ap.add_argument(
        "--flows", type=int, default=None, help=f"{FLOWS}; {BREAKDOWN_FLOWS} broken down"
    )
    ap.add_argument("--algorithms", nargs="*", default=["wrr", "iphash"], help="lb.p4's")
    ap.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--breakdown", action="store_true", help="per path and phase instead")
    ap.add_argument("--before", type=Path, default=None, help="an earlier breakdown, beside")
    runner.add_common(ap)


def builds_to_measure(args: argparse.Namespace) -> dict[str, str] | None:
    """The builds, or None once stderr says what is missing (the peer's source given but
    absent, a tool, p4c's fitness); a note when no peer is given."""
    if args.peer is None:
        print(
            "bench-peers: the peer is skipped: no PEER_P4=path/to/l4_loadbalancer.p4 given; "
            "measuring p4lb's programs alone",
            file=sys.stderr,
        )
    elif not args.peer.is_file():
        print(f"bench-peers: PEER_P4={args.peer}: no such file", file=sys.stderr)
        return None
    tools = ["tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"]
    tools += ["callgrind_annotate"] if args.breakdown else []
    builds = runner.builds_to_measure("bench-peers", args.build, [*tools, p4c()])
    if builds and (problem := p4c_problem(p4c())):
        print(f"bench-peers: {problem}", file=sys.stderr)
        return None
    return builds


def main(argv: list[str] | None = None) -> int:
    cost = "--breakdown" in (sys.argv[1:] if argv is None else argv)
    args = runner.command_line(
        "bench-peers",
        __doc__,
        "switch",
        argv,
        options,
        ["flows", "algorithms", "floor"],
        reps=3,
        builds=True,
        profile="bench-cost" if cost else "bench-peers",
    )
    runner.order_seed(args)
    if args.flows is None:
        args.flows = BREAKDOWN_FLOWS if args.breakdown else FLOWS
    builds = builds_to_measure(args)
    if builds is None or (run := runner.start_run("bench-peers", builds, argv)) is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        **summary_facts(run.facts),
        "method": __doc__,
        "reps": 1 if args.breakdown else args.reps,
        "flows": args.flows,
        "instr_pps": instructions.INSTR_PPS,
        "peer": str(args.peer) if args.peer else None,
        "builds": {build: {"bmv2": tool_version(binary)} for build, binary in builds.items()},
    }
    out = args.out / ("cost_breakdown.json" if args.breakdown else "peers.json")
    with lab.veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-peers-") as tmp:
        for build, binary in builds.items():
            measure_build = breakdown if args.breakdown else measure
            result["builds"][build].update(measure_build(build, binary, args, Path(tmp)))
            out.write_text(json.dumps(result, indent=2) + "\n")  # what is done so far
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    result["provenance"] = run.finish(
        result["reps"],
        order="one pass per program, in the order of `programs` (counts are exact)"
        if args.breakdown
        else "each build's `order`: the programs of each repetition",
        order_seed=args.order_seed,
    )
    before = json.loads(args.before.read_text()) if args.breakdown and args.before else None
    if before:
        result["before"] = {"commit": before["commit"], "when": before["when"]}
    out.write_text(json.dumps(result, indent=2) + "\n")
    if args.breakdown:
        out.with_suffix(".md").write_text(breakdown_markdown(result, before))
    runner.progress(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
