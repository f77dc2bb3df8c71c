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

Writes results/switch/flood.json. The switch binary: P4LB_SIMPLE_SWITCH or PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import lab, outdir, rate, runner, traffic
from bench.stats import summary

ROUND_CONNS = 30
MAX_ROUNDS = 60  # a minute of rounds at most after the flood


def syn_ack(client: str, sport: int, vip: str = "10.0.1.1") -> list[bytes]:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    base = Ether(src=lab.port_mac(1), dst=lab.VIP_MAC) / IP(src=client, dst=vip)
    return [
        bytes(base / TCP(sport=sport, dport=80, flags="S", seq=1)),
        bytes(base / TCP(sport=sport, dport=80, flags="A", seq=2, ack=1)),
    ]


def web(s: dict[str, Any]) -> dict[str, Any]:
    v: dict[str, Any] = next(v for v in s["vips"] if v["name"] == "v0tcp")
    return v


def conns(s: dict[str, Any]) -> list[int]:
    return [b["connections"] for b in web(s)["backends"]]


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
        packets = []
        for i in range(1500):
            packets += syn_ack(f"10.1.0.{1 + i % 20}", 20000 + i)
        send(packets, workdir, "exact", pps)
        s = lab.p4lb_stats(workdir)
    got = conns(s)
    want = [1500 * w // sum(weights) for w in weights]
    return {
        "weights": weights,
        "connections": got,
        "wanted": want,
        "max_deviation": max(abs(g - w) for g, w in zip(got, want, strict=True)),
        "collisions": web(s)["collisions"],
    }


def flood(binary: str, workdir: Path, n_syns: int, pps: int) -> dict[str, Any]:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    rng = random.Random(70_000)
    with lab.LAB.switch(binary=binary):
        lab.program_lb(lab.lb_config("wrr", lab.Shape()), workdir)
        # 100 connections opened before the flood; which port each went to.
        before = []
        for i in range(100):
            before += syn_ack(f"10.1.1.{1 + i % 50}", 30000 + i)
        send(before, workdir, "before", pps)
        spoofed = [
            bytes(
                Ether(src=lab.port_mac(1), dst=lab.VIP_MAC)
                / IP(src=f"10.1.{rng.randrange(2, 256)}.{rng.randrange(1, 255)}", dst="10.0.1.1")
                / TCP(
                    sport=rng.randrange(1024, 65536), dport=80, flags="S", seq=rng.randrange(2**32)
                )
            )
            for _ in range(n_syns)
        ]
        t0 = time.monotonic()
        sent = send(spoofed, workdir, "flood", None)
        flood_s = time.monotonic() - t0
        after_flood = lab.p4lb_stats(workdir)
        rounds = []
        exact_after = None
        t_end = time.monotonic()
        for r in range(MAX_ROUNDS):
            c0 = conns(lab.p4lb_stats(workdir))
            pk = []
            for i in range(ROUND_CONNS):
                pk += syn_ack(f"10.1.0.{100 + i}", 40000 + r * ROUND_CONNS + i)
            send(pk, workdir, f"round{r}", pps)
            s = lab.p4lb_stats(workdir)
            split = [b - a for a, b in zip(c0, conns(s), strict=True)]
            elapsed = time.monotonic() - t_end
            rounds.append(
                {"after_s": round(elapsed, 2), "split": split, "collisions": web(s)["collisions"]}
            )
            if split == [ROUND_CONNS // 3] * 3:
                exact_after = elapsed
                break
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t_end - elapsed)))
        # The connections opened before the flood: each ACK again must come out, and on the
        # port its first packets took (its backend).
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


def options(ap: argparse.ArgumentParser) -> None:
    binary = os.environ.get("P4LB_SIMPLE_SWITCH") or shutil.which("simple_switch_grpc")
    ap.add_argument("--binary", default=binary)
    ap.add_argument("--name", default="standard")
    ap.add_argument("--syns", type=int, default=70_000)
    ap.add_argument("--pps", type=int, default=2000)


def main(argv: list[str] | None = None) -> int:
    args = runner.command_line(
        "bench-flood", __doc__, "switch/flood.json", argv, options, ["syns", "pps"], reps=3
    )
    named = [f"{args.name}={args.binary}"] if args.binary else []
    if runner.builds_to_measure("bench-flood", named, ["tcpreplay"]) is None:
        return 2
    run = runner.start_run("bench-flood", {args.name: args.binary}, argv)
    if run is None:
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="p4lb-bench-flood-"))
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    # One entry per binary: the same binary measured before under another name (the speed
    # build was once "fast") is replaced, not kept beside.
    result = {k: v for k, v in result.items() if v.get("binary") != args.binary}
    runs: dict[str, Any] = {
        "binary": args.binary,
        "machine": runner.machine(),
        "exactness": [],
        "flood": [],
    }
    with lab.veths():
        for weights in ([1, 1, 1], [1, 2, 3]):
            for rep in range(args.reps):
                runner.progress(f"exactness {weights} rep {rep + 1}/{args.reps}")
                runs["exactness"].append(exactness(args.binary, weights, workdir, args.pps))
        for rep in range(args.reps):
            runner.progress(f"flood rep {rep + 1}/{args.reps}")
            runs["flood"].append(flood(args.binary, workdir, args.syns, args.pps))
    exact = [
        r["exact_again_after_s"] for r in runs["flood"] if r["exact_again_after_s"] is not None
    ]
    runs["exact_again_after_s"] = summary(exact) if exact else None
    shutil.rmtree(workdir, ignore_errors=True)  # pcaps and configs; a failed run keeps them
    runs["machine"]["loadavg_at_end"] = os.getloadavg()
    # Each repetition's figure is kept (exactness and flood lists); their order: weights
    # 1:1:1 then 1:2:3 (each args.reps times), then the floods.
    runs["provenance"] = run.finish(args.reps, order="weights 1:1:1, then 1:2:3, then the floods")
    result[args.name] = runs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    runner.progress(f"wrote {args.out}; {outdir.said(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
