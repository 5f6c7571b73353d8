"""The dashboard's side of the worker protocol (see ``dashboard.runtime.worker``).

A ``WorkerClient`` starts a worker from an argv (a local Python, or ``ssh host python -m
dashboard.runtime.worker``: the transport is only the command line), sends requests, streams progress
events to a callback, and turns every way a worker can fail into a ``WorkerError`` with one line
a user can read: the runtime's own message, a timeout, the signal or exception code that killed
the process, or what ssh said when it could not connect.

No worker outlives its client. ``close`` (and leaving the ``with`` block, however it is left) closes
the worker's stdin, which makes it exit at once even in the middle of a request (its stdin
watchdog), waits ``STOP_GRACE`` seconds, then kills its process group; a timeout, a crash and a
malformed reply all end that way. A client that is never closed is stopped when it is garbage
collected or the process exits (``weakref.finalize``). Workers started while a ``WorkerGroup`` is
current are also stopped together when the group closes (a Streamlit session's, when the browser
session ends; a job's, when its Cancel is pressed), at any moment, also while they start. If the
client process is killed outright, the worker sees its stdin close and exits by itself; a remote
worker sees the same when its SSH connection drops.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
import math
import os
import queue
import subprocess
import tempfile
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import IO, Callable, Iterator

from dashboard import __version__, platform
from dashboard.runtime import scratch
from dashboard.errors import UserError
from dashboard.runtime.protocol import (COMMANDS, MAX_LINE, PROTOCOL_VERSION, DigestArgs, ModelChunk, OrtViewArgs,
                                        ProgressEvent, Upload, WorkerHello, WorkerProgress, WorkerReply,
                                        WorkerRequest, event_from_json, plain_file_name, read_line)
from dashboard.runtime import spawn as _spawn
# local_worker_argv, worker_cwd and PACKAGE_PARENT are also named here by callers and tests.
from dashboard.runtime.spawn import PACKAGE_PARENT, local_env, local_worker_argv, take_spare, worker_cwd  # noqa: F401
from dashboard.serde import Record, SchemaError, dumps, load

# ``PROJECT_ROOT`` is the older name of ``spawn.PACKAGE_PARENT`` the tests use.
PROJECT_ROOT = PACKAGE_PARENT
CHUNK = 4 << 20
STOP_GRACE = 3.0  # seconds a worker gets to exit by itself once its stdin is closed, before it is killed
STDERR_TAIL = 40  # lines of a worker's stderr kept for its crash report


class WorkerError(UserError):
    """The worker failed the request, crashed, hung or could not be started."""


class WorkerCrashed(WorkerError):
    pass


class WorkerTimeout(WorkerError):
    pass


class WorkerProtocolError(WorkerError):
    """The worker wrote something that is not the protocol (a forged or garbled line)."""


class WorkerVersionError(WorkerProtocolError):
    """The worker speaks another version of the protocol."""


# -- ownership ------------------------------------------------------------------------------------
# The groups current in this context, outermost first: a job's ``Cancellation`` group nests inside
# the Streamlit session's, and a worker started there belongs to both.
_OWNER: contextvars.ContextVar[tuple["WorkerGroup", ...]] = contextvars.ContextVar("worker_owner", default=())


class WorkerGroup:
    """The workers started (in this thread) while the group is current, stopped together by
    ``close``. Why: a Streamlit session's script thread may be blocked inside a worker call when
    the browser session ends; Streamlit then releases the session's resources on another thread,
    and this group is such a resource (``dashboard.views.frame``). A worker joins its groups the
    moment its process exists, before it greets, so closing stops it at any point of its start;
    one that starts after the close is stopped at once.

    ``grace``: the seconds each worker gets to exit by itself once its stdin is closed, before it
    is killed (a Cancel gives less than a session's end: a stopped or wedged worker must be gone
    within a moment of the click)."""

    def __init__(self, grace: float = STOP_GRACE) -> None:
        self._clients: weakref.WeakSet[WorkerClient] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.grace = grace
        self._closed: str | None = None  # the reason given to ``close``

    def make_current(self) -> None:
        """Workers this thread starts from now on belong to the group (a Streamlit script run
        calls this first; the next run calls it again)."""
        _OWNER.set((self,))

    @contextlib.contextmanager
    def current(self) -> Iterator["WorkerGroup"]:
        """Workers started in the block belong to the group, and to the groups already current."""
        token = _OWNER.set(_OWNER.get() + (self,))
        try:
            yield self
        finally:
            _OWNER.reset(token)

    def add(self, client: "WorkerClient") -> None:
        """Count ``client`` in; a group already closed stops it at once."""
        with self._lock:
            reason = self._closed
            if reason is None:
                self._clients.add(client)
        if reason is not None:
            client.close(grace=0, reason=reason)

    @property
    def pids(self) -> list[int]:
        """Process ids of the group's running workers."""
        with self._lock:
            return [pid for pid in (c.pid for c in self._clients) if pid is not None]

    def close(self, reason: str = "its owner closed", wait: bool = False, grace: float | None = None) -> None:
        """Stop every worker of the group, and any started later, without blocking the caller
        (Streamlit runs release hooks and button callbacks on its server thread): each is stopped
        on a thread of its own. ``wait``: return only once they are stopped (a command line
        interrupted by Ctrl-C, which must not exit before its workers do); ``grace``: instead of
        the group's."""
        with self._lock:
            clients = list(self._clients)
            self._clients = weakref.WeakSet()
            self._closed = reason
        grace = self.grace if grace is None else grace
        stoppers = [threading.Thread(target=client.close, kwargs={"grace": grace, "reason": reason},
                                     daemon=True) for client in clients]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers if wait else ():
            stopper.join()


