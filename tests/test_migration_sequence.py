"""``Migration``: the one open → warm → policy → swap → drain → release sequence that both
``HotMigrationSession`` and the timeline runner use, on real CPU EP sessions (no QNN needed to
decide a policy): a light model (one MatMul) and a heavy one (eight) with the same input."""

from __future__ import annotations

import numpy as np
import pytest
from deadlines import within
from onnx import TensorProto, helper, numpy_helper

from dashboard.errors import UserError
from dashboard.runtime.config import SessionConfig
from dashboard.timeline.migration import EventLog, Migration, SessionFailed, open_slot
from dashboard.timeline.model import EVENT_KINDS, Event

N = 256
CPU = SessionConfig(backend="cpu", intra_op_threads=1)


def matmuls(count: int) -> bytes:
    """``count`` chained N x N MatMuls on input ``x``: the work per call scales with ``count``."""
    weight = numpy_helper.from_array(np.eye(N, dtype=np.float32), "w")
    nodes, prev = [], "x"
    for i in range(count):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"h{i}"]))
        prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    graph = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()


LIGHT, HEAVY = matmuls(1), matmuls(8)
FEEDS = [{"x": np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)}]


def migrate(fast_model: bytes | None, target_model: bytes, policy: str = "always") -> tuple[Migration, list[Event]]:
    seen: list[Event] = []
    log = EventLog(seen.append)
    migration = Migration(log, policy=policy, feeds=FEEDS, warmup_runs=5)
    if fast_model is not None:
        migration.serve(open_slot(log, fast_model, CPU, "fast session"))
    migration.run("cpu", lambda: open_slot(log, target_model, CPU, "target session"))
    return migration, seen


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def test_always_opens_warms_swaps_drains_and_releases_in_that_order():
    migration, seen = migrate(HEAVY, LIGHT)
    assert kinds(seen) == ["session_create_start", "session_create_end", "serve_start",
                           "session_create_start", "session_create_end", "warmup_start", "warmup_end",
                           "swap", "drain_end", "session_released"]
    assert set(kinds(seen)) <= set(EVENT_KINDS)
    assert migration.migrated.is_set() and migration.done.is_set() and migration.failure is None
    assert seen == migration.log.events  # one record, streamed as it happened
    assert "0 request(s) in flight" in seen[-2].detail


@pytest.mark.parametrize("fast_model, target_model, swapped", [(HEAVY, LIGHT, True), (LIGHT, HEAVY, False)])
def test_if_faster_compares_both_sessions_on_the_same_warm_up_inputs(fast_model, target_model, swapped):
    migration, seen = migrate(fast_model, target_model, policy="if_faster")
    decision = next(e for e in seen if e.kind in ("swap", "migration_skipped"))
    assert decision.kind == ("swap" if swapped else "migration_skipped")
    assert "policy if_faster" in decision.detail and "on the same 5 warm-up run(s)" in decision.detail
    assert migration.migrated.is_set() is swapped
    # The session that lost is released either way: the old one after the drain, or the target.
    assert kinds(seen)[-1] == "session_released"
    assert migration.switch.current.handle is not None
    served = migration.switch.current.run(FEEDS[0])[0]
    np.testing.assert_allclose(served, FEEDS[0]["x"], rtol=1e-5, atol=1e-5)  # identity weights


def test_a_target_that_fails_leaves_the_fast_session_serving_with_the_runtime_reason():
    migration, seen = migrate(LIGHT, b"not a model")
    assert kinds(seen)[-2:] == ["session_failed", "migration_failed"]
    assert "still serving on cpu" in seen[-1].detail
    assert migration.failure and "session creation failed on cpu" in migration.failure
    assert not migration.migrated.is_set() and migration.switch.closed is None
    assert migration.switch.current.backend == "cpu"


def test_without_a_fast_session_the_target_simply_serves_or_callers_learn_why_not():
    served, seen = migrate(None, LIGHT)
    assert "serve_start" in kinds(seen) and "swap" not in kinds(seen)
    assert served.switch.current is not None

    failed, _ = migrate(None, b"not a model")
    # A waiting caller is not left hanging.
    assert within(lambda: failed.switch.acquire(wait=True), "a caller waiting on a failed migration") is None
    assert failed.switch.closed.startswith("no session: the fast session failed and")


def test_a_target_ready_after_serving_stopped_is_released_not_swapped_in():
    log = EventLog()
    migration = Migration(log, feeds=FEEDS)
    migration.serve(open_slot(log, LIGHT, CPU, "fast"))
    migration.switch.close("closed")
    assert migration.run("cpu", lambda: open_slot(log, LIGHT, CPU, "target")) is False
    assert kinds(log.events)[-1] == "session_released" and "swap" not in kinds(log.events)


def test_unknown_policy_and_failed_sessions_are_one_line_user_errors():
    with pytest.raises(UserError, match="unknown migration policy 'sometimes'"):
        Migration(EventLog(), policy="sometimes")
    with pytest.raises(SessionFailed) as info:
        open_slot(EventLog(), b"garbage", CPU, "fast")
    assert isinstance(info.value, UserError) and "\n" not in str(info.value)
