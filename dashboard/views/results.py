"""A page's finished results in the session, one mechanism for every page that keeps them (the
Profile and the Quantize & accuracy pages): the background job's result collected once, whichever
page the session is on when it ends; at most ``keep`` entries, oldest dropped; per model the entry
shown (which other pages draw, e.g. on the Partitions graph) and the picker that changes it.

An entry is a dict with at least ``digest``, ``name`` and ``finished`` (an aware datetime); ``add``
gives it its ``label``: ``#N name · what · HH:MM:SS``.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from dashboard.views import jobs
from dashboard.views.safe import short


class SessionResults:
    """``runs``: the session-state key of the entries (oldest first); ``shown``: of model digest ->
    label shown; ``job``: the page's job key (``views.jobs``); ``what(entry)``: the label's words."""

    def __init__(self, runs: str, shown: str, job: str, keep: int, what: Callable[[dict], str]) -> None:
        self.runs, self.shown, self.job, self.keep, self.what = runs, shown, job, keep, what

    def entries(self) -> list[dict]:
        return st.session_state.setdefault(self.runs, [])

    def add(self, entry: dict) -> None:
        runs = self.entries()
        entry["label"] = (f"#{len(runs) + 1} {short(entry['name'], 40)} · {self.what(entry)} · "
                          f"{entry['finished'].astimezone():%H:%M:%S}")
        runs.append(entry)
        del runs[:-self.keep]
        st.session_state.setdefault(self.shown, {})[entry["digest"]] = entry["label"]

    def collect(self) -> None:
        """The finished job's result into the entries, once (any page of the session may call this:
        a run that ends while the user is elsewhere is kept)."""
        job = jobs.current(self.job)
        if job is None or not job.done or job.result is None:
            return
        if any(r is job.result for r in st.session_state.get(self.runs, [])):
            return
        self.add(job.result)

    def progress(self, digest: str, finished: str, again: str, time_left=None) -> None:
        """The job's progress while it runs (``jobs.show``; ``time_left`` its estimate); once it
        ended, for the model ``digest``: its failure or Cancel and ``again``, else ``finished`` and
        the time it took."""
        job = jobs.current(self.job)
        if job is None:
            return
        if not job.done:
            jobs.show(self.job, time_left)
            return
        self.collect()
        if job.key.startswith(f"{digest}|"):
            if job.result is None:
                jobs.outcome(job, again)
            else:
                st.caption(f"{finished} in {jobs.duration(job.elapsed)}.")

    def of(self, digest: str) -> list[dict]:
        """The model ``digest``'s entries, oldest first (call ``collect`` first)."""
        return [r for r in st.session_state.get(self.runs, []) if r["digest"] == digest]

    def shown_entry(self, digest: str) -> dict | None:
        """The entry picked for ``digest``, else its latest, else None."""
        entries = self.of(digest)
        if not entries:
            return None
        label = st.session_state.get(self.shown, {}).get(digest)
        return next((e for e in entries if e["label"] == label), entries[-1])

    def picker(self, digest: str, title: str, key: str, entries: list[dict]) -> dict:
        """The select box of ``entries`` (``key`` its widget key), starting at the one shown;
        returns the entry picked, which becomes the one shown."""
        labels = [e["label"] for e in entries]
        shown: dict = st.session_state.setdefault(self.shown, {})
        st.session_state[key] = shown.get(digest) if shown.get(digest) in labels else labels[-1]
        label = st.selectbox(title, labels, key=key, on_change=self._picked, args=(digest, key))
        shown[digest] = label
        return next(e for e in entries if e["label"] == label)

    def _picked(self, digest: str, key: str) -> None:
        st.session_state.setdefault(self.shown, {})[digest] = st.session_state[key]
