"""How a first ``partition`` run starts its worker early and lets it go late, without a worker ever
outliving the command: the spare worker started before the CLI's imports is adopted (or stopped
at exit when the answer came from the cache), and the worker's exit is reaped on a thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dashboard.intake.samples import build_cnn_classifier
from dashboard.runtime import client
from dashboard.runtime.client import WorkerClient, prespawn_local_worker

ROOT = Path(__file__).resolve().parent.parent


def workers_marked(marker: str) -> list[int]:
    """Pids of live runtime workers whose environment carries ``marker`` (this test's cache path)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"dashboard.runtime.worker" in cmdline and marker.encode() in environ:
            found.append(int(proc.name))
    return found


@pytest.fixture()
def env(tmp_path) -> dict[str, str]:
    return {**os.environ, "QNN_LAB_CACHE": str(tmp_path / "cache"), "QNN_LAB_MODEL_STORE": str(tmp_path / "models")}


def test_a_spare_worker_is_adopted_by_the_next_local_client():
    prespawn_local_worker()
    spare_pid = client._spare.pid
    with WorkerClient() as worker:
        assert worker.pid == spare_pid and client._spare is None
        assert worker.call("hello").protocol == worker.hello.protocol
    with WorkerClient() as another:  # no spare left: a worker of its own
        assert another.pid != spare_pid


def test_a_spare_nobody_adopts_is_stopped_when_the_process_exits(env):
    done = subprocess.run([sys.executable, "-c", "from dashboard.runtime import client; "
                           "client.prespawn_local_worker(); print(client._spare.pid)"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_partition_first_and_cached_runs_leave_no_worker_behind(env, tmp_path):
    model = tmp_path / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), model)
    command = [sys.executable, "-m", "dashboard", "partition", str(model), "--fp16", "--json"]
    first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert '"cached": false' in first.stdout and not workers_marked(env["QNN_LAB_CACHE"])
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert '"cached": true' in again.stdout and not workers_marked(env["QNN_LAB_CACHE"])
