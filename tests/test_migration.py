"""Hot migration on the real HTP simulator (target) and the CPU EP (fast), through a real worker.

Every run goes through ``run_on_device`` on the local device, i.e. the same worker subprocess,
protocol and event stream the page and the CLI use.
"""

from __future__ import annotations

import os
import platform
import signal
import tempfile
from pathlib import Path

import onnx
import pytest
from deadlines import wait_until, within

from dashboard.errors import UserError
from dashboard.intake.samples import build_cnn_classifier, sample_path
from dashboard.runtime.client import WorkerClient, WorkerCrashed
from dashboard.runtime.devices import Device
from dashboard.timeline.model import TimelineOptions, TimelineRun
from dashboard.timeline.protocol import TimelineArgs, TimelineEvent, TimelineRequest
from dashboard.timeline.remote import run_on_device
from dashboard.timeline.runner import SCRATCH_PREFIX

FP16 = {"fp16": True, "soc": "sc8380xp"}
# Three seconds of arrivals: long enough that the HTP session (about 0.2 s to compile and warm
# on an idle machine, several times that on a busy one) is swapped in while requests still come.
WORKLOAD = {"requests": 90, "rate": 30.0}


@pytest.fixture()
def stores(tmp_path, monkeypatch):
    """Model and EPContext stores of this test only (the worker inherits the environment)."""
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(tmp_path / "models"))
    monkeypatch.setenv("QNN_LAB_CONTEXT_STORE", str(tmp_path / "contexts"))
    return tmp_path


@pytest.fixture(scope="module")
def small_cnn(tmp_path_factory) -> str:
    """A 32x32 CNN: a few milliseconds per request on the HTP simulator."""
    path = tmp_path_factory.mktemp("models") / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), path)
    return str(path)


def timeline(model: str, collect: list | None = None, **options) -> TimelineRun:
    return run_on_device(Device.parse("local"), model, TimelineOptions(**options),
                         on_event=None if collect is None else collect.append, timeout=300)


def kinds(run, backend: str | None = None) -> list[str]:
    return [e.kind for e in sorted(run.events, key=lambda e: e.t) if backend is None or e.backend == backend]


def first(run, kind: str, backend: str | None = None):
    return next(e for e in sorted(run.events, key=lambda e: e.t)
                if e.kind == kind and (backend is None or e.backend == backend))


def test_migration_swaps_to_htp_without_losing_or_repeating_a_request(stores, small_cnn):
    streamed: list[dict] = []
    result = timeline(small_cnn, streamed, strategies=["migrate"], **FP16, **WORKLOAD)
    run = result.strategies["migrate"]
    m = run.metrics
    assert result.fast["backend"] == "cpu"
    assert run.backends == {"fast": "cpu", "target": "htp"}

    swap = first(run, "swap")
    assert swap.backend == "htp"
    # The target was created and warmed before the swap, drained after, the CPU session released.
    assert first(run, "session_create_end", "htp").t <= first(run, "warmup_start", "htp").t
    assert first(run, "warmup_end", "htp").t <= swap.t <= first(run, "drain_end", "cpu").t
    assert first(run, "drain_end", "cpu").t <= first(run, "session_released", "cpu").t
    assert "migration_failed" not in kinds(run)

    # Every scheduled request answered once, on the session that was current when it started.
    assert sorted(r.id for r in run.requests) == list(range(WORKLOAD["requests"]))
    assert m["failed"] == 0 and m["lost"] == 0 and m["duplicated"] == 0
    assert m["served"]["cpu"] > 0 and m["served"]["htp"] > 0
    for r in run.requests:
        assert r.arrival <= r.start <= r.end
        assert r.backend == ("cpu" if r.start < swap.t else "htp")
    assert m["swap_at_s"] == swap.t and m["p50_after_s"] is not None

    # Outputs before and after the swap agree within the tolerance the run reports.
    before_after = [c for c in run.outputs["checks"] if "after swap" in c["a"]]
    assert before_after and before_after[0]["compared"] > 0 and before_after[0]["agree"] is True
    assert run.outputs["agree"] is True

    # The live stream carried exactly what the final result holds.
    live_requests = [e for e in streamed if isinstance(e, TimelineRequest) and e.strategy == "migrate"]
    live_events = [e for e in streamed if isinstance(e, TimelineEvent) and e.strategy == "migrate"]
    assert sorted(e.request.id for e in live_requests) == sorted(r.id for r in run.requests)
    assert len(live_events) == len(run.events)


