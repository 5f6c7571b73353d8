"""The worker protocol, driven through a real worker subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from dashboard.intake.reader import file_digest
from dashboard.messages import PROTOCOL_VERSION, ModelChunk, ProbeArgs, Probing
from dashboard.runtime.client import (PROJECT_ROOT, WorkerClient, WorkerCrashed, WorkerError, WorkerTimeout,
                                      local_worker_argv)


@pytest.fixture()
def store(tmp_path, monkeypatch):
    """Each test gets its own model store, in the worker too (it inherits the environment)."""
    monkeypatch.setenv("QNN_LAB_MODEL_STORE", str(tmp_path / "store"))
    return tmp_path / "store"


def test_hello_reports_runtime_versions():
    with WorkerClient() as worker:
        info = worker.call("hello")
    assert info.protocol == PROTOCOL_VERSION == worker.hello.protocol
    assert info.onnxruntime_qnn == "2.7.0"
    assert info.qnn_sdk.startswith("2.")


def test_probe_tells_which_backends_initialize_here():
    events = []
    with WorkerClient() as worker:
        result = worker.call("probe", ProbeArgs(["htp", "gpu"]), on_event=events.append)
    assert events == [Probing("htp"), Probing("gpu")]
    assert result.backends["htp"].ok is True
    if result.arch == "x86_64":  # the Linux x86_64 wheel has the HTP simulator but no Adreno
        assert result.backends["gpu"].ok is False
        assert "QNN_BACKEND_ERROR_CANNOT_INITIALIZE" in result.backends["gpu"].error
        assert result.shared_memory.ok is False
        assert "rpcmem" in result.shared_memory.reason


def test_native_crash_is_reported_with_its_signal_and_caller_survives():
    worker = WorkerClient().start()
    with pytest.raises(WorkerCrashed, match="SIGSEGV"):
        worker.call("crash")
    with pytest.raises(WorkerError, match="not running"):
        worker.call("hello")
    with WorkerClient() as fresh:  # a new worker serves after the old one died
        assert fresh.call("hello").protocol == PROTOCOL_VERSION


def test_worker_killed_from_outside_mid_call():
    with WorkerClient() as worker:
        timer = threading.Timer(0.5, lambda: os.killpg(worker.pid, signal.SIGKILL))
        timer.start()
        with pytest.raises(WorkerCrashed, match="SIGKILL"):
            # A probe of every backend takes longer than the timer.
            worker.call("probe", ProbeArgs(["htp"] * 6))
        timer.cancel()


def test_timeout_stops_a_hung_worker():
    hang = [sys.executable, "-c",
            "import json,sys,time; print(json.dumps({'hello': {'protocol': 2, 'pid': 1}}), flush=True); "
            "sys.stdin.readline(); time.sleep(60)"]
    worker = WorkerClient(hang, label="test worker").start()
    pid = worker.pid
    with pytest.raises(WorkerTimeout, match="within 1 s"):
        worker.call("hello", timeout=1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_unknown_command_and_bad_requests_keep_the_worker_alive():
    requests = ["not json", json.dumps({"id": 1, "cmd": "nope"}), json.dumps({"id": 2, "cmd": "has_model"}),
                json.dumps({"id": 3, "cmd": "has_model", "args": {"digest": "../../etc/ssh"}}),
                json.dumps({"id": 4, "cmd": "hello", "args": {"extra": 1}}), json.dumps({"id": 5, "cmd": "hello"})]
    proc = subprocess.run(local_worker_argv(), input="\n".join(requests) + "\n", capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=60)
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert replies[0].keys() == {"hello"}
    assert replies[1]["ok"] is False and replies[1]["error"].startswith("bad request")
    assert replies[2]["ok"] is False and "unknown worker command 'nope'" in replies[2]["error"]
    assert replies[3]["ok"] is False and "missing field 'digest'" in replies[3]["error"]
    assert replies[4]["ok"] is False and "bad model digest" in replies[4]["error"]
    assert replies[5]["ok"] is False and "unknown field(s) 'extra'" in replies[5]["error"]
    assert replies[6]["ok"] is True and replies[6]["result"]["protocol"] == PROTOCOL_VERSION


def test_native_stdout_noise_never_corrupts_the_protocol():
    """Native libraries print to fd 1 (QNN prints a LIBNATIVE banner); the worker moves fd 1 to
    stderr, so every stdout line is protocol JSON."""
    script = "hello\nprobe\n"
    lines = "".join(json.dumps({"id": i, "cmd": c}) + "\n" for i, c in enumerate(script.split()))
    proc = subprocess.run(local_worker_argv(), input=lines, capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=120)
    for line in proc.stdout.splitlines():
        json.loads(line)
    assert sum(1 for line in proc.stdout.splitlines() if '"ok": true' in line) == 2


def test_model_upload_in_chunks_is_verified_and_kept_by_digest(tmp_path, store, monkeypatch):
    model = tmp_path / "blob.onnx"
    model.write_bytes(os.urandom(300_000))
    digest = file_digest(model)
    monkeypatch.setattr("dashboard.runtime.client.CHUNK", 100_000)
    with WorkerClient(label="remote-like worker", remote=True) as worker:
        events = []
        path = worker.send_model(model, digest, on_event=events.append)
        assert [e.sent for e in events] == [100_000, 200_000, 300_000]
        assert open(path, "rb").read() == model.read_bytes()
        assert path.startswith(str(store))
        assert worker.send_model(model, digest) == path  # second time: found by digest, not re-sent
        with pytest.raises(WorkerError, match="corrupted"):
            worker.call("put_model", ModelChunk("0" * 32, "x.onnx", 0, "AAAA", True))
