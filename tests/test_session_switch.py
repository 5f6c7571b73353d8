"""SessionSwitch: the swap/drain primitive under hot migration, with real threads."""

from __future__ import annotations

import threading

from deadlines import DEADLINE, join_all, wait_until

from dashboard.timeline.switch import SessionSwitch


def waiting_on(switch: SessionSwitch, count: int) -> bool:
    """Whether ``count`` threads are blocked inside the switch (waiting on its condition), not
    merely started: what a test checks before it asserts that they are still waiting."""
    return len(switch._cond._waiters) == count


def test_each_call_runs_on_exactly_one_session_and_drain_waits_for_the_old_ones():
    switch: SessionSwitch[str] = SessionSwitch()
    switch.swap("fast")
    started, finish = threading.Event(), threading.Event()
    served = []

    def slow_call():
        session = switch.acquire()
        started.set()
        finish.wait(DEADLINE)
        served.append(session)
        switch.release(session)

    caller = threading.Thread(target=slow_call)
    caller.start()
    assert started.wait(DEADLINE), "the slow call never acquired its session"
    order = []
    assert switch.swap("target", lambda old: order.append(("swapped", old))) == "fast"
    assert switch.acquire() == "target"  # new calls go to the new session at once
    drained = []
    drainer = threading.Thread(target=lambda: drained.append(switch.drain("fast")))
    drainer.start()
    wait_until(lambda: waiting_on(switch, 1), "the drain waiting for the call on the old session")
    assert drainer.is_alive() and not drained  # the call on "fast" is still running
    finish.set()
    join_all([drainer, caller], "the drain and the call on the old session")
    assert drained == [1] and served == ["fast"] and order == [("swapped", "fast")]
    assert switch.drain("fast") == 0  # nothing left on it


def test_callers_wait_for_a_first_session_or_get_none_once_closed():
    switch: SessionSwitch[str] = SessionSwitch()
    assert switch.acquire() is None  # without waiting: no session yet
    got = []
    waiters = [threading.Thread(target=lambda: got.append(switch.acquire(wait=True))) for _ in range(3)]
    for w in waiters:
        w.start()
    wait_until(lambda: waiting_on(switch, 3), "three callers waiting for a first session")
    assert not got
    switch.swap("first")
    join_all(waiters, "callers waiting for a first session")
    assert got == ["first"] * 3

    closed: SessionSwitch[str] = SessionSwitch()
    late = []
    waiter = threading.Thread(target=lambda: late.append(closed.acquire(wait=True)))
    waiter.start()
    wait_until(lambda: waiting_on(closed, 1), "a caller waiting for a first session")
    closed.close("fast failed and the target failed")
    join_all([waiter], "a caller waiting on a closed switch")
    assert late == [None] and closed.closed == "fast failed and the target failed"
