"""One job runner for every long run (``dashboard.runtime.jobs``): the background job's progress,
time left, Cancel, timeout and outcome; partition analyses and timelines cancelled the same way,
also while their worker starts; a command line interrupted stops its worker through it; and the
typed probe of a device.

The workers here are real processes that stand in for the runtime (``fake_workers``): no HTP
compile, so these run in the fast tier.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import partition_models as pm
import pytest
from deadlines import DEADLINE, wait_until
from fake_workers import (MARK, STOPS_BEFORE_GREETING, alive, fake_timeline_code, gone_within, held,  # noqa: F401
                          interruptible, patched_worker, processes_with_env, stopped, worker_mark)

from dashboard.errors import UserError
from dashboard.runtime.jobs import CANCELLED, Cancellation, Cancelled, Job
from dashboard.runtime.protocol import Upload

pytestmark = pytest.mark.timeout(300)

@pytest.fixture(autouse=True)
def _private(worker_mark):
    return worker_mark


# -- the job -------------------------------------------------------------------------------------------
@dataclass
class Step:
    """Shaped like a partition's ``Stage`` (the runtime must not import partition)."""

    stage: str
    progress: float


class Counter:
    """Shaped like a timeline's ``LiveRun``: counts the events it is fed as answered requests."""

    def __init__(self, total: int) -> None:
        self.status, self.answered, self.total = "starting", 0, total

    def feed(self, event) -> None:
        self.answered += 1
        self.status = f"answered {self.answered}"


def run_job(work, **kwargs) -> Job:
    job = Job("key", "a test run", **kwargs).start(work)
    job.wait(DEADLINE)
    assert job.done, "the job did not end"
    return job


def test_a_job_keeps_its_latest_step_and_its_result():
    seen = []

    def work(on_event, cancel):
        on_event(Step("compiling", 0.5))
        seen.append((job.stage, job.progress))
        on_event(Upload(3, 4))
        seen.append(job.stage)
        on_event(Step("overshoot", 7.0))
        seen.append(job.progress)
        return {"answer": 42}

    job = Job("key", "a test run")
    job.start(work).wait(DEADLINE)
    assert seen == [("compiling", 0.5), "sending the model to the device: 75%", 1.0]
    assert job.result == {"answer": 42} and job.error is None and not job.cancelled
    assert job.count is None and job.time_left is None and job.elapsed >= 0


def test_a_job_that_counts_requests_estimates_the_time_left_from_them():
    release, fed = threading.Event(), threading.Event()

    def work(on_event, cancel):
        for _ in range(3):
            on_event(object())
        fed.set()
        release.wait(DEADLINE)
        return "done"

    job = Job("key", "a timeline", tracker=Counter(12)).start(work)
    assert fed.wait(DEADLINE)
    assert job.count == (3, 12) and job.progress == 0.25 and job.stage == "answered 3"
    left, elapsed = job.time_left, job.elapsed
    # 3 answers so far, 9 to go: three times the time taken so far (read just before ``elapsed``)
    assert left is not None and left <= 3 * elapsed and left >= 3 * (elapsed - 1.0)
    release.set()
    job.wait(DEADLINE)
    assert job.result == "done" and job.time_left is None


def test_a_job_without_answers_yet_has_no_estimate():
    job = Job("key", "a timeline", tracker=Counter(5))
    assert job.count == (0, 5) and job.time_left is None


def test_cancel_ends_a_job_as_cancelled_and_an_error_is_one_line():
    def waits_for_cancel(on_event, cancel):
        job.cancel()
        cancel.check()

    job = Job("key", "a test run")
    job.start(waits_for_cancel).wait(DEADLINE)
    assert job.done and job.cancelled and job.error is None and job.result is None

    def bad_input(on_event, cancel):
        raise UserError("model.onnx: not an ONNX model")

    failed = run_job(bad_input)
    assert failed.error == "model.onnx: not an ONNX model" and not failed.cancelled

    def bug(on_event, cancel):
        raise KeyError("oops")

    broken = run_job(bug)
    assert broken.error.startswith("internal error (KeyError") and "server log" in broken.error


def test_a_job_past_its_timeout_is_stopped_with_an_error_saying_so():
    def until_cancelled(on_event, cancel):
        deadline = time.monotonic() + DEADLINE
        while not cancel.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        cancel.check()
        return "not stopped"

    job = run_job(until_cancelled, timeout=0.2)
    assert job.error == "a test run did not finish within 0.2 s and was stopped"
    assert not job.cancelled and job.result is None


# -- partitions and timelines, cancelled the same way -----------------------------------------------
def start_partition(model: Path, device, cancel: Cancellation):
    from dashboard.partition.analysis import PartitionOptions, analyze

    return analyze(model, PartitionOptions(backends=("htp",)), device=device, timeout=600, cancel=cancel)


def start_timeline(model: Path, device, cancel: Cancellation):
    from dashboard.timeline.model import TimelineOptions
    from dashboard.timeline.remote import run_on_device

    return run_on_device(device, str(model), TimelineOptions(strategies=["fast"], requests=3), timeout=600,
                         cancel=cancel)


