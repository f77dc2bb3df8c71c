"""Runs the experiment matrix on real BMv2 and keeps every run's raw output.

For each capacity scenario one Mininet network (3 clients with many source addresses, 3
servers with that scenario's capacities, BMv2, `p4lb apply`); in it, for each variant (every
algorithm of the compiled program, by name), each load and each repetition, one run whose
files go to results/experiments/raw/<experiment>/<scenario>/<variant>/<load>/r<k>/:
the load generator's own output (ab text, -g/-e files; k6 summary JSON and per-request
CSV) and run.json (requests per server counted at the servers, connections counted by the
servers' kernels (SYNs that completed) and by the switch, switch drop counters, TCP
retransmissions, the switch's packet rate and CPU, the machine's load). Once every run of
the plan is recorded, raw/ becomes one archive, raw.tar.xz (bench.rawstore).

`python -m bench.experiments.report` turns these files into tables and plots."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import outdir, profiles, provenance, rawstore
from bench.experiments import load as loadgen
from bench.experiments.plan import (
    PROFILES,
    SCENARIOS,
    SERVICE_MS,
    SINGLE,
    AbLoad,
    ClientsLoad,
    K6Shape,
    Profile,
    Scenario,
    Variant,
    variants,
)
from bench.rate import process_cpu_s
from p4lb.intent import reader, writer
from p4lb.pipeline.p4info import compiled_limits
from p4lb.service import operations
from topology.bmv2 import switch_binary
from topology.net import (
    ROOT,
    VIP_ADDR,
    VIP_PORT,
    Lab,
    Options,
    access_log,
    build,
    p4lb_cmd,
    start_server,
    start_servers,
    stop,
    wait_servers_idle,
)

OUT = ROOT / "results" / "experiments"
# No load balancer: the same server program and capacity on another port of one backend host.
# (Port 8000 of a backend is the VIP's: the switch rewrites every reply from it to the VIP.)
SINGLE_PORT = 8001
URL = f"http://{VIP_ADDR}:{VIP_PORT}/"
LoadSpec = AbLoad | ClientsLoad | K6Shape


@dataclasses.dataclass(frozen=True)
class Job:
    experiment: str  # ab | clients | k6
    scenario: Scenario
    variant: Variant
    load: LoadSpec
    rep: int

    def path(self, root: Path) -> Path:
        where = (self.experiment, self.scenario.name, self.variant.name, self.load.name)
        return root.joinpath("raw", *where, f"r{self.rep}")


def algorithms() -> tuple[str, ...]:
    """Every algorithm the compiled program offers (its P4Info), in its order."""
    return compiled_limits().algorithms


def jobs(
    profile: Profile, algs: tuple[str, ...], k6: bool, only: set[str], seed: int = 0
) -> list[Job]:
    """The whole matrix, grouped by scenario (one network each), then repetition: within a
    repetition every variant runs once, in an order shuffled per repetition (seeded by
    `seed`, recorded in meta.json), each with all its loads; so a drift of the machine
    falls on every variant alike (issue 33)."""
    out: list[Job] = []
    names = dict.fromkeys(
        profile.ab_scenarios + profile.clients_scenarios + (profile.k6_scenarios if k6 else ())
    )
    for sname in names:
        sc = SCENARIOS[sname]
        vs = [*variants(algs, sc), SINGLE]
        orders = provenance.interleaved(
            [v.name for v in vs], profile.reps, seed + list(SCENARIOS).index(sname)
        )
        by_name = {v.name: v for v in vs}
        for r, order in enumerate(orders):
            for v in (by_name[n] for n in order):
                if "ab" in only and sname in profile.ab_scenarios:
                    out += [Job("ab", sc, v, ld, r) for ld in profile.ab_loads]
                if v is SINGLE:
                    continue
                if "clients" in only and sname in profile.clients_scenarios:
                    out += [Job("clients", sc, v, ld, r) for ld in profile.clients_loads]
                if (
                    "k6" in only
                    and k6
                    and sname in profile.k6_scenarios
                    and (profile.k6_variants is None or v.name in profile.k6_variants)
                ):
                    out += [Job("k6", sc, v, sh, r) for sh in profile.k6_shapes]
    return out


def selected(todo: list[Job], scenarios: list[str] | None, names: list[str] | None) -> list[Job]:
    """The jobs of these scenarios and variants (None: all)."""
    return [
        j
        for j in todo
        if (not scenarios or j.scenario.name in scenarios)
        and (not names or j.variant.name in names)
    ]


def resumed_seed(root: Path, facts: dict[str, Any]) -> int | None:
    """The order seed of the run in `root` that --resume continues, None when `root` has
    none yet (the run starts afresh). ValueError, one line, when root's runs could not be
    figures of one run with this one's: another profile, P4 program or BMv2."""
    meta_p = root / "meta.json"
    if not meta_p.exists():
        return None
    meta = json.loads(meta_p.read_text())
    for key, what in (("profile", "profile"), ("p4_program", "P4 program"), ("bmv2", "BMv2")):
        if meta.get(key) != facts.get(key):
            raise ValueError(
                f"{meta_p}: its runs have {what} {meta.get(key)!r}, this one {facts.get(key)!r}; "
                "--resume continues a run only on the same (start one in another --out)"
            )
    if "order_seed" not in meta:
        raise ValueError(f"{meta_p}: no order_seed, so the variants' order cannot be continued")
    return int(meta["order_seed"])


