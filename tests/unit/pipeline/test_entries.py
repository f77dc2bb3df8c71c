"""Config -> entries -> ordered plan, checked by replaying the plan on a fake switch and
checking after every batch that no VIP can see a half-applied change."""

from __future__ import annotations

from dataclasses import replace

import pytest

from p4lb.intent import edits
from p4lb.intent.model import Backend, Config
from p4lb.pipeline.desired import desired_entries
from p4lb.pipeline.entries import COOKIE_TABLE, MULTICAST, OWNED_TABLES, Entry, Update
from p4lb.pipeline.ids import assign_ids, ids_on_switch
from p4lb.pipeline.plan import plan
from tests.unit.support import default_config


def default() -> Config:
    return default_config()


class FakeSwitch:
    """Holds entries by key; refuses what a real switch refuses (insert of an existing key,
    modify/delete of a missing one)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[object, ...], Entry] = {}

    def write(self, batch: list[Update]) -> None:
        for u in batch:
            k = u.entry.key
            if u.op == "INSERT":
                assert k not in self.entries, f"insert of existing {k}"
                self.entries[k] = u.entry
            elif u.op == "MODIFY":
                assert k in self.entries, f"modify of missing {k}"
                self.entries[k] = u.entry
            else:
                assert k in self.entries, f"delete of missing {k}"
                del self.entries[k]

    def held(self) -> list[Entry]:
        return list(self.entries.values())


def consistent(entries: list[Entry]) -> None:
    """Every live VIP resolves completely: pool and slot tables full for its version, every
    member a known backend with a route."""
    by_table: dict[str, list[Entry]] = {}
    for e in entries:
        by_table.setdefault(e.table, []).append(e)
    backends = {e.exact("backend_id"): e for e in by_table.get("backend_table", [])}
    ports = {e.exact("backend_id") for e in by_table.get("backend_port_table", [])}
    assert set(backends) == ports, "a backend without its port entry, or the reverse"
    routes = {e.m("dst_addr") for e in by_table.get("ipv4_route_table", [])}
    for v in by_table.get("vip_table", []):
        sid, ver = v.p("service_id"), v.p("version")
        for table, size, idx in (
            ("pool_table", v.p("pool_size"), "index"),
            ("slot_table", v.p("slot_count"), "slot"),
        ):
            members = {
                e.exact(idx): e.p("backend_id")
                for e in by_table.get(table, [])
                if e.exact("service_id") == sid and e.exact("version") == ver
            }
            assert set(members) == set(range(size)), f"{table} of service {sid} incomplete"
            for bid in members.values():
                assert bid in backends, f"member {bid} has no backend entry"
                assert (backends[bid].p("addr"), 32) in routes


def run(sw: FakeSwitch, cfg: Config) -> list[list[Update]]:
    _, desired = desired_entries(cfg, sw.held())
    batches = plan(desired, sw.held())
    for b in batches:
        sw.write(b)
        consistent(sw.held())
    return batches


def test_first_apply_creates_bottom_up_and_second_apply_writes_nothing() -> None:
    sw = FakeSwitch()
    batches = run(sw, default())
    order = [{u.entry.table for u in b} for b in batches]
    assert order[0] >= {
        "ipv4_route_table",
        "backend_table",
        "backend_port_table",
        "reverse_nat_table",
    }
    assert order[1] == {"pool_table", "slot_table"}
    assert order[2] == {"vip_table", "vip_address_table", "vip_source_table"}
    assert all(u.op == "INSERT" for b in batches for u in b)
    assert run(sw, default()) == []


def test_weight_change_writes_the_other_version_then_flips_then_cleans_up() -> None:
    sw = FakeSwitch()
    run(sw, default())
    before = next(e for e in sw.held() if e.table == "vip_table")
    cfg = edits.set_weight(default(), "web", "h2", 3)
    batches = run(sw, cfg)
    ops = [(u.op, u.entry.table) for b in batches for u in b]
    assert ("MODIFY", "vip_table") in ops
    flip = next(i for i, b in enumerate(batches) if any(u.entry.table == "vip_table" for u in b))
    assert all(u.op == "INSERT" for b in batches[:flip] for u in b)
    assert all(u.op == "DELETE" for b in batches[flip + 1 :] for u in b)
    after = next(e for e in sw.held() if e.table == "vip_table")
    assert after.p("version") == 1 - before.p("version")
    assert after.p("slot_count") == 5
    slots = sorted(e.p("backend_id") for e in sw.held() if e.table == "slot_table")
    assert slots.count(1) == 3 and len(slots) == 5
    assert run(sw, cfg) == []


def test_algorithm_change_only_modifies_the_vip_entry() -> None:
    sw = FakeSwitch()
    run(sw, default())
    batches = run(sw, edits.set_algorithm(default(), "web", "iphash"))
    assert [(u.op, u.entry.table) for b in batches for u in b] == [("MODIFY", "vip_table")]


def test_drain_keeps_backend_entries_but_leaves_the_pools() -> None:
    sw = FakeSwitch()
    run(sw, default())
    run(sw, edits.drain(default(), "web", "h3"))
    held = sw.held()
    ids = ids_on_switch(held)
    h3 = next(b for (vk, addr, port), b in ids.backends.items() if addr == 0x0A000003)
    assert any(e.table == "backend_table" and e.exact("backend_id") == h3 for e in held)
    in_pools = (e for e in held if e.table in ("pool_table", "slot_table"))
    assert not any(e.p("backend_id") == h3 for e in in_pools)


def test_ids_are_stable_when_other_backends_and_vips_go_and_come() -> None:
    sw = FakeSwitch()
    run(sw, default())
    first = ids_on_switch(sw.held())
    cfg = edits.remove_backend(default(), "web", "h2")
    cfg = edits.add_backend(cfg, "web", Backend("h5", "10.0.0.5", 8000, 2, "00:00:00:00:00:05", 5))
    run(sw, cfg)
    second = ids_on_switch(sw.held())
    for k, bid in second.backends.items():
        if k in first.backends:
            assert first.backends[k] == bid
    new = [bid for k, bid in second.backends.items() if k not in first.backends]
    assert new == [1]  # the freed id is reused only by a new backend
    assert second.services == first.services


def test_vip_add_and_remove_round_trip_to_an_empty_switch() -> None:
    sw = FakeSwitch()
    cfg = default()
    run(sw, cfg)
    web = cfg.vip("web")
    other = type(web)(
        name="dns",
        address="10.0.0.53",
        protocol="udp",
        port=53,
        algorithm="iphash",
        mac=web.mac,
        backends=(Backend("h2", "10.0.0.2", 5353, 1, "00:00:00:00:00:02", 2),),
    )
    run(sw, edits.add_vip(cfg, other))
    assert len([e for e in sw.held() if e.table == "vip_table"]) == 2
    empty = Config(switch=cfg.switch, source=cfg.source)
    run(sw, empty)
    assert {e.table for e in sw.held()} == {MULTICAST}


def test_assign_ids_fills_lowest_free() -> None:
    cfg = default()
    ids = assign_ids(cfg, ids_on_switch([]))
    assert sorted(ids.services.values()) == [1]
    assert sorted(ids.backends.values()) == [1, 2, 3]


@pytest.mark.parametrize("weights", [(1, 1, 1), (1, 2, 2), (0, 1, 4)])
def test_wrr_slot_table_holds_exact_weights(weights: tuple[int, int, int]) -> None:
    cfg = default()
    for name, w in zip(("h2", "h3", "h4"), weights, strict=True):
        cfg = edits.set_weight(cfg, "web", name, w)
    ids, desired = desired_entries(cfg, [])
    slots = [e.p("backend_id") for e in desired if e.table == "slot_table"]
    per = [slots.count(b) for b in (1, 2, 3)]
    assert [p * sum(weights) for p in per] == [w * len(slots) for w in weights]
    pool = [e.p("backend_id") for e in desired if e.table == "pool_table"]
    assert pool == [b for b, w in zip((1, 2, 3), weights, strict=True) if w > 0]


def test_dsr_vip_rewrites_only_the_frame_and_keeps_the_ids_record() -> None:
    """A dsr VIP's backend entries set only the MACs (the destination stays the VIP); its
    reverse entries stay (the record a restarted controller recovers backend ids from), with
    no cookie even in a tier: its replies never cross the switch."""
    nat = default()
    web = nat.vip("web")
    dsr_web = replace(
        web, mode="dsr", backends=tuple(replace(b, port=web.port) for b in web.backends)
    )
    for cfg in (nat.with_vip(dsr_web), replace(nat.with_vip(dsr_web), shared=True)):
        _, desired = desired_entries(cfg, [])
        backends = [e for e in desired if e.table == "backend_table"]
        assert {e.action for e in backends} == {"set_backend_dsr"}
        assert {tuple(name for name, _ in e.params) for e in backends} == {("src_mac", "dst_mac")}
        by_mac = {dict(e.params)["dst_mac"] for e in backends}
        assert by_mac == {int(b.mac.replace(":", ""), 16) for b in dsr_web.backends}
        reverse = [e for e in desired if e.table == "reverse_nat_table"]
        assert len(reverse) == len(dsr_web.backends)
        assert {e.p("cookie") for e in reverse} == {0}
        assert not [e for e in desired if e.table == COOKIE_TABLE]
        assert ids_on_switch(desired).backends == assign_ids(cfg, ids_on_switch(desired)).backends
    # The same VIP in NAT mode on a tier's balancer does stamp cookies.
    _, desired = desired_entries(replace(nat, shared=True), [])
    assert [e for e in desired if e.table == COOKIE_TABLE]


def test_every_owned_table_has_a_place_in_the_write_order() -> None:
    """A table the controller owns but the plan does not order would never be written."""
    from p4lb.pipeline import plan

    for stages in (plan._CREATE_STAGES, plan._DELETE_STAGES):
        ordered = [t for stage in stages for t in stage if t != MULTICAST]
        assert sorted(ordered) == sorted(OWNED_TABLES)
