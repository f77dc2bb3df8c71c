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
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import floor, instructions, lab, outdir, runner, stats, templates, traffic
from bench.toolchain import compile_p4, p4c, p4c_problem, tool_version

FLOWS = 200
BREAKDOWN_FLOWS = 100  # the breakdown's default: 1,100 packets a program, each path's dump
DATA_SEGMENTS = 8
DATA_BYTES = 100
PEER_BACKEND_PORTS = (2, 3, 4, 5)  # the peer forwards to its backend id as a port
# How the peer's authors compile it (p4-utils: p4c, BMv2 back end, v1model).
PEER_P4C_FLAGS = ["--arch", "v1model", "--std", "p4-16"]
# A log_msg statement: its arguments hold strings and braces, never a semicolon.
LOG_MSG = re.compile(r"\blog_msg\s*\((?:\"[^\"]*\"|[^;\"])*?\)\s*;")
PATHS = ("syn", "data", "reply", "fin")


def strip_logs(source: str) -> str:
    """The source without its log_msg statements (each becomes an empty statement)."""
    return LOG_MSG.sub(";", source)


def compile_peer(source: Path, workdir: Path, log_free: bool) -> Path:
    name = "peer-log-free" if log_free else "peer"
    src = workdir / f"{name}.p4"
    text = source.read_text()
    src.write_text(strip_logs(text) if log_free else text)
    return compile_p4(src, workdir / f"{name}.json", PEER_P4C_FLAGS, str(source))


def peer_backend(port: int) -> str:
    return lab.backend_addr(0, port - 2, len(PEER_BACKEND_PORTS))


def program_peer(shape: lab.Shape) -> None:
    """The peer's tables as its control plane writes them, for this bench's addresses:
    the VIP's TCP port, its four backends (by id = port) and their replies back to it."""
    vip = lab.vip_addr(0)
    cmds = [f"table_add MyIngress.virtual_ip MyIngress.is_virtual_ip {vip} 80 => 1"]
    cmds += [
        f"table_add MyIngress.vip_to_backend MyIngress.update_backend_info {p} => "
        f"{peer_backend(p)} 8000 {lab.port_mac(p)}"
        for p in PEER_BACKEND_PORTS
    ]
    cmds.append(
        "table_add MyIngress.backend_to_vip MyIngress.backend_to_vip_conversion "
        f"10.2.0.0/16 => {vip} 80 {lab.VIP_MAC}"
    )
    lab.thrift_cli(cmds)


def flow_paths(i: int, direct: bool) -> dict[str, list[bytes]]:
    """Connection i's packets by path; `direct` addresses the server (the baseline).
    The reply comes from the first backend (whichever one served the connection: the
    reverse NAT of every program here matches the backend, not the connection)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    client, sport = traffic.client_of(i)
    server = lab.backend_addr(0, i % 3, 3)
    dst, dport = (server, 8000) if direct else (lab.vip_addr(0), 80)
    up = Ether(src=lab.port_mac(1), dst=lab.VIP_MAC) / IP(src=client, dst=dst)
    down = Ether(src=lab.port_mac(2), dst=lab.SWITCH_MAC) / IP(
        src=lab.backend_addr(0, 0, 3), dst=client
    )
    a, b = 1000, 5000
    data = [
        up
        / TCP(sport=sport, dport=dport, flags="PA", seq=a + 1 + k * DATA_BYTES, ack=b + 1)
        / Raw(b"d" * DATA_BYTES)
        for k in range(DATA_SEGMENTS)
    ]
    end = a + 1 + DATA_SEGMENTS * DATA_BYTES
    reply = (
        down / TCP(sport=8000, dport=sport, flags="A", seq=b + 1, ack=end) / Raw(b"r" * DATA_BYTES)
    )
    return {
        "syn": [bytes(up / TCP(sport=sport, dport=dport, flags="S", seq=a))],
        "data": [bytes(p) for p in data],
        "reply": [bytes(reply)],
        "fin": [bytes(up / TCP(sport=sport, dport=dport, flags="FA", seq=end, ack=b + 1))],
    }


def interleaved(flows: list[list[bytes]]) -> list[bytes]:
    """Step k of 50 connections, then step k + 1 (as bench.traffic.traffic)."""
    out: list[bytes] = []
    for g in range(0, len(flows), 50):
        group = flows[g : g + 50]
        for step in range(len(group[0])):
            out += [f[step] for f in group]
    return out


def client_traffic(flows: int, direct: bool) -> list[bytes]:
    per_flow = [flow_paths(i, direct) for i in range(flows)]
    return interleaved([p["syn"] + p["data"] + p["fin"] for p in per_flow])


def pcap(workdir: Path, name: str, packets: list[bytes]) -> Path:
    path = workdir / f"{name}.pcap"
    if not path.exists():
        traffic.write_pcap(packets, path)
    return path


def programs(args: argparse.Namespace, workdir: Path, shape: lab.Shape) -> list[lab.Program]:
    out = [lab.Program("baseline", shape)]
    if args.floor:
        json_path = floor.compile_floor(floor.LEVELS["floor-state"], workdir)
        out.append(lab.Program("floor-state", shape, json_path, floor.program_floor))
    if args.peer:
        out.append(
            lab.Program("peer", shape, compile_peer(args.peer, workdir, False), program_peer)
        )
        peer_lf = compile_peer(args.peer, workdir, True)
        out.append(lab.Program("peer-log-free", shape, peer_lf, program_peer))
    out += [lab.Program(a, shape) for a in args.algorithms]
    return out


def program_names(args: argparse.Namespace) -> list[str]:
    peer = ["peer", "peer-log-free"] if args.peer else []
    return ["baseline", *(["floor-state"] if args.floor else []), *peer, *args.algorithms]


def instructions_of(t: runner.Trial, name: str) -> tuple[float, float]:
    """One program's instructions per packet on the client mix (compiled once a run)."""
    shape = lab.Shape(flows=t.args.flows)
    compiled = t.workdir / "programs.json"
    if not compiled.exists():  # the floor and the peer, compiled into the run's directory
        paths = {p.name: str(p.json) for p in programs(t.args, t.workdir, shape) if p.json}
        compiled.write_text(json.dumps(paths))
    json_path = json.loads(compiled.read_text()).get(name)
    setup = floor.program_floor if name == "floor-state" else program_peer
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
    doc=__doc__,
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
    per_flow = [flow_paths(i, direct) for i in range(flows)]
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
