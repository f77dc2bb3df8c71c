"""Shared connections of a tier: which conn_table copies each balancer should hold as
connections open, close, age out, and balancers leave and come back."""

from __future__ import annotations

import pytest

from p4lb.pipeline.shared import CLOSE_GRACE_S, COPY_AFTER_S, EARLY_CLOSE_S, Shared

A = (("src_addr", 1), ("dst_addr", 2), ("protocol", 6), ("src_port", 1000), ("dst_port", 80))
B = (("src_addr", 1), ("dst_addr", 2), ("protocol", 6), ("src_port", 1001), ("dst_port", 80))


def tier(*names: str) -> Shared:
    s = Shared()
    for n in names:
        s.join(n)
    return s


def test_a_connection_is_copied_to_every_other_balancer_once() -> None:
    s = tier("lb1", "lb2", "lb3")
    s.opened("lb1", A, 7, now=1.0)
    s.expire(1.0 + COPY_AFTER_S - 0.01)
    assert s.writes("lb2") == []  # not yet: most connections end sooner
    s.expire(1.0 + COPY_AFTER_S)
    assert s.writes("lb1") == []  # its own state holds it
    assert s.writes("lb2") == [(A, 7)]
    assert s.writes("lb3") == [(A, 7)]
    s.written("lb2", [A], now=1.5)
    assert s.writes("lb2") == []  # handed out once
    assert s.delays == [0.5]  # event to copy: the window


def test_a_short_connection_is_never_copied() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7, now=0.0)
    s.closed(A, now=0.05)
    s.expire(COPY_AFTER_S)
    assert s.writes("lb2") == []
    s.expire(0.05 + CLOSE_GRACE_S)
    assert A not in s.conns and s.deletes("lb2") == []


def test_a_returning_balancer_gets_everything_its_own_included() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7)
    s.opened("lb2", B, 9)
    s.expire(COPY_AFTER_S)
    s.written("lb1", [f for f, _ in s.writes("lb1")])
    s.lost("lb1")  # its switch restarted: its buckets are empty
    s.opened("lb2", B, 9)  # events meanwhile do not pile up for it
    assert "lb1" not in s.pending
    s.join("lb1", fresh=True)
    assert s.writes("lb1") == [(A, 7), (B, 9)]


def test_a_close_removes_the_copies_after_the_grace() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7)
    s.expire(COPY_AFTER_S)
    s.written("lb2", [f for f, _ in s.writes("lb2")])
    s.closed(A, now=100.0)
    s.expire(100.0 + CLOSE_GRACE_S - 0.1)
    assert s.deletes("lb2") == []  # the last ACKs may still come
    s.expire(100.0 + CLOSE_GRACE_S)
    assert s.deletes("lb2") == [A]
    s.removed("lb2", [A])
    assert s.deletes("lb2") == [] and s.writes("lb2") == [] and A not in s.conns


def test_a_reused_tuple_replaces_the_copy_and_outlives_the_old_close() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7, now=0.0)
    s.expire(COPY_AFTER_S)
    s.written("lb2", [f for f, _ in s.writes("lb2")])
    s.closed(A, now=1.0)
    s.opened("lb1", A, 8, now=2.0)  # the client reused its port
    # The old copy is overwritten with the new backend at once (not left to a removal
    # that waits behind copies), and not removed after.
    assert s.writes("lb2") == [(A, 8)]
    assert s.deletes("lb2") == []
    s.written("lb2", [A])
    s.expire(2.0 + COPY_AFTER_S)
    assert s.writes("lb2") == []  # written once
    s.expire(1.0 + CLOSE_GRACE_S + 0.5)
    assert A in s.conns  # the old close does not end the new connection


def test_an_old_connection_s_close_reported_late_does_not_end_the_new_one() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7, now=0.0)
    s.opened("lb2", A, 8, now=1.0)  # the port reused, on lb2, before lb1 reported the close
    s.closed(A, now=1.1, backend_id=7)
    s.expire(1.0 + COPY_AFTER_S)
    assert s.writes("lb1") == [(A, 8)]  # still copied: it is open
    s.closed(A, now=2.0, backend_id=8)
    s.expire(2.0 + CLOSE_GRACE_S)
    assert A not in s.conns


