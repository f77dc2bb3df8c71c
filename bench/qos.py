"""`make bench-qos`: Maulana et al.'s comparison of queueing disciplines, in the switch.

Mininet: clients h1 (3 bulk TCP flows), h2 (1 bulk TCP flow), h3 (a VoIP-like UDP flow,
50 packets/s of 160 bytes, and a ping every 200 ms), all toward the server h4 behind switch
port 4, which the discipline under test shapes to 1,000 packets/s. Each discipline runs
`--reps` times for `--duration` s, interleaved (rep 1 of every discipline, then rep 2 ...,
the order rotated each rep). Measured per run: bulk goodput per flow and per host with
Jain's index, the VoIP flow's one-way delay (p50/p95, the hosts share one clock), RFC 3550
jitter and loss, ping RTT and loss, the port's mean queueing delay from deq_timedelta
(qos.p4's qos_sojourn_us / qos_dequeued, read over Thrift), drops by cause, and the switch
process's CPU time per packet it took in. Writes results/qos/ (runs.csv, summary.json,
tiphon.md, plots) with provenance.

The queue hashes each flow into one of 64 buckets (qos.p4); five flows collide at random
about 15 % of the time, and a VoIP flow sharing a bulk flow's bucket waits in its queue. So
each run picks fresh source ports that give every flow a bucket of its own (place_flows,
recorded per run): the comparison is of the disciplines, not of the hash's luck.
tests/e2e/test_qos.py shows what a shared bucket does."""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import figure, outdir, runner, templates
from bench import provenance as pv
from bench import qos_metrics as m
from bench.experiments.counters import switch_packets
from bench.outdir import ROOT
from bench.rate import process_cpu_s
from bench.stats import percentile_interpolated
from p4lb.models.hashing import qos_flow_bucket
from p4lb.stats.fairness import jain
from topology import wire
from topology.procs import poll_until

PORT = 4  # the server's switch port: the bottleneck
RATE_PPS = 1000
VOIP_PPS = 50
TCP_PORT, VOIP_PORT = 5001, 5002
WARMUP_S = 3.0
BULK_FLOWS = (3, 1)  # h1's and h2's
# Source ports for the placed flows: below Linux's ephemeral range (32768-60999), and never
# one twice in a process (a closed connection's port stays in TIME_WAIT for 60 s). A
# narrower range would not do: the CRC-16 is linear, and the ports of 20000-31999 reach
# only 56 of the 64 buckets.
SPORTS = range(1024, 32768)
_spent: set[int] = set()

# name -> `p4lb qos set` words. The two FIFOs are the deep-buffer (1 s at the port rate)
# and shallow-buffer baselines.
VARIANTS: dict[str, list[str]] = {
    "fifo-deep": ["fifo", f"rate_pps={RATE_PPS}", "limit=1000"],
    "fifo-shallow": ["fifo", f"rate_pps={RATE_PPS}", "limit=50"],
    "codel": ["codel", f"rate_pps={RATE_PPS}", "limit=1000"],
    "sfq-approx": ["sfq-approx", f"rate_pps={RATE_PPS}"],
    "pcq-approx": ["pcq-approx", f"rate_pps={RATE_PPS}", "class_rate_pps=400"],
    "fq_codel-approx": ["fq_codel-approx", f"rate_pps={RATE_PPS}"],
    "cake-approx": ["cake-approx", f"rate_pps={RATE_PPS}", "host_limit=250"],
}


# Maulana et al. (MikroTik RouterOS v7, RB450G, 35 Mbit/s), their own figures and grades.
def _seed(ping: int, loss: int, cpu: int, mbps: float, grade: str, loss_grade: str) -> Any:
    keys = ("ping_ms", "loss_pct", "cpu_pct", "mbps", "grade", "loss_grade")
    return dict(zip(keys, (ping, loss, cpu, mbps, grade, loss_grade), strict=True))


SEED = {
    "sfq": _seed(215, 8, 15, 33.2, "Poor", "Good"),
    "pcq": _seed(35, 6, 25, 34.8, "Good", "Good"),
    "fq_codel": _seed(31, 0, 45, 34.1, "Very Good", "Very Good"),
    "cake": _seed(29, 0, 70, 34.5, "Very Good", "Very Good"),
}


