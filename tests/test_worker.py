"""The worker protocol, driven through a real worker subprocess: replies, crashes, hangs, version
handshake, line limits, the model store's boundaries, and the lifecycle that leaves no worker or
scratch folder behind."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from deadlines import DEADLINE, join_all, wait_until, within
from fake_workers import alive, fake_worker, gone_within, patched_worker, stopped

from dashboard import __version__
from dashboard.intake.digest import file_digest
from dashboard.runtime.client import (PROJECT_ROOT, WorkerClient, WorkerCrashed, WorkerError, WorkerGroup,
                                      WorkerTimeout, WorkerVersionError, local_worker_argv)
from dashboard.runtime.protocol import MAX_LINE, PROTOCOL_VERSION, DigestArgs, ModelChunk, ProbeArgs, Probing


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


def test_an_infinite_timeout_waits_without_bound_and_nonsense_is_refused():
    with WorkerClient() as worker:
        assert worker.call("hello", timeout=math.inf).protocol == PROTOCOL_VERSION
        for bad in (float("nan"), 0.0, -1.0):
            with pytest.raises(ValueError, match="positive number of seconds"):
                worker.call("hello", timeout=bad)
        assert worker.call("hello", timeout=30).protocol == PROTOCOL_VERSION  # still serving


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


# A real worker whose probe says it has started and then blocks until the process is killed.
PROBE_UNTIL_KILLED = ("import threading\n"
                      "def handler(args, emit):\n"
                      "    emit(m.Probing('htp'))\n"
                      "    threading.Event().wait()\n")


def test_worker_killed_from_outside_mid_call():
    """Killed by someone else (the OOM killer, an operator) while it serves a call: the call
    fails naming the signal. The kill lands mid-call by construction: the worker's pid is read
    first, and the kill is sent when the worker reports the probe under way, which then never
    ends by itself."""
    with WorkerClient(patched_worker(PROBE_UNTIL_KILLED, "probe")) as worker:
        pid = worker.pid
        with pytest.raises(WorkerCrashed, match="SIGKILL"):
            worker.call("probe", ProbeArgs(["htp"]), timeout=DEADLINE,
                        on_event=lambda event: os.killpg(pid, signal.SIGKILL))
        assert worker.pid is None
    assert gone_within(pid, DEADLINE)


def test_timeout_stops_a_hung_worker_and_states_the_timeout_that_was_set():
    worker = WorkerClient(fake_worker("sys.stdin.readline(); sys.stdin.read()"), label="test worker").start()
    pid = worker.pid
    with pytest.raises(WorkerTimeout, match=r"did not finish 'hello' within 1\.5 s and was stopped"):
        worker.call("hello", timeout=1.5)
    assert worker.pid is None and not alive(pid)


def converse(requests: list[dict], env: dict | None = None) -> list[dict]:
    """Talk to a real worker the way a client does: one request at a time, each answered before
    the next; stdin stays open until the last reply (closing it means the client is gone)."""
    proc = subprocess.Popen(local_worker_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=PROJECT_ROOT,
                            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})})
    replies = [json.loads(within(proc.stdout.readline, "the worker's hello"))]
    try:
        for request in requests:
            proc.stdin.write((request if isinstance(request, str) else json.dumps(request)).encode() + b"\n")
            proc.stdin.flush()
            while True:
                reply = json.loads(within(proc.stdout.readline, f"the worker's reply to {request!r:.80}"))
                if "event" not in reply:
                    replies.append(reply)
                    break
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0  # an idle worker whose stdin closes exits cleanly
    return replies


def test_unknown_command_and_bad_requests_keep_the_worker_alive():
    requests = ["not json", {"id": 1, "cmd": "nope"}, {"id": 2, "cmd": "has_model"},
                {"id": 3, "cmd": "has_model", "args": {"digest": "../../etc/ssh"}},
                {"id": 4, "cmd": "hello", "args": {"extra": 1}},
                {"id": 5, "cmd": "put_model", "args": {"digest": "0" * 32, "name": "../../x.onnx", "offset": 0,
                                                        "data": "", "final": True}},
                {"id": 6, "cmd": "hello"}]
    replies = converse(requests)
    assert replies[0].keys() == {"hello"}
    assert replies[0]["hello"]["protocol"] == PROTOCOL_VERSION and replies[0]["hello"]["version"] == __version__
    assert replies[1]["ok"] is False and replies[1]["error"].startswith("bad request")
    assert replies[2]["ok"] is False and "unknown worker command 'nope'" in replies[2]["error"]
    assert replies[3]["ok"] is False and "missing field 'digest'" in replies[3]["error"]
    assert replies[4]["ok"] is False and "bad model digest" in replies[4]["error"]
    assert replies[5]["ok"] is False and "unknown field(s) 'extra'" in replies[5]["error"]
    assert replies[6]["ok"] is False and "bad model file name" in replies[6]["error"]
    assert replies[7]["ok"] is True and replies[7]["result"]["protocol"] == PROTOCOL_VERSION


def test_native_stdout_noise_never_corrupts_the_protocol():
    """Native libraries print to fd 1 (QNN prints a LIBNATIVE banner); the worker moves fd 1 to
    stderr, so every stdout line is protocol JSON."""
    replies = converse([{"id": 1, "cmd": "hello"}, {"id": 2, "cmd": "probe"}])
    assert [r.get("ok") for r in replies[1:]] == [True, True]


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


# -- the version handshake ---------------------------------------------------------------------------
@pytest.mark.parametrize("protocol, version, shown", [(1, None, "of an older release"), (2, "0.0.9", "0.0.9"),
                                                      (PROTOCOL_VERSION + 1, "9.0.0", "9.0.0")])
def test_a_worker_of_another_protocol_is_refused_naming_both_versions(protocol, version, shown):
    hint = "reinstall it with `python -m dashboard device install ssh://me@board`"
    worker = WorkerClient(fake_worker("sys.stdin.read()", protocol=protocol, version=version),
                          label="worker on ssh://me@board", upgrade_hint=hint).spawn()
    pid = worker.pid
    with pytest.raises(WorkerVersionError) as info:
        worker.start()
    assert str(info.value) == (f"the worker on ssh://me@board runs qnn-backend-lab {shown} (protocol {protocol}); "
                               f"this dashboard ({__version__}) needs protocol {PROTOCOL_VERSION}: {hint}")
    assert worker.pid is None and not alive(pid)


# -- line limits --------------------------------------------------------------------------------------
FLOODING_CLIENT = """
import sys
sys.path[:0] = [{root!r}, {tests!r}]
from fake_workers import alive, fake_worker
from dashboard.runtime.client import WorkerClient, WorkerProtocolError
body = "sys.stdin.readline()\\nchunk = b'x' * (1 << 20)\\nfor _ in range({mb}): sys.stdout.buffer.write(chunk)\\n"
body += "sys.stdout.flush()\\nsys.stdin.read()"
worker = WorkerClient(fake_worker(body), label="flooding worker").start()
pid = worker.pid
try:
    worker.call("hello", timeout=120)
