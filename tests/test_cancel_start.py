"""Cancel at any moment, also while a worker starts (issue 14, item 5): a local worker that is
stopped (SIGSTOP) before it greets, an ssh that hangs before the SSH handshake, and a remote
worker over a real sshd that never greets. Each is a real process, found by its pid; Cancel ends
it and the analysis (or the page's job) reports cancelled, leaving no process behind.

Issue 14 bounds Cancel at 2 s. No assertion here times it, which a loaded machine could fail: each
test asserts the process is gone within a deadline far shorter than anything but Cancel could take
to end it (the worker's start timeout, ssh's connect timeout, the call's own timeout), and the 2 s
are the grace a Cancel gives a worker before it kills it (``CANCEL_GRACE``, checked below against
``BOUND_S``) plus the kill itself. The time each took is printed.
"""

from __future__ import annotations

import fcntl
import getpass
import os
import socket
import termios
import sys
import threading
import time
from pathlib import Path

import partition_models as pm
import pytest
from deadlines import DEADLINE, wait_until
from fake_workers import (MARK, STOPS_BEFORE_GREETING, alive, gone_within, processes_with_env, stopped,  # noqa: F401
                          worker_mark)
from page_jobs import settle
from streamlit.testing.v1 import AppTest
from test_devices_ssh import sshd  # noqa: F401 - the fixture: a real sshd on a free port

from dashboard.partition.analysis import Cancellation, Cancelled, PartitionOptions, analyze
from dashboard.runtime.client import STOP_GRACE, WorkerClient, WorkerCrashed, WorkerGroup
from dashboard.runtime.devices import Device
from dashboard.runtime.jobs import CANCEL_GRACE

pytestmark = pytest.mark.timeout(300)

BOUND_S = 2.0  # the bound: Cancel ends the worker within 2 s
GONE_S = 30.0  # the deadline for a cancelled process to be gone: below every other way it could end
START_TIMEOUT_S = 60.0  # WorkerClient's default: how long a start that nobody cancels waits for the greeting


@pytest.fixture(autouse=True)
def _private(worker_mark):
    return worker_mark


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


