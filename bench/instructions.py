"""Instructions per packet with the switch under valgrind's callgrind (a count, not a time),
where they go among BMv2's phases, and the per-packet counts of a BMv2 trace."""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter
from pathlib import Path

from bench.lab import Program, Shape, run_quietly, running, rx_total, settled_rx
from bench.rate import LOSS_TOLERANCE, replay

INSTR_PPS = 40  # under callgrind BMv2 runs some 50x slower, slower still on new code
# BMv2's phases, by the functions whose inclusive cost each is (PHASE_FUNCTIONS; the
# checksums subtracted from the parser and deparser that call them). Other: the rest of each
# thread (packet I/O, queues, logging, idle threads).
PHASES = (
    "parser",
    "verify_checksum",
    "ingress",
    "egress",
    "deparser",
    "compute_checksum",
    "metadata_reset",
    "other",
)
PHASE_FUNCTIONS = {
    "parser": "bm::Parser::parse",
    "verify_checksum": "bm::Parser::verify_checksums",
    "pipeline": "bm::Pipeline::apply",
    "deparser": "bm::Deparser::deparse",
    "compute_checksum": "bm::Deparser::update_checksums",
    "metadata_reset": "bm::PHV::reset_metadata",
    "ingress_thread": "SimpleSwitch::ingress_thread",
}


TRACED = [f"{w}{k}" for w in ("", "ingress_") for k in ("tables", "conditions", "primitives")]


def traced_counts(log: Path) -> dict[int, dict[str, int]]:
    """Per packet id in a BMv2 trace: tables applied, conditions, primitives, in all and
    in the ingress pipeline alone (BMv2 runs the egress in other threads)."""
    counts: dict[int, dict[str, int]] = {}
    pipeline: dict[int, str] = {}
    # A message may start with its source location, "file.p4(12) ".
    kind_re = re.compile(r"^(?:\S+\(\d+\) )?(Applying table|Condition|Primitive|Action) ")
    start_re = re.compile(r"^Pipeline '(\w+)': start")
    kinds = {
        "Applying table": "tables",
        "Condition": "conditions",
        "Primitive": "primitives",
        "Action": "actions",
    }
    for line in log.read_text(errors="replace").splitlines():
        m = re.search(r"\[(\d+)\.\d+\] \[cxt \d+\] (.*)", line)
        if not m:
            continue
        pkt, msg = int(m.group(1)), m.group(2)
        if p := start_re.match(msg):
            pipeline[pkt] = p.group(1)
        elif k := kind_re.match(msg):
            c = counts.setdefault(pkt, dict.fromkeys(TRACED, 0))
            kind = kinds[k.group(1)]
            c[kind] = c.get(kind, 0) + 1
            if pipeline.get(pkt) == "ingress":
                c[f"ingress_{kind}"] = c.get(f"ingress_{kind}", 0) + 1
    return counts


def callgrind_totals(files: list[Path]) -> list[int]:
    """The instruction total of each callgrind dump file (one per thread)."""
    totals = []
    for f in files:
        # "summary:" heads a dump and may be 0 in a dump on request; "totals:" ends it.
        m = re.search(r"^totals: (\d+)", f.read_text(errors="replace"), re.M)
        if m:
            totals.append(int(m.group(1)))
    return totals


def callgrind_wrap(out: Path) -> list[str]:
    """The command that runs a switch under callgrind, counting nothing until told, a file per
    thread named after `out` (earlier runs' removed)."""
    for old in out.parent.glob(f"{out.name}*"):
        old.unlink()
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={out}",
    ]


def counted(pid: int, pcap: Path, port: int = 1) -> tuple[int, int]:
    """(packets sent, delivered) of `pcap` replayed at INSTR_PPS on `port` through the switch
    `pid`, callgrind counting only meanwhile."""
    run_quietly("callgrind_control", "-i", "on", str(pid))
    start = rx_total()
    sent, _ = replay(pcap, INSTR_PPS, port)
    delivered = settled_rx(start)
    run_quietly("callgrind_control", "-i", "off", str(pid))
    run_quietly("callgrind_control", "-d", str(pid))
    return sent, delivered


