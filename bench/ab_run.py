"""One ApacheBench run through the Mininet lab of `make bench-ab` (bench.apachebench) and
`make bench-switch`'s end-to-end overhead (bench.ab_overhead): ab's report, the requests
each server served, the connections the switch counted, fairness and TCP's counters."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from bench.experiments.counters import tcp_counters
from p4lb.intent import reader
from p4lb.pipeline.desired import route_entry
from p4lb.pipeline.entries import Update
from p4lb.pipeline.p4info import Schema, load_p4info
from p4lb.service import operations
from p4lb.stats.fairness import jain, weighted_jain
from p4lb.switch.client import Switch
from topology import ab, net
from topology.procs import poll_until

COMPILED = net.ROOT / "p4src" / "compiled"


@dataclass
class Case:
    name: str
    algorithm: str  # iphash | wrr | baseline
    weights: list[int]
    change: bool = False  # weight change + drain in the middle


CASES = [
    Case("iphash", "iphash", [1, 1, 1]),
    Case("wrr", "wrr", [1, 1, 1]),
    Case("wrr-1:2:2", "wrr", [1, 2, 2]),
    Case("wrr-change", "wrr", [1, 1, 1], change=True),
    Case("baseline", "baseline", [1, 1, 1]),
]


# The fields of a run that ab's report gives (topology.ab.AbResult's, by the same names).
AB_FIELDS = ("complete", "failed", "non_2xx", "rps", "transfer_kbps", "mean_ms")
AB_FIELDS += ("p50_ms", "p95_ms", "p99_ms")


@dataclass
class Run:
    case: str
    algorithm: str
    weights: str
    n: int
    concurrency: int
    complete: int
    failed: int
    non_2xx: int
    rps: float
    transfer_kbps: float
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    served: str  # per-server requests served, from the access logs
    connections: str  # per-server TCP connections accepted, from the access logs
    switch: str  # per-server new connections, from the switch counters
    agree: bool
    jain: float
    weighted_jain: float
    retransmissions: int
    resets: int


def program_baseline(lab: net.Lab) -> None:
    """Load the plain forwarding program and route every host."""
    schema = Schema(load_p4info(COMPILED / "baseline.p4info.txtpb"))
    s = lab.config.switch
    sw = Switch(s.address, 0, s.election_id, info=schema, tls=s.tls)
    with sw:
        sw.ensure_pipeline(COMPILED / "baseline.p4info.txtpb", COMPILED / "baseline.json")
        hosts = lab.clients + lab.servers
        entries = [
            route_entry(h.IP(), 32, i + 1, net.SWITCH_MAC, net.mac(i + 1))
            for i, h in enumerate(hosts)
        ]
        sw.write([Update("INSERT", e) for e in entries])
    for i, h in enumerate(hosts):  # no ARP answering in the baseline program
        for j, other in enumerate(hosts):
            if i != j:
                h.cmd(f"arp -s {other.IP()} {net.mac(j + 1)}")


def one_run(case: Case, n: int, c: int, raw_dir: Path) -> Run:
    algorithm = "wrr" if case.algorithm == "baseline" else case.algorithm
    opts = net.Options(algorithm=algorithm, weights=case.weights)
    with net.running(opts, threaded=False, apply=case.algorithm != "baseline") as lab:
        if case.algorithm == "baseline":
            program_baseline(lab)
            url = f"http://{lab.servers[0].IP()}:{net.SERVER_PORT}/"
        else:
            url = f"http://{net.VIP_ADDR}:{net.VIP_PORT}/"
        client = lab.clients[0]
        tcp0 = tcp_counters(client)
        result: list[ab.AbResult] = []
        t = threading.Thread(target=lambda: result.append(ab.run(client, url, n, c)))
        t.start()
        logs = {s.name: str(net.access_log(s)) for s in lab.servers}
        if case.change:
            half = lambda: sum(ab.access_counts(logs).values()) >= n // 2  # noqa: E731
            poll_until(lambda: half() or not t.is_alive(), 300, every=0.05)
            for words in (("weight", "set", "web", "h2", "3"), ("backend", "drain", "web", "h3")):
                subprocess.run(net.p4lb_cmd(lab, *words), check=True, capture_output=True)
        t.join(3600)
        if not result:
            raise RuntimeError(f"{case.name} n={n} c={c}: ab did not finish")
        r = result[0]
        tcp1 = tcp_counters(client)
        (raw_dir / f"{case.name}-n{n}-c{c}.txt").write_text(r.raw)
        net.wait_servers_idle(lab)
        served = ab.access_counts(logs)
        conns = ab.access_counts(logs, connections=True)
        if case.algorithm == "baseline":
            switch = dict(conns)
            cfg_weights = case.weights
        else:
            cfg = reader.load(lab.config_path)
            with operations.connect_reader(cfg) as sw:
                st = operations.read_stats(sw, cfg)
            switch = {b.name: b.connections for b in st.vips[0].backends}
            cfg_weights = [b.weight for b in st.vips[0].backends]
        agree = switch == conns
        if not agree:
            print(
                f"!! MISMATCH {case.name} n={n}: switch {switch} vs access logs {conns}",
                file=sys.stderr,
            )
        values = [served[s.name] for s in lab.servers]
        tcp = {k: tcp1.get(k, 0) - tcp0.get(k, 0) for k in ("RetransSegs", "OutRsts")}
        lb = case.algorithm != "baseline"
        return Run(
            case=case.name,
            algorithm=case.algorithm,
            weights=":".join(map(str, case.weights)),
            n=n,
            concurrency=c,
            **{k: getattr(r, k) for k in AB_FIELDS},
            served=json.dumps(served),
            connections=json.dumps(conns),
            switch=json.dumps(switch),
            agree=agree,
            jain=jain(values) if lb else 1.0,
            weighted_jain=weighted_jain(values, cfg_weights) if lb else 1.0,
            retransmissions=tcp["RetransSegs"],
            resets=tcp["OutRsts"],
        )
