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
import sys
from pathlib import Path
from typing import Any

from bench import instructions, lab, runner, stats, traffic

BALANCER = """
[tier]
[[tier.balancer]]
name = "lb1"
address = "127.0.0.1:{port}"
device_id = 0
mac = "{mac}"
ports = [1, 2, 3, 4]
"""
# name: (program, timestamps on, shared by a tier, plain forwarding's direct traffic)
VARIANTS = {
    "plain forwarding": ("baseline", False, False),
    "single switch, no TCP options": ("wrr", False, False),
    "single switch, timestamps": ("wrr", True, False),
    "tier balancer, timestamps": ("wrr", True, True),
}


def shared_setup(workdir: Path) -> Any:
    """Programs the switch as the one balancer of a tier: the VIP's connections shared."""

    def setup(shape: lab.Shape) -> None:
        tier = BALANCER.format(port=lab.LAB.grpc_port, mac=lab.SWITCH_MAC)
        lab.program_lb(lab.lb_config("wrr", shape) + tier, workdir)

    return setup


def measure(t: runner.Trial, name: str) -> tuple[float, float]:
    """(busiest thread, all threads) instructions per packet of one variant."""
    program, timestamps, shared = VARIANTS[name]
    shape = lab.Shape(flows=t.args.flows, timestamps=timestamps)
    prog = (
        lab.Program(program, shape, lab.COMPILED / "lb.json", shared_setup(t.workdir))
        if shared
        else lab.Program(program, shape)
    )
    pcap = traffic.pcap_for(shape, program == "baseline", t.workdir)
    tag = f"v{list(VARIANTS).index(name)}"
    return instructions.instructions_once(tag, t.binary, t.args, t.workdir, pcap, prog)


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        name: {
            "busiest_thread_per_packet": stats.summary([b for b, _ in values[name]]),
            "all_threads_per_packet": stats.summary([t for _, t in values[name]]),
        }
        for name in VARIANTS
    }


SPEC = runner.Spec(
    prog="bench-cookie",
    doc=__doc__,
    subdir="tier",
    filename="cookie.json",
    reps=5,  # variants compared: five a side
    tools=("tcpreplay", "simple_switch_CLI", "valgrind", "callgrind_control"),
    options=lambda ap: ap.add_argument("--flows", type=int, default=100),
    committed=("flows",),
    variants=lambda args: list(VARIANTS),
    measure=measure,
    figures=figures,
    head=lambda args: {"instr_pps": instructions.INSTR_PPS, "flows": args.flows},
    provenance={"else_running": "nothing (no tier, no other benchmark)"},
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
