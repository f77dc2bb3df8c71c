"""The experiment matrix as a list of runs (jobs): which runs a profile makes, in which order,
which are still to do, how long they take, and a many-source run's client addresses."""

from __future__ import annotations

import dataclasses
import random
import statistics
from pathlib import Path

from bench import provenance
from bench.experiments import plan
from bench.experiments.plan import SCENARIOS, SERVICE_MS, SINGLE, AbLoad, ClientsLoad, Profile

LoadSpec = AbLoad | ClientsLoad | plan.K6Shape

# A many-source repetition draws its client addresses from a pool this many times larger
# than it needs (repetitions: independent placements; a repetition's variants: one draw).
DRAW_POOL = 4


@dataclasses.dataclass(frozen=True)
class Job:
    experiment: str  # ab | clients | k6
    scenario: plan.Scenario
    variant: plan.Variant
    load: LoadSpec
    rep: int

    def path(self, root: Path) -> Path:
        where = (self.experiment, self.scenario.name, self.variant.name, self.load.name)
        return root.joinpath("raw", *where, f"r{self.rep}")


def jobs(
    profile: Profile,
    algs: tuple[str, ...],
    k6: bool,
    only: set[str],
    seed: int = 0,
    scenarios: list[str] | None = None,
    names: list[str] | None = None,
) -> list[Job]:
    """The matrix (or its `scenarios` and variant `names`) by scenario, then repetition, each
    repetition's variants in an order shuffled by `seed`, each with all its loads."""
    out: list[Job] = []
    in_plan = profile.ab_scenarios + profile.clients_scenarios
    for sname in dict.fromkeys(in_plan + (profile.k6_scenarios if k6 else ())):
        sc = SCENARIOS[sname]
        vs = [*plan.variants(algs, sc), SINGLE]
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
    return [
        j
        for j in out
        if (not scenarios or j.scenario.name in scenarios)
        and (not names or j.variant.name in names)
    ]


def pending(todo: list[Job], root: Path) -> list[Job]:
    """The jobs without a finished run (its run.json) under `root`, in their order."""
    return [j for j in todo if not (j.path(root) / "run.json").exists()]


def run_seconds(job: Job, clients: int) -> float:
    """How long a run takes at least, from the plan alone: the servers' capacity and the
    load's concurrency at SERVICE_MS a request, a k6 shape's planned length; setup aside."""
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
    """`--plan`: the runs per experiment and scenario and about how long each part takes."""
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


def fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def draw_sources(pool: list[str], k: int, seed: int) -> list[str]:
    """`k` addresses of `pool`, a seeded draw (sorted, for the record)."""
    return sorted(random.Random(seed).sample(pool, min(k, len(pool))))


def draw_seed(job: Job) -> int:
    """The draw of a many-source run: one per scenario and repetition."""
    return 1000 * (list(SCENARIOS).index(job.scenario.name) + 1) + job.rep