def pending(todo: list[Job], root: Path) -> list[Job]:
    """The jobs without a finished run (its run.json) under `root`, in their order."""
    return [j for j in todo if not (j.path(root) / "run.json").exists()]


def run_seconds(job: Job, clients: int) -> float:
    """How long a run takes, from the plan alone: ab and the many-source runs cannot outpace
    the servers' capacity (the one server's for `single`) nor their own concurrency at
    SERVICE_MS a request, which bounds them from below; a k6 shape counts at its planned
    length (a breakpoint run stops earlier, when its thresholds fail). Setup comes on top."""
    sc, ld = job.scenario, job.load
    workers = max(sc.workers) if job.variant is SINGLE else sum(sc.workers)
    per_s = workers * 1000 / SERVICE_MS
    if isinstance(ld, AbLoad) and job.variant.algorithm == "srchash":
        # ab is one source address, so srchash sends every request to one server, which
        # one the plan cannot know: the mean time over the servers it may be.
        per_s = 1 / statistics.mean(SERVICE_MS / 1000 / w for w in sc.workers)
    if isinstance(ld, AbLoad):
        return max(ld.n / per_s, ld.n / ld.concurrency * SERVICE_MS / 1000)
    if isinstance(ld, ClientsLoad):
        total = clients * ld.addresses * ld.per_address
        return max(total / per_s, ld.per_address * SERVICE_MS / 1000)
    return float(ld.ramp_s + ld.hold_s + ld.down_s)


def plan_text(profile: Profile, todo: list[Job]) -> str:
    """`--plan`: the runs per experiment and scenario and about how long each part takes,
    so the full profile can be run in parts (--only, --scenarios, --keep)."""
    parts: dict[tuple[str, str], list[float]] = {}
    for j in todo:
        parts.setdefault((j.experiment, j.scenario.name), []).append(
            run_seconds(j, profile.clients)
        )
    lines = [f"{profile.name} profile: {len(todo)} runs, {profile.reps} repetitions a point"]
    for (exp, sc), secs in parts.items():
        lines.append(f"  {exp:8} {sc:6} {len(secs):5} runs, about {fmt_s(sum(secs))}")
    total = sum(sum(v) for v in parts.values())
    lines.append(
        f"  about {total / 3600:.1f} h in all (servers' capacity, k6's planned shapes; "
        "a breakpoint run stops earlier), plus a few seconds of setup a run"
    )
    return "\n".join(lines)