@pytest.mark.parametrize("run", [start_partition, start_timeline], ids=["partition", "timeline"])
def test_a_cancel_while_the_worker_starts_stops_it_for_both_kinds_of_run(tmp_path, run):
    """The worker stops itself before it greets (a local import, an ssh handshake that hangs):
    Cancel ends the process, and the run raises ``Cancelled`` instead of waiting out the start."""
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    cancel, outcome = Cancellation(), {}

    def go() -> None:
        try:
            outcome["result"] = run(model, pm.worker_device(tmp_path, STOPS_BEFORE_GREETING), cancel)
        except Cancelled as exc:
            outcome["cancelled"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=go)
    thread.start()
    wait_until(lambda: [p for p in cancel.pids if stopped(p)] or outcome, "the worker stopping itself")
    [pid] = [p for p in cancel.pids if stopped(p)] or [None]
    assert pid is not None, outcome
    cancel.cancel()
    assert gone_within(pid, 30), "the worker outlived Cancel"
    thread.join(DEADLINE)
    assert not thread.is_alive() and outcome == {"cancelled": CANCELLED}


def test_a_timeline_cancelled_mid_run_stops_its_worker(tmp_path):
    """A timeline whose requests have started to stream: Cancel ends the worker and the run."""
    from dashboard.timeline.model import TimelineOptions
    from dashboard.timeline.remote import run_on_device

    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = pm.worker_device(tmp_path, fake_timeline_code(tmp_path / "never", hold_after=2))
    cancel, events, outcome = Cancellation(), [], {}

    def go() -> None:
        try:
            run_on_device(device, str(model), TimelineOptions(strategies=["fast"], requests=5), timeout=600,
                          on_event=events.append, cancel=cancel)
        except Cancelled as exc:
            outcome["cancelled"] = str(exc)

    thread = threading.Thread(target=go)
    thread.start()
    wait_until(lambda: sum(e.type == "request" for e in events) == 2, "two requests answered")
    [pid] = cancel.pids
    cancel.cancel()
    assert gone_within(pid, 30)
    thread.join(DEADLINE)
    assert outcome == {"cancelled": CANCELLED}


def test_ctrl_c_on_the_timeline_command_stops_its_worker_before_it_exits(tmp_path, _private):
    """The CLI interrupted mid-run: one error line, exit 130, and its worker is already gone when
    the command has exited (it is stopped through the run's cancellation and waited for)."""
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = pm.worker_device(tmp_path, fake_timeline_code(tmp_path / "never", hold_after=1))
    cli = subprocess.Popen([sys.executable, "-m", "dashboard", "timeline", str(model), "--device", device.url,
                            "--strategies", "fast", "--requests", "5"], cwd=Path(__file__).resolve().parent.parent,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
                           env={**os.environ, "PYTHONFAULTHANDLER": "1"})  # a hang dumps its threads on SIGABRT
    try:
        workers: list[int] = []
        wait_until(lambda: workers.extend(p for p in processes_with_env(MARK, _private) if p != cli.pid) or workers,
                   "the CLI starting its worker")
        wait_until(held(tmp_path / "never").exists, "the worker holding after its first answer")
        cli.send_signal(signal.SIGINT)
        try:
            _, stderr = cli.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:  # (seen once under load): say where each thread was
            cli.send_signal(signal.SIGABRT)
            _, stderr = cli.communicate(timeout=60)
            pytest.fail(f"the CLI did not end within {DEADLINE:.0f} s of Ctrl-C; its threads:\n{stderr[-6000:]}")
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130 and stderr.strip().splitlines()[-1] == "error: interrupted", stderr
    assert "Traceback" not in stderr
    assert not any(alive(pid) for pid in workers)  # already gone: the CLI waited for them before it exited


# -- the typed probe -----------------------------------------------------------------------------------
FAKE_PROBE = """
from dashboard.runtime.protocol import BackendProbe, ProbeResult, SharedMemoryProbe

def handler(args, emit):
    return ProbeResult(hostname='board', os='Linux 6.1', arch='aarch64', python='3.11.2', onnxruntime='1.22',
                       onnxruntime_qnn='2.7.0', qnn_sdk='2.51', backends={
                           'htp': BackendProbe(True, None, 0.5), 'gpu': BackendProbe(False, 'no libOpenCL.so', 0.1)},
                       soc={'machine': 'SM8650'}, shared_memory=SharedMemoryProbe(False, 'no rpcmem'))
"""


def test_a_device_probe_is_a_typed_record_whose_json_keeps_its_keys(tmp_path):
    from dashboard.runtime.devices import DeviceProbe

    device = pm.worker_device(tmp_path, patched_worker(FAKE_PROBE, "probe")[2])
    probe = device.probe(timeout=60)
    assert isinstance(probe, DeviceProbe)
    assert (probe.device, probe.label, probe.arch) == (device.url, device.label, "aarch64")
    assert probe.initializes("htp") is True and probe.initializes("gpu") is False and probe.initializes("x") is None
    assert probe.backends["gpu"].error == "no libOpenCL.so" and probe.shared_memory.reason == "no rpcmem"
    data = probe.to_json()
    assert set(data) == {"device", "label", "seconds", "hostname", "os", "arch", "python", "onnxruntime",
                         "onnxruntime_qnn", "qnn_sdk", "protocol", "backends", "soc", "shared_memory"}
    assert data["backends"]["htp"] == {"ok": True, "error": None, "seconds": 0.5} and data["seconds"] >= 0
    assert DeviceProbe.from_json(data) == probe
