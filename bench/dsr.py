"""`make bench-dsr`: what a request costs the switch under NAT and under direct server
return, for small and large responses, per BMv2 build, and the highest request rate one
balancer sustains with no request failed.

The single-switch lab (topology.net: one client, three threaded HTTP servers) with the VIP
in NAT mode, or in DSR mode with its return path beside the switch; `ab -c 10` through the
VIP; the switch process's CPU time (user + system, every thread, and its busiest thread)
over the run, per completed request. Then the rate: ab again at twice the concurrency,
and twice that, up to --peak-concurrency, until the rate stops growing (by 5 %) or a
request fails; the peak is the highest rate of a run with none failed.
The tier (topology.tier_load: r0, one balancer, three servers, its speaker and the
controller) in DSR mode serves both at once: its port-80 VIP is a DSR one, its port-81 VIP
a NAT one, both Maglev; ab takes turns between them, and the balancer's CPU per request is
measured the same way.
Variants (where x mode x response size) take turns within each repetition, each in a lab
of its own (the tier's modes in one tier); each figure is the median with min and max, and
DSR's share of NAT's is taken per repetition. Writes results/dsr/dsr.json.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import figure, outdir, rate, runner, stats
from topology import ab

SIZES = {"1KB": 1024, "100KB": 100 * 1024}
MODES = ("nat", "dsr")
_tier_runs = itertools.count()


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--requests-small", type=int, default=3000, help="ab -n for 1 KB")
    ap.add_argument("--requests-large", type=int, default=600, help="ab -n for 100 KB")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--peak-concurrency", type=int, default=80, help="the rate's search stops here")


def variants(args: argparse.Namespace) -> list[str]:
    """Single switch: mode x size; the tier: one variant per size, both modes in it."""
    return [f"{mode} {size}" for mode in MODES for size in SIZES] + [
        f"tier {size}" for size in SIZES
    ]


def cpu_per_request(
    pid: int, run: Callable[[], ab.AbResult]
) -> tuple[ab.AbResult, dict[str, float]]:
    """`run` (one ab) while process `pid` is measured: its CPU milliseconds per answered
    request, all threads and the busiest."""
    cpu, threads = rate.process_cpu_s(pid), rate.thread_cpu_s(pid)
    r = run()
    cpu = rate.process_cpu_s(pid) - cpu
    busiest = max(
        (s - threads.get(tid, 0.0) for tid, s in rate.thread_cpu_s(pid).items()), default=0.0
    )
    done = max(r.complete - r.failed, 1)
    return r, {
        "cpu_ms_per_request": 1000 * cpu / done,
        "busiest_ms_per_request": 1000 * busiest / done,
        "rps": r.rps,
        "failed": float(r.failed + r.non_2xx),
    }


def peak(
    first: ab.AbResult, concurrency: int, top: int, run: Callable[[int], ab.AbResult]
) -> dict[str, float]:
    """The highest rate of a run with no failed request, `first` (at `concurrency`) and
    then at twice the concurrency each time up to `top`, while the rate grows by 5 %."""
    best = (first.rps, concurrency) if first.failed + first.non_2xx == 0 else (0.0, 0)
    last = first.rps
    c = concurrency * 2
    while c <= top:
        r = run(c)
        if r.failed + r.non_2xx:
            break
        if r.rps > best[0]:
            best = (r.rps, c)
        if r.rps < last * 1.05:
            break
        last, c = r.rps, c * 2
    return {"peak_rps": best[0], "peak_concurrency": float(best[1])}


def measure(t: runner.Trial, label: str) -> dict[str, float]:
    """One lab: the switch's CPU milliseconds per request (all threads and the busiest),
    the request rate and what failed at --concurrency, and the peak rate; for the tier
    each of these per mode ("nat cpu_ms_per_request", ...)."""
    where, size = label.split()
    n = t.args.requests_small if size == "1KB" else t.args.requests_large
    os.environ["P4LB_SIMPLE_SWITCH"] = t.binary  # the lab's switch (topology.bmv2)
    if where == "tier":
        return measure_tier(t, size, n)
    from topology.net import VIP_ADDR, VIP_PORT, Options, build, p4lb_cmd, start_servers, stop

    lab = build(Options(mode=where, body_bytes=SIZES[size]))
    try:
        subprocess.run(p4lb_cmd(lab, "apply"), check=True, capture_output=True, timeout=120)
        start_servers(lab, threaded=True)
        client, url = lab.clients[0], f"http://{VIP_ADDR}:{VIP_PORT}/"
        ab.run(client, url, 20, 1)  # warm: ARP, the servers' first connections
        c0 = t.args.concurrency
        r, out = cpu_per_request(lab.pids["switch"], lambda: ab.run(client, url, n, c0))
        out |= peak(r, c0, t.args.peak_concurrency, lambda c: ab.run(client, url, n, c))
    finally:
        stop(lab)
    return out | {"requests": float(n)}


def measure_tier(t: runner.Trial, size: str, n: int) -> dict[str, float]:
    """One tier of one balancer in DSR mode (port 80 DSR, port 81 NAT, both Maglev): per
    mode, in an order that alternates with the repetition, the balancer's CPU per request
    at --concurrency and the peak rate."""
    from topology import tier_load
    from topology.tier_plan import NS, VIP
    from topology.tier_procs import in_ns

    def run(port: int, c: int, requests: int = n) -> ab.AbResult:
        cmd = ab.command(f"http://{VIP}:{port}/", requests, c)
        return ab.parse(in_ns(NS + "c1", *cmd, check=False).stdout)

    tier = tier_load.start_tier(1, 3, "maglev", "dsr", body_bytes=SIZES[size])
    out: dict[str, float] = {}
    try:
        pid = tier.pids["switch-lb1"]
        ports = {"dsr": 80, "nat": 81}
        first = next(_tier_runs) % 2  # each tier the other mode first
        c0 = t.args.concurrency
        for mode in (*MODES[first:], *MODES[:first]):
            port = ports[mode]
            run(port, 1, 20)  # warm: ARP, the servers' first connections
            r, got = cpu_per_request(pid, lambda port=port: run(port, c0))
            got |= peak(r, c0, t.args.peak_concurrency, lambda c, port=port: run(port, c))
            out |= {f"{mode} {k}": v for k, v in got.items()}
    finally:
        tier.down()
    return out | {"requests": float(n)}


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    """Per variant the medians (min–max) of each figure; per size DSR over NAT."""
    out: dict[str, Any] = {
        label: {k: stats.summary([v[k] for v in vs]) for k in vs[0]} for label, vs in values.items()
    }
    ratios = ("cpu_ms_per_request", "busiest_ms_per_request", "rps", "peak_rps")
    for size in SIZES:
        nat, dsr = values[f"nat {size}"], values[f"dsr {size}"]
        out[f"dsr/nat {size}"] = {
            k: stats.summary([d[k] / n[k] for d, n in zip(dsr, nat, strict=True)]) for k in ratios
        }
        tier = values[f"tier {size}"]
        out[f"tier dsr/nat {size}"] = {
            k: stats.summary([v[f"dsr {k}"] / v[f"nat {k}"] for v in tier]) for k in ratios
        }
    return out


SPEC = runner.Spec(
    prog="bench-dsr",
    doc=__doc__ or "",
    subdir="dsr",
    filename="dsr.json",
    reps=3,
    tools=("ab", "mn", "/usr/lib/frr/bgpd", "gobgpd"),
    options=options,
    committed=("requests_small", "requests_large", "concurrency", "peak_concurrency"),
    variants=variants,
    measure=measure,
    figures=figures,
    head=lambda args: {
        "sizes": SIZES,
        "concurrency": args.concurrency,
        "peak_concurrency": args.peak_concurrency,
    },
    lab=contextlib.nullcontext,
)


def plot(out: Path) -> None:
    """dsr.png beside dsr.json: the switch's CPU per request, NAT and DSR, per build, single
    switch and tier, and response size (medians, min–max as error bars)."""
    d = json.loads((out / "dsr.json").read_text())
    fig, axes = figure.pyplot().subplots(1, len(SIZES), figsize=(9, 3.4))
    for ax, size in zip(axes, SIZES, strict=True):
        groups = [(b, where) for b in d["builds"] for where in ("single", "tier")]
        for i, mode in enumerate(MODES):
            cells = []
            for build, where in groups:
                b = d["builds"][build]
                key = f"{mode} {size}" if where == "single" else f"tier {size}"
                metric = "cpu_ms_per_request" if where == "single" else f"{mode} cpu_ms_per_request"
                cells.append(b[key][metric])
            med = [c["median"] for c in cells]
            err = [[c["median"] - c["min"] for c in cells], [c["max"] - c["median"] for c in cells]]
            xs = [x + i * 0.4 for x in range(len(groups))]
            ax.bar(xs, med, 0.4, yerr=err, capsize=3, label=mode.upper())
        labels = [f"{build}\n{where}" for build, where in groups]
        ax.set_xticks([x + 0.2 for x in range(len(groups))], labels, fontsize=8)
        ax.set_title(f"{size} responses", fontsize=9)
        ax.set_ylabel("switch CPU ms per request")
    axes[0].legend(fontsize=8)
    figure.save(fig, out / "dsr.png", dpi=120)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--plot"]:  # `make bench-dsr`'s second step: the figure of a run
        plot(Path(args[1]) if len(args) > 1 else outdir.RESULTS / SPEC.subdir)
        return 0
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