def instructions_once(
    name: str,
    binary: str,
    args: argparse.Namespace,
    workdir: Path,
    pcap: Path,
    prog: Program | None = None,
) -> tuple[float, float]:
    """(busiest thread, all threads) instructions per packet while `pcap` is replayed at
    INSTR_PPS through a switch under callgrind; every packet must come out."""
    out = workdir / f"cg-{name}"
    wrap = callgrind_wrap(out)
    prog = prog or Program(name, Shape(flows=args.instr_flows))
    with running(prog, binary, workdir, None, wrap) as pid:
        sent, delivered = counted(pid, pcap)
    if delivered < sent * (1 - LOSS_TOLERANCE):
        raise RuntimeError(f"instructions: {name} lost {sent - delivered} of {sent} packets")
    # The dump on request is part 1 of each thread's output; the dump at exit (part 2,
    # or the unnumbered file) counted nothing, instrumentation being off by then.
    totals = callgrind_totals(sorted(workdir.glob(f"cg-{name}.1-*")))
    if not totals:
        raise RuntimeError(f"instructions: no callgrind dump for {name} in {workdir}")
    return max(totals) / sent, sum(totals) / sent


def annotate(dump: Path) -> dict[str, int]:
    """Inclusive instructions per function (summed over its files) of one callgrind dump."""
    r = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", str(dump)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    costs: Counter[str] = Counter()
    for line in r.stdout.splitlines():
        # "  1,234 (12.3%)  /path/file.cpp:ns::fn(args) const [/usr/bin/obj]"
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line)
        if not m:
            continue
        where = re.sub(r" \[[^\]]*\]$", "", m.group(2))
        fn = re.split(r"(?<!:):(?!:)", where, maxsplit=1)[-1]  # after "file:"
        fn = re.sub(r"'\d+$", "", fn.split("(", 1)[0]).strip()
        costs[fn] += int(m.group(1).replace(",", ""))
    return dict(costs)


def phases(dumps: list[Path]) -> dict[str, int]:
    """BMv2's phases (PHASES), summed over the threads of one dump (a file per thread)."""
    out = dict.fromkeys(PHASES, 0)
    total = 0
    for d in dumps:
        total += sum(callgrind_totals([d]))
        if not d.stat().st_size:
            continue
        costs = annotate(d)  # one callgrind_annotate a dump
        c = {k: costs.get(f, 0) for k, f in PHASE_FUNCTIONS.items()}
        out["parser"] += c["parser"] - c["verify_checksum"]
        out["verify_checksum"] += c["verify_checksum"]
        out["ingress" if c["ingress_thread"] else "egress"] += c["pipeline"]
        out["deparser"] += c["deparser"] - c["compute_checksum"]
        out["compute_checksum"] += c["compute_checksum"]
        out["metadata_reset"] += c["metadata_reset"]
    out["other"] = total - sum(out.values())
    out["total"] = total
    return out


def breakdown_once(
    prog: Program, binary: str, workdir: Path, groups: list[dict[str, tuple[Path, int]]]
) -> dict[str, dict[str, float]]:
    """Per path (the groups' keys), instructions per packet by phase: one switch, per group of
    connections a dump per path, its pcap sent on its port; every packet must come out."""
    paths = list(groups[0])
    out_file = workdir / f"bd-{prog.name}"
    wrap = callgrind_wrap(out_file)
    sent = dict.fromkeys(paths, 0)
    dumps: dict[str, list[int]] = {path: [] for path in paths}
    with running(prog, binary, workdir, None, wrap) as pid:
        for group in groups:
            for path in paths:
                n, got = counted(pid, *group[path])
                if got < n:
                    raise RuntimeError(f"breakdown: {prog.name} lost {n - got} of {n} {path}")
                sent[path] += n
                dumps[path].append(sum(len(v) for v in dumps.values()) + 1)
    res = {}
    for path in paths:
        files = [f for k in dumps[path] for f in sorted(workdir.glob(f"bd-{prog.name}.{k}-*"))]
        res[path] = {ph: v / sent[path] for ph, v in phases(files).items()}
    return res