def _join_groups(client: "WorkerClient") -> None:
    for group in _OWNER.get():
        group.add(client)


# -- the client -------------------------------------------------------------------------------------
class _LineTooLong:
    """Queued instead of a message when the worker wrote a line over ``MAX_LINE``."""


class WorkerClient:
    """One worker process. Use as a context manager; ``call`` may be made many times."""

    def __init__(self, argv: list[str] | None = None, *, label: str = "local worker", remote: bool = False,
                 start_timeout: float = 60.0, upgrade_hint: str | None = None) -> None:
        self.argv = argv or local_worker_argv()
        self.remote = remote  # a remote worker cannot read our files: models travel over the protocol
        self.label = label
        self.start_timeout = start_timeout
        self.upgrade_hint = upgrade_hint  # how to fix a worker of another protocol version
        self.hello: WorkerHello | None = None
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._lines: queue.Queue = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL)
        self._stderr_thread: threading.Thread | None = None
        self._finalizer: weakref.finalize | None = None
        self._stopped: str | None = None  # why ``close`` stopped the worker, for a call still waiting
        self._next_id = 0
        self._spawn_error: str | None = None
        self._env: dict[str, str] | None = None  # what the process was started with

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
        A spare local worker started by ``spawn.start_spare`` is adopted instead."""
        self._spawn_error = None
        spare = None if self.remote else take_spare(self.argv)
        if spare is not None:
            proc, self._env = spare.proc, spare.env
        else:
            self._env = local_env()
            try:
                proc = _spawn.start(self.argv, self._env)
            except OSError as exc:
                self._spawn_error = f"cannot start the {self.label} ({self.argv[0]}): {exc.strerror}"
                return self
        self._proc, self._stopped = proc, None
        self._lines = queue.Queue()
        self._finalizer = weakref.finalize(self, _spawn.stop, proc, STOP_GRACE, not self.remote)
        platform.on_exit(self._finalizer)  # a web server's stop may skip atexit
        _join_groups(self)
        # The pumps get the queue and the deque, not ``self``: a client nobody holds can be collected.
        threading.Thread(target=_pump_stdout, args=(proc.stdout, self._lines, self._stderr), daemon=True).start()
        self._stderr_thread = threading.Thread(target=_pump_stderr, args=(proc.stderr, self._stderr), daemon=True)
        self._stderr_thread.start()
        return self

    def _await_hello(self) -> None:
        if self._spawn_error is not None:
            raise WorkerError(self._spawn_error)
        if self.hello is not None:
            return
        greeting = self._next_message(self.start_timeout, "starting", self.start_timeout).get("hello")
        if self._stopped is not None:  # stopped while starting, yet greeted: an adopted spare had greeted before
            raise self._crashed("starting")
        protocol = greeting.get("protocol") if isinstance(greeting, dict) else None
        if isinstance(protocol, int) and protocol != PROTOCOL_VERSION:
            self.close()
            raise WorkerVersionError(self._mismatch(greeting.get("version"), protocol))
        try:
            self.hello = load(WorkerHello, greeting, "greeting")
        except SchemaError as exc:
            self.close()
            raise WorkerProtocolError(f"the {self.label} did not greet as a worker does: {exc}") from None

    def _mismatch(self, version: object, protocol: int) -> str:
        release = version if isinstance(version, str) and version else "of an older release"
        text = (f"the {self.label} runs qnn-backend-lab {release[:40]} (protocol {protocol}); this dashboard "
                f"({__version__}) needs protocol {PROTOCOL_VERSION}")
        return f"{text}: {self.upgrade_hint}" if self.upgrade_hint else text

    def close(self, grace: float = STOP_GRACE, reason: str | None = None) -> None:
        """Stop the worker: close its stdin (it exits by itself, even mid-request), wait up to
        ``grace`` seconds, then kill its process group. Safe from any thread, any number of times."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None and reason:
                self._stopped = reason
        if proc is None:
            return
        self._finalizer.detach()
        _spawn.stop(proc, grace, not self.remote)

    def __enter__(self) -> "WorkerClient":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc else None

    # -- requests ---------------------------------------------------------------------------
    def call(self, cmd: str, args: Record | None = None, *, timeout: float | None = 600.0,
             on_event: Callable[[ProgressEvent], None] | None = None) -> Record | None:
        """Run ``cmd`` in the worker and return its result record (checked against
        ``protocol.COMMANDS``); progress events go to ``on_event``. ``timeout`` bounds the whole
        call (``None`` or ``math.inf``: no bound); on expiry the worker is stopped. A reply that is
        not what the protocol says is a ``WorkerProtocolError`` and the worker is stopped (the next
        client starts a fresh one)."""
        if timeout is not None and not timeout > 0:  # nan included
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        timeout = None if timeout == math.inf else timeout
        command = COMMANDS[cmd]
        self._await_hello()
        proc = self._proc
        if proc is None:
            raise WorkerError(f"the {self.label} is not running")
        self._next_id += 1
        req_id = self._next_id
        self._stderr.clear()  # a crash report should quote this request's output, not older noise
        request = WorkerRequest(req_id, cmd, (args if args is not None else command.args()).to_json())
        try:
            proc.stdin.write((dumps(request) + "\n").encode())
            proc.stdin.flush()
        except (OSError, ValueError):  # the pipe broke, or another thread closed it
            raise self._crashed(cmd) from None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            message = self._next_message(remaining, cmd, timeout)
            try:
                done, result = self._read(message, req_id, command)
            except SchemaError as exc:
                self.close()
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
        if not self.remote:
            return str(Path(path).resolve())
        known = self.call("has_model", DigestArgs(digest), timeout=60)
        if known.path:
            return known.path
        size = os.path.getsize(path)
        name = plain_file_name(Path(path).name)
        offset = 0
        with open(path, "rb") as handle:
            while True:
                data = handle.read(CHUNK)
                final = offset + len(data) >= size
                chunk = ModelChunk(digest, name, offset, base64.b64encode(data).decode(), final)
                result = self.call("put_model", chunk, timeout=300)
                offset += len(data)
                if on_event is not None:
                    on_event(Upload(offset, size))
                if final:
                    return result.path

    # -- plumbing ---------------------------------------------------------------------------
    def _next_message(self, remaining: float | None, what: str, timeout: float | None) -> dict:
        """The next protocol message; ``timeout`` is the limit the caller set (what a timeout
        message states), ``remaining`` what is left of it."""
        try:
            message = self._lines.get(timeout=remaining)
        except queue.Empty:
            self.close()
            raise WorkerTimeout(f"the {self.label} did not finish {what!r} within {timeout:g} s "
                                "and was stopped") from None
        if message is None:
            raise self._crashed(what)
        if isinstance(message, _LineTooLong):
            self.close()
            raise WorkerProtocolError(f"the {self.label} wrote a line longer than the protocol's "
                                      f"{MAX_LINE >> 20} MB limit during {what!r} and was stopped")
        return message

    def _crashed(self, what: str) -> WorkerCrashed:
        with self._lock:
            proc, self._proc = self._proc, None
        if self._stopped is not None:
            return WorkerCrashed(f"the {self.label} was stopped during {what!r}: {self._stopped}")
        code = None
        if proc is not None:
            self._finalizer.detach()
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _spawn.stop(proc, 0, not self.remote)
            else:
                if not self.remote:  # it ended by itself (a native crash): it removed nothing, as if killed
                    scratch.remove_of(proc.pid)
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=2)  # its last words (ssh's reason, a traceback) are read first
        tail = next((line for line in reversed(self._stderr) if line.strip()), "")
        detail = f"; last output: {tail[-300:]}" if tail else ""
        return WorkerCrashed(f"the {self.label} died during {what!r} ({platform.describe_exit(code)}){detail}")


