"""Long analyses off the script thread: progress with the step and the time elapsed, and Cancel.

Streamlit runs a page's script on one thread per session. An analysis run there (5 to 113 s on real
models) blocks the page, so a Cancel button could never be pressed. A job instead runs on a
background thread that never touches Streamlit: it only records the latest progress event it was
sent. The job lives in ``st.session_state`` under a slot name, so every rerun finds it; the page
shows a running job with ``show``, an ``st.fragment`` that redraws itself every ``POLL_S`` with the
step and the time elapsed, and a Cancel button whose callback stops the job's worker process
(``Cancellation.cancel``: at any moment, also while the worker starts or its ssh connects, and
without blocking the server thread the callback runs on). When the job ends, the fragment reruns the
whole page, which reads the outcome (``Job.result``, ``Job.error`` or ``Job.cancelled``).
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import streamlit as st

from dashboard.errors import UserError
from dashboard.partition.analysis import Cancellation, Cancelled
from dashboard.partition.protocol import Stage
from dashboard.runtime.protocol import ProgressEvent, Upload
from dashboard.views.safe import md

POLL_S = 0.5
QUICK_S = 2.0  # a job that ends this fast (a cache hit, a tiny model) is shown without a progress box

Work = Callable[[Callable[[ProgressEvent], None], Cancellation], Any]


@dataclass
class Job:
    """One background run and what it has said so far (written by its thread, read by the page)."""

    key: str  # what it computes (e.g. the digest and options), so a page knows whether it is current
    title: str
    cancellation: Cancellation = field(default_factory=Cancellation)
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    stage: str = "starting"
    progress: float = 0.0
    result: Any = None
    error: str | None = None
    thread: threading.Thread | None = None

    @property
    def done(self) -> bool:
        return self.ended is not None

    @property
    def cancelled(self) -> bool:
        return self.cancellation.cancelled and self.result is None

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def feed(self, event: ProgressEvent) -> None:
        if isinstance(event, Stage):
            self.stage, self.progress = event.stage, min(max(event.progress, 0.0), 1.0)
        elif isinstance(event, Upload):
            self.stage = f"sending the model to the device: {event.sent / max(event.total, 1):.0%}"

    def cancel(self) -> None:
        self.stage = "cancelling: stopping the worker"
        self.cancellation.cancel()

    def wait(self, seconds: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout=seconds)

    def _run(self, work: Work) -> None:
        try:
            self.result = work(self.feed, self.cancellation)
        except Cancelled:
            pass
        except UserError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must still end the job, with its traceback logged
            traceback.print_exc(file=sys.stderr)
            self.error = f"internal error ({type(exc).__name__}: {exc}); the details are in the server log"
        finally:
            self.ended = time.monotonic()


def current(slot: str) -> Job | None:
    return st.session_state.get(slot)


def start(slot: str, key: str, title: str, work: Work) -> Job:
    """Run ``work(on_event, cancellation)`` on a thread as the job of ``slot``; a job still running
    there is cancelled first (one analysis per page at a time)."""
    previous = current(slot)
    if previous is not None and not previous.done:
        previous.cancel()
    job = Job(key, title)
    # In the script run's context: the workers the job starts belong to the session's worker group
    # (``frame._session_workers``), so they stop when the browser session ends.
    context = contextvars.copy_context()
    job.thread = threading.Thread(target=context.run, args=(job._run, work), name=f"job {slot}", daemon=True)
    st.session_state[slot] = job
    job.thread.start()
    return job


@st.fragment(run_every=POLL_S)
def show(slot: str) -> None:
    """The running job of ``slot``: its step and time elapsed, and Cancel; the whole page reruns
    once it has ended."""
    job = current(slot)
    if job is None:
        return
    if job.done:
        st.rerun()
    with st.container(border=True):
        st.progress(job.progress, text=f"{md(job.title)} · {md(job.stage)} · {job.elapsed:.0f} s elapsed")
        st.button("Cancel", key=f"{slot}_cancel", icon=":material/stop_circle:", on_click=job.cancel,
                  help="Stops the worker process at once; nothing is measured or cached.")


def outcome(job: Job) -> None:
    """What a finished job without a result says: cancelled, or its one-line error."""
    if job.cancelled:
        st.info(f"Cancelled after {job.elapsed:.0f} s: the worker was stopped and nothing was measured. Apply "
                "the options again to restart.", icon=":material/stop_circle:")
    elif job.error:
        st.error(md(job.error), icon=":material/error:")


def finished(slot: str, job: Job):
    """The result of ``job`` once it has one; until then its progress (``show``), and after a
    cancel or a failure what happened (``outcome``), with None."""
    if not job.done:
        show(slot)
        return None
    if job.result is None:
        outcome(job)
    return job.result
