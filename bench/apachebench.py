"""`make bench-ab`: ApacheBench through the VIP for every algorithm and request count, plus the
same load through a plain forwarding program on the same BMv2 binary (the baseline).

Writes results/: raw ab text, runs.csv / runs.json, meta.json, summary.md, PNG plots."""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import figure, outdir, provenance, runner, templates
from bench.experiments.counters import tcp_counters
from p4lb.intent import reader
from p4lb.pipeline.entries import Entry, Update
from p4lb.pipeline.p4info import Schema, load_p4info
from p4lb.service import operations
from p4lb.stats.fairness import jain, weighted_jain
from p4lb.switch.client import Switch
from topology import ab
from topology.net import (
    ROOT,
    SERVER_PORT,
    SWITCH_MAC,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    access_log,
    mac,
    p4lb_cmd,
    running,
    wait_servers_idle,
)

COMPILED = ROOT / "p4src" / "compiled"
PAPER_COUNTS = [20000, 40000, 60000, 80000, 100000]
QUICK_COUNTS = [300, 600]


@dataclass
class Case:
    name: str
    algorithm: str  # iphash | wrr | baseline
    weights: list[int]
    change: bool = False  # weight change + drain in the middle


CASES = [
    Case("iphash", "iphash", [1, 1, 1]),
    Case("wrr", "wrr", [1, 1, 1]),
    Case("wrr-1:2:2", "wrr", [1, 2, 2]),
    Case("wrr-change", "wrr", [1, 1, 1], change=True),
    Case("baseline", "baseline", [1, 1, 1]),
]


# The fields of a run that ab's report gives (topology.ab.AbResult's, by the same names).
AB_FIELDS = ("complete", "failed", "non_2xx", "rps", "transfer_kbps", "mean_ms")
AB_FIELDS += ("p50_ms", "p95_ms", "p99_ms")


@dataclass
class Run:
    case: str
    algorithm: str
    weights: str
    n: int
    concurrency: int
    complete: int
    failed: int
    non_2xx: int
    rps: float
    transfer_kbps: float
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    served: str  # per-server requests served, from the access logs
    connections: str  # per-server TCP connections accepted, from the access logs
    switch: str  # per-server new connections, from the switch counters
    agree: bool
    jain: float
    weighted_jain: float
    retransmissions: int
    resets: int


def program_baseline(lab: Lab) -> None:
    """Load the plain forwarding program and route every host."""
    schema = Schema(load_p4info(COMPILED / "baseline.p4info.txtpb"))
    s = lab.config.switch
    sw = Switch(s.address, 0, s.election_id, info=schema, tls=s.tls)
    with sw:
        sw.ensure_pipeline(COMPILED / "baseline.p4info.txtpb", COMPILED / "baseline.json")
        hosts = lab.clients + lab.servers
        entries = [
            Entry(
                "ipv4_route_table",
                (("dst_addr", (int.from_bytes(bytes(map(int, h.IP().split("."))), "big"), 32)),),
                "forward",
                (
                    ("port", i + 1),
                    ("src_mac", int(SWITCH_MAC.replace(":", ""), 16)),
                    ("dst_mac", int(mac(i + 1).replace(":", ""), 16)),
                ),
            )
            for i, h in enumerate(hosts)
        ]
        sw.write([Update("INSERT", e) for e in entries])
    for i, h in enumerate(hosts):  # no ARP answering in the baseline program
        for j, other in enumerate(hosts):
            if i != j:
                h.cmd(f"arp -s {other.IP()} {mac(j + 1)}")


