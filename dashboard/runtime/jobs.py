"""Every long run, local or on a device, through one mechanism: a partition analysis, a timeline,
and whatever comes next (a cost profile, a sweep) start, report, stop and end the same way.

Two parts, both free of Streamlit:

- ``run_command`` is a run's worker lifecycle: start the worker on the device (a ``Cancel`` stops
  it also while it starts or its ssh connects), make the model available there (sent once per
  digest to a remote device), call one command with a timeout, streaming its progress events,
  and reap the worker on a non-daemon thread, so no worker outlives the process that started it.
  ``Cancellation`` stops it from any thread at any moment; a command line interrupted (Ctrl-C,
  SIGTERM) stops it the same way before it exits.
- ``Job`` is a run in the background: it keeps the latest step, the fraction done, the time
  elapsed and (when its progress counts requests) an estimate of the time left, a Cancel, an
  optional timeout, and the outcome (result, error or cancelled). The pages draw a ``Job``
  (``dashboard.views.jobs``); nothing here knows about pages.

Why one mechanism: the Timeline page used to run its run on the page's script thread, with no
Cancel and a 30-minute timeout, while a partition ran in the background with both; the next
capability would have copied one or the other.
"""

from __future__ import annotations

import contextvars
import itertools
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from dashboard.errors import UserError
from dashboard.runtime.client import STOP_GRACE, WorkerClient, WorkerError, WorkerGroup
from dashboard.runtime.protocol import ProgressEvent, Upload, WorkerHello
from dashboard.serde import Record

if TYPE_CHECKING:
    from dashboard.runtime.devices import Device

Events = Callable[[ProgressEvent], None]


# -- cancelling ---------------------------------------------------------------------------------------
class Cancelled(UserError):
    """The user stopped the run; nothing was measured or cached."""


CANCELLED = "the analysis was cancelled"
CANCEL_GRACE = 0.5  # seconds a cancelled worker gets to exit by itself (and remove its scratch) before it is killed


class Cancellation:
    """Lets another thread stop a running run: ``cancel()`` stops every worker started inside
    ``watching`` (a ``WorkerGroup``: the worker exits at once when its stdin closes, even
    mid-compile, and is killed within ``CANCEL_GRACE`` if it does not, e.g. a stopped one), and
    the run then raises ``Cancelled`` instead of reporting a crash. Why a group and not the
    started client: a worker joins it the moment its process exists, so a Cancel pressed while
    it starts (a local import, an ssh connection, a worker that never greets) stops it too
    instead of waiting out the start timeout; one started after the Cancel is stopped at once.
    Thread-safe, and ``cancel`` never blocks (the page's button callback calls it)."""

    def __init__(self) -> None:
        self._workers = WorkerGroup(grace=CANCEL_GRACE)
        self.cancelled = False

    def watching(self):
        """A context manager: workers started in the block are the ones ``cancel`` stops."""
        return self._workers.current()

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers a ``cancel`` would stop."""
        return self._workers.pids

    def cancel(self) -> None:
        self.cancelled = True
        self._workers.close(CANCELLED)

    def stop(self) -> None:
        """``cancel``, and return once the workers are gone, each given ``STOP_GRACE`` to exit by
        itself first: what an interrupted command line does, since nobody waits on a button and a
        worker that exits by itself removes its scratch folders."""
        self.cancelled = True
        self._workers.close(CANCELLED, wait=True, grace=STOP_GRACE)

    def check(self) -> None:
        if self.cancelled:
            raise Cancelled(CANCELLED)


# -- one command on a device ----------------------------------------------------------------------
@dataclass
class Answer:
    """What a command run on a device came back with: its result, or the one-line ``failure``
    of the worker (it crashed, hung past the timeout, or the command failed), the model's path
    on the device, and the worker's greeting."""

    result: Record | None
    failure: WorkerError | None
    model_path: str
    hello: WorkerHello | None

    def value(self) -> Record:
        """The result, or the worker's failure raised."""
        if self.failure is not None:
            raise self.failure
        return self.result


def run_command(device: Device, model_path: str, digest: str | None, command: str,
                args: Callable[[str], Record], *, timeout: float | None, on_event: Events | None = None,
                cancel: Cancellation | None = None) -> Answer:
    """``command`` run on ``device`` for the model at ``model_path``: ``args(path)`` builds its
    arguments from the model's path on the device. ``digest`` names the model to a remote
    device (sent once per digest; unused locally).

    Raises ``UserError`` for an unreachable device and ``Cancelled`` once ``cancel`` fired (also
    while connecting, and when the Cancel made the worker fail); every other failure of the
    worker is ``Answer.failure``. The worker is reaped on a non-daemon thread, which this process
    joins before it ends (a remote worker's SSH session takes a while to close)."""
    cancel = cancel or Cancellation()
    emit = on_event or (lambda event: None)
    worker: WorkerClient | None = None
    try:
        cancel.check()
        try:
            with cancel.watching():
                worker = device.connect()
        except UserError:  # a worker stopped by Cancel while it started is not an unreachable device
            cancel.check()
            raise
        path = ""
        try:
            path = worker.send_model(model_path, digest or "", on_event=emit)
            result = worker.call(command, args(path), timeout=timeout, on_event=emit)
        except WorkerError as exc:
            cancel.check()
            return Answer(None, exc, path, worker.hello)
        return Answer(result, None, path, worker.hello)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # Ctrl-C, or SIGTERM/SIGHUP (``platform.Terminated``), in a CLI
            cancel.stop()
        raise
    finally:
        if worker is not None:
            threading.Thread(target=worker.close, name=f"{command}-worker-reaper").start()