def _host_py(host: Any, args: str) -> None:
    """`python -m bench.qos_traffic ARGS` on `host`, in the background."""
    cmd = f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m bench.qos_traffic {args}"
    host.cmd(cmd + " > /dev/null 2>&1 &")


def thrift_register(name: str, index: int, thrift_port: int = 9090) -> int:
    """One register cell over Thrift, on 127.0.0.1; a cell the CLI did not print raises."""
    out = wire.thrift_cli(thrift_port, [f"register_read {name} {index}"])
    found = re.search(rf"{re.escape(name)}\[{index}\]\s*=\s*(\d+)", out)
    if found is None:
        raise RuntimeError(f"register_read {name} {index}: no value in {out[-200:]!r}")
    return int(found.group(1))


def qos_drops(lab: Any) -> dict[str, int]:
    from topology.net import p4lb_cmd

    out = subprocess.run(
        p4lb_cmd(lab, "qos", "show", "--json"), capture_output=True, text=True, timeout=60
    )
    return dict(json.loads(out.stdout)["drops"]) if out.returncode == 0 else {}


def place_flows(
    rng: random.Random, bulk_srcs: list[str], voip_src: str, dst: str, voip_with: int | None = None
) -> dict[str, Any]:
    """Fresh source ports for the bulk flows (one per address in `bulk_srcs`, toward
    TCP_PORT) and the VoIP flow (toward VOIP_PORT) that give every flow a flow bucket of
    its own in the bottleneck's queue, or, with `voip_with=i`, put the VoIP flow in bulk
    flow i's bucket. Bounded: a few thousand draws; 5 flows in 64 buckets need a handful."""
    for _ in range(5000):
        ports = rng.sample(SPORTS, len(bulk_srcs) + 1)
        if _spent.intersection(ports):
            continue
        bulk = [
            qos_flow_bucket(a, dst, 6, p, TCP_PORT)
            for a, p in zip(bulk_srcs, ports[:-1], strict=True)
        ]
        voip = qos_flow_bucket(voip_src, dst, 17, ports[-1], VOIP_PORT)
        apart = len(set(bulk)) == len(bulk)
        if apart and (voip == bulk[voip_with] if voip_with is not None else voip not in bulk):
            _spent.update(ports)
            return {
                "bulk_ports": ports[:-1],
                "voip_port": ports[-1],
                "bulk_buckets": bulk,
                "voip_bucket": voip,
            }
    raise RuntimeError("bench.qos: no placement of the flows found in 5,000 draws")


def measures(
    sink: dict[str, Any], voip: list[list[float]], ping_out: str, sent: int, pings: int
) -> dict[str, Any]:
    """What the hosts saw in one run: the sink's bytes per bulk flow over its window (as
    Mbit/s per flow and per host, with Jain's index), the VoIP receiver's (sequence,
    one-way delay ms) pairs of the `sent`, and ping's output of `pings` echoes."""
    hosts: dict[str, float] = {}
    flows = {}
    for peer, nbytes in sink["bytes"].items():
        flows[peer] = nbytes * 8 / sink["window_s"] / 1e6
        hosts[peer.split(":")[0]] = hosts.get(peer.split(":")[0], 0.0) + flows[peer]
    delays = [d for _, d in sorted(voip, key=lambda x: x[0])]
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping_out)]
    return {
        "flows_mbps": flows,
        "hosts_mbps": hosts,
        "goodput_mbps": sum(flows.values()),
        "jain_flows": jain(list(flows.values())),
        "jain_hosts": jain(list(hosts.values())),
        "voip_p50_ms": percentile_interpolated(delays, 0.5),
        "voip_p95_ms": percentile_interpolated(delays, 0.95),
        "voip_mean_ms": statistics.fmean(delays) if delays else float("nan"),
        "voip_jitter_ms": m.jitter_rfc3550([d for _, d in voip]),
        "voip_loss": m.loss(sent, len({s for s, _ in voip})),
        "ping_mean_ms": statistics.fmean(rtts) if rtts else float("nan"),
        "ping_loss": m.loss(pings, len(rtts)),
    }