except WorkerProtocolError as exc:
    print(exc)
print(alive(pid))
# VmHWM, not ru_maxrss: the latter keeps the forking parent's peak (pytest's, hundreds of MB)
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) // 1024)
"""


def test_a_line_without_end_stops_the_worker_and_the_client_memory_stays_bounded():
    """A worker writes 300 MB without a newline: the client reads at most ``MAX_LINE`` of it,
    stops the worker and reports it in one line. Its peak memory is measured in a process of its
    own (before the cap: 908 MB)."""
    script = FLOODING_CLIENT.format(root=str(PROJECT_ROOT), tests=str(Path(__file__).parent), mb=300)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    message, still_alive, peak_mb = done.stdout.strip().splitlines()
    assert message == ("the flooding worker wrote a line longer than the protocol's 64 MB limit during 'hello' "
                       "and was stopped")
    assert still_alive == "False"
    assert int(peak_mb) < 3 * (MAX_LINE >> 20) + 100, f"peak RSS {peak_mb} MB"


def test_a_result_over_the_line_limit_is_an_error_reply(monkeypatch):
    """The worker never writes a line the client would refuse: an oversized result becomes an
    error reply (the cap is lowered for the test, in the worker's process)."""
    argv = [sys.executable, "-c", "import dashboard.runtime.worker as w\n"
            "w.MAX_LINE = 200\nw.serve()"]
    with WorkerClient(argv) as worker:
        with pytest.raises(WorkerError, match=r"the result is \d{3,} bytes, over the protocol's line limit of 200 "):
            worker.call("hello")
        assert worker.call("has_model", DigestArgs("0" * 32)).path is None  # still serving


# -- lifecycle -------------------------------------------------------------------------------------------
def test_a_worker_whose_client_goes_away_mid_request_exits_and_removes_its_scratch(tmp_path):
    """Requests run on the worker's main thread (here: a handler that never returns); its stdin
    watchdog still notices the client is gone, removes the request's scratch folder and exits."""
    from dashboard.runtime.worker import EXIT_ORPHANED

    argv = patched_worker("import threading\nfrom dashboard.runtime import scratch\n"
                          "from dashboard.partition.protocol import Stage\n"
                          "def handler(args, emit):\n"
                          "    emit(Stage(str(scratch.make('qnn-lab-test-')), 0.5))\n"
                          "    threading.Event().wait()\n")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=PROJECT_ROOT,
                            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "TMPDIR": str(tmp_path)})
    assert "hello" in json.loads(within(proc.stdout.readline, "the worker's hello"))
    request = {"id": 1, "cmd": "partition", "args": {"path": "m.onnx", "config": {}, "backends": ["htp"]}}
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    folder = Path(json.loads(within(proc.stdout.readline, "the handler's first event"))["event"]["stage"])
    assert folder.is_dir() and folder.parent == tmp_path
    proc.stdin.close()  # what the OS does when the client dies, and sshd when the connection drops
    assert proc.wait(timeout=DEADLINE) == EXIT_ORPHANED
    assert not folder.exists()


