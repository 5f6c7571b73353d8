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
from dashboard.runtime import spawn
from dashboard.runtime.client import WorkerClient

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
    spawn.start_spare()
    spare_pid = spawn._spare.proc.pid
    with WorkerClient() as worker:
        assert worker.pid == spare_pid and spawn._spare is None
        assert worker.call("hello").protocol == worker.hello.protocol
    with WorkerClient() as another:  # no spare left: a worker of its own
        assert another.pid != spare_pid


def test_a_spare_nobody_adopts_is_stopped_when_the_process_exits(env):
    done = subprocess.run([sys.executable, "-c", "from dashboard.runtime import spawn; "
                           "spawn.start_spare(); print(spawn._spare.proc.pid)"],
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


def test_a_spare_started_under_another_environment_is_not_adopted(monkeypatch, tmp_path):
    """A spare reads and writes the cache its environment names: once the caller's has changed
    (another ``QNN_LAB_CACHE``), a fresh worker is started and the spare stopped."""
    spawn.start_spare()
    spare_pid = spawn._spare.proc.pid
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "another-cache"))
    with WorkerClient() as worker:
        assert worker.pid != spare_pid and spawn._spare is None
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes() if Path("/proc").is_dir() else b""
        assert not environ or str(tmp_path / "another-cache").encode() in environ
    from fake_workers import gone_within

    assert gone_within(spare_pid, 30)


@pytest.mark.parametrize("argv, early", [
    (["partition", "m.onnx", "--fp16"], True),
    (["profile", "m.onnx"], True),
    (["accuracy", "m.onnx", "--data", "d"], True),
    (["quantize", "m.onnx", "--data", "d", "--out", "q.onnx"], True),
    (["partition", "m.onnx", "--device", "ssh://u@h"], False),
    (["partition", "m.onnx", "--device=local?python=/x"], False),
    (["partition", "m.onnx", "--snippet"], False),
    (["profile", "m.onnx", "--aihub", "p.json"], False),
    (["partition", "--help"], False),
    (["classify", "m.onnx"], False),
    ([], False),
])
def test_the_commands_that_will_run_a_local_worker_start_it_before_parsing(argv, early, monkeypatch):
    """Only a command that surely runs on this machine's worker starts one before the parser (its
    numpy and onnxruntime imports then overlap the parser's), so a remote device, an import, a
    snippet or a help text never start a process for nothing."""
    from dashboard.cli import early as cli_early

    started = []
    monkeypatch.setattr(spawn, "start_spare", lambda: started.append(True))
    cli_early.start_worker_early(argv)
    assert bool(started) is early


def spawned_in_a_first_run(env, tmp_path, seen: str, run: str) -> str:
    """A first partition of a small CNN in a fresh process, by ``run`` (code in which ``MODEL`` is
    the model's path); at each start of a runtime worker, the value of the expression ``seen`` is
    recorded. Returns the records; the run must succeed and leave no worker behind."""
    model = tmp_path / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), model)
    script = ("import runpy, subprocess, sys; spawned = []; real = subprocess.Popen\n"
              "class Popen(real):\n    def __init__(self, argv, *a, **k):\n"
              f"        spawned.extend([{seen}] if 'dashboard.runtime.worker' in argv else [])\n"
              "        super().__init__(argv, *a, **k)\n"
              "subprocess.Popen = Popen\n"
              f"MODEL = {str(model)!r}\n"
              f"try:\n    {run}\nfinally:\n    print('SPAWNED', spawned, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert '"cached": false' in done.stdout and not workers_marked(env["QNN_LAB_CACHE"])
    return done.stderr.rsplit("SPAWNED ", 1)[-1].strip()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_a_first_partition_run_adopts_the_worker_it_started_before_parsing(env, tmp_path):
    """The run starts exactly one worker, before this process has imported numpy (the parser's
    first heavy import): the worker that measured is the one started first."""
    run = ("from dashboard.cli.main import main; "
           "sys.exit(main(['partition', MODEL, '--backends', 'htp', '--json']))")
    assert spawned_in_a_first_run(env, tmp_path, "'numpy' in sys.modules", run) == "[False]"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_python_m_dashboard_starts_the_worker_before_it_imports_the_command_line(env, tmp_path):
    """``python -m dashboard partition``: the worker is started before the CLI, the client or the
    protocol is imported (their imports, about 40 ms, then run beside the worker's start), and it
    is the worker that measured."""
    later = ("dashboard.cli.main", "dashboard.runtime.client", "dashboard.runtime.protocol", "argparse")
    run = ("sys.argv = ['dashboard', 'partition', MODEL, '--backends', 'htp', '--json']; "
           "runpy.run_module('dashboard', run_name='__main__')")
    assert spawned_in_a_first_run(env, tmp_path, f"[m for m in {later!r} if m in sys.modules]", run) == "[[]]"