def one_run(case: Case, n: int, c: int, raw_dir: Path) -> Run:
    algorithm = "wrr" if case.algorithm == "baseline" else case.algorithm
    opts = Options(algorithm=algorithm, weights=case.weights)
    with running(opts, threaded=False, apply=case.algorithm != "baseline") as lab:
        if case.algorithm == "baseline":
            program_baseline(lab)
            url = f"http://{lab.servers[0].IP()}:{SERVER_PORT}/"
        else:
            url = f"http://{VIP_ADDR}:{VIP_PORT}/"
        client = lab.clients[0]
        tcp0 = tcp_counters(client)
        result: list[ab.AbResult] = []
        t = threading.Thread(target=lambda: result.append(ab.run(client, url, n, c)))
        t.start()
        logs = {s.name: str(access_log(s)) for s in lab.servers}
        if case.change:
            for _ in range(6000):  # bounded: at most ~5 min
                if sum(ab.access_counts(logs).values()) >= n // 2 or not t.is_alive():
                    break
                t.join(0.05)
            subprocess.run(
                p4lb_cmd(lab, "weight", "set", "web", "h2", "3"), check=True, capture_output=True
            )
            subprocess.run(
                p4lb_cmd(lab, "backend", "drain", "web", "h3"), check=True, capture_output=True
            )
        t.join(3600)
        if not result:
            raise RuntimeError(f"{case.name} n={n} c={c}: ab did not finish")
        r = result[0]
        tcp1 = tcp_counters(client)
        (raw_dir / f"{case.name}-n{n}-c{c}.txt").write_text(r.raw)
        wait_servers_idle(lab)
        served = ab.access_counts(logs)
        conns = ab.access_counts(logs, connections=True)
        if case.algorithm == "baseline":
            switch = dict(conns)
            cfg_weights = case.weights
        else:
            cfg = reader.load(lab.config_path)
            with operations.connect_reader(cfg) as sw:
                st = operations.read_stats(sw, cfg)
            switch = {b.name: b.connections for b in st.vips[0].backends}
            cfg_weights = [b.weight for b in st.vips[0].backends]
        agree = switch == conns
        if not agree:
            print(
                f"!! MISMATCH {case.name} n={n}: switch {switch} vs access logs {conns}",
                file=sys.stderr,
            )
        values = [served[s.name] for s in lab.servers]
        tcp = {k: tcp1.get(k, 0) - tcp0.get(k, 0) for k in ("RetransSegs", "OutRsts")}
        lb = case.algorithm != "baseline"
        return Run(
            case=case.name,
            algorithm=case.algorithm,
            weights=":".join(map(str, case.weights)),
            n=n,
            concurrency=c,
            **{k: getattr(r, k) for k in AB_FIELDS},
            served=json.dumps(served),
            connections=json.dumps(conns),
            switch=json.dumps(switch),
            agree=agree,
            jain=jain(values) if lb else 1.0,
            weighted_jain=weighted_jain(values, cfg_weights) if lb else 1.0,
            retransmissions=tcp["RetransSegs"],
            resets=tcp["OutRsts"],
        )


def versions() -> dict[str, str]:
    """meta.json's facts, from bench.provenance."""
    machine = provenance.machine()
    return {
        "commit": provenance.git_state()["commit"],
        "bmv2": provenance.version_line(["simple_switch_grpc", "--version"]) or "missing",
        "p4c": (COMPILED / "SOURCES.sha256").read_text().strip().replace("\n", " | "),
        "ab": provenance.version_line(["ab", "-V"]) or "missing",
        "kernel": machine["kernel"],
        "python": machine["python"],
        "machine": f"{platform.machine()}, {machine['cores']} cores",
    }


def overhead(runs: list[Run]) -> dict[tuple[str, int], dict[int, float]]:
    """Requests/s of each load-balanced case over the baseline's, at the same n and -c."""
    base = {(r.n, r.concurrency): r.rps for r in runs if r.algorithm == "baseline"}
    out: dict[tuple[str, int], dict[int, float]] = {}
    for r in sorted(runs, key=lambda r: r.n):
        if r.algorithm != "baseline" and base.get((r.n, r.concurrency)):
            ratio = r.rps / base[(r.n, r.concurrency)]
            out.setdefault((r.case, r.concurrency), {})[r.n] = ratio
    return out


def summary(runs: list[Run]) -> str:
    """The results table (Markdown), one row per run."""
    ratios = overhead(runs)
    rows = [
        (r, ratios.get((r.case, r.concurrency), {}).get(r.n), json.loads(r.served)) for r in runs
    ]
    return templates.render("ab-summary.md", rows=rows)


