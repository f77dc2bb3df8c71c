"""`make bench-dsr`: what a request costs the switch under NAT and under direct server
return, for small and large responses, per BMv2 build.

The single-switch lab (topology.net: one client, three threaded HTTP servers) with the VIP
in NAT mode, or in DSR mode with its return path beside the switch; `ab -c 10` through the
VIP; the switch process's CPU time (user + system, every thread, and its busiest thread)
over the run, per completed request. Variants (mode x response size) take turns within
each repetition, each in a lab of its own; each figure is the median with min and max,
and DSR's share of NAT's is taken per repetition. Writes results/dsr/dsr.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import ab, outdir, rate, runner, stats

SIZES = {"1KB": 1024, "100KB": 100 * 1024}
MODES = ("nat", "dsr")


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--requests-small", type=int, default=3000, help="ab -n for 1 KB")
    ap.add_argument("--requests-large", type=int, default=600, help="ab -n for 100 KB")
    ap.add_argument("--concurrency", type=int, default=10)


def variants(args: argparse.Namespace) -> list[str]:
    return [f"{mode} {size}" for mode in MODES for size in SIZES]


def measure(t: runner.Trial, label: str) -> dict[str, float]:
    """One lab, one ab run: the switch's CPU milliseconds per request (all threads and
    the busiest), the request rate, and what failed."""
    from topology.net import VIP_ADDR, VIP_PORT, Options, build, p4lb_cmd, start_servers, stop

    mode, size = label.split()
    n = t.args.requests_small if size == "1KB" else t.args.requests_large
    os.environ["P4LB_SIMPLE_SWITCH"] = t.binary  # the lab's switch (topology.bmv2)
    lab = build(Options(mode=mode, body_bytes=SIZES[size]))
    try:
        subprocess.run(p4lb_cmd(lab, "apply"), check=True, capture_output=True, timeout=120)
        start_servers(lab, threaded=True)
        client, url = lab.clients[0], f"http://{VIP_ADDR}:{VIP_PORT}/"
        ab.run(client, url, 20, 1)  # warm: ARP, the servers' first connections
        pid = lab.pids["switch"]
        cpu, threads = rate.process_cpu_s(pid), rate.thread_cpu_s(pid)
        r = ab.run(client, url, n, t.args.concurrency)
        cpu = rate.process_cpu_s(pid) - cpu
        busiest = max(
            (s - threads.get(tid, 0.0) for tid, s in rate.thread_cpu_s(pid).items()),
            default=0.0,
        )
    finally:
        stop(lab)
    done = max(r.complete - r.failed, 1)
    return {
        "cpu_ms_per_request": 1000 * cpu / done,
        "busiest_ms_per_request": 1000 * busiest / done,
        "rps": r.rps,
        "failed": float(r.failed + r.non_2xx),
        "requests": float(n),
    }


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    """Per variant the medians (min–max) of each figure; per size DSR over NAT."""
    out: dict[str, Any] = {
        label: {k: stats.summary([v[k] for v in vs]) for k in vs[0]} for label, vs in values.items()
    }
    for size in SIZES:
        nat, dsr = values[f"nat {size}"], values[f"dsr {size}"]
        out[f"dsr/nat {size}"] = {
            k: stats.summary([d[k] / n[k] for d, n in zip(dsr, nat, strict=True)])
            for k in ("cpu_ms_per_request", "busiest_ms_per_request", "rps")
        }
    return out


SPEC = runner.Spec(
    prog="bench-dsr",
    doc=__doc__ or "",
    subdir="dsr",
    filename="dsr.json",
    reps=3,
    tools=("ab", "mn"),
    options=options,
    committed=("requests_small", "requests_large", "concurrency"),
    variants=variants,
    measure=measure,
    figures=figures,
    head=lambda args: {"sizes": SIZES, "concurrency": args.concurrency},
    lab=contextlib.nullcontext,
)


def plot(out: Path) -> None:
    """dsr.png beside dsr.json: the switch's CPU per request, NAT and DSR, per build and
    response size (medians, min–max as error bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = json.loads((out / "dsr.json").read_text())
    fig, axes = plt.subplots(1, len(SIZES), figsize=(7, 3.2))
    for ax, size in zip(axes, SIZES, strict=True):
        builds = list(d["builds"])
        for i, mode in enumerate(MODES):
            cells = [d["builds"][b][f"{mode} {size}"]["cpu_ms_per_request"] for b in builds]
            med = [c["median"] for c in cells]
            err = [[c["median"] - c["min"] for c in cells], [c["max"] - c["median"] for c in cells]]
            xs = [x + i * 0.4 for x in range(len(builds))]
            ax.bar(xs, med, 0.4, yerr=err, capsize=3, label=mode.upper())
        ax.set_xticks([x + 0.2 for x in range(len(builds))], builds)
        ax.set_title(f"{size} responses", fontsize=9)
        ax.set_ylabel("switch CPU ms per request")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "dsr.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--plot"]:  # `make bench-dsr`'s second step: the figure of a run
        plot(Path(args[1]) if len(args) > 1 else outdir.RESULTS / SPEC.subdir)
        return 0
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
