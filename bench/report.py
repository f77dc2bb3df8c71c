"""Tables and plots for results/switch/ from the raw switch.json that `bench.switch` wrote,
plus the connection-state collision model (the same placement the data plane does, on the
reference hashing of p4lb.model). Re-run it alone to regenerate every table and plot."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from bench import outdir, provenance
from p4lb.models.hashing import Flow, flow_hash

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "switch"
LIVE_POINTS = (1_000, 5_000, 10_000, 20_000, 40_000, 60_000)
MODEL_SEED = 7
PROBE_FLOWS = 20_000
# Issue 11's overhead goals, by the build names results/ uses.
GOALS = {"standard": 0.75, "fast": 0.9, "speed": 0.9}


def turned_away(live: list[Flow], probes: list[Flow], buckets: int, ways: int) -> float:
    """Fraction of `probes` whose bucket is already full with the `live` flows stored
    (first come, first stored: a flow that finds its bucket full is not stored)."""
    fill: dict[int, int] = {}
    for f in live:
        i = flow_hash(f) % buckets
        if fill.get(i, 0) < ways:
            fill[i] = fill.get(i, 0) + 1
    full = sum(1 for f in probes if fill.get(flow_hash(f) % buckets, 0) >= ways)
    return full / len(probes)


def collision_model() -> list[dict[str, float]]:
    """New flows turned away by a full bucket, with n connections live, for the former
    design (65,536 single slots) and this one (131,072 buckets x 4 ways)."""
    rng = random.Random(MODEL_SEED)
    flows = [
        Flow(
            f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            "10.0.0.100",
            6,
            rng.randrange(1024, 65536),
            80,
            1,
        )
        for _ in range(max(LIVE_POINTS) + PROBE_FLOWS)
    ]
    probes = flows[max(LIVE_POINTS) :]
    rows = []
    for n in LIVE_POINTS:
        rows.append(
            {
                "live": n,
                "before": turned_away(flows[:n], probes, 65536, 1),
                "after": turned_away(flows[:n], probes, 131072, 4),
            }
        )
    return rows


def measured(data: dict[str, Any]) -> str:
    """When and on what a raw file's figures were measured, and the machine's load."""
    m = data["machine"]
    return (
        f"Measured {data['when']} on {m['cpus']} CPUs (load average at start "
        f"{m['loadavg_at_start'][0]:.2f}, at end {m.get('loadavg_at_end', [0])[0]:.2f}); "
        f"{provenance.describe(data)}. "
    )


def fmt(s: dict[str, float], scale: float = 1.0, digits: int = 0) -> str:
    return (
        f"{s['median'] / scale:.{digits}f} ({s['min'] / scale:.{digits}f}–"
        f"{s['max'] / scale:.{digits}f})"
    )


def tables(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for build, b in data.get("builds", {}).items():
        lines += [
            f"### {build} build (`{b['binary']}`)",
            "",
            "| program | zero-loss pps | vs baseline (per rep) | busiest thread µs/packet | "
            "capacity vs baseline by CPU (per rep) | delivered at top speed pps | "
            "latency p50 µs (new / handshake / established / reply / fin) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, p in b["programs"].items():
            lat = p["latency_us"]
            lat_s = " / ".join(
                f"{lat[k]['median']:.0f}" if k in lat else "–"
                for k in ("new", "handshake", "established", "reply", "fin")
            )
            base = name == "baseline"
            ratio = p.get("zero_loss_vs_baseline_per_rep")
            cpu = p.get("busiest_thread_us_per_packet")
            capacity = p.get("cpu_capacity_vs_baseline_per_rep")
            lines.append(
                f"| {name} | {fmt(p['zero_loss_pps'])} | "
                f"{'1' if base else fmt(ratio, digits=2) if ratio else '–'} | "
                f"{fmt(cpu, digits=1) if cpu else '–'} | "
                f"{'1' if base else fmt(capacity, digits=2) if capacity else '–'} | "
                f"{fmt(p['saturation_pps'])} | {lat_s} |"
            )
        instr = b.get("instructions")
        if instr:
            lines += [
                "",
                f"Instructions per packet under callgrind ({instr['flows']} connections' "
                f"packets at {instr['pps']} pps; user-space instructions, not time: no "
                "cache misses, no kernel, no waits):",
                "",
                "| program | busiest thread | all threads | capacity vs baseline by "
                "instructions (per rep) | all threads, baseline over program (medians) |",
                "|---|---|---|---|---|",
            ]
            base_all = instr["programs"].get("baseline", {}).get("all_threads_per_packet")
            for name, p in instr["programs"].items():
                capacity = p.get("capacity_vs_baseline_per_rep")
                all_ratio = (
                    f"{base_all['median'] / p['all_threads_per_packet']['median']:.2f}"
                    if base_all
                    else "–"
                )
                lines.append(
                    f"| {name} | {fmt(p['busiest_thread_per_packet'])} | "
                    f"{fmt(p['all_threads_per_packet'])} | "
                    f"{fmt(capacity, digits=2) if capacity else '1'} | {all_ratio} |"
                )
        paths = b.get("path_instructions")
        if paths:
            names = list(paths["programs"])
            kinds = list(paths["programs"][names[0]])
            lines += [
                "",
                "Instructions one more packet of each path costs, all threads, median "
                "(min–max), then the busiest thread's share: the mix of "
                f"{paths['flows']} connections, then the same mix with "
                f"{paths['extra_per_connection']} more copies of that packet per TCP "
                "connection, the difference over the copies:",
                "",
                "| path | " + " | ".join(names) + " |",
                "|---|" + "---|" * len(names),
            ]
            for kind in kinds:
                cells = []
                for name in names:
                    c = paths["programs"][name][kind]
                    all_, busy = c["all_threads"]["median"], c["busiest_thread"]["median"]
                    base = paths["programs"][names[0]][kind]["all_threads"]["median"]
                    vs = "" if name == names[0] else f"; baseline over it {base / all_:.2f}"
                    cells.append(f"{fmt(c['all_threads'])}, busiest {busy:.0f}{vs}")
                lines.append(f"| {kind} | " + " | ".join(cells) + " |")
        growth = b.get("growth", [])
        if growth:
            lines += [
                "",
                "LB (wrr) packet rate at top speed (overloaded) as the switch holds more:",
                "",
                "| dimension | value | delivered at top speed pps | collisions while preloading |",
                "|---|---|---|---|",
            ]
            for g in growth:
                coll = g.get("collisions")
                lines.append(
                    f"| {g['dimension']} | {g['value']} | {fmt(g['saturation_pps'])} | "
                    f"{fmt(coll) if coll else '–'} |"
                )
        lines.append("")
    trace = data.get("trace")
    if trace:
        lines += [
            f"### Work per packet (traced run, `{trace['binary']}`)",
            "",
            "Whole packet, and in parentheses the ingress alone (BMv2 runs one ingress",
            "thread and the egress in threads of their own). Older runs did not split them.",
            "",
            "| program | path | tables | conditions | primitives |",
            "|---|---|---|---|---|",
        ]

        def cell(c: dict[str, int], kind: str) -> str:
            ingress = c.get(f"ingress_{kind}")
            return f"{c.get(kind, 0)}" + (f" ({ingress})" if ingress is not None else "")

        for name, paths in trace["counts"].items():
            for path, c in paths.items():
                lines.append(
                    f"| {name} | {path} | {cell(c, 'tables')} | {cell(c, 'conditions')} | "
                    f"{cell(c, 'primitives')} |"
                )
        lines.append("")
    return lines


def flood_tables(out: Path) -> list[str]:
    raw = out / "flood.json"
    if not raw.exists():
        return []
    data = json.loads(raw.read_text())
    lines = [
        "## WRR with many clients, and after a SYN flood (`bench/flood.py`)",
        "",
        *[f"{build}: {provenance.describe(runs)}." for build, runs in data.items()],
        "",
        "| build | weights | connections per backend (wanted) | collisions |",
        "|---|---|---|---|",
    ]
    for build, runs in data.items():
        for r in runs["exactness"]:
            lines.append(
                f"| {build} | {':'.join(map(str, r['weights']))} | "
                f"{' / '.join(map(str, r['connections']))} "
                f"({' / '.join(map(str, r['wanted']))}) | {r['collisions']} |"
            )
    lines += [
        "",
        "| build | spoofed SYNs | flood s | collisions in flood | first round after | "
        "exact 10/10/10 again after s | pre-flood connections' packets delivered |",
        "|---|---|---|---|---|---|---|",
    ]
    for build, runs in data.items():
        for r in runs["flood"]:
            first = r["rounds"][0]["split"] if r["rounds"] else []
            lines.append(
                f"| {build} | {r['spoofed_syns']} | {r['flood_seconds']} | "
                f"{r['collisions_during_flood']} | {' / '.join(map(str, first))} | "
                f"{r['exact_again_after_s']} | {r['established_packets_delivered_after']} |"
            )
    return [*lines, ""]


def plots(data: dict[str, Any], model: list[dict[str, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    live = [r["live"] for r in model]
    ax.plot(live, [r["before"] * 100 for r in model], "o-", label="before: 65,536 x 1 slot")
    ax.plot(live, [max(r["after"], 1e-4) * 100 for r in model], "s-", label="after: 131,072 x 4")
    for build, b in data.get("builds", {}).items():
        pts = [g for g in b.get("growth", []) if g["dimension"] == "live" and "collisions" in g]
        if pts:
            ax.plot(
                [g["value"] for g in pts],
                [max(g["collision_rate"], 1e-4) * 100 for g in pts],
                "x",
                markersize=9,
                label=f"measured on BMv2 ({build})",
            )
    ax.set_yscale("log")
    ax.set_xlabel("live connections")
    ax.set_ylabel("new flows finding no slot (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "collisions.png", dpi=120)
    plt.close(fig)

    builds = data.get("builds", {})
    if not builds:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(next(iter(builds.values()))["programs"])
    width = 0.8 / len(builds)
    for i, (build, b) in enumerate(builds.items()):
        med = [b["programs"][n]["zero_loss_pps"]["median"] for n in names]
        lo = [m - b["programs"][n]["zero_loss_pps"]["min"] for m, n in zip(med, names, strict=True)]
        hi = [b["programs"][n]["zero_loss_pps"]["max"] - m for m, n in zip(med, names, strict=True)]
        ax.bar(
            [x + i * width for x in range(len(names))],
            med,
            width,
            yerr=[lo, hi],
            capsize=3,
            label=build,
        )
    ax.set_xticks([x + width * (len(builds) - 1) / 2 for x in range(len(names))], names)
    ax.set_ylabel("zero-loss packets/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "zero_loss.png", dpi=120)
    plt.close(fig)


def floor_plot(data: dict[str, Any], out: Path) -> None:
    """Each program's instructions per packet as a share of plain forwarding's, per build,
    with the issue's goal for that build."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    builds = data["builds"]
    names = [n for n in next(iter(builds.values()))["programs"] if n != "baseline"]
    width = 0.8 / len(builds)
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    for i, (build, b) in enumerate(builds.items()):
        ratios = [b["programs"][n]["all_vs_baseline_per_rep"]["median"] for n in names]
        bars = ax.bar([x + i * width for x in range(len(names))], ratios, width, label=build)
        if build in GOALS:
            ax.axhline(GOALS[build], color=bars.patches[0].get_facecolor(), linestyle="--")
    labels = [n if n.startswith("floor") else f"lb.p4 {n}" for n in names]
    ax.set_xticks([x + width * (len(builds) - 1) / 2 for x in range(len(names))], labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel("plain forwarding's instructions\n/ the program's (all threads)")
    ax.set_title("dashed: the goal for that build", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / "floor.png", dpi=120)
    plt.close(fig)


def floor_tables(out: Path) -> list[str]:
    raw = out / "floor.json"
    if not raw.exists():
        return []
    data = json.loads(raw.read_text())
    floor_plot(data, out)
    lines = [
        "## The floor: the least a stateful NAT load balancer costs (`bench/floor.py`)",
        "",
        f"{measured(data)}{data['reps']} repetitions, programs taking turns; "
        "median (min–max), ratios to the baseline per repetition (for instructions, "
        "baseline's over the program's). Instructions: callgrind, "
        f"{data['instr_flows']} connections at {data['instr_pps']} packets/s, the mix of "
        "the table above (the hash and state steps run on a client's TCP packets, about "
        "half of it). Zero-loss "
        f"rate: {data['timed_flows']} connections, as in the table above. `floor-*` is "
        "p4src/floor.p4 at each level, each adding one step to the one before: `nat` "
        "(VIP table, reverse table, TCP checksum), `hash` (CRC32 of the client's address "
        "and port), `read` (one 64-bit register read), `state` (compare and write back).",
        "",
        "| build | program | k instructions/packet, all threads | vs baseline | "
        "k, busiest thread | vs baseline | zero-loss k packets/s | vs baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for build, b in data["builds"].items():
        for name, p in b["programs"].items():
            cells = []
            for key, scale in (("all", 1000), ("busiest", 1000), ("zero_loss", 1000)):
                ratio = p.get(f"{key}_vs_baseline_per_rep")
                cells += [
                    fmt(p[key], scale, 1) if key in p else "–",
                    fmt(ratio, digits=2) if ratio else ("1" if key in p else "–"),
                ]
            lines.append(f"| {build} | {name} | {' | '.join(cells)} |")
    return [*lines, "", "![the floor](floor.png)", ""]


def peers_provenance(data: dict[str, Any]) -> str:
    """Commit, p4c and BMv2 versions of a bench-peers file (besides `measured`)."""
    bmv2 = ", ".join(f"{b} {v.get('bmv2')}" for b, v in data["builds"].items())
    return f"commit {data['commit']}, p4c {data['p4c']}, BMv2 {bmv2}. "


def peers_tables(out: Path) -> list[str]:
    raw = out / "peers.json"
    if not raw.exists():
        return []
    data = json.loads(raw.read_text())
    lines = [
        "## Beside a public stateful NAT balancer (`bench/peers.py`)",
        "",
        f"{measured(data)}{peers_provenance(data)}{data['reps']} repetitions, programs taking "
        "turns; median (min–max) of the instructions per delivered packet (callgrind, all "
        f"threads), {data['flows']} client-direction TCP connections (SYN, data, FIN) at "
        f"{data['instr_pps']} packets/s; ratios per repetition. `peer`: the course L4 "
        "balancer (`PEER_P4`, compiled at run time, never committed) as published; "
        "`peer-log-free`: the same without its log_msg calls. Ratios: the program's "
        "instructions over the other's (below 1: cheaper). Other work shared the machine "
        "(other agents' switches and tests, under the same lock as their BMv2 runs, not at "
        "once); an instruction count does not depend on it.",
        "",
        "| build | program | k instructions/packet | vs baseline | vs peer | vs peer log-free |",
        "|---|---|---|---|---|---|",
    ]
    for build, b in data["builds"].items():
        for name, p in b["programs"].items():
            cells = [fmt(p["all_threads"], 1000, 1)]
            for other in ("baseline", "peer", "peer-log-free"):
                r = p.get(f"all_vs_{other}_per_rep")
                cells.append(fmt(r, digits=2) if r else ("1" if name == other else "–"))
            lines.append(f"| {build} | {name} | {' | '.join(cells)} |")
    return [*lines, ""]


def ab_tables(out: Path) -> list[str]:
    raw = out / "ab.json"
    if not raw.exists():
        return []
    data = json.loads(raw.read_text())
    lines = [
        "## End to end: ApacheBench through the VIP (`bench/ab_overhead.py`)",
        "",
        f"{measured(data)}`ab -n {data['n']} -c {data['c']}` from one Mininet client, "
        f"{data['reps']} repetitions, programs taking turns; median (min–max). The "
        "baseline serves the same requests from one server through plain forwarding.",
        "",
        "| build | program | requests/s | vs baseline (per rep) | failed |",
        "|---|---|---|---|---|",
    ]
    for build, b in data["builds"].items():
        for name, p in b["programs"].items():
            ratio = p.get("vs_baseline_per_rep")
            lines.append(
                f"| {build} | {name} | {fmt(p['rps'])} | "
                f"{fmt(ratio, digits=2) if ratio else '1'} | {p['failed']} |"
            )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the switch/ results directory (default: $P4LB_RESULTS_DIR/switch or results/switch)",
    )
    a = ap.parse_args(argv)
    out: Path = a.dir or outdir.results_root(True) / "switch"
    raw = out / "switch.json"
    data: dict[str, Any] = json.loads(raw.read_text()) if raw.exists() else {}
    model = collision_model()
    out.mkdir(parents=True, exist_ok=True)
    (out / "collision_model.json").write_text(json.dumps(model, indent=2) + "\n")
    plots(data, model, out)
    lines = [
        "# The switch alone (`make bench-switch`)",
        "",
        "Generated by `python -m bench.report` from `switch.json` (raw figures, with the",
        "machine's load and the method) and the collision model; edit neither by hand.",
        "",
        "## Connection-state collisions",
        "",
        "New flows that find no free slot, by live connections: model (random 5-tuples,",
        f"seed {MODEL_SEED}, the data plane's own CRC32 bucket index; the rate for the",
        "next 20,000 flows once n are live, not stored).",
        "",
        "| live | before (65,536 x 1) | after (131,072 x 4) |",
        "|---|---|---|",
    ]
    lines += [f"| {r['live']} | {r['before']:.2%} | {r['after']:.3%} |" for r in model]
    lines += ["", "![collisions](collisions.png)", ""]
    if data:
        lines += [
            "## Packet rate, latency, work per packet",
            "",
            f"{measured(data)}{data['reps']} repetitions, median (min–max); zero loss "
            f"means at most {data['loss_tolerance']:.1%} of the packets lost.",
            "",
            *(
                [
                    "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in data["merged_from"].items())
                    + ".",
                    "",
                ]
                if "merged_from" in data
                else []
            ),
            "How to read it: the zero-loss rate is a threshold (a rate fails when two",
            "replays at it lose more than the tolerance), and on a shared VM it still moves",
            "between repetitions, so its ratios span wide ranges. The busiest thread's CPU",
            "per packet, at a fixed rate below every program's limit, is steadier: baseline",
            "µs / program µs is the program's capacity when that thread is the bound. On the",
            "speed build much of that thread's time at 2,000 pps is the kernel's share of",
            "receiving and sending, the same for both programs, so there the ratio reads",
            "closer to 1 than the instructions per packet (exact counts of the user-space",
            "work), which show what the extra work costs once the switch is loaded. BMv2",
            "runs a receive, an ingress, four egress and a transmit thread: on a machine",
            "with fewer cores than busy threads, the all-threads count bounds the rate as",
            "much as the busiest thread does.",
            "",
            *tables(data),
            "![zero-loss rate](zero_loss.png)",
            "",
        ]
    lines += floor_tables(out)
    lines += peers_tables(out)
    lines += ab_tables(out)
    lines += flood_tables(out)
    (out / "README.md").write_text("\n".join(lines))
    print(f"wrote {out / 'README.md'}; {outdir.said(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
