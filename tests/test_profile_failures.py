"""A profile's failures stay where they happen (no simulator: the runtime's parts are replaced by
what they return or raise): a trace event with a figure that is no number fails the CPU backend
alone; ONNX Runtime failing to write the pre-partition graph is a note on the backends that ran,
never the HTP's failure (and never the whole worker's, on a device whose GPU runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dashboard.errors import UserError
from dashboard.intake.reader import load_model
from dashboard.profile import measure
from dashboard.profile.parse import ProfileFileError, read_ort_trace
from dashboard.profile.protocol import ProfileArgs
from dashboard.runtime.config import SessionConfig

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "cnn_classifier.onnx"


def trace(**bad) -> str:
    run = {"name": "model_run", "cat": "Session", "ts": 100, "dur": 50}
    node = {"name": "Softmax_kernel_time", "cat": "Node", "ts": 110, "dur": 5,
            "args": {"provider": "CPUExecutionProvider", "op_name": "Softmax"}}
    node.update(bad)
    return json.dumps([run, node])


def test_a_trace_event_whose_figure_is_no_number_fails_the_cpu_backend_alone():
    assert read_ort_trace(trace(), 0)[0][0].dur_us == 5.0
    for bad in ({"dur": "5us"}, {"ts": None}, {"dur": True}):
        with pytest.raises(ProfileFileError, match="not a number"):
            read_ort_trace(trace(**bad), 0)
    graphs = measure.MappedGraphs(lambda: (_ for _ in ()).throw(UserError("no")), Prepared())()
    cpu, rows = measure.cpu_backend(trace(dur="5us"), graphs, 0, "x86_64 CPU")
    assert cpu.status == "failed" and "not a number" in cpu.reason and rows == []


class Prepared:
    """What ``partition.measure.prepare`` gives, as far as the mapping reads it."""

    def __init__(self) -> None:
        self.graph = load_model(SAMPLE)


class Session:
    level, notes = "detailed", []

    def qnn_csv(self):
        return None

    def op_trace(self):
        return {}

    def ort_text(self):
        return None


def failing_graphs():
    raise UserError("ONNX Runtime could not write the optimized model")


def test_a_pre_partition_graph_that_fails_is_a_note_not_the_htps_failure(monkeypatch, tmp_path):
    def session(prepared, config, folder, runs, warmup, on_run=None, before_runs=None, samples=None):
        if before_runs is not None:
            before_runs()  # where the real one calls it: inside its try, a UserError is "the session failed"
        return Session()

    monkeypatch.setattr(measure, "profiled_session", session)
    backends, nodes = {}, []
    args = ProfileArgs(path=str(SAMPLE), config=SessionConfig(), runs=1, warmup=0)
    measure._profile_htp(Prepared(), args.config.replace(backend="htp"), args, tmp_path, failing_graphs, backends,
                         nodes, lambda stage: None)
    htp = backends["htp"]
    assert "could not write" not in (htp.reason or "")  # failed only for its missing file, not for the graph
    assert any("pre-partition graph failed" in n for n in htp.notes)
    assert not any("HTP session failed" in n for b in backends.values() for n in b.notes)


def test_on_a_device_whose_gpu_runs_a_failing_graph_does_not_take_the_worker_down(monkeypatch, tmp_path):
    from dashboard.partition import measure as partition_measure

    monkeypatch.setattr(partition_measure, "probe_gpu_cached", lambda: (True, None, "now"))
    monkeypatch.setattr(measure, "profiled_session", lambda *a, **k: Session())
    backends, nodes = {}, []
    args = ProfileArgs(path=str(SAMPLE), config=SessionConfig(), backends=["gpu"], runs=1, warmup=0)
    measure._profile_gpu(Prepared(), args.config, args, tmp_path, failing_graphs, backends, nodes, lambda stage: None)
    assert backends["gpu"].status == "failed" and "profiling file" in backends["gpu"].reason
    assert any("pre-partition graph failed" in n for n in backends["gpu"].notes)
