"""Each algorithm's slot table, as entries.py fills it from the config: the backend ids of
every slot, in proportion to the weights, and changing only what the algorithm changes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from p4lb import config as cfgmod
from p4lb import intent
from p4lb.config import Config
from p4lb.entries import Ids, assign_ids, ids_on_switch, wrr_slots

ROOT = Path(__file__).resolve().parents[2]


def _web(algorithm: str, weights: tuple[int, int, int]) -> tuple[Config, Ids]:
    cfg = cfgmod.load(ROOT / "configs" / "default.toml")
    cfg = intent.set_algorithm(cfg, "web", algorithm)
    for name, w in zip(("h2", "h3", "h4"), weights, strict=True):
        cfg = intent.set_weight(cfg, "web", name, w)
    return cfg, assign_ids(cfg, ids_on_switch([]))


def _shares(algorithm: str, weights: tuple[int, int, int]) -> tuple[int, Counter[int]]:
    cfg, ids = _web(algorithm, weights)
    slots = wrr_slots(cfg.vip("web"), ids)
    return len(slots), Counter(slots)


def test_wrr_slots_are_one_cycle_of_the_weights() -> None:
    size, counts = _shares("wrr", (1, 2, 3))
    assert size == 6
    assert sorted(counts.values()) == [1, 2, 3]


def test_maglev_table_is_a_prime_of_100_per_backend_shared_by_weight() -> None:
    size, counts = _shares("maglev", (1, 2, 3))
    assert size >= 300 and all(size % d for d in range(2, int(size**0.5) + 1))
    for got, weight in zip(sorted(counts.values()), (1, 2, 3), strict=True):
        assert abs(got / size - weight / 6) < 0.01


def test_maglev_table_keeps_its_size_and_most_entries_when_a_backend_drains() -> None:
    cfg, ids = _web("maglev", (1, 1, 1))
    before = wrr_slots(cfg.vip("web"), ids)
    after = wrr_slots(intent.drain(cfg, "web", "h3").vip("web"), ids)
    assert len(after) == len(before)
    drained = ids.backends[next(k for k in ids.backends if k[1] == 0x0A000003)]
    assert drained not in after
    moved = sum(a != b for a, b in zip(before, after, strict=True))
    # Only the drained backend's third of the table moves (Maglev: a little more).
    assert moved < len(before) * 0.4


def test_srchash_buckets_follow_the_weights_in_a_fixed_size_table() -> None:
    size, counts = _shares("srchash", (1, 2, 2))
    assert size == _shares("srchash", (1, 1, 1))[0]
    for got, weight in zip(sorted(counts.values()), (1, 2, 2), strict=True):
        assert abs(got - size * weight / 5) <= 1
