"""One run of a queueing discipline in bench-qos's Mininet lab (bench.qos): the bulk, VoIP
and ping traffic from the clients to the server, what the hosts and the switch saw."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.experiments.counters import switch_packets
from bench.outdir import ROOT
from bench.qos_metrics import TCP_PORT, VOIP_PORT, measures, place_flows
from bench.rate import process_cpu_s
from topology import wire
from topology.procs import poll_until

PORT = 4  # the server's switch port: the bottleneck
RATE_PPS = 1000
VOIP_PPS = 50
WARMUP_S = 3.0
BULK_FLOWS = (3, 1)  # h1's and h2's

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


def _host_py(host: Any, args: str) -> None:
    """`python -m bench.qos_traffic ARGS` on `host`, in the background."""
    cmd = f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m bench.qos_traffic {args}"
    host.cmd(cmd + " > /dev/null 2>&1 &")


def qos_drops(lab: Any) -> dict[str, int]:
    from topology.net import p4lb_cmd

    out = subprocess.run(
        p4lb_cmd(lab, "qos", "show", "--json"), capture_output=True, text=True, timeout=60
    )
    return dict(json.loads(out.stdout)["drops"]) if out.returncode == 0 else {}


def one_run(
    lab: Any,
    variant: str,
    duration: float,
    tmp: Path,
    rng: random.Random | None = None,
    voip_with: int | None = None,
) -> dict[str, Any]:
    """One run of `variant`; the flows placed by place_flows (`voip_with`: see there)."""
    from topology.net import THRIFT_PORT, p4lb_cmd

    def register(name: str) -> int:
        return wire.register_read(THRIFT_PORT, name, 0)

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
    soj0, deq0 = register("qos_sojourn_us"), register("qos_dequeued")
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
    soj1, deq1 = register("qos_sojourn_us"), register("qos_dequeued")
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
