"""What the suite measures: capacity scenarios, the variants (every algorithm of the compiled
program), and the quick and full profiles."""

from __future__ import annotations

from dataclasses import dataclass, field

from topology.net import Capacity

SERVICE_MS = 25.0  # each request takes 25 ms: one worker answers at most 40 requests/s


@dataclass(frozen=True)
class Scenario:
    """Server capacities as worker counts (same service time), e.g. 1:2:2 as in Fathurrohim
    and Basuki."""

    name: str
    workers: tuple[int, ...]

    def capacities(self, service_ms: float = SERVICE_MS) -> list[Capacity]:
        return [Capacity(workers=w, service_ms=service_ms) for w in self.workers]


SCENARIOS = {
    "equal": Scenario("equal", (2, 2, 2)),
    "1:2:2": Scenario("1:2:2", (1, 2, 2)),
    "1:1:4": Scenario("1:1:4", (1, 1, 4)),
}


@dataclass(frozen=True)
class Variant:
    """One way to balance: an algorithm with weights set to the servers' capacities, or
    `equal` weights (`wrr` so is round robin); `algorithm` None: one server, no balancer."""

    name: str
    algorithm: str | None
    weights: str = "capacity"  # capacity | equal

    def weight_list(self, scenario: Scenario) -> list[int]:
        return [1] * len(scenario.workers) if self.weights == "equal" else list(scenario.workers)


SINGLE = Variant("single", None)


def variants(algorithms: tuple[str, ...], scenario: Scenario) -> list[Variant]:
    """Every algorithm with capacity weights, plus round robin where the capacities differ."""
    out = [Variant(a, a) for a in algorithms]
    if "wrr" in algorithms and len(set(scenario.workers)) > 1:
        out.append(Variant("rr", "wrr", "equal"))
    return out


@dataclass(frozen=True)
class AbLoad:
    """As Usman et al. and Ramadhan and Wardhana load: one client, ab -n N -c C."""

    n: int
    concurrency: int

    @property
    def name(self) -> str:
        return f"n{self.n}-c{self.concurrency}"


@dataclass(frozen=True)
class ClientsLoad:
    """Many sources: every client runs `per_address` requests from each of its first
    `addresses` source addresses, one ab -c 1 per address, all at once."""

    addresses: int
    per_address: int

    @property
    def name(self) -> str:
        return f"a{self.addresses}-r{self.per_address}"


@dataclass(frozen=True)
class K6Shape:
    """Sudiatmika et al.'s load shapes, per client: `average` and `stress` ramp to `vus` and hold;
    `breakpoint` raises the arrival rate to `rate` until failures or p95 pass their bounds."""

    name: str
    vus: int = 0
    ramp_s: int = 0
    hold_s: int = 0
    down_s: int = 0
    rate: int = 0
    p95_bound_ms: int = 1000


@dataclass(frozen=True)
class Profile:
    name: str
    reps: int
    ab_scenarios: tuple[str, ...]
    ab_loads: tuple[AbLoad, ...]
    clients_scenarios: tuple[str, ...]
    clients_loads: tuple[ClientsLoad, ...]
    k6_scenarios: tuple[str, ...]
    k6_shapes: tuple[K6Shape, ...]
    # Variants k6 runs (None: all); the quick profile keeps Sudiatmika et al.'s own pair.
    k6_variants: tuple[str, ...] | None = None
    clients: int = 3
    addresses_per_client: int = field(default=0)  # 0: the largest ClientsLoad.addresses

    def max_addresses(self) -> int:
        return self.addresses_per_client or max([x.addresses for x in self.clients_loads] + [1])


# Five repetitions: variants are compared (bench.stats' "differs" test needs five a side).
QUICK = Profile(
    name="quick",
    reps=5,
    ab_scenarios=("equal", "1:1:4"),
    ab_loads=(AbLoad(100, 1), AbLoad(400, 10)),
    clients_scenarios=("equal", "1:2:2"),
    clients_loads=(ClientsLoad(1, 40), ClientsLoad(8, 10)),
    k6_scenarios=("1:2:2",),
    k6_shapes=(
        K6Shape("average", vus=8, ramp_s=5, hold_s=10),
        K6Shape("stress", vus=16, ramp_s=5, hold_s=10, down_s=3),
        K6Shape("breakpoint", rate=120, ramp_s=20, p95_bound_ms=500),
    ),
    k6_variants=("iphash", "rr"),
)

FULL = Profile(
    name="full",
    reps=5,
    ab_scenarios=("equal", "1:2:2", "1:1:4"),
    # Usman et al.'s 20k..100k and Ramadhan and Wardhana's 3k..12k, divided by 10: with
    # servers that answer 240 requests/s in all, 100k requests would take 7 minutes per run.
    ab_loads=tuple(AbLoad(n, c) for c in (1, 10) for n in (300, 600, 900, 1200))
    + tuple(AbLoad(n, 10) for n in (2000, 4000, 6000, 8000, 10000)),
    clients_scenarios=("equal", "1:2:2", "1:1:4"),
    clients_loads=(ClientsLoad(1, 100), ClientsLoad(4, 25), ClientsLoad(16, 8)),
    k6_scenarios=("equal", "1:2:2"),
    k6_shapes=(
        K6Shape("average", vus=15, ramp_s=30, hold_s=60),
        K6Shape("stress", vus=30, ramp_s=30, hold_s=60, down_s=15),
        K6Shape("breakpoint", rate=150, ramp_s=90, p95_bound_ms=500),
    ),
)

PROFILES = {p.name: p for p in (QUICK, FULL)}  # by bench.profiles.NAMES
