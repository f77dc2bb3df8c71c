"""`make bench-qos`: Maulana et al.'s comparison of queueing disciplines, in the switch.

Mininet: clients h1 (3 bulk TCP flows), h2 (1 bulk TCP flow), h3 (a VoIP-like UDP flow,
50 packets/s of 160 bytes, and a ping every 200 ms), all toward the server h4 behind switch
port 4, which the discipline under test shapes to 1,000 packets/s. Each discipline runs
`--reps` times for `--duration` s, interleaved (bench.runner), each run's flows in queue
buckets of their own (bench.qos_metrics.place_flows). Measured per run: bulk goodput per
flow and per host with Jain's index, the VoIP flow's one-way delay (p50/p95, the hosts
share one clock), RFC 3550 jitter and loss, ping RTT and loss, the port's mean queueing
delay from deq_timedelta (qos.p4's qos_sojourn_us / qos_dequeued, read over Thrift), drops
by cause, and the switch process's CPU time per packet it took in. Writes results/qos/
(runs.json, and bench.qos_report's files) with provenance."""

from __future__ import annotations

import argparse
import contextlib
import random
from collections.abc import Iterator
from typing import Any

from bench import provenance as pv
from bench import qos_report, runner
from bench.qos_metrics import summarize
from bench.qos_run import RATE_PPS, VARIANTS, one_run


def named(prov: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The run's provenance (bench.provenance) under the names the notes read."""
    (bmv2,) = prov["bmv2"].values()
    return {
        "commit": prov["git"]["commit"],
        "dirty": prov["git"]["dirty"],
        "bmv2": bmv2["version"] or "",
        "bmv2_binary": bmv2["path"],
        "p4c": [f"p4c-bm2-ss {prov['p4c']}"],
        "date": prov["started"],
        "machine": prov["machine"],
        "load": prov["load"],
        "reps": args.reps,
        "duration_s": args.duration,
        "rate_pps": RATE_PPS,
        "measured": pv.describe({"provenance": prov}),
        "variants": {v: VARIANTS[v] for v in args.variants},
        "placement": "fresh source ports per run, every flow in a queue bucket of its own "
        "(bench.qos_metrics.place_flows; each run's ports and buckets in runs.json)",
        "label": args.label,
        "seed": args.seed,
    }


@contextlib.contextmanager
def lab(args: argparse.Namespace) -> Iterator[tuple[Any, random.Random]]:
    """The Mininet lab (h1-h3 clients, h4 the server) and the source ports' generator."""
    from topology.net import Options, running

    opts = Options(servers=1, clients=3, tls=False, priority_queues=8)
    with running(opts, threaded=False) as net:
        yield net, random.Random(args.seed)


def measure(t: runner.Trial, variant: str) -> dict[str, Any]:
    net, rng = t.lab
    r = one_run(net, variant, t.args.duration, t.workdir, rng)
    runner.progress(
        f"{variant}: voip p95 {r['voip_p95_ms']:.1f} ms, loss {r['voip_loss']:.1%}, goodput "
        f"{r['goodput_mbps']:.2f} Mbit/s, jain(hosts) {r['jain_hosts']:.3f}, queue "
        f"{r['queue_delay_ms']:.1f} ms, drops {r['drops']}"
    )
    return r


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    runs = [values[v][i] | {"rep": i + 1} for i in range(args.reps) for v in args.variants]
    return {"runs": runs, "summary": summarize(runs)}


def write(args: argparse.Namespace, result: dict[str, Any]) -> None:
    ((build,),) = (result["builds"].values(),)
    qos_report.write(args.out, build["runs"], build["summary"], named(result["provenance"], args))


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--label", default="full")
    p.add_argument("--seed", type=int, default=4, help="the flows' source ports (default 4)")


SPEC = runner.Spec(
    prog="bench-qos",
    doc=__doc__ or "",
    subdir="qos",
    filename="runs.json",
    reps=5,
    tools=("ping",),
    options=options,
    # Fewer repetitions, shorter runs or fewer disciplines than the committed profile
    # write into the scratch tree unless --out (or P4LB_RESULTS_DIR) says otherwise.
    committed=("duration", "variants"),
    variants=lambda a: list(a.variants),
    measure=measure,
    figures=figures,
    lab=lab,
    check=lambda a: "--build: the lab runs $P4LB_SIMPLE_SWITCH or PATH's" if a.build else None,
    write=write,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return runner.arguments(SPEC, argv)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
