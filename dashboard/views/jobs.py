"""Long runs off the script thread, on a page: progress with the step, the time elapsed (and left,
for runs that count requests), and Cancel.

Streamlit runs a page's script on one thread per session. A run there (5 to 113 s for an analysis
on real models, many minutes for a timeline on the HTP simulator) blocks the page, so a Cancel
button could never be pressed, and leaving the page stopped the run. A job instead runs on a
background thread that never touches Streamlit (``dashboard.runtime.jobs.Job``, the same for every
kind of run). The job lives in ``st.session_state`` under a slot name, so every rerun and every
page of the session finds it; the page shows a running job with ``show``, an ``st.fragment`` that
redraws itself every ``POLL_S`` with the step and the times, anything the page draws from the
job's events (``draw``: a timeline's live chart), and a Cancel button whose callback stops the
job's worker process (at any moment, also while the worker starts or its ssh connects, and
without blocking the server thread the callback runs on). When the job ends, the fragment reruns
the whole page, which reads the outcome (``Job.result``, ``Job.error`` or ``Job.cancelled``).
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

from dashboard.runtime.jobs import Job, Tracker, Work
from dashboard.views.safe import md

POLL_S = 0.5
QUICK_S = 2.0  # a job that ends this fast (a cache hit, a tiny model) is shown without a progress box
AGAIN = "Apply the options again to restart."

Draw = Callable[[Job], None]

__all__ = ["Job", "POLL_S", "QUICK_S", "current", "start", "show", "outcome", "finished", "duration"]


def current(slot: str) -> Job | None:
    return st.session_state.get(slot)


def start(slot: str, key: str, title: str, work: Work, tracker: Tracker | None = None,
          timeout: float | None = None) -> Job:
    """Run ``work(on_event, cancellation)`` on a thread as the job of ``slot``; a job still running
    there is cancelled first (one run per page at a time). Started in the script run's context:
    the workers the job starts belong to the session's worker group (``frame._session_workers``),
    so they stop when the browser session ends."""
    previous = current(slot)
    if previous is not None and not previous.done:
        previous.cancel()
    job = Job(key, title, tracker=tracker, timeout=timeout)
    st.session_state[slot] = job
    return job.start(work)


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``: a time a person reads at a glance."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def progress_text(job: Job) -> str:
    """The title, the step, the requests answered (when the job counts them), the time elapsed and
    the time left estimated from them."""
    parts = [md(job.title)]
    if job.count is not None:
        parts.append(f"{job.count[0]}/{job.count[1]} requests answered")
    parts += [md(job.stage), f"{job.elapsed:.0f} s elapsed"]
    if job.count is not None:
        left = job.time_left
        parts.append("time left: estimated after the first answer" if left is None else
                     f"about {duration(left)} left")
    return " · ".join(parts)


@st.fragment(run_every=POLL_S)
def show(slot: str, draw: Draw | None = None) -> None:
    """The running job of ``slot``: its step and times, what ``draw`` shows of it, and Cancel; the
    whole page reruns once it has ended."""
    job = current(slot)
    if job is None:
        return
    if job.done:
        st.rerun()
    with st.container(border=True):
        st.progress(job.progress, text=progress_text(job))
        st.button("Cancel", key=f"{slot}_cancel", icon=":material/stop_circle:", on_click=job.cancel,
                  help="Stops the worker process at once; nothing is measured or cached.")
        if draw is not None:
            draw(job)


def outcome(job: Job, again: str = AGAIN) -> None:
    """What a finished job without a result says: cancelled, or its one-line error."""
    if job.cancelled:
        st.info(f"Cancelled after {job.elapsed:.0f} s: the worker was stopped and nothing was measured. "
                f"{again}", icon=":material/stop_circle:")
    elif job.error:
        st.error(md(job.error), icon=":material/error:")


def finished(slot: str, job: Job, draw: Draw | None = None, again: str = AGAIN):
    """The result of ``job`` once it has one; until then its progress (``show``), and after a
    cancel or a failure what happened (``outcome``), with None."""
    if not job.done:
        show(slot, draw)
        return None
    if job.result is None:
        outcome(job, again)
    return job.result
