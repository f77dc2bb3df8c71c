"""Shared connections of a tier: which conn_table copies each balancer should hold as
connections open, close, age out, and balancers leave and come back."""

from __future__ import annotations

from p4lb.pipeline.shared import CLOSE_GRACE_S, Shared

A = (("src_addr", 1), ("dst_addr", 2), ("protocol", 6), ("src_port", 1000), ("dst_port", 80))
B = (("src_addr", 1), ("dst_addr", 2), ("protocol", 6), ("src_port", 1001), ("dst_port", 80))


def test_a_connection_is_copied_to_every_other_balancer() -> None:
    s = Shared()
    s.opened("lb1", A, 7)
    assert s.writes("lb1") == []  # its own state holds it
    assert s.writes("lb2") == [(A, 7)]
    assert s.writes("lb3") == [(A, 7)]
    s.written("lb2", [A])
    assert s.writes("lb2") == []  # written once


def test_a_returning_balancer_gets_everything_its_own_included() -> None:
    s = Shared()
    s.opened("lb1", A, 7)
    s.opened("lb2", B, 9)
    s.written("lb1", [B])
    s.lost("lb1")  # its switch restarted: its buckets are empty
    assert s.writes("lb1", fresh=True) == [(A, 7), (B, 9)]


def test_a_close_removes_the_copies_after_the_grace() -> None:
    s = Shared()
    s.opened("lb1", A, 7)
    s.written("lb2", [A])
    s.closed(A, now=100.0)
    s.expire(100.0 + CLOSE_GRACE_S - 0.1)
    assert s.deletes("lb2") == []  # the last ACKs may still come
    s.expire(100.0 + CLOSE_GRACE_S)
    assert s.deletes("lb2") == [A]
    s.removed("lb2", [A])
    assert s.deletes("lb2") == [] and s.writes("lb2") == []


def test_a_new_connection_on_a_reused_tuple_cancels_the_close() -> None:
    s = Shared()
    s.opened("lb1", A, 7)
    s.closed(A, now=0.0)
    s.opened("lb2", A, 8)  # the client reused its port at once
    s.expire(CLOSE_GRACE_S + 1)
    assert s.writes("lb1") == [(A, 8)]


def test_aged_copies_are_not_rewritten_and_the_last_one_forgets() -> None:
    s = Shared()
    s.opened("lb1", A, 7)
    s.written("lb2", [A])
    s.written("lb3", [A])
    s.idle("lb2", A)
    assert s.writes("lb2") == []  # aged out there: not written back
    assert A in s.conns  # lb3 still holds it
    s.idle("lb3", A)
    assert A not in s.conns
