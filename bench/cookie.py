"""`make bench-cookie`: what the tier's connection sharing costs the switch per packet.

Instructions per packet (callgrind, BMv2's busiest thread and all threads, counting only
while the traffic is replayed: a count, not a time) of lb.p4 with a round-robin VIP, on
bench-switch's traffic (ten-packet TCP connections and UDP pairs), in four variants:
  - plain forwarding (baseline.p4), the reference bench-switch uses;
  - a single switch, TCP without options (bench-switch's own traffic);
  - a single switch, TCP with Linux's options (timestamps on): lb.p4 parses the timestamp
    and sums it into the checksum it recomputes;
  - a tier's balancer (the VIP shared): besides, every reply's TSval gets the cookie and a
    new connection's SYN and the client's FIN are reported to the controller (a digest).
Variants take turns within each repetition; each figure is the median with min and max.
The controller's side (a digest handled and a copy written on every other balancer per
new connection) is measured by `make bench-tier`. Writes results/tier/cookie.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import outdir, profiles, provenance
from bench import switch as sw

OUT = sw.ROOT / "results" / "tier"
BALANCER = """
[tier]
[[tier.balancer]]
name = "lb1"
address = "127.0.0.1:{port}"
device_id = 0
mac = "{mac}"
ports = [1, 2, 3, 4]
"""


def shared_setup(workdir: Path) -> Any:
    """Programs the switch as the one balancer of a tier: the VIP's connections shared."""

    def setup(shape: sw.Shape) -> None:
        tier = BALANCER.format(port=sw.GRPC_PORT, mac=sw.SWITCH_MAC)
        sw.program_lb(sw.lb_config("wrr", shape) + tier, workdir)

    return setup


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench-cookie", description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--reps", type=int, default=5)  # variants compared: five a side
    ap.add_argument("--flows", type=int, default=100)
    sw.add_common(ap)
    ap.add_argument("--out", type=Path, default=None, help=f"default: {OUT} or the scratch tree")
    profiles.add_argument(ap)
    args = ap.parse_args(profiles.expand("bench-cookie", argv))
    committed = outdir.is_committed_profile(ap, args, ["flows"])
    args.out = outdir.destination("tier", committed, args.out)
    tools = ["tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"]
    builds = sw.builds_to_measure("bench-cookie", args.build, tools)
    if builds is None:
        return 2
    sw.order_seed(args)
    run = sw.start_run("bench-cookie", builds, argv)
    if run is None:
        return 2
    plain, ts = sw.Shape(flows=args.flows), sw.Shape(flows=args.flows, timestamps=True)
    from bench.tier import provenance as tier_provenance

    result: dict[str, Any] = {
        "provenance": {
            k: v
            for k, v in tier_provenance(next(iter(builds.values()))).items()
            if k not in ("frr", "gobgpd", "load")
        }
        | {"else_running": "nothing (no tier, no other benchmark)"},
        "builds_measured": builds,
        "machine": sw.machine(),
        "method": __doc__,
        "reps": args.reps,
        "instr_pps": sw.INSTR_PPS,
        "flows": args.flows,
        "builds": {},
    }
    with sw.veths(), tempfile.TemporaryDirectory(prefix="p4lb-bench-cookie-") as tmp:
        workdir = Path(tmp)
        variants = {
            "plain forwarding": (sw.Program("baseline", plain), True),
            "single switch, no TCP options": (sw.Program("wrr", plain), False),
            "single switch, timestamps": (sw.Program("wrr", ts), False),
            "tier balancer, timestamps": (
                sw.Program("wrr", ts, sw.COMPILED / "lb.json", shared_setup(workdir)),
                False,
            ),
        }
        for build, binary in builds.items():
            busiest: dict[str, list[float]] = {v: [] for v in variants}
            total: dict[str, list[float]] = {v: [] for v in variants}
            names = list(variants)
            orders = provenance.interleaved(names, args.reps, args.order_seed, build)
            for rep, order in enumerate(orders):
                for name in order:
                    i = names.index(name)
                    prog, direct = variants[name]
                    sw.progress(f"bench-cookie {build} rep {rep + 1}/{args.reps}: {name}")
                    pcap = sw.pcap_for(prog.shape, direct, workdir)
                    b, t = sw.instructions_once(f"v{i}", binary, args, workdir, pcap, prog)
                    busiest[name].append(b)
                    total[name].append(t)
            result.setdefault("order", {})[build] = orders
            result["builds"][build] = {
                name: {
                    "busiest_thread_per_packet": sw.summary(busiest[name]),
                    "all_threads_per_packet": sw.summary(total[name]),
                }
                for name in variants
            }
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    result["provenance"] = result["provenance"] | run.finish(
        args.reps, order="`order`: the variants of each repetition", order_seed=args.order_seed
    )
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "cookie.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    sw.progress(f"wrote {out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
