"""The timeline data model on hand-made runs (metrics checked against values worked out by hand),
and the IOBinding runner that the shared-memory mode uses, on the CPU EP."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from dashboard.errors import UserError
from dashboard.runtime.protocol import event_from_json
from dashboard.timeline.model import (Event, Phase, Request, StrategyRun, TimelineOptions, TimelineRun, cached_vs_cold,
                                      compute_metrics, percentile, phases, requests_csv, strategy_table)
from dashboard.timeline.remote import LiveRun

# A migration as the runner records it: CPU serves from 10 ms, the HTP session is created
# (finalize measured by QNN in its last 50 ms), warmed, swapped in at 350 ms; one CPU request is
# in flight at the swap and drains by 360 ms; one request arrives after every session is gone.
EVENTS = [
    Event(0.0, "session_create_start", "cpu"), Event(0.01, "session_create_end", "cpu"),
    Event(0.01, "serve_start", "cpu"), Event(0.02, "session_create_start", "htp"),
    Event(0.15, "finalize_start", "htp"), Event(0.2, "session_create_end", "htp"),
    Event(0.2, "warmup_start", "htp"), Event(0.3, "warmup_end", "htp"), Event(0.35, "swap", "htp"),
    Event(0.36, "drain_end", "cpu"), Event(0.37, "session_released", "cpu"),
    Event(0.6, "workload_end", "htp"), Event(0.61, "session_released", "htp"),
]
REQUESTS = [
    Request(0, 0.0, 0.01, 0.02, "cpu", True), Request(1, 0.1, 0.1, 0.102, "cpu", True),
    Request(2, 0.2, 0.2, 0.203, "cpu", True), Request(3, 0.34, 0.345, 0.36, "cpu", True),
    Request(4, 0.4, 0.4, 0.405, "htp", True), Request(5, 0.5, 0.5, 0.504, "htp", True),
    Request(6, 0.55, None, None, None, False, "no session"),
]


def test_metrics_of_a_migration():
    m = compute_metrics(EVENTS, REQUESTS, expected=7)
    assert m["first_response_s"] == 0.02
    assert m["swap_at_s"] == 0.35
    # before: 10, 2, 3, 15 ms -> nearest-rank p50 is the 2nd smallest; after: 5, 4 ms -> 4 ms
    assert m["p50_before_s"] == 0.003
    assert m["p50_after_s"] == 0.004
    assert m["p95_s"] == m["p99_s"] == 0.015
    assert m["p99_before_s"] == 0.01  # requests that finished before the swap only
    assert m["response_p50_s"] == 0.004
    assert m["throughput_rps"] == round(6 / 0.504, 3)
    assert m["failed"] == 1 and m["lost"] == 0 and m["duplicated"] == 0
    assert m["served"] == {"cpu": 4, "htp": 2}
    assert m["session_create_s"] == {"cpu": 0.01, "htp": 0.18}
    assert m["finalize_s"] == {"htp": 0.05}
    assert m["warmup_s"] == {"htp": 0.1}
    assert m["swap_drain_s"] == 0.01
    assert m["swap_in_flight"] == 1 and m["swap_in_flight_max_s"] == 0.015
    assert m["post_swap_first_max_s"] == 0.005


def test_lost_and_duplicated_requests_are_counted():
    requests = [Request(0, 0, 0, 0.1, "cpu", True), Request(1, 0.1, 0.1, 0.2, "cpu", True),
                Request(1, 0.1, 0.1, 0.2, "cpu", True)]
    m = compute_metrics([], requests, expected=4)
    assert m["duplicated"] == 1 and m["lost"] == 2 and m["swap_at_s"] is None and m["p50_after_s"] is None


def test_percentile_is_an_observed_value():
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([4, 1, 3, 2], 50) == 2
    assert percentile(range(1, 101), 99) == 99


def test_gantt_phases_follow_the_sessions():
    got = {(p.backend, p.phase): (p.start, p.end) for p in phases(EVENTS)}
    assert got == {
        ("cpu", "create"): (0.0, 0.01), ("cpu", "serve"): (0.01, 0.35), ("cpu", "drain"): (0.35, 0.36),
        ("htp", "create"): (0.02, 0.15), ("htp", "finalize"): (0.15, 0.2), ("htp", "warm-up"): (0.2, 0.3),
        ("htp", "serve"): (0.35, 0.61),
    }


def test_open_phases_of_a_live_run_end_at_now():
    live = [Event(0.0, "session_create_start", "htp"), Event(0.1, "session_create_end", "htp"),
            Event(0.1, "warmup_start", "htp")]
    assert phases(live, end_of_run=0.4)[-1] == Phase("htp", "warm-up", 0.1, 0.4)


def test_json_round_trip_and_csv():
    strategy = StrategyRun("migrate", {"fast": "cpu", "target": "htp"}, EVENTS, REQUESTS, 7)
    run = TimelineRun({"label": "local"}, "m.onnx", {}, {"requests": 7}, {"migrate": strategy})
    data = run.to_json()
    assert set(data["strategies"]["migrate"]) >= {"events", "requests", "metrics"}
    assert TimelineRun.from_json(data).to_json() == data
    rows = list(csv.DictReader(io.StringIO(requests_csv(run))))
    assert len(rows) == 7 and rows[3]["backend"] == "cpu" and float(rows[3]["latency_s"]) == pytest.approx(0.015)
    table = strategy_table(run)
    assert table[0]["backends"] == "cpu → htp" and table[0]["failed"] == 1


def test_live_run_grows_with_the_stream():
    live = LiveRun(TimelineOptions(strategies=["fast", "migrate"], requests=2))
    stream = [{"type": "strategy_start", "strategy": "fast", "backends": {"fast": "cpu"}},
              {"type": "event", "strategy": "fast", "event": {"t": 0.0, "kind": "serve_start", "backend": "cpu"}},
              {"type": "request", "strategy": "fast", "request": {"id": 0, "arrival": 0.0, "start": 0.0, "end": 0.001,
                                                                  "backend": "cpu", "ok": True}}]
    for message in stream:  # as the worker's progress lines arrive
        live.feed(event_from_json(message))
    assert live.fraction == 0.25 and live.strategies["fast"].requests[0].latency == pytest.approx(0.001)
    assert "serve start" in live.status


@pytest.mark.parametrize("options, message", [
    ({"strategies": ["fast", "warp"]}, "unknown strategy warp"),
    ({"soc": "sm9999"}, "unknown SoC"),
    ({"rate": 0}, "the rate must be"),
    ({"requests": 0}, "requests per strategy must be"),
    ({"fast": "npu"}, "fast backend"),
    ({"dims": {"batch": 0}}, "positive integer"),
])
def test_bad_options_are_one_line(options, message):
    with pytest.raises(UserError, match=message):
        TimelineOptions(**options)


def test_fp16_gets_the_default_soc_as_on_the_partitions_page():
    assert TimelineOptions(fp16=True).soc == "sc8380xp"
    assert TimelineOptions(fp16=True, soc="57").soc == "sm8650"


def test_unknown_option_over_the_protocol_is_refused():
    with pytest.raises(UserError, match="unknown field.*'turbo'"):
        TimelineOptions.from_json({"requests": 3, "turbo": True})


def test_bound_runner_reuses_its_buffers():
    """The shared-memory path binds buffers once and rewrites them per request; on the CPU EP the
    same machinery runs with ordinary CPU memory and must give the plain run's answers."""
    from dashboard.intake.samples import build_cnn_classifier
    from dashboard.runtime import qnn as runtime

    handle = runtime.create_session(build_cnn_classifier(size=32).SerializeToString(),
                                    runtime.SessionConfig(backend="cpu"))
    session = handle.session
    first, second = (runtime.random_inputs(session, {}, seed) for seed in (0, 1))
    runner = runtime.BoundRunner(session, runtime.cpu_memory_info(), first, session.run(None, first))
    for feeds in (first, second, first):
        np.testing.assert_array_equal(runner.run(feeds)[0], session.run(None, feeds)[0])
    with pytest.raises(UserError, match="No shared allocator found for.*QnnHtpShared"):  # no rpcmem on this host
        runtime.BoundRunner(session, runtime.shared_memory_info(), first, session.run(None, first))


def served(name: str, create: float, warm: float, first_end: float) -> StrategyRun:
    """A one-request strategy: its session is created in ``create`` s, warmed in ``warm`` s and
    answers at ``first_end``."""
    events = [Event(0.0, "session_create_start", "htp"), Event(create, "session_create_end", "htp"),
              Event(create, "warmup_start", "htp"), Event(create + warm, "warmup_end", "htp")]
    request = Request(0, 0.0, create + warm, first_end, "htp", True)
    return StrategyRun(name, {"target": "htp"}, events, [request], expected_requests=1)


def test_cached_vs_cold_says_what_the_context_saved_and_what_it_cannot():
    run = TimelineRun(device={}, model="m", options={}, workload={},
                      strategies={"target": served("target", 0.10, 0.45, 0.748),
                                  "cached": served("cached", 0.01, 0.45, 0.660)})
    text = cached_vs_cold(run)
    assert "loaded in 10 ms against a 100 ms compile (saved 90 ms)" in text
    assert "warm-up, 450 ms" in text and "came 88 ms sooner" in text
    assert cached_vs_cold(TimelineRun(device={}, model="m", options={}, workload={},
                                      strategies={"target": run.strategies["target"]})) is None
