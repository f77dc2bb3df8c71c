"""The tier bench's figure (tier.png, ha.png): scaling, failover and overload side by side
(the failover alone for --ha)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import figure


def medians(table: dict[str, Any], key: str) -> list[float]:
    return [v[key]["median"] for v in table.values()]


def failover_panel(b: Any, doc: dict[str, Any]) -> None:
    """Per kind of event: until the router (or the twin, or the standby) took over, and the
    longest wait of an open connection; how many broke, under each."""
    fo = doc["failover"]
    ticks = [
        f"{k}\nbroken {v['broken']} of {sum(r['connections'] for r in v['runs'])}"
        for k, v in fo.items()
    ]
    series = {
        "taken over: routes, twin, standby (s)": medians(fo, "detection_s"),
        "longest stall of an open connection (s)": medians(fo, "longest_stall_s"),
    }
    figure.bars(b, series, 0.4, ticks)
    b.legend()


def overload_panel(c: Any, over: dict[str, Any], reps: int) -> None:
    """Per overload point: seconds r0 had fewer next hops than balancers, and none, and the
    longest wait of a held connection; the served rate under each."""
    pts = over["points"]
    below, none = medians(pts, "r0_s_below_n"), medians(pts, "r0_s_none")
    series = {
        "s r0 below all next hops": below,
        "s r0 without a route": none,
        "longest held-connection stall (s)": medians(pts, "longest_stall_s"),
    }
    served = medians(pts, "served_rps")
    figure.bars(c, series, 0.27, [f"{p}\n{r:.0f} req/s" for p, r in zip(pts, served, strict=True)])
    for i in range(len(pts)):  # the seconds written out: a bar of 0 s is the finding
        at = (i - 0.13, max(below[i], none[i]))
        c.annotate(f"{below[i]:.1f}/{none[i]:.1f}", at, ha="center", va="bottom", fontsize=7)
    c.set_title(
        f"Overload, nothing killed (capacity {over['capacity_rps']:.0f} req/s; median of {reps})"
    )
    c.legend(fontsize=8)


def plot(doc: dict[str, Any], path: Path) -> None:
    plt = figure.pyplot()
    if "scaling" not in doc:  # --ha: the failover alone
        fig, b = plt.subplots(1, 1, figsize=(11, 4.4))
        failover_panel(b, doc)
        b.set_title(
            f"Failover with a router pair and a standby controller (median of {doc['reps']})"
        )
        figure.save(fig, path, 110)
        return
    over = doc.get("overload")
    fig, axes = plt.subplots(1, 3 if over else 2, figsize=(16.5 if over else 11, 4))
    a, b = axes[0], axes[1]
    ns = sorted(doc["scaling"], key=int)
    rps = [doc["scaling"][n]["rps"] for n in ns]
    med = [r["median"] for r in rps]
    err = [
        [m - r["min"] for m, r in zip(med, rps, strict=True)],
        [r["max"] - m for m, r in zip(med, rps, strict=True)],
    ]
    a.bar(ns, med, yerr=err, capsize=4, color="#4a7")
    a.set_xlabel("balancers announcing the VIP")
    a.set_ylabel("requests/s (median, min-max)")
    a.set_title("Tier throughput (ab -c 20, no keep-alive)")
    failover_panel(b, doc)
    b.set_title(f"Failover (median of {doc['reps']} repetitions)")
    if over:
        overload_panel(axes[2], over, doc["reps"])
    figure.save(fig, path, 110)