def plots(runs: list[Run], out: Path) -> None:
    plt = figure.pyplot()

    cases = sorted({r.case for r in runs if r.algorithm != "baseline"})
    top = max(r.concurrency for r in runs)  # the lines at the highest concurrency
    for metric, label in (
        ("rps", "requests/s"),
        ("mean_ms", "mean time per request (ms)"),
        ("jain", "Jain's fairness index"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4))
        for case in sorted({r.case for r in runs}):
            mine = [r for r in runs if r.case == case and r.concurrency == top]
            pts = sorted((r.n, getattr(r, metric)) for r in mine)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=case)
        ax.set_xlabel("requests (ab -n)")
        ax.set_ylabel(label)
        ax.legend()
        ax.grid(alpha=0.3)
        figure.save(fig, out / f"{metric}.png", 110)
    fig, ax = plt.subplots(figsize=(7, 4))
    for (case, conc), ratios in sorted(overhead(runs).items()):
        ax.plot(list(ratios), list(ratios.values()), marker="o", label=f"{case} -c {conc}")
    ax.axhline(0.95, color="grey", linestyle="--", linewidth=1, label="goal 0.95")
    ax.set_xlabel("requests (ab -n)")
    ax.set_ylabel("requests/s relative to the baseline")
    ax.set_ylim(0, 1.1)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    figure.save(fig, out / "overhead.png", 110)
    fig, ax = plt.subplots(figsize=(7, 4))
    biggest = max(r.n for r in runs)
    width = 0.8 / max(1, len(cases))
    for k, case in enumerate(cases):
        run = next((r for r in runs if r.case == case and r.n == biggest), None)
        if run is None:
            continue
        served = json.loads(run.served)
        xs = [i + k * width for i in range(len(served))]
        ax.bar(xs, list(served.values()), width=width, label=case)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(served))], list(served))
    ax.set_ylabel(f"requests served (n={biggest})")
    ax.legend()
    figure.save(fig, out / "distribution.png", 110)


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help=f"counts {QUICK_COUNTS}")
    p.add_argument("--counts", type=int, nargs="*", default=None)
    p.add_argument("--concurrency", type=int, nargs="*", default=[1, 10])
    p.add_argument("--cases", nargs="*", default=[c.name for c in CASES])
    p.add_argument("--append", action="store_true", help="add to the runs already in OUT/runs.json")


def main(argv: list[str] | None = None) -> int:
    # Into results/ only with the paper's counts, every case and concurrency.
    committed = ["quick", "counts", "concurrency", "cases"]
    a = runner.command_line("bench-ab", __doc__, "", argv, options, committed)
    counts = a.counts or (QUICK_COUNTS if a.quick else PAPER_COUNTS)
    out = a.out
    record = runner.start_run(
        "bench-ab", {"standard": shutil.which("simple_switch_grpc") or "?"}, argv
    )
    if record is None:
        return 2
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    plan = [(c, n, k) for c in CASES if c.name in a.cases for n in counts for k in a.concurrency]
    runs: list[Run] = []
    if a.append and (out / "runs.json").exists():
        runs = [Run(**r) for r in json.loads((out / "runs.json").read_text())]
    started = time.monotonic()
    for i, (case, n, k) in enumerate(plan, start=1):
        print(
            f"[{i}/{len(plan)}] {case.name} ab -n {n} -c {k} "
            f"({time.monotonic() - started:.0f}s elapsed)",
            flush=True,
        )
        run = one_run(case, n, k, raw)
        runs.append(run)
        print(
            f"    {run.rps:.1f} req/s, mean {run.mean_ms:.2f} ms, failed {run.failed}, "
            f"served {run.served}, jain {run.jain:.4f}",
            flush=True,
        )
        runner.write_csv(out / "runs.csv", [asdict(r) for r in runs])
        (out / "runs.json").write_text(json.dumps([asdict(r) for r in runs], indent=1))
    invocation = {"counts": counts, "concurrency": a.concurrency, "cases": a.cases}
    meta_file = out / "meta.json"
    earlier = json.loads(meta_file.read_text()) if a.append and meta_file.exists() else {}
    meta = versions() | {
        "invocations": earlier.get("invocations", []) + [invocation],
        "provenance": record.finish(1, order="the plan: cases, counts, concurrency"),
    }
    meta_file.write_text(json.dumps(meta, indent=1))
    (out / "summary.md").write_text(summary(runs))
    plots(runs, out)
    mismatches = [r for r in runs if not r.agree]
    print(f"done: {len(runs)} runs, {len(mismatches)} counter/log mismatches; {outdir.said(out)}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