def one_run(
    lab: Any,
    variant: str,
    duration: float,
    tmp: Path,
    rng: random.Random | None = None,
    voip_with: int | None = None,
) -> dict[str, Any]:
    """One run of `variant`; the flows placed by place_flows (`voip_with`: see there)."""
    from topology.net import p4lb_cmd

    h1, h2, h3 = lab.clients
    server = lab.servers[0]
    dst = server.IP()
    srcs = [h1.IP()] * BULK_FLOWS[0] + [h2.IP()] * BULK_FLOWS[1]
    placement = place_flows(rng or random.Random(), srcs, h3.IP(), dst, voip_with)
    sports = placement["bulk_ports"]
    words = VARIANTS[variant]
    subprocess.run(
        p4lb_cmd(lab, "qos", "set", str(PORT), *words), check=True, capture_output=True, timeout=60
    )
    time.sleep(2.0)  # the previous run's queue drains
    drops0 = qos_drops(lab)
    sw = lab.net.switches[0]
    soj0, deq0 = thrift_register("qos_sojourn_us", 0), thrift_register("qos_dequeued", 0)
    cpu0, rx0 = process_cpu_s(sw.switch_pid), switch_packets(lab)
    sink_out, voip_out = tmp / f"{variant}-sink.json", tmp / f"{variant}-voip.json"
    for old in (sink_out, voip_out):
        old.unlink(missing_ok=True)  # a previous repetition's
    total = duration + WARMUP_S
    _host_py(
        server,
        f"tcp-sink --port {TCP_PORT} --duration {total + 2} --skip {WARMUP_S + 1} --out {sink_out}",
    )
    _host_py(server, f"voip-recv --port {VOIP_PORT} --duration {total + 2} --out {voip_out}")
    time.sleep(1.0)
    for host, mine in ((h1, sports[: BULK_FLOWS[0]]), (h2, sports[BULK_FLOWS[0] :])):
        _host_py(
            host,
            f"bulk --dst {dst} --port {TCP_PORT} --flows {len(mine)} --duration {total} "
            f"--sports {','.join(map(str, mine))}",
        )
    time.sleep(WARMUP_S)
    _host_py(
        h3,
        f"voip-send --dst {dst} --port {VOIP_PORT} --pps {VOIP_PPS} --size 160 "
        f"--duration {duration} --sport {placement['voip_port']}",
    )
    pings = int(duration / 0.2)
    ping_out = h3.cmd(f"ping -i 0.2 -c {pings} -W 2 {dst}")
    poll_until(lambda: sink_out.exists() and voip_out.exists(), 30, every=0.5)
    cpu1, rx1 = process_cpu_s(sw.switch_pid), switch_packets(lab)
    soj1, deq1 = thrift_register("qos_sojourn_us", 0), thrift_register("qos_dequeued", 0)
    drops1 = qos_drops(lab)

    sink, voip = json.loads(sink_out.read_text()), json.loads(voip_out.read_text())
    return {
        "variant": variant,
        **measures(sink, voip, ping_out, int(duration * VOIP_PPS), pings),
        "queue_delay_ms": (soj1 - soj0) / max(1, deq1 - deq0) / 1000,
        "drops": {k: drops1.get(k, 0) - drops0.get(k, 0) for k in drops1},
        "cpu_us_per_packet": (cpu1 - cpu0) * 1e6 / max(1, rx1 - rx0),
        "switch_packets": rx1 - rx0,
        "placement": placement,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant: median, min and max of each scalar measure over its runs, and grades."""
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        mine = [r for r in runs if r["variant"] == variant]
        if not mine:
            continue
        s: dict[str, Any] = {"reps": len(mine)}
        for k in keys:
            vals = [r[k] for r in mine]
            s[k] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        s["grade_delay"] = m.grade_delay(s["voip_p95_ms"]["median"])
        s["grade_jitter"] = m.grade_jitter(s["voip_jitter_ms"]["median"])
        s["grade_loss"] = m.grade_loss(s["voip_loss"]["median"])
        s["grade_ping"] = m.grade_delay(s["ping_mean_ms"]["median"])
        out[variant] = s
    return out


def tiphon(prov: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    """tiphon.md: how the run was measured, its table, and Maulana et al.'s beside it."""
    return templates.render("qos/tiphon.md", p=prov, summary=summary, seed=SEED) + "\n"


def plots(runs: list[dict[str, Any]], summary: dict[str, dict[str, Any]], out: Path) -> None:
    plt = figure.pyplot()

    fig, ax = plt.subplots(figsize=(7, 4))
    for v in summary:
        p95 = sorted(r["voip_p95_ms"] for r in runs if r["variant"] == v)
        ax.plot(p95, [(i + 1) / len(p95) for i in range(len(p95))], marker="o", label=v)
    ax.set_xscale("log")
    ax.set_xlabel("VoIP one-way delay p95 per run (ms, log)")
    ax.set_ylabel("fraction of runs")
    ax.legend(fontsize=7)
    figure.save(fig, out / "delay_cdf.png", 120)

    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(summary)
    x = range(len(names))
    for offset, (host, label) in (
        (-0.2, ("10.0.0.1", "h1 (3 flows)")),
        (0.2, ("10.0.0.2", "h2 (1 flow)")),
    ):
        mbps = [
            statistics.median(r["hosts_mbps"].get(host, 0) for r in runs if r["variant"] == v)
            for v in names
        ]
        ax.bar([i + offset for i in x], mbps, width=0.4, label=label)
    ax.set_xticks(list(x), names, rotation=30, fontsize=7)
    ax.set_ylabel("goodput, Mbit/s (median)")
    ax.legend()
    figure.save(fig, out / "goodput.png", 120)


def provenance(reps: int, duration: float, binary: str) -> dict[str, Any]:
    """The facts bench.provenance collects (code, tools) and the queueing run's own, under
    the names the note (tiphon.md) reads."""
    facts = pv.collect("bench-qos", {"standard": binary})
    return {
        "commit": facts["git"]["commit"],
        "dirty": facts["git"]["dirty"],
        "bmv2": facts["bmv2"]["standard"]["version"] or "",
        "bmv2_binary": binary,
        "p4c": [f"p4c-bm2-ss {facts['p4c']}"],
        "date": facts["started"],
        "machine": facts["machine"],
        "reps": reps,
        "duration_s": duration,
        "rate_pps": RATE_PPS,
        "host": "Debian 12, 2 cores shared with other agents' builds/benches (one BMv2 run at a "
        "time under /tmp/p4lb-bmv2.lock)",
        "variants": VARIANTS,
        "placement": "fresh source ports per run, every flow in a queue bucket of its own "
        "(bench.qos.place_flows; each run's ports and buckets in runs.json)",
    }


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--label", default="full")
    p.add_argument("--seed", type=int, default=4, help="the flows' source ports (default 4)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # Fewer repetitions, shorter runs or fewer disciplines than the committed profile write
    # into the scratch tree unless --out (or P4LB_RESULTS_DIR) says otherwise.
    committed = ["duration", "variants"]
    return runner.command_line("bench-qos", __doc__, "qos", argv, options, committed, reps=5)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from topology.bmv2 import switch_binary
    from topology.net import Options, running

    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path("/tmp/p4lb-bench-qos")
    tmp.mkdir(exist_ok=True)
    runs: list[dict[str, Any]] = []
    rng = random.Random(args.seed)
    opts = Options(servers=1, clients=3, tls=False, priority_queues=8)
    with running(opts, threaded=False) as lab:
        for rep in range(args.reps):
            k = rep % len(args.variants)
            order = args.variants[k:] + args.variants[:k]
            for v in order:
                r = one_run(lab, v, args.duration, tmp, rng)
                r["rep"] = rep + 1
                runs.append(r)
                print(
                    f"rep {rep + 1} {v}: voip p95 {r['voip_p95_ms']:.1f} ms, loss "
                    f"{r['voip_loss']:.1%}, goodput {r['goodput_mbps']:.2f} Mbit/s, "
                    f"jain(hosts) {r['jain_hosts']:.3f}, queue {r['queue_delay_ms']:.1f} ms, "
                    f"drops {r['drops']}",
                    flush=True,
                )
    summary = summarize(runs)
    prov = provenance(args.reps, args.duration, switch_binary())
    prov |= {"label": args.label, "seed": args.seed}
    (args.out / "runs.json").write_text(json.dumps({"provenance": prov, "runs": runs}, indent=1))
    cols = [k for k, v in runs[0].items() if isinstance(v, (int, float, str))]
    runner.write_csv(args.out / "runs.csv", runs, cols)
    (args.out / "summary.json").write_text(
        json.dumps({"provenance": prov, "summary": summary}, indent=1)
    )
    (args.out / "tiphon.md").write_text(tiphon(prov, summary))
    plots(runs, summary, args.out)
    print(tiphon(prov, summary), end="")
    print(f"bench.qos: {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