def _pump_stdout(stream: IO[bytes], lines: queue.Queue, noise: deque) -> None:
    """Protocol lines to the queue, each read whole but never more than ``MAX_LINE`` bytes of it;
    anything else a native library printed is kept with stderr for crash reports. A line over the
    cap ends the stream: the client stops the worker."""
    while True:
        raw = read_line(stream)
        if raw is None:
            lines.put(_LineTooLong())
            return
        if not raw:
            break
        line = raw.strip()
        if line.startswith(b"{"):
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict):
                lines.put(message)
                continue
        if line:
            noise.append(line[:1000].decode("utf-8", "replace"))
    lines.put(None)


def _pump_stderr(stream: IO[bytes], tail: deque) -> None:
    while True:
        try:
            raw = stream.readline(64 << 10)
        except (OSError, ValueError):
            return
        if not raw:
            return
        text = raw.decode("utf-8", "replace").rstrip()
        if text:
            tail.append(text[:1000])


@contextlib.contextmanager
def optimized_copy(model_path: str, timeout: float = 300.0) -> Iterator[Path]:
    """The graph ONNX Runtime hands to execution providers (after its level-1 optimizations),
    written by a local worker into a scratch folder of this process, removed when the block ends
    (also when the worker dies half-way)."""
    with tempfile.TemporaryDirectory(prefix="qnn-lab-ortview-") as folder:
        with WorkerClient() as worker:
            result = worker.call("ort_view", OrtViewArgs(str(Path(model_path).resolve()), folder), timeout=timeout)
        yield Path(result.path)