# -- a run in the background ------------------------------------------------------------------------
@runtime_checkable
class Step(Protocol):
    """A progress event that names the step and the fraction done (a partition's ``Stage``)."""

    stage: str
    progress: float


class Tracker(Protocol):
    """What follows a run that counts requests as they are answered (a timeline's ``LiveRun``):
    it takes every event, and says the step, the requests answered and how many there are."""

    status: str
    answered: int
    total: int

    def feed(self, event: ProgressEvent) -> None: ...


Work = Callable[[Events, Cancellation], Any]
_IDS = itertools.count(1)


class Job:
    """One background run and what it has said so far (written by its thread, read by whoever
    shows it). ``key`` says what it computes (e.g. a model digest and the options), so a page
    knows whether the job is the one it would start; ``tracker``, when given, takes every event
    and its count of answered requests drives the progress and the time-left estimate;
    ``timeout``: the whole run is cancelled after that many seconds, an error that says so."""

    def __init__(self, key: str, title: str, *, tracker: Tracker | None = None,
                 timeout: float | None = None) -> None:
        self.id = next(_IDS)
        self.key, self.title = key, title
        self.tracker = tracker
        self.timeout = timeout
        self.cancellation = Cancellation()
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stage = "starting"
        self.progress = 0.0
        self.result: Any = None
        self.error: str | None = None
        self.timed_out = False
        self.thread: threading.Thread | None = None

    @property
    def done(self) -> bool:
        return self.ended is not None

    @property
    def cancelled(self) -> bool:
        return self.cancellation.cancelled and self.result is None and not self.timed_out

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def count(self) -> tuple[int, int] | None:
        """(answered, total) requests, for a job with a tracker."""
        return None if self.tracker is None else (self.tracker.answered, self.tracker.total)

    @property
    def time_left(self) -> float | None:
        """Seconds left, estimated from the requests answered so far: the time per answered
        request until now, times the requests still to answer. Why this simple rate and not one
        per phase: every strategy of a run pays its own setup (a session, an HTP compile) before
        its requests, so the setup is spread over the answers in the same proportion throughout.
        A tracker with a ``time_left`` of its own is asked first (a timeline's ``LiveRun``: the
        estimate's walk on the costs its first requests measured). None before the first answer,
        once done, and for a job without a count."""
        count = self.count
        if self.done or count is None or count[0] <= 0:
            return None
        own = getattr(self.tracker, "time_left", None)  # a tracker that estimates better (a timeline's)
        left = own() if callable(own) else None
        if left is not None:
            return left
        answered, total = count
        return self.elapsed / answered * max(total - answered, 0)

    def feed(self, event: ProgressEvent) -> None:
        """One progress event of the run (the ``on_event`` its work gets)."""
        if self.tracker is not None:
            self.tracker.feed(event)
            answered, total = self.tracker.answered, self.tracker.total
            self.stage = self.tracker.status
            self.progress = min(answered / total, 1.0) if total else 0.0
        elif isinstance(event, Step):
            self.stage, self.progress = event.stage, min(max(event.progress, 0.0), 1.0)
        elif isinstance(event, Upload):
            self.stage = f"sending the model to the device: {event.sent / max(event.total, 1):.0%}"

    def cancel(self) -> None:
        """Stop the run's worker at once; never blocks (a button callback calls it)."""
        self.stage = "cancelling: stopping the worker"
        self.cancellation.cancel()

    def wait(self, seconds: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout=seconds)

    def start(self, work: Work) -> "Job":
        """Run ``work(self.feed, self.cancellation)`` on a daemon thread, in the caller's context
        (so the workers it starts belong to the caller's worker groups too: a browser session's,
        which stops them when the session ends)."""
        context = contextvars.copy_context()
        self.thread = threading.Thread(target=context.run, args=(self._run, work), name=f"job {self.title}",
                                       daemon=True)
        self.thread.start()
        return self

    def _expire(self) -> None:
        if not self.done:
            self.timed_out = True
            self.cancel()

    def _run(self, work: Work) -> None:
        timer = None
        if self.timeout is not None:
            timer = threading.Timer(self.timeout, self._expire)
            timer.daemon = True
            timer.start()
        try:
            self.result = work(self.feed, self.cancellation)
        except Cancelled:
            if self.timed_out:
                self.error = f"{self.title} did not finish within {self.timeout:g} s and was stopped"
        except UserError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must still end the job, with its traceback logged
            traceback.print_exc(file=sys.stderr)
            self.error = f"internal error ({type(exc).__name__}: {exc}); the details are in the server log"
        finally:
            if timer is not None:
                timer.cancel()
            self.ended = time.monotonic()
