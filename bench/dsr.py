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
import json
import sys
from pathlib import Path
from typing import Any

from bench import figure, outdir, runner, stats
from bench.dsr_run import MODES, SIZES, measure


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
    write=lambda args, result: plot(result, args.out),
)


def plot(d: dict[str, Any], out: Path) -> None:
    """dsr.png beside dsr.json (`d`): the switch's CPU per request, NAT and DSR, per build,
    single switch and tier, and response size (medians, min–max as error bars)."""
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
    if args[:1] == ["--plot"]:  # the figure of a run again (a run draws its own)
        out = Path(args[1]) if len(args) > 1 else outdir.RESULTS / SPEC.subdir
        plot(json.loads((out / "dsr.json").read_text()), out)
        return 0
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
