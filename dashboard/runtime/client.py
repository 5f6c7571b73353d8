"""The dashboard's side of the worker protocol (see ``dashboard.runtime.worker``).

A ``WorkerClient`` starts a worker from an argv (a local Python, or ``ssh host python -m
dashboard.runtime.worker``: the transport is only the command line), sends requests, streams progress
events to a callback, and turns every way a worker can fail into a ``WorkerError`` with one line
a user can read: the runtime's own message, a timeout, or the signal that killed the process.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from dashboard.errors import UserError
from dashboard.serde import Record, SchemaError, dumps, load

# dashboard.messages (the protocol's records) is imported where it is used: it pulls in numpy and
# onnx, and spawning a worker must not wait for them (see ``prespawn_local_worker``).
if TYPE_CHECKING:
    from dashboard.messages import ProgressEvent, WorkerHello

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHUNK = 4 << 20


class WorkerError(UserError):
    """The worker failed the request, crashed, hung or could not be started."""


class WorkerCrashed(WorkerError):
    pass


class WorkerTimeout(WorkerError):
    pass


class WorkerProtocolError(WorkerError):
    """The worker wrote something that is not the protocol (a forged or garbled line)."""


def local_worker_argv() -> list[str]:
    """This machine's worker: the same interpreter, the package from this checkout."""
    return [sys.executable, "-m", "dashboard.runtime.worker"]