# Each repetition of a many-source load draws its client addresses anew from a pool this
# many times larger than it needs, so its repetitions are independent placements (issue
# 33: srchash's figure had been one placement reported three times). Within a repetition
# every variant gets the same draw: they are compared on the same addresses.
DRAW_POOL = 4


def draw_sources(pool: list[str], k: int, seed: int) -> list[str]:
    """`k` addresses of `pool`, a seeded draw (sorted, for the record)."""
    return sorted(random.Random(seed).sample(pool, min(k, len(pool))))


# ---------------------------------------------------------------- measurements


def tcp_counters(host: Any) -> dict[str, int]:
    """The host namespace's TCP counters (RetransSegs, OutSegs, PassiveOpens, ...)."""
    lines = [
        ln.split() for ln in host.cmd("cat /proc/net/snmp").splitlines() if ln.startswith("Tcp:")
    ]
    if len(lines) < 2:
        return {}
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:], strict=False)}


def switch_packets(lab: Lab) -> int:
    """Packets the switch received on all its ports (the veths' counters, root namespace)."""
    total = 0
    for intf in lab.net.switches[0].intfList():
        if intf.name == "lo":
            continue
        p = Path(f"/sys/class/net/{intf.name}/statistics/rx_packets")
        if p.exists():
            total += int(p.read_text())
    return total


def log_lines(lab: Lab) -> dict[str, int]:
    out = {}
    for s in lab.servers:
        with open(access_log(s)) as f:
            out[s.name] = sum(1 for _ in f)
    return out


def log_since(
    lab: Lab, start: dict[str, int]
) -> tuple[dict[str, int], dict[str, int], dict[str, dict[str, int]]]:
    """Since `start` (line counts): requests served per server, connections accepted per
    server, and requests per (source address, server)."""
    served: dict[str, int] = {}
    conns: dict[str, int] = {}
    by_source: dict[str, Counter[str]] = {}
    for s in lab.servers:
        with open(access_log(s)) as f:
            lines = [ln.split() for ln in f.readlines()[start[s.name] :] if ln.strip()]
        conns[s.name] = len(lines)
        served[s.name] = sum(1 for x in lines if x[-1] == "200")
        for x in lines:
            if x[-1] == "200":
                by_source.setdefault(x[0], Counter())[s.name] += 1
    return served, conns, {a: dict(c) for a, c in sorted(by_source.items())}


def switch_view(lab: Lab) -> tuple[dict[str, int], dict[str, int]]:
    """(new connections per backend, drops per reason) from the switch's counters, read as
    a reader (no arbitration)."""
    cfg = reader.load(lab.config_path)
    with operations.connect_reader(cfg) as sw:
        st = operations.read_stats(sw, cfg)
    conns = {b.name: b.connections for b in st.vips[0].backends}
    drops = Counter(st.drops)
    for v in st.vips:
        drops.update(v.drops)
    return conns, dict(drops)


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items()}


# ---------------------------------------------------------------- one run