def folder_then(ending: str, tmp_path: Path, monkeypatch) -> tuple[list[str], Path]:
    """A worker whose ``probe`` makes a scratch folder in ``tmp_path`` (the temp folder from now
    on), reports its path as the event's backend, then runs ``ending`` (handler lines, where
    ``path`` is the folder); and another worker's folder there, which must stay."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    argv = patched_worker("import os, signal\nfrom dashboard.runtime import scratch\n"
                          "def handler(args, emit):\n"
                          "    path = scratch.make('qbl-partition-')\n"
                          "    emit(m.Probing(str(path)))\n" + ending, "probe")
    other = tmp_path / "qbl-partition-1-abc"  # not this worker's folder
    other.mkdir()
    return argv, other


def test_a_worker_killed_before_it_could_clean_up_leaves_no_scratch(tmp_path, monkeypatch):
    """On a loaded machine the stop's grace can run out before the worker's watchdog has removed
    its folders, and the kill then lands mid-cleanup. By construction here: the handler makes a
    folder the watchdog does not know of and stops itself (SIGSTOP), so it cannot exit in the
    grace and is killed; the client that killed it removes the folder before ``close`` returns."""
    argv, other = folder_then("    scratch.keep(path)  # the watchdog will not remove it: only a kill ends this worker\n"
                              "    os.kill(os.getpid(), signal.SIGSTOP)\n", tmp_path, monkeypatch)
    seen: list[Path] = []
    closers: list[threading.Thread] = []
    worker = WorkerClient(argv).start()
    pid = worker.pid

    def stop_once_made(event) -> None:
        seen.append(Path(event.backend))
        closers.append(threading.Thread(target=lambda: (wait_until(lambda: stopped(pid), "the worker stopping itself"),
                                                         worker.close(grace=0.2)), daemon=True))
        closers[-1].start()

    with pytest.raises(WorkerCrashed):
        worker.call("probe", ProbeArgs(["htp"]), timeout=DEADLINE, on_event=stop_once_made)
    assert seen and seen[0].parent == tmp_path and seen[0].name.startswith(f"qbl-partition-{pid}-")
    join_all(closers, "the close that kills the worker")  # the call fails as soon as the kill lands
    assert not alive(pid)
    assert not seen[0].exists(), "the killed worker's scratch folder outlived it"
    assert other.is_dir()


def test_a_worker_that_crashes_mid_request_leaves_no_scratch(tmp_path, monkeypatch):
    """A native crash (here SIGSEGV, sent by the handler to itself) ends the worker without its
    watchdog's cleanup; the client that finds it dead removes its folders, as after a kill, before
    the call reports the crash (the next run's sweep would otherwise be the first to)."""
    argv, other = folder_then("    os.kill(os.getpid(), signal.SIGSEGV)\n", tmp_path, monkeypatch)
    seen: list[Path] = []
    with WorkerClient(argv) as worker:
        with pytest.raises(WorkerCrashed, match="SIGSEGV"):
            worker.call("probe", ProbeArgs(["htp"]), timeout=DEADLINE, on_event=lambda e: seen.append(Path(e.backend)))
        assert seen and seen[0].name.startswith(f"qbl-partition-{worker.hello.pid}-")
        assert not seen[0].exists(), "the crashed worker's scratch folder outlived it"
    assert other.is_dir()


def test_a_client_nobody_closes_stops_its_worker_when_collected():
    worker = WorkerClient().start()
    pid = worker.pid
    del worker
    assert not alive(pid)


def test_a_worker_group_stops_its_workers_and_the_waiting_call_says_why():
    """What a Streamlit session does when the browser goes away: its script thread waits in a
    call; the session's group is closed from another thread."""
    group = WorkerGroup()
    started = threading.Event()
    with group.current():
        worker = WorkerClient(patched_worker(PROBE_UNTIL_KILLED, "probe")).start()
    outside = WorkerClient().start()  # not in the group: untouched
    pid = worker.pid
    assert group.pids == [pid]
    failures = []

    def call() -> None:
        try:
            worker.call("probe", on_event=lambda event: started.set())
        except WorkerError as exc:
            failures.append(str(exc))

    waiting = threading.Thread(target=call)
    waiting.start()
    assert started.wait(DEADLINE), "the probe never started"
    group.close("the browser session ended")
    waiting.join(DEADLINE)
    assert failures == ["the local worker was stopped during 'probe': the browser session ended"]
    assert gone_within(pid, DEADLINE) and group.pids == []
    assert outside.call("hello").protocol == PROTOCOL_VERSION
    outside.close()


# -- the model store ------------------------------------------------------------------------------------
def test_the_model_store_follows_no_planted_symlink(store, tmp_path):
    from dashboard.errors import UserError
    from dashboard.runtime import worker as w

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "id_ed25519").write_text("key")
    store.mkdir(parents=True)
    linked, real = "a" * 32, "b" * 32
    (store / linked).symlink_to(secret)  # a digest folder that is a link elsewhere
    (store / real).mkdir()
    (store / real / "model.onnx").symlink_to(secret / "id_ed25519")  # a model that is a link elsewhere
    with pytest.raises(UserError, match="is a symlink"):
        w.has_model(DigestArgs(linked), None)
    assert w.has_model(DigestArgs(real), None).path is None
    with pytest.raises(UserError, match="is a symlink"):
        w.put_model(ModelChunk(linked, "m.onnx", 0, "QUJD", False), None)
    (store / real / "m.onnx.part").symlink_to(secret / "id_ed25519")  # written through, it would overwrite the key
    with pytest.raises(UserError, match="cannot write m.onnx.part"):
        w.put_model(ModelChunk(real, "m.onnx", 0, "QUJD", False), None)
    assert (secret / "id_ed25519").read_text() == "key"


@pytest.mark.parametrize("name", ["../../x.onnx", "..", ".", "a/b.onnx", "a\\b.onnx", "C:x.onnx", "NUL", "con.onnx",
                                  "x.onnx.part", "x\n.onnx", ""])
def test_a_model_name_cannot_leave_its_digest_folder(name):
    from dashboard.serde import SchemaError

    with pytest.raises(SchemaError, match="bad model file name"):
        ModelChunk("0" * 32, name, 0, "", True)
