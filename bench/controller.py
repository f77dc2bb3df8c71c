"""Controller speed on a real simple_switch_grpc (part of `make bench`; measures, asserts
nothing): `p4lb apply` of 100 WRR VIPs x 8 backends on an empty switch, a no-op apply, and
how soon after `p4lb weight set` returns the next new connection follows the new weight.

Each repetition measures both on a fresh switch, in turn. Writes results/controller.json
(every repetition's values) and prints one line per figure."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import runner, templates
from bench.controller_probe import CLIENT_MAC, LAB, SWITCH_MAC, weight_trials
from bench.stats import summary
from p4lb.intent import writer
from p4lb.intent.model import Backend, Config, Host, SwitchConfig, Vip
from p4lb.intent.validate import validate
from p4lb.pipeline import capacity
from p4lb.pipeline.p4info import compiled_limits
from p4lb.service import operations

VIP = "10.0.0.100"


def big_config(n_vips: int, n_backends: int) -> Config:
    """VIP 0 ("web", 10.0.0.100:80) is the one the latency trials send to; all hosts sit
    behind switch port 1, the one veth the benchmark owns."""

    def backend(i: int, j: int) -> Backend:
        address = f"10.0.0.{j + 2}" if i == 0 else f"10.{i}.1.{j + 1}"
        mac = f"02:00:00:00:{i:02x}:{j + 2:02x}"
        return Backend(f"b{j}", address, port=8000, weight=1, mac=mac, switch_port=1)

    def vip(i: int) -> Vip:
        name, address = (f"v{i}", f"10.100.{i // 250}.{i % 250 + 1}") if i else ("web", VIP)
        backends = tuple(backend(i, j) for j in range(n_backends))
        return Vip(name, address, "tcp", 80, "wrr", mac=SWITCH_MAC, backends=backends)

    switch = SwitchConfig(f"127.0.0.1:{LAB.grpc_port}", 0, 10, mac=SWITCH_MAC)
    client = Host("client", "10.0.0.1", CLIENT_MAC, 1)
    return Config(switch=switch, hosts=(client,), vips=tuple(vip(i) for i in range(n_vips)))


def measure(t: runner.Trial, name: str) -> dict[str, Any]:
    """On a switch of its own: "apply" pushes the pipeline, applies the big config to the
    empty switch, applies it again (a no-op, 5 times) and sets a weight by the command (5
    times); "weight" applies a 2-backend "web" and times --trials weight changes."""
    a = t.args
    cfg, cfg_path = big_config(a.vips, a.backends), t.workdir / "lb.toml"
    with LAB.switch(binary=t.binary, out=t.workdir / "switch.out"):
        validate(cfg)
        capacity.check(cfg, compiled_limits())
        if name == "weight":  # a 2-backend "web" so the next slot is known exactly
            web = cfg.vip("web")
            cfg = cfg.with_vip(Vip(**{**web.__dict__, "backends": web.backends[:2]}))
        writer.save(cfg, cfg_path)
        with operations.connect(cfg, one_shot=True) as sw:
            t0 = time.perf_counter()
            sw.ensure_pipeline()
            t1 = time.perf_counter()
            first = operations.apply(sw, cfg)
            t2 = time.perf_counter()
            noop = []
            for _ in range(5 if name == "apply" else 0):
                t = time.perf_counter()
                again = operations.apply(sw, cfg)
                noop.append(time.perf_counter() - t)
                if again.writes:
                    raise RuntimeError(f"a second apply wrote {again.writes} entries")
        if name == "weight":
            effects, ok = weight_trials(cfg_path, a.trials)
            return {"effect_ms": effects, "ok": ok}
        p4lb = str(Path(sys.executable).with_name("p4lb"))
        cli = []
        for w in (2, 1, 2, 1, 2):
            t = time.perf_counter()
            cmd = [p4lb, "-c", str(cfg_path), "weight", "set", "web", "b0", str(w)]
            subprocess.run(cmd, check=True, capture_output=True)
            cli.append(time.perf_counter() - t)
    return dict(push_s=t1 - t0, apply_s=t2 - t1, writes=first.writes, noop_s=noop, cli_s=cli)


def figures(args: argparse.Namespace, values: dict[str, list[Any]]) -> dict[str, Any]:
    """The pipeline push and the apply on an empty switch per repetition; every no-op
    apply, command and weight trial in the order measured."""
    ap, wt = values["apply"], values["weight"]
    return {
        "pipeline_push_s": summary([r["push_s"] for r in ap]),
        "apply_empty_s": summary([r["apply_s"] for r in ap]),
        "apply_empty_writes": ap[0]["writes"],
        "apply_noop_s": [x for r in ap for x in r["noop_s"]],
        "cli_weight_set_s": [x for r in ap for x in r["cli_s"]],
        "weight_change_effect_ms": [x for r in wt for x in r["effect_ms"]],
        "weight_change_trials_ok": sum(r["ok"] for r in wt),
    }


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vips", type=int, default=100)
    p.add_argument("--backends", type=int, default=8)
    p.add_argument("--trials", type=int, default=20, help="weight changes per repetition")


def lines(doc: dict[str, Any], f: dict[str, Any]) -> str:
    """The lines the bench prints for a build's figures `f`: each beside its goal."""
    return templates.render("controller-lines.md", doc=doc, f=f, median=statistics.median)


def write(args: argparse.Namespace, doc: dict[str, Any]) -> int:
    """Print the lines; a weight trial that went to the old backend fails the run."""
    for build, f in doc["builds"].items():
        print(f"{build}:\n{lines(doc, f)}", end="")
    fs = doc["builds"].values()
    return int(any(f["weight_change_trials_ok"] < len(f["weight_change_effect_ms"]) for f in fs))


SPEC = runner.Spec(
    prog="bench-controller",
    doc=__doc__ or "",
    subdir="",
    filename="controller.json",
    reps=3,
    tools=(),
    options=options,
    committed=("vips", "backends", "trials"),
    variants=lambda args: ["apply", "weight"],
    measure=measure,
    figures=figures,
    head=lambda a: {"vips": a.vips, "backends_per_vip": a.backends},
    lab=lambda args: LAB.veths(),
    order_in_build=True,
    write=write,
)


def main(argv: list[str] | None = None) -> int:
    return runner.main(SPEC, argv)


if __name__ == "__main__":
    sys.exit(main())
