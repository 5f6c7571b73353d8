"""The workload a timeline starts with: defaults that fit the hardware, a workload paced until
after the migration's swap, the estimate before a run, the live count of a paced run; and what
the timeline's figures and sentences must never do (WebGL traces, negative durations).

The pacing is checked in process on sessions that only sleep (the runner's own ``Server`` and
``Migration``), and on the real HTP simulator with the simulator's defaults (``simulator`` tier)."""

from __future__ import annotations

import threading
from pathlib import Path
import time

import plotly.graph_objects as go
import pytest
from deadlines import wait_until

from dashboard.intake.reader import load_model
from dashboard.intake.samples import sample_path
from dashboard.runtime.devices import Device
from dashboard.timeline.estimate import costs_from_size, estimate
from dashboard.timeline.migration import Slot
from dashboard.timeline.model import (Event, Request, StrategyRun, TimelineOptions, TimelineRun, WORKLOADS,
                                      cached_vs_cold, default_workload)
from dashboard.timeline.protocol import Setup, StrategyEnd, StrategyStart, TimelineEvent, TimelineRequest
from dashboard.timeline.remote import LiveRun
from dashboard.timeline.runner import Recorder, Server


class _Sleeps:
    """A session whose run takes ``seconds`` and answers one output."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self, _names, feeds):
        time.sleep(self.seconds)
        return [feeds["x"]]


class _Handle:
    def __init__(self, seconds: float) -> None:
        self.session = _Sleeps(seconds)


def _paced_migration(after_swap: int, compiled_after: int, cap: int = 3000) -> tuple[StrategyRun, Server]:
    """A paced migration whose target "compiles" until ``compiled_after`` requests have been answered
    on the fast session (an event, not a duration: what the test needs before the swap happens)."""
    options = TimelineOptions(strategies=["fast", "migrate"], requests=cap, rate=50.0, after_swap=after_swap,
                              warmup_runs=1)
    rec = Recorder("migrate", lambda event: None, threading.Lock(), options.requests)
    server = Server(rec, options, [{"x": 1.0}], count=options.requests, paced=True).start()
    server.migration.serve(Slot("cpu", _Handle(0.001)))

    def open_target() -> Slot:
        wait_until(lambda: len(rec.run.requests) >= compiled_after, f"{compiled_after} requests answered")
        return Slot("htp", _Handle(0.002))

    background = threading.Thread(target=server.migration.run, args=("htp", open_target))
    background.start()
    server.join()
    background.join()
    return rec.run, server


def test_a_paced_workload_serves_the_requests_asked_for_after_the_swap():
    """The workload outlasts the compile whatever it takes: it ends once ``after_swap`` requests
    arrived after the swap, and those are served by the target."""
    run, server = _paced_migration(after_swap=4, compiled_after=15)
    m = run.metrics
    assert m["swap_at_s"] is not None and m["p50_after_s"] is not None
    after = [r for r in run.requests if r.start >= m["swap_at_s"]]
    assert len(after) >= 4 and all(r.backend == "htp" for r in after)
    assert server.dispatched == len(run.requests) < 3000 and not server.capped
    assert not run.swapped_after_last


def test_a_paced_workload_stops_at_its_cap_and_says_so():
    run, server = _paced_migration(after_swap=4, compiled_after=5, cap=5)  # compiled once all were answered
    assert server.capped and server.dispatched == 5
    assert run.swapped_after_last  # the swap came after the last request started


def test_the_defaults_fit_the_hardware():
    """On the simulator: the two strategies migration is about, paced until after the swap; on a
    device: every strategy, 40 requests, as before."""
    sim, device = default_workload("simulator"), default_workload("npu")
    assert sim["after_swap"] > 0 and sim["strategies"] == ["fast", "migrate"]
    assert device == {**WORKLOADS["device"]} and device["after_swap"] == 0 and len(device["strategies"]) == 5
    sim["strategies"].append("target")  # a copy: the table itself is untouched
    assert default_workload("simulator")["strategies"] == ["fast", "migrate"]


def test_the_estimate_says_it_is_one_and_the_simulator_default_is_far_shorter():
    """A YOLOv8n-sized model (12 MiB, 230 nodes) on the simulator: the device defaults would take
    many times the simulator's; the text says it is an estimate and what it rests on."""
    costs = costs_from_size(12 * 1024 * 1024, 230, "simulator")
    paced = estimate(TimelineOptions(**default_workload("simulator")), costs)
    every = estimate(TimelineOptions(**default_workload("device")), costs)
    assert paced.seconds * 5 < every.seconds
    assert paced.requests > default_workload("simulator")["after_swap"]
    text = paced.text()
    assert "estimate" in text.lower() and "model's size" in text and "not a measurement" in text


