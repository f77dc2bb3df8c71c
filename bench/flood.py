"""Connection state under load and attack, on a real BMv2 (`make bench-switch` runs it).

  exactness: 1,500 connections (SYN, then the client's ACK) from 20 client addresses to a
             WRR VIP at 1:1:1 and at 1:2:3; connections per backend from the switch's own
             counters (`p4lb stats --json`), and the collisions counted.
  flood:     100 connections are opened, then 70,000 SYNs from spoofed sources (random
             addresses, never ACKed) are sent to the VIP as fast as the switch takes them.
             After the flood, every second, 30 new connections are opened; the figure is the
             time until a round splits exactly 10/10/10 again, and whether the 100 connections
             opened before the flood still reach their backends (the whole flood lasts far
             less than their idle timeout).

The three take turns in each repetition, on every build (--build NAME=PATH; else
P4LB_SIMPLE_SWITCH or the simple_switch_grpc on PATH). Writes results/switch/flood.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench import lab, rate, runner, traffic
from bench.stats import summary
from bench.traffic import syn_ack

ROUND_CONNS = 30
MAX_ROUNDS = 60  # a minute of rounds at most after the flood


def web(s: dict[str, Any]) -> dict[str, Any]:
    """The TCP VIP's entry in `p4lb stats --json`: its backends' connections, collisions."""
    v: dict[str, Any] = next(v for v in s["vips"] if v["name"] == "v0tcp")
    return v | {"connections": [b["connections"] for b in v["backends"]]}


def send(packets: list[bytes], workdir: Path, name: str, pps: int | None) -> int:
    """Replay `packets` on port 1 and wait until the switch has handled them."""
    pcap = workdir / f"{name}.pcap"
    traffic.write_pcap(packets, pcap)
    start = lab.rx_total()
    sent, _ = rate.replay(pcap, pps)
    lab.settled_rx(start)
    return sent


def exactness(binary: str, weights: list[int], workdir: Path, pps: int) -> dict[str, Any]:
    with lab.LAB.switch(binary=binary):
        lab.program_lb(lab.lb_config("wrr", lab.Shape(), weights), workdir)
        packets = [p for i in range(1500) for p in syn_ack(f"10.1.0.{1 + i % 20}", 20000 + i)]
        send(packets, workdir, "exact", pps)
        s = web(lab.p4lb_stats(workdir))
    got = s["connections"]
    want = [1500 * w // sum(weights) for w in weights]
    return {
        "weights": weights,
        "connections": got,
        "wanted": want,
        "max_deviation": max(abs(g - w) for g, w in zip(got, want, strict=True)),
        "collisions": s["collisions"],
    }


def flood(binary: str, workdir: Path, n_syns: int, pps: int) -> dict[str, Any]:
    with lab.LAB.switch(binary=binary):
        lab.program_lb(lab.lb_config("wrr", lab.Shape()), workdir)
        # 100 connections opened before the flood.
        before = [p for i in range(100) for p in syn_ack(f"10.1.1.{1 + i % 50}", 30000 + i)]
        send(before, workdir, "before", pps)
        spoofed = traffic.spoofed_syns(n_syns, seed=70_000)
        t0 = time.monotonic()
        sent = send(spoofed, workdir, "flood", None)
        flood_s = time.monotonic() - t0
        after_flood = lab.p4lb_stats(workdir)
        rounds = []
        exact_after = None
        t_end = time.monotonic()
        for r in range(MAX_ROUNDS):
            c0 = web(lab.p4lb_stats(workdir))["connections"]
            first = 40000 + r * ROUND_CONNS
            pk = [p for i in range(ROUND_CONNS) for p in syn_ack(f"10.1.0.{100 + i}", first + i)]
            send(pk, workdir, f"round{r}", pps)
            s = web(lab.p4lb_stats(workdir))
            split = [b - a for a, b in zip(c0, s["connections"], strict=True)]
            elapsed = time.monotonic() - t_end
            rounds.append(
                {"after_s": round(elapsed, 2), "split": split, "collisions": s["collisions"]}
            )
            if split == [ROUND_CONNS // 3] * 3:
                exact_after = elapsed
                break
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t_end - elapsed)))
        # The connections opened before the flood: each one's ACK, sent again, must come out.
        start = lab.rx_total()
        again = [p for i, p in enumerate(before) if i % 2 == 1]
        sent_again = send(again, workdir, "again", pps)
        delivered_again = lab.rx_total() - start
    return {
        "spoofed_syns": sent,
        "flood_seconds": round(flood_s, 2),
        "collisions_during_flood": web(after_flood)["collisions"],
        "rounds": rounds,
        "exact_again_after_s": exact_after,
        "established_before": 100,
        "established_packets_delivered_after": f"{delivered_again}/{sent_again}",
    }


WEIGHTS = {"exact 1:1:1": [1, 1, 1], "exact 1:2:3": [1, 2, 3]}


def measure(t: runner.Trial, name: str) -> dict[str, Any]:
    if name == "flood":
        return flood(t.binary, t.workdir, t.args.syns, t.args.pps)
    return exactness(t.binary, WEIGHTS[name], t.workdir, t.args.pps)


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    """Every repetition's figures (exactness: 1:1:1's, then 1:2:3's) and the median time
    until a round split exactly again."""
    exact = [
        r["exact_again_after_s"] for r in values["flood"] if r["exact_again_after_s"] is not None
    ]
    return {
        "exactness": [r for name in WEIGHTS for r in values[name]],
        "flood": values["flood"],
        "exact_again_after_s": summary(exact) if exact else None,
    }


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--syns", type=int, default=70_000)
    ap.add_argument("--pps", type=int, default=2000)


SPEC = runner.Spec(
    prog="bench-flood",
    doc=__doc__ or "",
    subdir="switch",
    filename="flood.json",
    reps=3,
    tools=("tcpreplay",),
    options=options,
    committed=("syns", "pps"),
    variants=lambda args: [*WEIGHTS, "flood"],
    measure=measure,
    figures=figures,
    head=lambda args: {"machine": runner.machine()},
    order_in_build=True,
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