def _local_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class WorkerClient:
    """One worker process. Use as a context manager; ``call`` may be made many times."""

    def __init__(self, argv: list[str] | None = None, *, label: str = "local worker",
                 remote: bool = False, start_timeout: float = 60.0) -> None:
        self.argv = argv or local_worker_argv()
        self.remote = remote  # a remote worker cannot read our files: models travel over the protocol
        self.label = label
        self.start_timeout = start_timeout
        self.hello: WorkerHello | None = None
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=40)
        self._next_id = 0
        self._spawn_error: str | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "WorkerClient":
        """Spawn the worker (unless ``spawn`` already did) and wait for its greeting."""
        if self._proc is None and self._spawn_error is None:
            self.spawn()
        self._await_hello()
        return self

    def spawn(self) -> "WorkerClient":
        """Spawn the worker without waiting: it imports the runtime while the caller does other
        work (reading the model, hashing it); the first ``call`` waits for the greeting. A worker
        that cannot be started is reported there too, so callers handle one kind of failure.
        A spare local worker started by ``prespawn_local_worker`` is adopted instead."""
        self._spawn_error = None
        if self._adopt_spare():
            return self
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, bufsize=1, env=_local_env(), cwd=str(PROJECT_ROOT), start_new_session=True)
        except OSError as exc:
            self._spawn_error = f"cannot start the {self.label} ({self.argv[0]}): {exc.strerror}"
            return self
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()
        return self

    def _adopt_spare(self) -> bool:
        global _spare
        spare, _spare = _spare, None
        if spare is None or spare.argv != self.argv or spare._proc is None or spare._proc.poll() is not None:
            if spare is not None:
                spare._abandon()
            return False
        # The spare's reader threads fill its queue and deque; this client takes those over.
        self._proc, self._lines, self._stderr = spare._proc, spare._lines, spare._stderr
        spare._proc = None
        return True

    def _await_hello(self) -> None:
        from dashboard.messages import WorkerHello

        if self._spawn_error is not None:
            raise WorkerError(self._spawn_error)
        if self.hello is not None:
            return
        message = self._next_message(self.start_timeout, "starting")
        try:
            self.hello = load(WorkerHello, message.get("hello"), "greeting")
        except SchemaError as exc:
            self._abandon()
            raise WorkerProtocolError(f"the {self.label} did not greet as a worker does: {exc}") from None

    def _abandon(self) -> None:
        """Stop a worker that can no longer be trusted or waited for."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._kill(proc)

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._kill(proc)

    def __enter__(self) -> "WorkerClient":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # -- requests ---------------------------------------------------------------------------
    def call(self, cmd: str, args: Record | None = None, *, timeout: float | None = 600.0,
             on_event: Callable[[ProgressEvent], None] | None = None) -> Record | None:
        """Run ``cmd`` in the worker and return its result record (checked against
        ``messages.COMMANDS``); progress events go to ``on_event``. ``timeout`` bounds the whole
        call; on expiry the worker is killed. A reply that is not what the protocol says is a
        ``WorkerProtocolError`` and the worker is stopped (the next client starts a fresh one)."""
        from dashboard.messages import COMMANDS, WorkerRequest

        command = COMMANDS[cmd]
        self._await_hello()
        if self._proc is None:
            raise WorkerError(f"the {self.label} is not running")
        self._next_id += 1
        req_id = self._next_id
        self._stderr.clear()  # a crash report should quote this request's output, not older noise
        request = WorkerRequest(req_id, cmd, (args if args is not None else command.args()).to_json())
        try:
            self._proc.stdin.write(dumps(request) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed(cmd) from None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            message = self._next_message(remaining, cmd)
            try:
                done, result = self._read(message, req_id, command)
            except SchemaError as exc:
                self._abandon()
                raise WorkerProtocolError(f"the {self.label} answered {cmd!r} with a malformed message "
                                          f"and was stopped: {exc}") from None
            if isinstance(result, BaseException):
                raise result
            if done:
                return result
            if result is not None and on_event is not None:
                on_event(result)

    def _read(self, message: dict, req_id: int, command) -> tuple[bool, object]:
        """(True, result record or WorkerError) for this request's reply, (False, event or None)
        for progress and for lines of other requests; ``SchemaError`` for a malformed line."""
        from dashboard.messages import WorkerProgress, WorkerReply, event_from_json

        if "event" in message:
            progress = load(WorkerProgress, message, "progress")
            return False, event_from_json(progress.event) if progress.id == req_id else None
        reply = load(WorkerReply, message, "reply")
        if reply.id != req_id:
            return False, None
        if not reply.ok:
            return True, WorkerError(reply.error or f"the command failed in the {self.label}")
        if command.result is None:
            raise SchemaError("a reply from a command that never answers")
        return True, load(command.result, reply.result, "result")

    def send_model(self, path: str | os.PathLike, digest: str,
                   on_event: Callable[[ProgressEvent], None] | None = None) -> str:
        """Make the model available to the worker; return its path there. Local workers read the
        file in place; remote ones receive it once (kept by digest)."""
        from dashboard.messages import DigestArgs, ModelChunk, Upload

        if not self.remote:
            return str(Path(path).resolve())
        known = self.call("has_model", DigestArgs(digest), timeout=60)
        if known.path:
            return known.path
        size = os.path.getsize(path)
        offset = 0
        with open(path, "rb") as handle:
            while True:
                data = handle.read(CHUNK)
                final = offset + len(data) >= size
                result = self.call("put_model", ModelChunk(digest, Path(path).name, offset,
                                                           base64.b64encode(data).decode(), final), timeout=300)
                offset += len(data)
                if on_event is not None:
                    on_event(Upload(offset, size))
                if final:
                    return result.path

    # -- plumbing ---------------------------------------------------------------------------
    def _pump_stdout(self) -> None:
        """Protocol lines to the queue; anything else a native library printed is kept with
        stderr for crash reports."""
        proc = self._proc
        for line in proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError):
                    message = None
                if isinstance(message, dict):
                    self._lines.put(message)
                    continue
            if line:
                self._stderr.append(line[:1000])
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        proc = self._proc
        for line in proc.stderr:
            self._stderr.append(line.rstrip())

    def _next_message(self, timeout: float | None, what: str) -> dict:
        try:
            message = self._lines.get(timeout=timeout)
        except queue.Empty:
            proc = self._proc
            self._proc = None
            if proc is not None:
                self._kill(proc)
            raise WorkerTimeout(f"the {self.label} did not finish {what!r} within {timeout:.0f} s "
                                "and was stopped") from None
        if message is None:
            raise self._crashed(what)
        return message

    def _crashed(self, what: str) -> WorkerCrashed:
        proc = self._proc
        self._proc = None
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill(proc)
        if code is not None and code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        tail = next((line for line in reversed(self._stderr) if line.strip()), "")
        detail = f"; last output: {tail[-300:]}" if tail else ""
        return WorkerCrashed(f"the {self.label} died during {what!r} ({how}){detail}")

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait()


@contextlib.contextmanager
def optimized_copy(model_path: str, timeout: float = 300.0) -> Iterator[Path]:
    """The graph ONNX Runtime hands to execution providers (after its level-1 optimizations),
    written by a local worker into a scratch folder that is removed when the block ends."""
    from dashboard.messages import OrtViewArgs

    with WorkerClient() as worker:
        result = worker.call("ort_view", OrtViewArgs(str(Path(model_path).resolve())), timeout=timeout)
    optimized = Path(result.path)
    try:
        yield optimized
    finally:
        shutil.rmtree(optimized.parent, ignore_errors=True)


_spare: WorkerClient | None = None


def prespawn_local_worker() -> None:
    """Start this machine's worker now, for the next local ``WorkerClient.spawn`` to adopt.

    A command that will need a worker calls this before its own imports: the worker process
    imports numpy, onnx and onnxruntime while this one imports the same libraries, instead of
    after it (about a quarter of a second of a first ``partition`` run). A spare that nobody
    adopts (the answer came from a cache) is stopped when this process exits."""
    global _spare
    if _spare is None:
        _spare = WorkerClient().spawn()
        atexit.register(_stop_spare)


def _stop_spare() -> None:
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        spare._abandon()