def test_the_live_count_of_a_paced_run_follows_the_migration():
    """The paced migration runs first; once it ends, the total is its count for every strategy."""
    options = TimelineOptions(strategies=["fast", "migrate"], requests=2000, after_swap=5)
    live = LiveRun(options, per_strategy=20)
    assert live.total == 40
    live.feed(StrategyStart("migrate", {"fast": "cpu", "target": "htp"}))
    for i in range(12):
        live.feed(TimelineRequest("migrate", Request(i, i / 5, i / 5, i / 5 + 0.01, "cpu", True)))
    live.feed(StrategyEnd("migrate", {"expected": 12}))
    assert live.total == 24 and live.fraction == 0.5


def test_a_cached_start_that_came_later_says_later_without_a_minus_sign():
    def strategy(name: str, create: float, first: float) -> StrategyRun:
        events = [Event(0.0, "session_create_start", "htp"), Event(create, "session_create_end", "htp"),
                  Event(create, "warmup_start", "htp"), Event(create + 0.1, "warmup_end", "htp")]
        return StrategyRun(name, {"target": "htp"}, events, [Request(0, 0.0, first - 0.05, first, "htp", True)])

    run = TimelineRun({}, "m", {}, {}, {"target": strategy("target", 0.05, 0.3),
                                        "cached": strategy("cached", 0.1, 0.486)})
    text = cached_vs_cold(run)
    assert "186 ms later" in text and "-" not in text.replace("EPContext", "").replace("warm-up", "")


def test_timeline_figures_use_no_webgl_traces():
    """A browser gives a page a handful of WebGL contexts; after a few runs, WebGL charts go blank."""
    from dashboard.render.timeline_figures import gantt, latency_scatter, strategy_bars

    events = [Event(0.0, "serve_start", "cpu"), Event(0.2, "swap", "htp"), Event(0.3, "migration_failed", "htp")]
    requests = [Request(0, 0.0, 0.0, 0.01, "cpu", True), Request(1, 0.25, 0.25, 0.3, "htp", True),
                Request(2, 0.3, None, None, None, False, "no session")]
    strategy = StrategyRun("migrate", {"fast": "cpu", "target": "htp"}, events, requests)
    run = TimelineRun({}, "m", {}, {}, {"migrate": strategy})
    figures = [gantt(strategy, {}), latency_scatter(strategy, {}), strategy_bars([("r", run)])]
    types = {trace.type for figure in figures for trace in figure.data}
    assert types and not {t for t in types if t.endswith("gl") or t in ("scattergl", "heatmapgl")}, types
    assert all(isinstance(f, go.Figure) for f in figures)


@pytest.fixture()
def stores(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(tmp_path / "models"))
    monkeypatch.setenv("QNN_LAB_CONTEXT_STORE", str(tmp_path / "contexts"))


@pytest.mark.parametrize("sample", ["cnn_classifier.onnx", "text_encoder.onnx"])
def test_the_simulator_default_workload_serves_after_the_swap(stores, sample):
    """The HTP simulator's default workload on a sample, as the page and the CLI start it: the hot
    migration swaps before the workload ends and serves requests on the HTP after the swap, and
    the fast strategy serves the same number of requests."""
    from dashboard.timeline.remote import run_on_device

    path = str(sample_path(sample))
    options = TimelineOptions(**default_workload("simulator"), fp16=True)
    # the progress, started from an estimate far off (a 12 MiB model's size): once the migration
    # swapped, its total is the count the run serves (issue 27, item 5), within a request a strategy
    prior = estimate(options, costs_from_size(12 * 1024 * 1024, 230, "simulator"))
    live, totals = LiveRun(options, prior.requests, prior.costs), []

    def follow(message) -> None:
        live.feed(message)
        if live._swap_at() is not None:
            totals.append(live.total)

    run = run_on_device(Device.parse("local"), path, options, on_event=follow)
    migrate = run.strategies["migrate"]
    served = 2 * run.workload["requests"]
    assert totals and all(abs(total - served) <= 2 for total in totals), (totals, served)
    assert live.total == live.answered == served and prior.requests * 2 > served
    m = migrate.metrics
    assert m["swap_at_s"] is not None and m["p50_after_s"] is not None, migrate.events
    assert m["served"].get("htp", 0) >= options.after_swap
    assert len(run.strategies["fast"].requests) == len(migrate.requests) == run.workload["requests"]
    assert list(run.strategies) == ["fast", "migrate"]  # shown in the order asked for, though migrate ran first
    assert load_model(path)  # the sample itself is intact


