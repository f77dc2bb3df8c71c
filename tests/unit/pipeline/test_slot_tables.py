"""Each algorithm's slot table, as entries.py fills it from the config: the backend ids of
every slot, in proportion to the weights, and changing only what the algorithm changes."""

from __future__ import annotations

from collections import Counter

from p4lb.intent import edits
from p4lb.intent.model import Config
from p4lb.pipeline.desired import desired_entries, static_entries
from p4lb.pipeline.entries import Entry
from p4lb.pipeline.ids import Ids, assign_ids, backend_key, ids_on_switch
from p4lb.pipeline.maglev import candidate_pairs, candidate_sets
from p4lb.pipeline.slots import wrr_slots
from tests.unit.support import default_config


def _web(algorithm: str, weights: tuple[int, int, int]) -> tuple[Config, Ids]:
    cfg = default_config()
    cfg = edits.set_algorithm(cfg, "web", algorithm)
    for name, w in zip(("h2", "h3", "h4"), weights, strict=True):
        cfg = edits.set_weight(cfg, "web", name, w)
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
    after = wrr_slots(edits.drain(cfg, "web", "h3").vip("web"), ids)
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


def test_least_algorithms_pair_distinct_candidates_in_proportion_to_weight() -> None:
    """Each slot names two different backends; each backend is proposed as either
    candidate about in proportion to its weight, and every pair of backends meets."""
    weights = [1, 2, 3, 2]
    size = 409
    pairs = candidate_pairs(weights, size)
    assert len(pairs) == size
    assert all(a != b for a, b in pairs)
    for position in (0, 1):
        counts = Counter(p[position] for p in pairs)
        for i, w in enumerate(weights):
            assert abs(counts[i] / size - w / sum(weights)) < 0.05, (position, counts)
    met = {frozenset(p) for p in pairs}
    assert met == {frozenset((a, b)) for a in range(4) for b in range(4) if a < b}
    assert candidate_pairs(weights, size) == pairs  # deterministic


def test_least_algorithms_leave_out_weight_0_and_fall_back_to_one_backend() -> None:
    assert {a for p in candidate_pairs([0, 1, 1], 307) for a in p} == {1, 2}
    assert set(candidate_pairs([0, 5, 0], 307)) == {(1, 1)}


def _candidates(params: tuple[tuple[str, int], ...]) -> list[tuple[int, int]]:
    """A set_candidates slot's filled places, (backend id, weight), in order; every place
    after them empty."""
    p = dict(params)
    places = [(p[f"candidate_{k}"], p[f"weight_{k}"]) for k in range(len(p) // 2)]
    filled = [c for c in places if c[1] != 0]
    assert places[len(filled) :] == [(0, 0)] * (len(places) - len(filled))
    return filled


def test_exact_least_slots_hold_every_active_backend_rotated_with_its_weight() -> None:
    """choices = "all" (the default): every slot names each active backend once with its
    weight; the order rotates, so each backend comes first in a third of the slots."""
    cfg, ids = _web("leastconn", (1, 2, 3))
    slots = wrr_slots(cfg.vip("web"), ids)
    assert len(slots) == _shares("maglev", (1, 1, 1))[0]
    weight = {ids.backends[k]: w for k, w in zip(sorted(ids.backends), (1, 2, 3), strict=True)}
    firsts: Counter[int] = Counter()
    for action, params in slots:
        assert action == "set_candidates"
        filled = _candidates(params)
        assert sorted(b for b, _ in filled) == sorted(weight)
        assert all(weight[b] == w for b, w in filled)
        firsts[filled[0][0]] += 1
    assert max(firsts.values()) - min(firsts.values()) <= 1


def test_exact_least_slots_leave_a_drained_backend_out() -> None:
    cfg, ids = _web("leastconn", (1, 1, 1))
    cfg = edits.drain(cfg, "web", "h3")
    h3 = ids.backends[backend_key(cfg.vip("web"), cfg.vip("web").backend("h3").address, 8000)]
    for _, params in wrr_slots(cfg.vip("web"), ids):
        assert [b for b, _ in _candidates(params)].count(h3) == 0
        assert len(_candidates(params)) == 2


def test_power_of_d_slots_hold_d_distinct_candidates() -> None:
    for d in (2, 3):
        cfg, ids = _web("leastconn", (1, 2, 3))
        cfg = edits.set_algorithm(cfg, "web", "leastconn", choices=d)
        for _, params in wrr_slots(cfg.vip("web"), ids):
            filled = _candidates(params)
            assert len({b for b, _ in filled}) == len(filled) == d


def test_all_over_more_backends_than_places_takes_as_many_as_fit() -> None:
    weights = [1] * 20
    sets = candidate_sets(weights, 409, 16)
    assert all(len(set(s)) == 16 for s in sets)
    assert {b for s in sets for b in s} == set(range(20))


def test_only_leasttime_backends_time_their_answers() -> None:
    for algorithm in ("wrr", "leastconn", "leasttime"):
        cfg, ids = _web(algorithm, (1, 1, 1))
        nat = [e for e in static_entries(cfg, ids) if e.table == "reverse_nat_table"]
        assert len(nat) == 3
        assert {e.p("track_time") for e in nat} == {int(algorithm == "leasttime")}


def test_maglev_on_the_switch_changes_only_what_a_drain_or_removal_must() -> None:
    """desired_entries builds a Maglev VIP's next table from the one in use: draining or
    removing one of three backends rewrites exactly its entries, and the table keeps its
    size (a new size would re-map every flow)."""
    cfg, _ = _web("maglev", (1, 1, 1))
    codes = {"iphash": 0, "wrr": 1, "srchash": 2, "maglev": 3}
    _, first = desired_entries(cfg, [], codes)

    def table(entries: list[Entry]) -> dict[int, int]:
        version = next(e.p("version") for e in entries if e.table == "vip_table")
        return {
            e.exact("slot"): e.p("backend_id")
            for e in entries
            if e.table == "slot_table" and e.exact("version") == version
        }

    before = table(first)
    name = next(b.name for b in cfg.vip("web").backends if b.address == "10.0.0.3")
    for changed in (edits.drain(cfg, "web", name), edits.remove_backend(cfg, "web", name)):
        _, second = desired_entries(changed, first, codes)
        after = table(second)
        assert len(after) == len(before)
        gone = {bid for bid in before.values() if bid not in after.values()}
        assert len(gone) == 1
        moved = [s for s in before if before[s] != after[s]]
        assert moved and all(before[s] in gone for s in moved)
