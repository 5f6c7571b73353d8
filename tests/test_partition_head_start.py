"""The head start of a partition request (``partition.session``): the HTP session a request will
measure starts from its raw arguments before the request is decoded, the handler takes it only
when it is the session it would have created, and whatever it does not take is waited for and its
folder removed when the request ends. On the real HTP simulator, in this process (the worker's own
``_answer``), with the sessions each path creates recorded."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import partition_models as pm
import pytest

from dashboard.partition import measure, session
from dashboard.partition.protocol import PartitionArgs
from dashboard.runtime import worker
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.protocol import WorkerRequest

CNN = Path(__file__).resolve().parent.parent / "samples" / "cnn_classifier.onnx"


@pytest.fixture(autouse=True)
def _private(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again


@pytest.fixture()
def sessions(monkeypatch) -> list[tuple[str, str]]:
    """(backend, thread name) of every session the partition code creates."""
    made: list[tuple[str, str]] = []
    real = session.measured

    def recording(session_input, session_config, config, workdir):
        made.append((config.backend, threading.current_thread().name))
        return real(session_input, session_config, config, workdir)

    monkeypatch.setattr(session, "measured", recording)
    return made


def raw_args(path: Path, as_is: bool, backends=("htp",)) -> dict:
    return PartitionArgs(str(path), SessionConfig(), list(backends), {}, as_is).to_json()


def answer(args: dict):
    return worker._answer(WorkerRequest(1, "partition", args), lambda message: None)


def scratch_left() -> list[str]:
    return sorted(p.name for p in Path(tempfile.gettempdir()).glob(f"{session.SCRATCH_PREFIX}*"))


def verdicts(reply) -> dict:
    return {name: (v["status"], v["supported"]) for name, v in reply.result["backends"]["htp"]["nodes"].items()}


def test_a_vouched_file_s_session_is_the_head_start_s_and_measures_the_same(sessions):
    early = answer(raw_args(CNN, as_is=True))
    assert early.ok, early.error
    assert sessions == [("htp", "partition head start")]  # one session, started before the handler ran
    sessions.clear()
    plain = answer(raw_args(CNN, as_is=False))
    assert plain.ok and sessions == [("htp", sessions[0][1])] and sessions[0][1] != "partition head start"
    assert verdicts(early) == verdicts(plain) and verdicts(early)
    assert early.result["backends"]["htp"]["qnn_subgraphs"] == plain.result["backends"]["htp"]["qnn_subgraphs"]
    assert scratch_left() == [] and session._pending is None


def test_a_file_that_must_be_rewritten_after_all_is_measured_on_the_copy_and_the_head_start_dropped(
        sessions, tmp_path):
    """A client that vouched wrongly (here: a model with an unnamed node, which the sessions must
    see under its stable name): the head start's session is not taken, the measurement is the
    rewritten copy's, and the early one is waited for and removed with its folder."""
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    reply = answer(raw_args(model, as_is=True))
    assert reply.ok, reply.error
    assert [backend for backend, _ in sessions] == ["htp", "htp"]
    assert sessions[0][1] == "partition head start" and sessions[1][1] != "partition head start"
    assert "Relu#1" in reply.result["backends"]["htp"]["nodes"]  # the copy's stable name: the copy was measured
    assert reply.result["renamed_nodes"] == 1
    assert scratch_left() == [] and session._pending is None


def test_arguments_the_request_then_refuses_leave_no_session_and_no_folder_behind(sessions):
    bad = raw_args(CNN, as_is=True, backends=("htp", "tpu"))  # the head start reads it; decoding refuses it
    reply = answer(bad)
    assert not reply.ok and reply.kind == "user" and "tpu" in reply.error
    assert sessions == [("htp", "partition head start")]  # it had started, and was waited for
    assert scratch_left() == [] and session._pending is None
    again = answer(raw_args(CNN, as_is=True))  # the worker serves the next request as before
    assert again.ok and verdicts(again)


@pytest.mark.parametrize("args", [
    None, [], "x", {"as_is": "yes"}, {"as_is": True, "path": 3, "backends": ["htp"]},
    {"as_is": True, "path": "m.onnx", "backends": "htp"}, {"as_is": True, "path": "m.onnx", "backends": ["gpu"]},
    {"as_is": True, "path": "m.onnx", "backends": ["htp"], "input_shapes": {"x": [1, 3]}},
    {"as_is": True, "path": "m.onnx", "backends": ["htp"], "config": {"backend": 7}},
])
def test_what_the_head_start_cannot_vouch_for_starts_nothing(args):
    with session.head_start(args):
        assert session._pending is None
    assert scratch_left() == []


def test_a_gpu_listed_first_is_probed_only_once_the_head_start_s_session_is_built(monkeypatch):
    """No two sessions ever build at once: the GPU probe (a GPU session that fails here) waits for
    the HTP session the head start began."""
    seen = []

    def probe():
        seen.append(done.is_set())
        return False, "no Adreno here", "now"

    done = threading.Event()
    real = session.measured

    def htp(*args):
        try:
            return real(*args)
        finally:
            done.set()

    monkeypatch.setattr(measure, "probe_gpu_cached", probe)
    monkeypatch.setattr(session, "measured", htp)
    reply = answer(raw_args(CNN, as_is=True, backends=("gpu", "htp")))
    assert reply.ok, reply.error
    assert seen == [True]
    assert reply.result["backends"]["gpu"]["status"] == "predicted"
    assert reply.result["backends"]["htp"]["status"] == "measured"
