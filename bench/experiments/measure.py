"""One run of the matrix in a running network: the load generator's raw output, and
run.json with what the servers, their kernels and the switch counted meanwhile
(bench.experiments.counters) and the machine's load."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from bench import provenance
from bench.experiments import counters
from bench.experiments import load as loadgen
from bench.experiments.matrix import Job, draw_seed, draw_sources
from bench.experiments.plan import SERVICE_MS, AbLoad, ClientsLoad, Scenario
from bench.rate import process_cpu_s
from topology.net import VIP_ADDR, VIP_PORT, Lab, access_log, start_server, wait_servers_idle

URL = f"http://{VIP_ADDR}:{VIP_PORT}/"
# No load balancer: the same server program and capacity on another port of one backend host.
# (Port 8000 of a backend is the VIP's: the switch rewrites every reply from it to the VIP.)
SINGLE_PORT = 8001


def single_server(lab: Lab, scenario: Scenario) -> tuple[Any, Path]:
    """No load balancer: the host of the largest server (the fairest one to compare), with
    a server of that capacity on SINGLE_PORT, started on first use; (host, its access log)."""
    i = max(range(len(scenario.workers)), key=lambda i: (scenario.workers[i], -i))
    host = lab.servers[i]
    log = access_log(host).with_name(f"{host.name}-{SINGLE_PORT}.log")
    if f"server-{host.name}-{SINGLE_PORT}" not in lab.pids:
        start_server(lab, host, scenario.capacities()[i], SINGLE_PORT, log)
    return host, log


def generate(lab: Lab, job: Job, url: str, out: Path, k6: str | None, k6_sources: int) -> Any:
    """The job's load from the clients to `url`, its output into `out`; the addresses a
    many-source run drew (None for the others)."""
    ld = job.load
    if isinstance(ld, AbLoad):
        loadgen.run_ab(lab.clients[0], url, ld.n, ld.concurrency, out, 60 + ld.n / 5)
        return None
    if isinstance(ld, ClientsLoad):
        seed = draw_seed(job)
        sources = {
            c: draw_sources(lab.sources[c.name], ld.addresses, seed + i)
            for i, c in enumerate(lab.clients)
        }
        loadgen.run_ab_sources(sources, url, ld.per_address, out, 60 + ld.per_address * 5)
        return {"seed": seed, "addresses": {c.name: a for c, a in sources.items()}}
    assert k6 is not None
    sources = {c: lab.sources[c.name][:k6_sources] for c in lab.clients}
    loadgen.run_k6(k6, sources, ld, url, out, 90 + 2 * (ld.ramp_s + ld.hold_s + ld.down_s))
    return None


def one_run(lab: Lab, job: Job, root: Path, k6: str | None, k6_sources: int = 1) -> dict[str, Any]:
    """The job in `lab`, its files under job.path(root); its record (run.json)."""
    out = job.path(root)
    sample0 = provenance.sample()
    out.mkdir(parents=True, exist_ok=True)
    hosts = [*lab.clients, *lab.servers]
    lines0 = counters.log_lines(lab)
    tcp0 = {h.name: counters.tcp_counters(h) for h in hosts}
    sw_conns0, drops0 = counters.switch_view(lab)
    pkts0 = counters.switch_packets(lab)
    swcpu0 = process_cpu_s(lab.pids["switch"])
    load0 = os.getloadavg()
    t0 = time.monotonic()
    url = URL
    single: tuple[Any, Path, int] | None = None
    if job.variant.algorithm is None:
        host, log = single_server(lab, job.scenario)
        single = (host, log, counters.line_count(log))
        url = f"http://{host.IP()}:{SINGLE_PORT}/"
    drawn = generate(lab, job, url, out, k6, k6_sources)
    elapsed = time.monotonic() - t0
    pkts = counters.switch_packets(lab) - pkts0
    swcpu = process_cpu_s(lab.pids["switch"]) - swcpu0
    sample1 = provenance.sample()
    wait_servers_idle(lab)
    served, conns, by_source = counters.log_since(lab, lines0)
    if single:  # what the one server answered (the pool's servers saw nothing)
        host, log, start = single
        lines = counters.log_tail(log, start)
        served[host.name] += counters.requests(lines)
        conns[host.name] += len(lines)
    tcp1 = {h.name: counters.tcp_counters(h) for h in hosts}
    sw_conns1, drops1 = counters.switch_view(lab)

    def tcp_delta(counter: str, of: list[Any]) -> dict[str, int]:
        return {h.name: tcp1[h.name].get(counter, 0) - tcp0[h.name].get(counter, 0) for h in of}

    sc, v, ld = job.scenario, job.variant, job.load
    record: dict[str, Any] = {
        "experiment": job.experiment,
        "scenario": sc.name,
        "workers": list(sc.workers),
        "service_ms": SERVICE_MS,
        "variant": v.name,
        "algorithm": v.algorithm,
        "weights": v.weight_list(sc) if v.algorithm else None,
        "load": dataclasses.asdict(ld) | {"name": ld.name},
        "rep": job.rep,
        "url": url,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "elapsed_s": elapsed,
        "loadavg_before": list(load0),
        "loadavg_after": list(os.getloadavg()),
        "busiest_processes_after": counters.busiest()[:4],
        "machine_cpu_busy": (sample1.busy - sample0.busy) / max(1, sample1.total - sample0.total),
        "other_cpu": provenance.other_share(sample0, sample1),
        "sources_drawn": drawn,
        "switch_packets": pkts,
        "switch_pps": pkts / elapsed if elapsed else 0.0,
        "switch_cpu": swcpu / elapsed if elapsed else 0.0,
        "served": served,
        "connections": conns,
        "by_source": by_source,
        "syn_connections": tcp_delta("PassiveOpens", lab.servers),
        "switch_connections": counters.delta(sw_conns1, sw_conns0),
        "drops": {k: v for k, v in counters.delta(drops1, drops0).items() if v},
        "retrans_segs": tcp_delta("RetransSegs", hosts),
        "out_segs": tcp_delta("OutSegs", hosts),
    }
    (out / "run.json").write_text(json.dumps(record, indent=1))
    return record
