from __future__ import annotations

import random

from p4lb.models.hashing import (
    QOS_BUCKETS,
    Flow,
    bucket_index,
    crc16,
    crc32,
    flow_hash,
    full_bucket_rate,
    iphash_member,
    qos_flow_bucket,
    qos_host_bucket,
    signature,
)


def _random_flows(n: int, seed: int) -> list[Flow]:
    rng = random.Random(seed)
    return [
        Flow(
            f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            "10.0.0.100",
            6,
            rng.randrange(1024, 65536),
            80,
            1,
        )
        for _ in range(n)
    ]


def test_crc_check_values() -> None:
    # The standard check input "123456789" (CRC catalogue check values).
    assert crc32(b"123456789") == 0xCBF43926
    assert crc16(b"123456789") == 0xBB3D  # CRC-16/ARC


def test_a_qos_bucket_hashes_addresses_protocol_and_ports_in_that_order() -> None:
    # qos.p4: {src_addr ++ dst_addr ++ protocol ++ src_port ++ dst_port}, modulo 64.
    key = bytes([10, 0, 0, 1, 10, 0, 0, 4, 17, 0x9C, 0x40, 0x13, 0x8A])
    assert qos_flow_bucket("10.0.0.1", "10.0.0.4", 17, 40000, 5002) == crc16(key) % 64
    assert qos_host_bucket("10.0.1.1") == crc16(bytes([10, 0, 1, 1])) % QOS_BUCKETS


def test_a_qos_bucket_folds_an_ipv6_address_to_its_four_words_xored() -> None:
    # 2001:db8::1 is the words 0x20010db8, 0, 0, 1: folded, 0x20010db9.
    folded = bytes([0x20, 0x01, 0x0D, 0xB9])
    assert qos_host_bucket("2001:db8::1") == crc16(folded) % QOS_BUCKETS
    key = folded + bytes([0x20, 0x01, 0x0D, 0xBA]) + bytes([6, 0x9C, 0x40, 0x00, 0x50])
    assert qos_flow_bucket("2001:db8::1", "2001:db8::2", 6, 40000, 80) == crc16(key) % 64


def test_the_hash_input_is_the_client_address_then_port_and_the_service_id_is_added() -> None:
    f = Flow("10.0.0.1", "10.0.0.100", 6, 0x1234, 80, 1)
    assert f.client_key() == bytes([10, 0, 0, 1, 0x12, 0x34])
    assert flow_hash(f) == (crc32(bytes([10, 0, 0, 1, 0x12, 0x34])) + 1) & 0xFFFFFFFF
    # The VIP's address, protocol and port do not enter the hash; its service id does.
    assert flow_hash(Flow("10.0.0.1", "10.0.0.200", 17, 0x1234, 53, 1)) == flow_hash(f)
    assert flow_hash(Flow("10.0.0.1", "10.0.0.100", 6, 0x1234, 80, 2)) != flow_hash(f)


def test_one_client_port_to_two_vips_takes_two_buckets() -> None:
    for sport in range(1024, 2048):
        a = Flow("10.0.0.1", "10.0.0.100", 6, sport, 80, 1)
        b = Flow("10.0.0.1", "10.0.0.100", 6, sport, 443, 2)
        assert bucket_index(a) != bucket_index(b)


def test_index_and_signature_are_independent_enough_to_tell_colliders_apart() -> None:
    """Among many flows sharing a state bucket, no two share a signature."""
    by_index: dict[int, set[int]] = {}
    clashes = 0
    for f in _random_flows(200_000, seed=3):
        sigs = by_index.setdefault(bucket_index(f), set())
        sig = signature(f)
        assert 0 <= sig < 1 << 32
        clashes += sig in sigs
        sigs.add(sig)
    assert sum(len(s) > 1 for s in by_index.values()) > 10_000  # buckets are shared
    assert clashes == 0


def test_iphash_member_is_in_range_and_spreads() -> None:
    picks = [iphash_member(Flow("10.0.0.1", "10.0.0.100", 6, p, 80, 1), 3) for p in range(3000)]
    assert set(picks) == {0, 1, 2}
    # Within 5 % of an even split (the paper's CRC16 gave 879/1051/1070 here).
    assert min(picks.count(i) for i in range(3)) > 950


def test_four_way_buckets_hold_60k_live_flows_with_almost_no_collision() -> None:
    """At 60k live connections the single-slot table of 65,536 entries turns most new
    flows away; 131,072 buckets of 4 ways turn away fewer than 0.5 %."""
    flows = _random_flows(60_000, seed=1)
    single = full_bucket_rate(flows, buckets=65536, ways=1)
    four_way = full_bucket_rate(flows)
    assert single > 0.3
    assert four_way < 0.005
    assert four_way < single / 100


def test_full_bucket_rate_counts_the_fifth_flow_of_a_bucket() -> None:
    by_bucket: dict[int, list[Flow]] = {}
    for f in _random_flows(200_000, seed=2):
        by_bucket.setdefault(bucket_index(f), []).append(f)
    five = next(fs for fs in by_bucket.values() if len(fs) >= 5)[:5]
    assert full_bucket_rate(five) == 1 / 5
    assert full_bucket_rate(five[:4]) == 0.0