@pytest.mark.parametrize("model, options, reason", [
    # A float encoder without fp16 fails to finalize on the HTP (measured: QNN_COMMON_ERROR_MEM_ALLOC).
    ("text_encoder.onnx", {}, "QNN_COMMON_ERROR_MEM_ALLOC"),
    # Options the EP itself refuses together (bf16 needs a soc_model of 88 or above).
    ("cnn32", {"provider_options": {"htp_bf16_enable": "1"}}, "BF16 mode is enabled but soc_model is not specified"),
])
def test_target_failure_keeps_serving_on_the_fast_backend(stores, small_cnn, model, options, reason):
    path = small_cnn if model == "cnn32" else str(sample_path(model))
    result = timeline(path, strategies=["migrate"], requests=30, rate=30.0, **options)
    run = result.strategies["migrate"]
    m = run.metrics
    failure = first(run, "migration_failed")
    assert failure.backend == "htp"
    assert reason.lower() in failure.detail.lower() and "still serving on cpu" in failure.detail
    assert "swap" not in kinds(run)
    assert m["failed"] == 0 and m["lost"] == 0 and m["served"] == {"cpu": 30}


def test_policy_if_faster_keeps_the_faster_backend(stores, small_cnn):
    if platform.machine() != "x86_64":
        pytest.skip("on a device the HTP is the faster backend; the simulator here is slower than the CPU EP")
    result = timeline(small_cnn, strategies=["migrate"], policy="if_faster", **FP16, **WORKLOAD)
    run = result.strategies["migrate"]
    skipped = first(run, "migration_skipped")
    assert "if_faster" in skipped.detail
    assert "swap" not in kinds(run)
    assert first(run, "session_released", "htp").t >= skipped.t  # the warmed target is let go
    assert run.metrics["served"] == {"cpu": WORKLOAD["requests"]} and run.metrics["failed"] == 0


def test_cached_strategy_really_loads_the_context_model(stores, small_cnn):
    first_run = timeline(small_cnn, strategies=["cached"], requests=8, rate=40.0, **FP16).strategies["cached"]
    assert "built once" in first_run.notes[0]
    loaded = first(first_run, "context_loaded")
    assert "EPContext" in loaded.detail
    assert first_run.metrics["served"] == {"htp": 8} and first_run.metrics["failed"] == 0
    assert first_run.outputs["agree"] is True

    contexts = list((stores / "contexts").rglob("*_ctx.onnx"))
    assert len(contexts) == 1
    graph = onnx.load(contexts[0], load_external_data=False).graph
    assert [n.op_type for n in graph.node] == ["EPContext"]

    again = timeline(small_cnn, strategies=["cached"], requests=8, rate=40.0, **FP16).strategies["cached"]
    assert "reused" in again.notes[0] and "EPContext" in first(again, "context_loaded").detail

    # Without its context binary the cached model cannot run: the session really used it.
    for binary in contexts[0].parent.glob("*.bin"):
        binary.unlink()
    broken = timeline(small_cnn, strategies=["cached"], requests=4, rate=40.0, **FP16).strategies["cached"]
    assert "session_failed" in kinds(broken)
    assert broken.metrics["failed"] == 4


def test_auto_follows_the_ep_rules(stores):
    result = timeline(str(sample_path("llm_decoder_kv.onnx")), strategies=["auto"], requests=4, rate=40.0)
    choice = first(result.strategies["auto"], "auto_choice")
    assert choice.detail.startswith("EP rules: GenAI → gpu")
    assert choice.backend == result.fast["backend"]  # GenAI → GPU, here the CPU EP stands in
    assert "no QNN GPU on this host" in result.fast["label"] or result.fast["backend"] == "gpu"
    assert result.strategies["auto"].metrics["failed"] == 0


def test_shared_memory_reports_why_it_is_unavailable(stores, small_cnn):
    result = timeline(small_cnn, strategies=["fast"], requests=4, rate=40.0, shared_memory=True, **FP16)
    shared = result.shared_memory
    assert shared["requested"] is True
    if platform.machine() == "x86_64":
        assert shared["available"] is False and "rpcmem" in shared["reason"]
    else:
        assert shared["available"] is True and shared["zero_copy_p50_s"] > 0


