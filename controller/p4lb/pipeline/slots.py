"""What fills a VIP's pool and slot table for its algorithm: the pool members IP hash picks
from, and the slots (a WRR cycle, a Maglev table, weighted buckets or least-* candidates).
Pure."""

from __future__ import annotations

from collections.abc import Sequence

from p4lb.intent.model import CHOICES_ALL, Vip
from p4lb.pipeline.entries import Slot
from p4lb.pipeline.ids import Ids, backend_key
from p4lb.pipeline.maglev import (
    MAGLEV_TABLE_SIZES,
    candidate_sets,
    maglev_table_size,
    maglev_update,
    weighted_buckets,
)
from p4lb.pipeline.p4info import schema
from p4lb.pipeline.schedules import smooth_wrr

# Least-* over per-backend load the data plane keeps: each slot of the VIP's slot table
# holds candidates (set_candidates: every active backend, or d of them), the least loaded
# over its weight wins.
LEAST_ALGORITHMS = ("leastconn", "leasttime", "leastpkt")
# Algorithms whose slot table is sized by the backends configured (not by the weights).
SIZED_BY_BACKENDS = ("maglev", "srchash", *LEAST_ALGORITHMS)


def pool_members(v: Vip, ids: Ids) -> list[int]:
    """Backend ids IP hash chooses among: the active (weight > 0) backends, config order."""
    return [ids.backends[backend_key(v, b.address, b.port)] for b in v.backends if b.active]


def slot_count(v: Vip) -> int:
    """Slots the VIP's slot table needs for its algorithm."""
    if v.algorithm in SIZED_BY_BACKENDS:
        return maglev_table_size(len(v.backends))
    return len(smooth_wrr([b.weight for b in v.backends]))


def choices(v: Vip, max_candidates: int) -> int:
    """How many candidates each of the VIP's least-* slots holds: its `choices` (all active
    backends when "all"), at most the `max_candidates` a slot has room for."""
    active = sum(1 for b in v.backends if b.active)
    wanted = active if v.choices == CHOICES_ALL else v.choices
    return max(1, min(wanted, max_candidates))


def wrr_slots(
    v: Vip, ids: Ids, previous: Sequence[Slot] = (), max_candidates: int | None = None
) -> list[Slot]:
    """The action of each slot of the VIP's slot table, filled for its algorithm: one
    smooth-WRR cycle of the weights (wrr, and iphash, which does not read it), a weighted
    Maglev lookup table (maglev), weighted source buckets (srchash), or least-* candidates
    (leastconn, leasttime, leastpkt: `choices` of them, in the set_candidates action's
    places, `max_candidates` by default as many as the committed P4Info gives it). All but
    wrr size their table by the configured backends, drained ones included, so a weight
    change never changes the size (which would re-map every flow). `previous`: the Maglev
    table in use, which a change of backends or weights alters in as few entries as it
    can (`maglev_update`)."""
    weights = [b.weight for b in v.backends]
    bids = [ids.backends[backend_key(v, b.address, b.port)] for b in v.backends]
    if v.algorithm in LEAST_ALGORITHMS:
        places = schema().limits().max_candidates if max_candidates is None else max_candidates
        return [
            candidates_slot([(bids[i], weights[i]) for i in drawn], places)
            for drawn in candidate_sets(weights, slot_count(v), choices(v, places))
        ]
    if v.algorithm == "maglev":
        name_of = {bid: b.name for bid, b in zip(bids, v.backends, strict=True)}
        owners = [name_of.get(dict(params).get("backend_id", 0)) for _, params in previous]
        # A table still big enough keeps its size when backends leave: a new size re-maps
        # every flow. Growing past a rung does re-map (the next prime up the ladder).
        size = slot_count(v)
        if len(previous) in MAGLEV_TABLE_SIZES and len(previous) > size:
            size = len(previous)
        order: Sequence[int] = maglev_update(owners, [b.name for b in v.backends], weights, size)
    elif v.algorithm == "srchash":
        order = weighted_buckets(weights, slot_count(v))
    else:
        order = smooth_wrr(weights)
    return [member_slot(bids[i]) for i in order]


def member_slot(bid: int) -> Slot:
    return ("set_member", (("backend_id", bid),))


def candidates_slot(candidates: Sequence[tuple[int, int]], places: int) -> Slot:
    """set_candidates with these (backend id, weight) pairs first, the other places empty
    (weight 0: the data plane skips them)."""
    padded = list(candidates) + [(0, 0)] * (places - len(candidates))
    params: list[tuple[str, int]] = []
    for k, (bid, weight) in enumerate(padded):
        params += [(f"candidate_{k}", bid), (f"weight_{k}", weight)]
    return ("set_candidates", tuple(params))
