"""A connection event digest as the data plane packs it (metadata.p4: the event, then the client's
5-tuple to the VIP and the backend id, 8+32+32+8+16+16+32 bits) -> the controller's view, and
the copy it writes on the other balancers."""

from __future__ import annotations

import ipaddress

import pytest

from p4lb.pipeline.entries import ip
from p4lb.pipeline.p4info import P4InfoError, Schema, schema
from p4lb.pipeline.shared import CLOSED, CONN_EVENT_DIGESTS, OPENED, ConnEvents


def pack(event: int, src: str, dst: str, proto: int, sport: int, dport: int, bid: int) -> int:
    out = event
    for value, width in (
        (ip(src), 32),
        (ip(dst), 32),
        (proto, 8),
        (sport, 16),
        (dport, 16),
        (bid, 32),
    ):
        out = (out << width) | value
    return out


@pytest.mark.parametrize("event", [OPENED, CLOSED])
def test_an_event_decodes(event: int) -> None:
    events = ConnEvents.of(schema())
    e = events.decode(pack(event, "10.1.0.2", "10.0.0.100", 6, 40001, 80, 7))
    assert e.event == event and e.backend_id == 7
    table, match = e.flow
    assert table == "conn_table"
    assert dict(match) == {
        "src_addr": ip("10.1.0.2"),
        "dst_addr": ip("10.0.0.100"),
        "protocol": 6,
        "src_port": 40001,
        "dst_port": 80,
    }
    copy = events.copy(e.flow, e.backend)
    assert (copy.table, copy.match, copy.action, copy.params) == (
        "conn_table",
        match,
        "use_shared_backend",
        (("backend_id", 7),),
    )


@pytest.mark.parametrize("digest", ["conn6_opened_t", "conn6_closed_t", "copy6_closed_t"])
def test_an_ipv6_event_decodes_into_its_conn6_copy(digest: str) -> None:
    """IPv6's events: the event, the 5-tuple with 128-bit addresses, the backend id and
    the port it leaves by (8+128+128+8+16+16+32+9 bits); the copy goes to conn6_table."""
    src, vip = ipaddress.ip_address("fd00:1::2"), ipaddress.ip_address("fd00::100")
    value = CLOSED
    for v, width in (
        (int(src), 128),
        (int(vip), 128),
        (6, 8),
        (40001, 16),
        (80, 16),
        (7, 32),
        (3, 9),
    ):
        value = (value << width) | v
    events = ConnEvents.of(schema())
    e = events.decode(value, digest)
    assert (e.event, e.backend_id, e.backend) == (CLOSED, 7, (7, 3))
    table, match = e.flow
    assert table == "conn6_table"
    assert dict(match) == {
        "src_addr": int(src),
        "dst_addr": int(vip),
        "protocol": 6,
        "src_port": 40001,
        "dst_port": 80,
    }
    copy = events.copy(e.flow, e.backend)
    assert (copy.table, copy.action, copy.params) == (
        "conn6_table",
        "use_shared_backend6",
        (("backend_id", 7), ("switch_port", 3)),
    )
    # A copy to remove names its key alone.
    assert events.copy(e.flow, None).match == match


@pytest.mark.parametrize("missing", CONN_EVENT_DIGESTS)
def test_a_program_without_one_of_the_digests_is_refused(missing: str) -> None:
    info = type(schema().info)()
    info.CopyFrom(schema().info)
    keep = [d for d in info.digests if d.preamble.name.split(".")[-1] != missing]
    assert len(keep) == len(info.digests) - 1
    del info.digests[:]
    info.digests.extend(keep)
    with pytest.raises(P4InfoError):
        ConnEvents.of(Schema(info))


class _OneSwitch:
    """What Sharing reads of a switch: its schema."""

    schema = schema()


def test_the_tier_skips_a_malformed_event_and_ipv6_pins_without_failing() -> None:
    """An event wider than its layout is ignored (the good one beside it still counts); an
    IPv6 collision pin reported idle is no shared copy, and leaves the shared state as it
    was."""
    from finsy.proto import p4d

    from p4lb.pipeline.entries import Entry
    from p4lb.service.metrics.exposition import ControllerMetrics
    from p4lb.service.tier_sharing import Sharing

    def member(value: int, size: int) -> p4d.P4Data:
        m = p4d.P4Data()
        m.struct.members.add().bitstring = value.to_bytes(size, "big")
        return m

    good = pack(OPENED, "10.1.0.2", "10.0.0.100", 6, 40001, 80, 7)
    sharing = Sharing(ControllerMetrics(), lambda: 0)
    sharing.events("lb1", _OneSwitch(), "conn_opened_t", [member(1 << 200, 26), member(good, 18)])  # type: ignore[arg-type]
    assert list(sharing.shared.conns.values()) == [("lb1", (7,))]
    pin6 = Entry(
        "conn6_table",
        (("src_addr", 1), ("dst_addr", 2), ("protocol", 6), ("src_port", 3), ("dst_port", 80)),
        "use_backend6",
        (("backend_id", 7), ("switch_port", 2)),
    )
    sharing.idle("lb1", [pin6])
    assert list(sharing.shared.conns.values()) == [("lb1", (7,))]
