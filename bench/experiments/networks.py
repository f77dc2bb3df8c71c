"""The matrix's runs in order, one Mininet network per capacity scenario, each variant's
algorithm and weights applied before its runs; a failed run is recorded, an interrupted one
discarded."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.experiments.matrix import DRAW_POOL, Job, fmt_s
from bench.experiments.measure import one_run
from bench.experiments.plan import SCENARIOS, Profile, Scenario, Variant
from p4lb.intent import reader, writer
from topology.net import Lab, Options, build, p4lb_cmd, start_servers, stop


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


def run_jobs(
    todo: list[Job],
    profile: Profile,
    root: Path,
    k6: str | None,
    meta: dict[str, Any],
    failures: list[str],
) -> None:
    """Every job in order, one network per scenario; a failed run is recorded in `failures`,
    an interrupted one discarded."""
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
    """Stop the network while an error or interrupt is on its way out: a failure to stop is
    said, not raised in its place (it would skip the interrupt's bookkeeping)."""
    try:
        stop(lab)
    except Exception as e:  # noqa: BLE001 - the error in flight is the one to report
        print(f"stopping the network failed as well: {type(e).__name__}: {e}", flush=True)
        for name, pid in lab.pids.items():  # the switch, which Mininet's stop did not reach
            if name.startswith("switch") and pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
