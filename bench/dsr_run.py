"""One bench-dsr variant (bench.dsr): a lab of its own (the single switch in NAT or DSR
mode, or a one-balancer tier serving both), ab through its VIP while the switch's CPU is
measured, then the peak rate."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

from bench import rate, runner
from topology import ab

SIZES = {"1KB": 1024, "100KB": 100 * 1024}
MODES = ("nat", "dsr")
_tier_runs = itertools.count()


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
    from topology.net import VIP_ADDR, VIP_PORT, Options, running

    with running(Options(mode=where, body_bytes=SIZES[size]), threaded=True) as lab:
        client, url = lab.clients[0], f"http://{VIP_ADDR}:{VIP_PORT}/"
        ab.run(client, url, 20, 1)  # warm: ARP, the servers' first connections
        c0 = t.args.concurrency
        r, out = cpu_per_request(lab.pids["switch"], lambda: ab.run(client, url, n, c0))
        out |= peak(r, c0, t.args.peak_concurrency, lambda c: ab.run(client, url, n, c))
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