def test_a_copy_written_after_its_close_is_removed_again() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7)
    s.expire(COPY_AFTER_S)
    todo = s.writes("lb2")
    s.closed(A, now=1.0)
    s.expire(1.0 + CLOSE_GRACE_S)
    s.written("lb2", [f for f, _ in todo])
    assert s.deletes("lb2") == [A]


def test_aged_copies_are_not_rewritten_and_the_last_one_forgets() -> None:
    s = tier("lb1", "lb2", "lb3")
    s.opened("lb1", A, 7)
    s.expire(COPY_AFTER_S)
    s.written("lb2", [f for f, _ in s.writes("lb2")])
    s.written("lb3", [f for f, _ in s.writes("lb3")])
    s.idle("lb2", A)
    assert s.writes("lb2") == []  # aged out there: not written back
    assert A in s.conns  # lb3 still holds it
    s.idle("lb3", A)
    assert A not in s.conns


def test_a_refused_copy_is_handed_out_again() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7)
    s.expire(COPY_AFTER_S)
    assert s.writes("lb2") == [(A, 7)]
    s.retry("lb2", [(A, 7)])
    assert s.writes("lb2") == [(A, 7)]
    s.closed(A, now=1.0)
    s.expire(1.0 + CLOSE_GRACE_S)
    s.retry("lb2", [(A, 7)])  # closed meanwhile: not again
    assert s.writes("lb2") == []


# The data plane's events arrive out of order (three BMv2 learn lists behind one P4Runtime
# digest): a short connection's close often comes before its open.
# Monotonic clocks as the controller sees them; with 0.01, (t + grace) - grace != t in
# floating point, which once kept such connections for ever.
@pytest.mark.parametrize("t", [1.0, 0.01, 25774.496078191])
def test_a_close_that_comes_before_its_open_ends_it(t: float) -> None:
    s = tier("lb1", "lb2")
    s.closed(A, now=t, backend_id=7)
    s.opened("lb1", A, 7, now=t)
    s.expire(t + COPY_AFTER_S)
    assert s.writes("lb2") == []  # never copied
    s.expire(t + CLOSE_GRACE_S)
    assert A not in s.conns  # not live for ever


def test_the_clock_values_above_include_one_that_rounds() -> None:
    assert (0.01 + CLOSE_GRACE_S) - CLOSE_GRACE_S != 0.01


def test_an_early_close_waits_only_so_long_and_only_for_its_backend() -> None:
    s = tier("lb1", "lb2")
    s.closed(A, now=0.0, backend_id=7)
    s.closed(B, now=0.0, backend_id=7)
    s.expire(EARLY_CLOSE_S)
    s.opened("lb1", A, 7, now=EARLY_CLOSE_S)  # a later connection of that 5-tuple
    s.opened("lb1", B, 9, now=EARLY_CLOSE_S)  # another backend: not the closed one
    s.expire(EARLY_CLOSE_S + COPY_AFTER_S)
    assert s.writes("lb2") == [(A, 7), (B, 9)]  # both live, both copied


def test_a_new_connections_close_before_its_open_while_the_old_one_lives() -> None:
    s = tier("lb1", "lb2")
    s.opened("lb1", A, 7, now=0.0)
    s.expire(COPY_AFTER_S)
    s.written("lb2", [f for f, _ in s.writes("lb2")])
    # The 5-tuple reused (to backend 9): the new connection's close, then its open.
    s.closed(A, now=10.0, backend_id=9)
    assert A not in s.ended  # the old connection's copies stay meanwhile
    s.opened("lb1", A, 9, now=10.0)
    assert s.writes("lb2") == [(A, 9)]  # overwritten at once: the old backend is wrong
    s.expire(10.0 + CLOSE_GRACE_S)
    assert A not in s.conns and s.deletes("lb2") == [A]