def test_the_cached_strategy_measures_the_compiled_context(stores):
    """What an SoC's compile produced, for Compare: the EPContext model's files on disk."""
    from dashboard.timeline.remote import run_on_device

    run = run_on_device(Device.parse("local"), str(sample_path("cnn_classifier.onnx")),
                        TimelineOptions(strategies=["cached"], requests=2))
    assert run.strategies["cached"].metrics["failed"] == 0
    assert run.target["context_bytes"] > 0


def test_the_page_says_when_the_swap_came_after_the_last_request(tmp_path):
    """A run whose migration swapped after every request had started (what every default run did
    on the simulator): the page says nothing was served after it and how to size the workload."""
    from datetime import datetime, timezone

    import onnx
    from streamlit.testing.v1 import AppTest

    from dashboard.intake.digest import file_digest
    from dashboard.intake.samples import build_cnn_classifier
    from dashboard.views.state import SelectedModel

    path = tmp_path / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), path)
    events = [Event(0.0, "serve_start", "cpu"), Event(2.5, "swap", "htp")]
    requests = [Request(i, i / 20, i / 20, i / 20 + 0.001, "cpu", True) for i in range(40)]
    run = TimelineRun({"label": "local"}, str(path), {}, {"requests": 40, "rate": 20.0, "concurrency": 2},
                      {"migrate": StrategyRun("migrate", {"fast": "cpu", "target": "htp"}, events, requests, 40)},
                      fast={"backend": "cpu", "label": "CPU EP"}, target={"backend": "htp", "label": "QNN HTP"})
    digest = file_digest(path)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.switch_page("pages/timeline.py")
    at.session_state["selected_model"] = SelectedModel(str(path), path.name, digest, "path")
    at.session_state["intake_started"] = True
    at.session_state["timeline_runs"] = [{"label": "#1 cnn32", "data": run.to_json(), "digest": digest,
                                          "finished": datetime.now(timezone.utc), "name": path.name,
                                          "device": "local"}]
    at.run()
    assert not at.exception
    said = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "after the last request had started: nothing was served after it" in said
    assert "Requests after the swap" in said and not at.success


def test_a_compile_measured_by_a_partition_analysis_replaces_the_size_guess():
    costs = costs_from_size(12 * 1024 * 1024, 230, "simulator")
    from dashboard.timeline.estimate import with_measured_compile

    measured = with_measured_compile(costs, 42.0, "simulator")
    assert measured.target_create == 42.0 and measured.target_request == costs.target_request
    assert "HTP compile measured by this model's partition analysis on the HTP simulator" in measured.basis
    assert with_measured_compile(costs, None, "simulator") is costs
    options = TimelineOptions(**default_workload("simulator"))
    assert estimate(options, measured).requests == min(options.requests, int(
        (42.0 + options.warmup_runs * costs.target_request) * options.rate) + 1 + options.after_swap)