def test_worker_killed_mid_run_is_a_clear_error_and_the_caller_lives_on(stores, small_cnn):
    options = TimelineOptions(strategies=["migrate"], **FP16, **WORKLOAD)
    killed_scratch: list[Path] = []
    with WorkerClient() as worker:

        def kill_on_first_request(message) -> None:
            if isinstance(message, TimelineRequest) and not killed_scratch:
                killed_scratch.extend(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{worker.pid}-*"))
                os.killpg(worker.pid, signal.SIGKILL)

        with pytest.raises(WorkerCrashed, match=r"died during 'timeline' \(killed by SIGKILL\)"):
            worker.call("timeline", TimelineArgs(small_cnn, options),
                        on_event=kill_on_first_request, timeout=300)
        # The killed worker could not remove its scratch folder; the client that saw it die did.
        assert killed_scratch and not any(folder.exists() for folder in killed_scratch)
    after = timeline(small_cnn, strategies=["fast"], requests=3, rate=40.0)  # a new worker serves
    assert after.strategies["fast"].metrics["failed"] == 0


def test_missing_model_is_one_line_before_any_worker_starts(stores, tmp_path):
    with pytest.raises(UserError) as info:
        timeline(str(tmp_path / "missing.onnx"), strategies=["fast"])
    assert "missing.onnx" in str(info.value) and "\n" not in str(info.value)


def test_swap_drains_requests_in_flight_on_the_old_session():
    """The migration's swap on two real sessions under the workload server, at a moment when
    requests are certainly running: they finish on the old session before it is drained; every
    later dispatch uses the new one."""
    import threading

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from dashboard.runtime import qnn as runtime
    from dashboard.timeline.migration import Slot
    from dashboard.timeline.runner import Recorder, Server

    n = 1024  # two 1024x1024 MatMuls: tens of milliseconds per request on one CPU thread
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()
    config = runtime.SessionConfig(backend="cpu", intra_op_threads=1)
    old = Slot("old", runtime.create_session(model, config))
    new = Slot("new", runtime.create_session(model, config))
    inputs = [runtime.random_inputs(old.handle.session, {}, 0)]

    events: list[dict] = []
    options = TimelineOptions(requests=12, rate=1000.0, concurrency=2)
    rec = Recorder("migrate", events.append, threading.Lock(), options.requests)
    server = Server(rec, options, inputs).start()
    migration = server.migration
    migration.serve(old)
    wait_until(lambda: server.switch.inflight(old) > 0, "no request started on the old session")
    in_flight_at_swap = server.switch.inflight(old)
    migration.swap(new, "old → new")
    within(lambda: migration.drain(old), "the drain of the old session")
    assert server.switch.inflight(old) == 0
    within(server.join, "the workload server's 12 requests")

    run = rec.run
    swap, drained = first(run, "swap"), first(run, "drain_end")
    assert in_flight_at_swap > 0 and "request(s) in flight" in drained.detail
    on_old = [r for r in run.requests if r.backend == "old"]
    assert on_old and all(r.start < swap.t for r in on_old)
    assert max(r.end for r in on_old) <= drained.t  # the drain waited for every one of them
    assert all(r.backend == "new" for r in run.requests if r.start >= swap.t)
    m = run.metrics
    assert m["swap_in_flight"] >= 1 and m["failed"] == 0 and m["lost"] == 0 and m["duplicated"] == 0


def test_supplied_inputs_drive_the_run_and_a_bare_array_is_refused(stores, small_cnn, tmp_path):
    """``TimelineOptions(inputs=...)``: an .npz with one array per model input is what every
    request runs on; a single .npy array (no input names) is one UserError, not a TypeError."""
    import numpy as np

    from dashboard.intake.reader import load_model

    spec = load_model(small_cnn).inputs[0]
    array = np.random.default_rng(5).standard_normal([d if isinstance(d, int) else 1 for d in spec.shape])
    np.savez(tmp_path / "inputs.npz", **{spec.name: array.astype(np.float32)})
    result = timeline(small_cnn, strategies=["fast"], requests=3, rate=30.0, inputs=str(tmp_path / "inputs.npz"))
    assert result.workload["input_sets"] == 1 and result.workload["inputs"] == str(tmp_path / "inputs.npz")
    assert result.strategies["fast"].metrics["failed"] == 0
    np.save(tmp_path / "inputs.npy", array.astype(np.float32))
    with pytest.raises(UserError, match="not an .npz archive"):
        timeline(small_cnn, strategies=["fast"], requests=3, inputs=str(tmp_path / "inputs.npy"))