def analyze_on_thread(model: Path, device: Device, cancel: Cancellation) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["report"] = analyze(model, PartitionOptions(backends=("htp",)), device=device, timeout=600,
                                        cancel=cancel)
        except Cancelled as exc:
            outcome["cancelled"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - the test reports what it got instead
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def cancel_and_time(cancel: Cancellation, pid: int) -> float:
    """Seconds from Cancel until ``pid`` is gone, which must be within ``GONE_S`` (reported, not
    asserted against the 2 s: see the module's docstring)."""
    pressed = time.monotonic()
    cancel.cancel()
    assert gone_within(pid, GONE_S), f"the worker {pid} outlived Cancel"
    return time.monotonic() - pressed


def test_cancel_gives_a_worker_the_short_grace_before_it_kills_it():
    """What keeps Cancel within the 2 s whatever the worker does: each worker gets
    ``CANCEL_GRACE`` to exit by itself, not a session's ``STOP_GRACE``, before it is killed."""
    from fake_workers import fake_worker

    assert CANCEL_GRACE < BOUND_S < STOP_GRACE and GONE_S < START_TIMEOUT_S
    cancel = Cancellation()
    with cancel.watching():
        worker = WorkerClient(fake_worker("sys.stdin.read()")).start()
    graces, close = [], worker.close
    worker.close = lambda grace=STOP_GRACE, reason=None: (graces.append(grace), close(grace=grace, reason=reason))
    pid = worker.pid
    cancel.cancel()
    wait_until(lambda: graces, "Cancel stopping the worker")
    assert graces == [CANCEL_GRACE] and gone_within(pid, GONE_S)


def test_cancel_ends_a_local_worker_stopped_before_its_greeting_within_2_s(tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    cancel = Cancellation()
    thread, outcome = analyze_on_thread(model, pm.worker_device(tmp_path, STOPS_BEFORE_GREETING), cancel)
    pids = wait_for(lambda: [p for p in cancel.pids if stopped(p)], 60)
    assert pids, "the worker never started (or never stopped itself)"
    took = cancel_and_time(cancel, pids[0])
    thread.join(DEADLINE)
    assert not thread.is_alive() and outcome == {"cancelled": "the analysis was cancelled"}
    assert not [p for p in (tmp_path / "cache" / "partitions").glob("*.json") if p.name != "digests.json"]
    print(f"stopped local worker gone {took:.2f} s after Cancel")


def test_cancel_ends_an_ssh_that_hangs_before_the_handshake_within_2_s(tmp_path):
    """A host that accepts the TCP connection and never speaks SSH: ssh waits its connect timeout
    (here 60 s), and the old client added 60 s more for the greeting."""
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        silent.settimeout(DEADLINE)
        port = silent.getsockname()[1]
        (tmp_path / "known_hosts").write_text("")  # a device's known_hosts must be an existing file
        device = Device.parse(f"ssh://nobody@127.0.0.1:{port}", connect_timeout=300, host_key="accept-new",
                              known_hosts=str(tmp_path / "known_hosts"))
        cancel = Cancellation()
        thread, outcome = analyze_on_thread(model, device, cancel)
        pids = wait_for(lambda: cancel.pids, 60)
        assert pids, "ssh was never started"
        connection, _ = silent.accept()  # ssh is connected and waits for a banner that never comes
        with connection:
            assert alive(pids[0])
            took = cancel_and_time(cancel, pids[0])  # its connect timeout is five minutes away
            thread.join(DEADLINE)
    assert not thread.is_alive() and outcome == {"cancelled": "the analysis was cancelled"}
    print(f"hanging ssh gone {took:.2f} s after Cancel")


def fake_remote_checkout(folder: Path) -> Path:
    """A ``workdir`` whose ``python -m dashboard.runtime.worker`` never greets and, like the real
    worker's stdin watchdog, exits when its stdin closes (its SSH connection dropped)."""
    package = folder / "dashboard" / "runtime"
    package.mkdir(parents=True)
    (folder / "dashboard" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "worker.py").write_text("import sys\nsys.stdin.buffer.read()\n")
    return folder


def test_cancel_ends_a_remote_worker_that_never_greets_within_2_s(sshd, tmp_path, _private):  # noqa: F811
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = Device.parse(f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}", identity=str(sshd["key"]),
                          python=sys.executable, workdir=str(fake_remote_checkout(tmp_path / "remote")),
                          connect_timeout=10, env={MARK: _private}, host_key="accept-new",
                          known_hosts=str(sshd["root"] / "known_hosts"))
    cancel = Cancellation()
    thread, outcome = analyze_on_thread(model, device, cancel)
    ssh = wait_for(lambda: cancel.pids, 60)
    assert ssh, "ssh was never started"
    # The remote worker runs (a child of sshd, carrying the mark) and has not greeted.
    remote = wait_for(lambda: [p for p in processes_with_env(MARK, _private)
                               if Path(f"/proc/{p}/cmdline").read_bytes().find(b"dashboard.runtime.worker") >= 0
                               and p not in ssh], 60)
    assert remote, "the remote worker never started"
    took = cancel_and_time(cancel, ssh[0])
    thread.join(DEADLINE)
    assert not thread.is_alive() and outcome == {"cancelled": "the analysis was cancelled"}
    assert all(gone_within(pid, DEADLINE) for pid in remote), "the remote worker outlived its connection"
    print(f"ssh gone {took:.2f} s after Cancel")


def test_a_group_closed_before_a_worker_starts_stops_it_as_it_starts():
    group = WorkerGroup(grace=0)
    group.close("the analysis was cancelled")
    with group.current(), pytest.raises(WorkerCrashed) as raised:
        WorkerClient(label="local worker").start()
    assert str(raised.value) == "the local worker was stopped during 'starting': the analysis was cancelled"
    assert group.pids == []


def test_a_group_closed_before_a_spare_worker_is_adopted_stops_it_although_it_had_greeted():
    """The spare a command line starts early (``spawn.start_spare``) greets while nobody waits
    for it; a client of a group closed meanwhile adopts it with that greeting already queued, and
    must still fail with the group's reason rather than return a stopped worker (the race seen once
    under load: a test that ran after a CLI test in the same process found its spare)."""
    import select

    from dashboard.runtime import spawn

    spawn.start_spare()
    spare = spawn._spare
    wait_until(lambda: select.select([spare.proc.stdout], [], [], 0)[0], "the spare worker greeting")
    pid = spare.proc.pid
    group = WorkerGroup(grace=0)
    group.close("the analysis was cancelled")
    with group.current(), pytest.raises(WorkerCrashed) as raised:
        WorkerClient(label="local worker").start()
    assert spawn._spare is None, "the spare was not the one adopted"
    assert str(raised.value) == "the local worker was stopped during 'starting': the analysis was cancelled"
    assert gone_within(pid, GONE_S)


def test_a_session_closed_while_its_worker_is_stopped_in_start_ends_it():
    """What a closed browser tab does (the session's ``WorkerGroup``), with the worker not yet
    greeted: the waiting start fails with the reason, the worker is killed after the grace."""
    session, failures = WorkerGroup(), []
    argv = [sys.executable, "-c", STOPS_BEFORE_GREETING]

    def start() -> None:
        with session.current():
            try:
                WorkerClient(argv).start()
            except WorkerCrashed as exc:
                failures.append(str(exc))

    thread = threading.Thread(target=start)
    thread.start()
    pids = wait_for(lambda: [p for p in session.pids if stopped(p)], 60)
    assert pids
    session.close("the browser session ended")
    assert gone_within(pids[0], STOP_GRACE + GONE_S)
    thread.join(DEADLINE)
    assert failures == ["the local worker was stopped during 'starting': the browser session ended"]


PAGE = """
from dashboard.views import state
if state.current_model() is None:
    state.select({path!r}, "test model", "path")
from dashboard.views.partitions import render
render()
"""


def test_the_partitions_page_cancel_ends_a_worker_stopped_in_start(tmp_path):
    """The page's background job (``views.jobs``) on a device whose worker stops before it greets:
    Cancel ends the process and the page says the analysis was cancelled."""
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = pm.worker_device(tmp_path, STOPS_BEFORE_GREETING)
    at = AppTest.from_string(PAGE.format(path=str(path)), default_timeout=300)
    at.session_state["devices"] = {"local": Device.parse("local"), device.url: device}
    at.session_state["device_current"] = device.url
    at.run()
    job = at.session_state["partition_job"]
    pids = wait_for(lambda: [p for p in job.cancellation.pids if stopped(p)], 60)
    assert pids and not job.done
    pressed = time.monotonic()
    at.button(key="partition_job_cancel").click().run()
    assert gone_within(pids[0], GONE_S)
    took = time.monotonic() - pressed  # includes the page's rerun after the click
    job.wait(DEADLINE)
    assert job.done and job.cancelled and job.error is None
    settle(at)
    assert any("Cancelled after" in i.value for i in at.info) and not at.error
    print(f"page Cancel: worker gone {took:.2f} s after the click")


def test_cancel_ends_a_stopped_worker_while_a_model_chunk_is_being_written_to_it():
    """Sending a model to a device writes 4 MB requests; a worker that stops reading (here it
    stops itself right after greeting) leaves the write blocked, holding the pipe's lock. Cancel
    must not wait for that lock before it kills the worker."""
    from dashboard.runtime.protocol import ModelChunk
    from dashboard.runtime.client import WorkerError
    from fake_workers import fake_worker

    group, failures = WorkerGroup(grace=0.5), []
    with group.current():
        worker = WorkerClient(fake_worker("import signal\nos.kill(os.getpid(), signal.SIGSTOP)\n")).start()
    pid = worker.pid
    assert wait_for(lambda: stopped(pid), 30)
    chunk = ModelChunk("0" * 32, "model.onnx", 0, "A" * (8 << 20), True)  # far more than a pipe holds

    def send() -> None:
        try:
            worker.call("put_model", chunk, timeout=600)
        except WorkerError as exc:
            failures.append(str(exc))

    sender = threading.Thread(target=send)
    sender.start()
    wait_until(lambda: pipe_full(pid), "the chunk filling the stopped worker's stdin")
    assert sender.is_alive()  # the write is blocked on the full pipe now, and stays so: nobody reads
    pressed = time.monotonic()
    group.close("the analysis was cancelled")
    assert gone_within(pid, GONE_S)  # the call's own timeout is ten minutes away
    took = time.monotonic() - pressed
    sender.join(DEADLINE)
    assert not sender.is_alive() and len(failures) == 1 and "the analysis was cancelled" in failures[0]
    print(f"worker with a blocked write gone {took:.2f} s after Cancel")


def pipe_full(pid: int) -> bool:
    """Whether the pipe that is ``pid``'s stdin holds all it can (a writer to it is blocked)."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)  # another reader of it; reads nothing
    try:
        queued = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, queued)
        return int.from_bytes(queued, sys.byteorder) >= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    finally:
        os.close(fd)