def configure(lab: Lab, scenario: Scenario, variant: Variant) -> None:
    """Write the variant's algorithm and weights into the lab's config and `p4lb apply` it."""
    if variant.algorithm is None:
        return
    # Weights by server name: the config file's backend order need not be the servers'.
    want = dict(zip((s.name for s in lab.servers), variant.weight_list(scenario), strict=True))
    cfg = reader.load(lab.config_path)
    vip = cfg.vips[0]
    backends = tuple(dataclasses.replace(b, weight=want[b.name]) for b in vip.backends)
    vip = dataclasses.replace(vip, algorithm=variant.algorithm, backends=backends)
    writer.save(dataclasses.replace(cfg, vips=(vip,)), lab.config_path)
    saved = reader.load(lab.config_path).vips[0]
    got = {b.name: b.weight for b in saved.backends}
    if got != want or saved.algorithm != variant.algorithm:
        raise RuntimeError(
            f"{lab.config_path}: wrote {variant.algorithm} {want}, reads back "
            f"{saved.algorithm} {got}"
        )
    r = subprocess.run(p4lb_cmd(lab, "apply"), capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError(f"p4lb apply ({variant.name}): {r.stdout}{r.stderr}".strip())


def single_server(lab: Lab, scenario: Scenario) -> tuple[Any, Path]:
    """No load balancer: the host of the largest server (the fairest one to compare), with
    a server of that capacity on SINGLE_PORT, started on first use; (host, its access log)."""
    i = max(range(len(scenario.workers)), key=lambda i: (scenario.workers[i], -i))
    host = lab.servers[i]
    log = access_log(host).with_name(f"{host.name}-{SINGLE_PORT}.log")
    if f"server-{host.name}-{SINGLE_PORT}" not in lab.pids:
        start_server(lab, host, scenario.capacities()[i], SINGLE_PORT, log)
    return host, log


def draw_seed(job: Job) -> int:
    """The draw of a many-source run: one per scenario and repetition."""
    return 1000 * (list(SCENARIOS).index(job.scenario.name) + 1) + job.rep


def one_run(lab: Lab, job: Job, root: Path, k6: str | None, k6_sources: int = 1) -> dict[str, Any]:
    out = job.path(root)
    drawn: dict[str, Any] | None = None
    sample0 = provenance.sample()
    out.mkdir(parents=True, exist_ok=True)
    hosts = [*lab.clients, *lab.servers]
    lines0 = log_lines(lab)
    tcp0 = {h.name: tcp_counters(h) for h in hosts}
    sw_conns0, drops0 = switch_view(lab)
    pkts0 = switch_packets(lab)
    swcpu0 = process_cpu_s(lab.pids["switch"])
    load0 = os.getloadavg()
    t0 = time.monotonic()
    url = URL
    single: tuple[Any, Path, int] | None = None
    if job.variant.algorithm is None:
        host, log = single_server(lab, job.scenario)
        single = (host, log, len(log.read_text().splitlines()))
        url = f"http://{host.IP()}:{SINGLE_PORT}/"
    ld = job.load
    if isinstance(ld, AbLoad):
        timeout = 60 + ld.n / 5
        loadgen.run_ab(lab.clients[0], url, ld.n, ld.concurrency, out, timeout)
    elif isinstance(ld, ClientsLoad):
        seed = draw_seed(job)
        sources = {
            c: draw_sources(lab.sources[c.name], ld.addresses, seed + i)
            for i, c in enumerate(lab.clients)
        }
        drawn = {"seed": seed, "addresses": {c.name: a for c, a in sources.items()}}
        loadgen.run_ab_sources(sources, url, ld.per_address, out, 60 + ld.per_address * 5)
    else:
        assert k6 is not None
        sources = {c: lab.sources[c.name][:k6_sources] for c in lab.clients}
        span = ld.ramp_s + ld.hold_s + ld.down_s
        loadgen.run_k6(k6, sources, ld, url, out, 90 + 2 * span)
    elapsed = time.monotonic() - t0
    pkts1 = switch_packets(lab)
    swcpu1 = process_cpu_s(lab.pids["switch"])
    sample1 = provenance.sample()
    wait_servers_idle(lab)
    served, conns, by_source = log_since(lab, lines0)
    if single:  # what the one server answered (the pool's servers saw nothing)
        host, log, start = single
        lines = [ln.split() for ln in log.read_text().splitlines()[start:] if ln.strip()]
        served[host.name] += sum(1 for x in lines if x[-1] == "200")
        conns[host.name] += len(lines)
    tcp1 = {h.name: tcp_counters(h) for h in hosts}
    sw_conns1, drops1 = switch_view(lab)

    def tcp_delta(counter: str, of: list[Any]) -> dict[str, int]:
        return {h.name: tcp1[h.name].get(counter, 0) - tcp0[h.name].get(counter, 0) for h in of}

    record: dict[str, Any] = {
        "experiment": job.experiment,
        "scenario": job.scenario.name,
        "workers": list(job.scenario.workers),
        "service_ms": SERVICE_MS,
        "variant": job.variant.name,
        "algorithm": job.variant.algorithm,
        "weights": job.variant.weight_list(job.scenario) if job.variant.algorithm else None,
        "load": dataclasses.asdict(ld) | {"name": ld.name},
        "rep": job.rep,
        "url": url,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "elapsed_s": elapsed,
        "loadavg_before": list(load0),
        "loadavg_after": list(os.getloadavg()),
        "busiest_processes_after": busiest()[:4],
        "machine_cpu_busy": (sample1.busy - sample0.busy) / max(1, sample1.total - sample0.total),
        "other_cpu": provenance.other_share(sample0, sample1),
        "sources_drawn": drawn,
        "switch_packets": pkts1 - pkts0,
        "switch_pps": (pkts1 - pkts0) / elapsed if elapsed else 0.0,
        "switch_cpu": (swcpu1 - swcpu0) / elapsed if elapsed else 0.0,
        "served": served,
        "connections": conns,
        "by_source": by_source,
        "syn_connections": tcp_delta("PassiveOpens", lab.servers),
        "switch_connections": delta(sw_conns1, sw_conns0),
        "drops": {k: v for k, v in delta(drops1, drops0).items() if v},
        "retrans_segs": tcp_delta("RetransSegs", hosts),
        "out_segs": tcp_delta("OutSegs", hosts),
    }
    (out / "run.json").write_text(json.dumps(record, indent=1))
    return record


# ---------------------------------------------------------------- the matrix


def versions() -> dict[str, Any]:
    """The facts a resumed run must share with the one it continues (bench.provenance's)."""
    k6 = loadgen.k6_binary()
    machine = provenance.machine()
    bmv2 = shutil.which("simple_switch_grpc") or ""
    return {
        "commit": provenance.git_state()["commit"],
        # The program that ran (the work tree's, which may be ahead of the commit).
        "p4_program": provenance.p4_stamp()["sources_sha256"],
        "bmv2": f"{bmv2} {provenance.version_line(['simple_switch_grpc', '--version']) or ''}",
        "ab": provenance.version_line(["ab", "-V"]) or "missing",
        "k6": (provenance.version_line([k6, "version"]) or "") if k6 else "missing",
        "kernel": machine["kernel"],
        "cpus": machine["cores"],
        "python": machine["python"],
    }


def busiest() -> list[str]:
    """The processes using most CPU right now (what else runs on the machine)."""
    r = subprocess.run(
        ["ps", "-eo", "pcpu,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=10
    )
    return [" ".join(x.split())[:120] for x in r.stdout.splitlines()[1:9]]


def fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def run_jobs(
    todo: list[Job],
    profile: Profile,
    root: Path,
    k6: str | None,
    meta: dict[str, Any],
    failures: list[str],
) -> None:
    """Every job in order, one network per scenario; a failed run is recorded in
    `failures`, not fatal. Interrupted, the run under way is discarded (no run.json)."""
    started = time.monotonic()
    done = 0
    running: Job | None = None
    try:
        for sname in dict.fromkeys(j.scenario.name for j in todo):
            sc = SCENARIOS[sname]
            group = [j for j in todo if j.scenario.name == sname]
            lab = build(
                Options(
                    clients=profile.clients,
                    capacities=sc.capacities(),
                    weights=list(sc.workers),
                    addresses_per_client=max(2, DRAW_POOL * profile.max_addresses()),
                )
            )
            try:
                meta.setdefault("qdiscs", lab.qdiscs)
                subprocess.run(p4lb_cmd(lab, "apply"), check=True, capture_output=True, timeout=120)
                start_servers(lab, threaded=False)
                current: Variant | None = None
                for job in group:
                    running = job
                    if job.variant != current:
                        configure(lab, sc, job.variant)
                        current = job.variant
                    done += 1
                    el = time.monotonic() - started
                    eta = el / (done - 1) * (len(todo) - done + 1) if done > 1 else 0.0
                    print(
                        f"[{done}/{len(todo)}] {job.experiment} {sname} {job.variant.name} "
                        f"{job.load.name} r{job.rep}  elapsed {fmt_s(el)}, ETA {fmt_s(eta)}",
                        flush=True,
                    )
                    try:
                        rec = one_run(lab, job, root, k6, max(2, profile.max_addresses()))
                    except Exception as e:  # noqa: BLE001 - one failed run is recorded, not fatal
                        failures.append(f"{job.path(root)}: {e}")
                        print(f"    FAILED: {e}", flush=True)
                        continue
                    print(
                        f"    served {rec['served']}, switch {rec['switch_pps']:.0f} pps, "
                        f"{rec['elapsed_s']:.1f}s",
                        flush=True,
                    )
            except BaseException:
                stop_after_error(lab)
                raise
            stop(lab)
    except KeyboardInterrupt:
        if running and not (running.path(root) / "run.json").exists():
            shutil.rmtree(running.path(root), ignore_errors=True)  # begun, not recorded
        raise


def stop_after_error(lab: Lab) -> None:
    """Stop the network while an error or interrupt is on its way out: a failure to stop
    is said, not raised in its place (it would skip the interrupt's bookkeeping: the meta's
    end, the begun run's removal, the report)."""
    try:
        stop(lab)
    except Exception as e:  # noqa: BLE001 - the error in flight is the one to report
        print(f"stopping the network failed as well: {type(e).__name__}: {e}", flush=True)
        for name, pid in lab.pids.items():  # the switch, which Mininet's stop did not reach
            if name.startswith("switch") and pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)


def chained(meta: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """This invocation's meta continuing `earlier` (the meta.json already in --out): the
    earlier invocations listed in order, the start taken from the first. The order of the
    runs is kept once, not per part, when it is the same plan (one seed)."""
    earlier = dict(earlier)
    if earlier.get("order") == meta["order"]:
        del earlier["order"]
    return meta | {
        "earlier_invocations": earlier.pop("earlier_invocations", []) + [earlier],
        "started": earlier["started"],
        "loadavg_at_start": earlier["loadavg_at_start"],
        "busiest_processes_at_start": earlier.get("busiest_processes_at_start", []),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.experiments.run")
    p.add_argument("--profile", choices=profiles.NAMES, default=profiles.DEFAULT)
    p.add_argument("--only", nargs="*", default=["ab", "clients", "k6"], help="experiments")
    p.add_argument("--scenarios", nargs="*", default=None, help="limit to these scenarios")
    p.add_argument("--variants", nargs="*", default=None, help="limit to these variants")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default: the profile's)")
    p.add_argument("--out", default=None, help=f"default: {OUT} (full profile) or scratch")
    p.add_argument("--order-seed", type=int, default=None, help="seed of the variants' order")
    p.add_argument("--keep", action="store_true", help="keep raw runs of earlier invocations")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (its order seed; finished runs kept and skipped): "
        "the full profile in parts, each stopped with Ctrl-C (a begun run is discarded)",
    )
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--plan", action="store_true", help="print the runs and how long they take")
    a = p.parse_args(argv)
    if a.plan:
        todo = jobs(PROFILES[a.profile], algorithms(), True, set(a.only))
        print(plan_text(PROFILES[a.profile], selected(todo, a.scenarios, a.variants)))
        return 0
    if os.geteuid() != 0:
        print("bench.experiments: needs root (Mininet and BMv2 on veths)", file=sys.stderr)
        return 2
    profile = PROFILES[a.profile]
    partial = bool(a.scenarios or a.variants or set(a.only) != {"ab", "clients", "k6"})
    committed = profile.name == "full" and not partial and (a.reps or profile.reps) >= profile.reps
    if a.reps:
        profile = dataclasses.replace(profile, reps=a.reps)
    root = outdir.destination("experiments", committed, Path(a.out) if a.out else None)
    facts = versions() | {"profile": profile.name}
    try:
        earlier_seed = resumed_seed(root, facts) if a.resume else None
    except ValueError as e:
        print(f"bench.experiments: {e}", file=sys.stderr)
        return 2
    if earlier_seed is not None and a.order_seed not in (None, earlier_seed):
        print(
            f"bench.experiments: --order-seed {a.order_seed}, but the run in {root} has "
            f"{earlier_seed}",
            file=sys.stderr,
        )
        return 2
    seed = next(
        x for x in (earlier_seed, a.order_seed, int(time.time()) % 1_000_000) if x is not None
    )
    from bench.runner import start_run

    run = start_run("bench-experiments", {"standard": switch_binary()}, argv)
    if run is None:
        return 2
    k6 = loadgen.k6_binary()
    if k6 is None and "k6" in a.only:
        print(
            "k6 is not installed: the seed 001 load shapes are skipped "
            "(go install go.k6.io/k6@v1.8.1 puts it in ~/go/bin)",
            flush=True,
        )
    algs = algorithms()
    todo = selected(jobs(profile, algs, k6 is not None, set(a.only), seed), a.scenarios, a.variants)
    keep = a.keep or a.resume
    if not keep:
        shutil.rmtree(root / "raw", ignore_errors=True)
        (root / rawstore.ARCHIVE).unlink(missing_ok=True)
    elif not (root / "raw").is_dir() and (root / rawstore.ARCHIVE).exists():
        try:  # a completed run kept as its archive: its runs are found (and skipped) in raw/
            rawstore.unpack(root)
        except rawstore.RawError as e:
            print(f"bench.experiments: {e}", file=sys.stderr)
            return 2
    root.mkdir(parents=True, exist_ok=True)
    meta = facts | {
        "algorithms": list(algs),
        "invocation": sys.argv[1:] if argv is None else argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "invocation_started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "finished": None,
        "loadavg_at_start": list(os.getloadavg()),
        "busiest_processes_at_start": busiest(),
        "runs_planned": len(todo),
        "order_seed": seed,
        "order": [[j.scenario.name, j.rep, j.variant.name, j.load.name] for j in todo],
    }
    if keep and (earlier := rawstore.read_meta(root)):
        meta = chained(meta, earlier)
    if a.resume:
        before = len(todo)
        todo = pending(todo, root)
        print(f"resuming {root}: {before - len(todo)} of {before} runs done already", flush=True)
    # Written now as well, so a run stopped any way leaves its order seed for --resume and
    # its facts (the load sampled while it runs comes with run.finish at the end).
    meta["provenance"] = run.facts | {"load": {}, "repetitions": profile.reps}
    rawstore.write_meta(root, meta)
    print(f"{len(todo)} runs ({profile.name} profile, algorithms {', '.join(algs)})", flush=True)
    started = time.monotonic()
    failures: list[str] = []
    # Ctrl-C (or SIGTERM) stops the run under way, which is discarded; the finished ones
    # are kept, the meta says so and --resume continues with the next.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        run_jobs(todo, profile, root, k6, meta, failures)
    except KeyboardInterrupt:
        meta["interrupted"] = True
        print("interrupted: finished runs are kept; --resume continues", flush=True)
    meta |= {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_at_end": list(os.getloadavg()),
        "elapsed_s": time.monotonic() - started,
        "failures": failures,
    }
    meta["provenance"] = run.finish(profile.reps, order="meta.json's `order`", order_seed=seed)
    rawstore.write_meta(root, meta)
    print(outdir.said(root))
    left = pending(todo, root)
    print(
        f"done: {len(todo) - len(left)} runs, {len(failures)} failed, "
        f"{fmt_s(time.monotonic() - started)}"
    )
    if not left and not meta.get("interrupted") and (root / "raw").is_dir():
        # complete: one archive, not a file per run (--resume unpacks it again)
        rec = rawstore.pack(root)
        print(f"raw files: {rec['files']} -> {root / rawstore.ARCHIVE} ({rec['bytes']:,} bytes)")
    if not a.no_report:
        from bench.experiments import report

        report.main(["--out", str(root)])
    return 130 if meta.get("interrupted") else 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
