"""Controller speed on a real simple_switch_grpc (part of `make bench`; measures, asserts
nothing): `p4lb apply` of 100 WRR VIPs x 8 backends on an empty switch, a no-op apply, and
how soon after `p4lb weight set` returns the next new connection follows the new weight.

Writes results/controller.json and prints one line per figure."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import outdir, provenance, runner, templates
from bench.controller_probe import CLIENT_MAC, LAB, SWITCH_MAC, weight_trials
from p4lb.intent import writer
from p4lb.intent.model import Backend, Config, Host, SwitchConfig, Vip
from p4lb.intent.validate import validate
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import compiled_limits
from p4lb.service import operations
from topology import bmv2


def big_config(n_vips: int, n_backends: int) -> Config:
    """VIP 0 ("web", 10.0.0.100:80) is the one the latency trials send to; all hosts sit
    behind switch port 1, the one veth the benchmark owns."""

    def backend(i: int, j: int) -> Backend:
        address = f"10.0.0.{j + 2}" if i == 0 else f"10.{i}.1.{j + 1}"
        mac = f"02:00:00:00:{i:02x}:{j + 2:02x}"
        return Backend(f"b{j}", address, port=8000, weight=1, mac=mac, switch_port=1)

    vips = tuple(
        Vip(
            name=f"v{i}" if i else "web",
            address=f"10.100.{i // 250}.{i % 250 + 1}" if i else "10.0.0.100",
            protocol="tcp",
            port=80,
            algorithm="wrr",
            mac=SWITCH_MAC,
            backends=tuple(backend(i, j) for j in range(n_backends)),
        )
        for i in range(n_vips)
    )
    address = f"127.0.0.1:{LAB.grpc_port}"
    return Config(
        switch=SwitchConfig(address=address, device_id=0, election_id=10, mac=SWITCH_MAC),
        hosts=(Host("client", "10.0.0.1", CLIENT_MAC, 1),),
        vips=vips,
    )


@dataclass
class Figures:
    vips: int
    backends_per_vip: int
    pipeline_push_s: float
    apply_empty_s: float
    apply_empty_writes: int
    apply_noop_s: list[float]
    cli_weight_set_s: list[float]
    weight_change_effect_ms: list[float]
    weight_change_trials_ok: int


def measure(n_vips: int, n_backends: int, trials: int) -> Figures:
    tmp = Path(tempfile.mkdtemp(prefix="p4lb-ctlbench-"))
    with LAB.veths(), LAB.switch(out=tmp / "switch.out"):
        cfg = big_config(n_vips, n_backends)
        validate(cfg)
        capacity.check(cfg, compiled_limits())
        cfg_path = tmp / "lb.toml"
        writer.save(cfg, cfg_path)
        with operations.connect(cfg, one_shot=True) as sw:
            t0 = time.perf_counter()
            sw.ensure_pipeline()
            t1 = time.perf_counter()
            first = operations.apply(sw, cfg)
            t2 = time.perf_counter()
            noop = []
            for _ in range(5):
                t = time.perf_counter()
                again = operations.apply(sw, cfg)
                noop.append(time.perf_counter() - t)
                if again.writes:
                    raise RuntimeError(f"a second apply wrote {again.writes} entries")
        cli_times = []
        for w in (2, 1, 2, 1, 2):
            t = time.perf_counter()
            subprocess.run(
                [str(Path(sys.executable).with_name("p4lb")), "-c", str(cfg_path)]
                + ["weight", "set", "web", "b0", str(w)],
                check=True,
                capture_output=True,
            )
            cli_times.append(time.perf_counter() - t)
        # The latency trials use a 2-backend "web" so the next slot is known exactly.
        small = cfg.with_vip(
            Vip(**{**cfg.vip("web").__dict__, "backends": cfg.vip("web").backends[:2]})
        )
        writer.save(small, cfg_path)
        with operations.connect(small, one_shot=True) as sw:
            operations.apply(sw, small)
        effects, ok = weight_trials(cfg_path, trials)
        figures = Figures(
            n_vips, n_backends, t1 - t0, t2 - t1, first.writes, noop, cli_times, effects, ok
        )
    shutil.rmtree(tmp, ignore_errors=True)  # the switch's output; a failed run keeps it
    return figures


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vips", type=int, default=100)
    p.add_argument("--backends", type=int, default=8)
    p.add_argument("--trials", type=int, default=20)


def summary(f: Figures) -> str:
    """The lines the bench prints: each figure beside its goal."""
    return templates.render("controller-lines.md", f=f, median=statistics.median)


def main(argv: list[str] | None = None) -> int:
    a = runner.command_line(
        "bench-controller", __doc__, "", argv, options, ["vips", "backends"], reps_key="trials"
    )
    run = runner.start_run("bench-controller", {"standard": bmv2.switch_binary()}, argv)
    if run is None:
        return 2
    f = measure(a.vips, a.backends, a.trials)
    print(summary(f), end="")
    a.out.mkdir(parents=True, exist_ok=True)
    bm = provenance.version_line([bmv2.switch_binary(), "--version"]) or "missing"
    # Every trial's value is in the lists (apply_noop_s, cli_weight_set_s, ...), in the
    # order measured; the no-op applies and weight sets run 5 times each.
    doc = asdict(f) | {
        "bmv2": bm,
        "provenance": run.finish({"trials": a.trials, "noop": 5}, order="as listed, in turn"),
    }
    (a.out / "controller.json").write_text(json.dumps(doc, indent=1))
    print(outdir.said(a.out / "controller.json"))
    return 0 if f.weight_change_trials_ok == len(f.weight_change_effect_ms) else 1


if __name__ == "__main__":
    sys.exit(main())