# -- issue 27, item 5: the estimate calibrated as the run goes; the total is what will run ---------------
def _simulated_run(options: TimelineOptions, compile_s: float, htp_s: float, cpu_s: float):
    """The messages a paced migration then a fast-only strategy stream, with when each arrives
    (seconds from the run's start), as the runner serves them: the CPU answers at once, the HTP
    compiles after the first answer, warms up ``options.warmup_runs`` times, swaps, and the
    workload ends ``after_swap`` arrivals later; the fast strategy serves as many on the CPU."""
    from dashboard.timeline.estimate import paced_count

    messages, rate = [(0.0, Setup({"backend": "cpu"}, {"backend": "htp"}))], options.rate
    messages.append((0.0, StrategyStart("migrate", {"fast": "cpu", "target": "htp"})))
    compiled = 0.15 + compile_s
    swap = compiled + options.warmup_runs * htp_s
    count = paced_count(options, swap)
    for t, kind in ((0.0, "session_create_start"), (0.1, "session_create_end")):
        messages.append((t, TimelineEvent("migrate", Event(t, kind, "cpu"))))
    for t, kind in ((0.15, "session_create_start"), (compiled, "session_create_end"), (compiled, "warmup_start"),
                    (swap, "warmup_end"), (swap, "swap")):
        messages.append((t, TimelineEvent("migrate", Event(t, kind, "htp"))))
    free = 0.0
    for i in range(count):
        arrival = i / rate
        backend = "htp" if arrival >= swap else "cpu"
        start = max(arrival, free if backend == "htp" else 0.1)
        end = start + (htp_s if backend == "htp" else cpu_s)
        free = end if backend == "htp" else free
        messages.append((end, TimelineRequest("migrate", Request(i, arrival, start, end, backend, True))))
    migrate_end = max(t for t, _ in messages) + 0.01
    messages.append((migrate_end, StrategyEnd("migrate", {"expected": count})))
    offset = migrate_end + 0.5
    messages.append((offset, StrategyStart("fast", {"fast": "cpu"})))
    for i in range(count):
        start = max(i / rate, 0.1)
        messages.append((offset + start + cpu_s,
                         TimelineRequest("fast", Request(i, i / rate, start, start + cpu_s, "cpu", True))))
    end = max(t for t, _ in messages) + 0.01
    messages.append((end, StrategyEnd("fast", {"expected": count})))
    return sorted(messages, key=lambda m: m[0]), swap, count, end


@pytest.mark.parametrize("compile_s, htp_s", [(3.0, 0.2), (8.0, 0.6), (40.0, 2.0)])
def test_the_live_estimate_is_calibrated_on_the_first_requests_and_the_total_is_what_will_run(compile_s, htp_s):
    """A YOLOv8n-sized model on the simulator, whose size says 14 s per HTP request and a long
    compile, served much faster (the issue: 2 min 37 s estimated, 21 s taken; "36/434 requests"
    when it ended at 74): once the HTP has compiled and warmed, the time left follows the run and
    the total is the count the run serves; a family of speeds, not one."""
    options = TimelineOptions(**default_workload("simulator"))
    prior = estimate(options, costs_from_size(12 * 1024 * 1024, 230, "simulator"))
    messages, swap, count, end = _simulated_run(options, compile_s, htp_s, cpu_s=0.05)
    now = [0.0]
    live = LiveRun(options, prior.requests, prior.costs, clock=lambda: now[0])
    assert live.total == 2 * prior.requests and live.time_left() is None  # nothing measured yet
    off_before = []
    for at, message in messages:
        now[0] = at
        live.feed(message)
        if at >= swap and at < end:
            assert live.total == 2 * count, (at, live.total)  # what will run, not the estimate's count
            left, truth = live.time_left(), end - at
            assert abs(left - truth) <= 0.2 * end + 1.0, (at, left, truth)
            off_before.append(abs((prior.seconds - at) - truth))
    assert live.answered == live.total == 2 * count
    assert max(off_before) > 0.2 * end + 1.0  # the estimate before the run would have been wrong
    text = live.costs_text()
    assert "calibrated on this run" in text and "HTP compile" in text and "not a measurement" in text


def test_a_job_asks_its_tracker_for_the_time_left():
    """The page's progress says the tracker's calibrated time left, not a rate of answers."""
    from dashboard.runtime.jobs import Job

    options = TimelineOptions(**default_workload("simulator"))
    prior = estimate(options, costs_from_size(12 * 1024 * 1024, 230, "simulator"))
    now = [0.0]
    live = LiveRun(options, prior.requests, prior.costs, clock=lambda: now[0])
    job = Job("key", "a timeline", tracker=live)
    messages, swap, _, _ = _simulated_run(options, 3.0, 0.2, 0.05)
    for at, message in messages:
        if at > swap:
            break
        now[0] = at
        job.feed(message)
    assert job.time_left == live.time_left() and job.count == (live.answered, live.total)
