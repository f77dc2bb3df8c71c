"""Instructions per packet with the switch under valgrind's callgrind (a count, not a time),
and the per-packet counts of a BMv2 trace."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bench.lab import Program, Shape, run_quietly, running, rx_total, settled_rx
from bench.rate import LOSS_TOLERANCE, replay

INSTR_PPS = 40  # under callgrind BMv2 runs some 50x slower, slower still on new code


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
            continue
        k = kind_re.match(msg)
        if k:
            c = counts.setdefault(
                pkt,
                {
                    f"{w}{k}": 0
                    for w in ("", "ingress_")
                    for k in ("tables", "conditions", "primitives")
                },
            )
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
    """The command that runs a switch under callgrind, counting nothing until told
    (callgrind_control -i on), one output file per thread named after `out`; any earlier
    run's files of that name are removed first."""
    for old in out.parent.glob(f"{out.name}*"):
        old.unlink()
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={out}",
    ]


def instructions_once(
    name: str,
    binary: str,
    args: argparse.Namespace,
    workdir: Path,
    pcap: Path,
    prog: Program | None = None,
) -> tuple[float, float]:
    """(busiest thread, all threads) instructions per packet while `pcap` is replayed at
    INSTR_PPS through a switch under callgrind, which counts only while the replay runs.
    Every packet must come out, or the figure would be per packet of another mix."""
    out = workdir / f"cg-{name}"
    wrap = callgrind_wrap(out)
    prog = prog or Program(name, Shape(flows=args.instr_flows))
    with running(prog, binary, workdir, None, wrap) as pid:
        run_quietly("callgrind_control", "-i", "on", str(pid))
        start = rx_total()
        sent, _ = replay(pcap, INSTR_PPS)
        delivered = settled_rx(start)
        run_quietly("callgrind_control", "-i", "off", str(pid))
        run_quietly("callgrind_control", "-d", str(pid))
    if delivered < sent * (1 - LOSS_TOLERANCE):
        raise RuntimeError(f"instructions: {name} lost {sent - delivered} of {sent} packets")
    # The dump on request is part 1 of each thread's output; the dump at exit (part 2,
    # or the unnumbered file) counted nothing, instrumentation being off by then.
    totals = callgrind_totals(sorted(workdir.glob(f"cg-{name}.1-*")))
    if not totals:
        raise RuntimeError(f"instructions: no callgrind dump for {name} in {workdir}")
    return max(totals) / sent, sum(totals) / sent
