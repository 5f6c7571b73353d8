"""Hot migration, once: open → warm → policy → swap → drain → release.

``HotMigrationSession`` (your own code, in your process) and the timeline's workload server (in the
worker) both migrate through ``Migration``, record the same ``timeline.model.Event`` kinds through
one ``EventLog`` and apply one meaning of each policy, so the library and the dashboard behave the
same. The pieces a strategy without migration also needs (``open_slot``, ``warm``) are here too,
so a "target only" session is created and warmed exactly as a migration's target is.

Policies (``timeline.model.POLICIES``):

- ``always``: swap as soon as the target is warm;
- ``if_faster``: once the target is warm, run the serving session on the same warm-up inputs the
  same number of times, and swap only if the target's median latency (runs after the first) is
  strictly lower than the serving session's, measured the same way at the same moment. Both
  figures go into the ``swap`` or ``migration_skipped`` event.
"""

from __future__ import annotations

import csv
import statistics
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from dashboard.errors import UserError, one_line
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.qnn import QNN_EP, BoundRunner, SessionHandle, create_session
from dashboard.timeline.model import POLICIES, Event
from dashboard.timeline.switch import SessionSwitch

Feeds = dict[str, np.ndarray]


class SessionFailed(UserError):
    """A session could not be created or warmed; the message is the runtime's reason."""


class EventLog:
    """A clock started at construction and the events recorded against it. Each event also goes
    to ``sink`` as it happens, under ``lock`` (a worker's protocol writer is shared by threads)."""

    def __init__(self, sink: Callable[[Event], None] | None = None, lock: threading.Lock | None = None) -> None:
        self.t0 = time.perf_counter()
        self.events: list[Event] = []
        self._sink = sink
        self.lock = lock or threading.Lock()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def event(self, kind: str, backend: str, detail: str | None = None, t: float | None = None) -> Event:
        event = Event(round(self.now() if t is None else max(t, 0.0), 6), kind, backend, detail)
        with self.lock:
            self.events.append(event)
            if self._sink is not None:
                self._sink(event)
        return event


class Slot:
    """A session that serves: its backend, the session, and optionally IOBinding memory (HTP
    shared memory) its calls are bound in, one binding per calling thread."""

    def __init__(self, backend: str, handle: SessionHandle, bind_memory=None,
                 output_example: list[np.ndarray] | None = None) -> None:
        self.backend = backend
        self.handle: SessionHandle | None = handle
        self.bind_memory = bind_memory  # None: plain runs (inputs copied)
        self.output_example = output_example or []
        self.warm_latency: float | None = None
        self._runners: dict[int, BoundRunner] = {}

    def run(self, feeds: Feeds) -> list[np.ndarray]:
        session = self.handle.session
        if self.bind_memory is None:
            return session.run(None, feeds)
        thread = threading.get_ident()
        runner = self._runners.get(thread)
        if runner is None:
            runner = self._runners[thread] = BoundRunner(session, self.bind_memory, feeds, self.output_example)
        return runner.run(feeds)

    def release(self) -> None:
        self._runners.clear()
        self.handle = None


def open_slot(log: EventLog, model: str | bytes, config: SessionConfig, detail: str, *, profile: Path | None = None,
              expect_context: bool = False, bind_memory=None, output_example: list[np.ndarray] | None = None) -> Slot:
    """Create a session and check QNN really holds it (a QNN session whose backend failed to set
    up silently runs on the CPU EP; that is a failure here, with QNN's message). ``profile`` is
    the QNN basic-profiling file the config writes, for the finalize phase."""
    backend = config.backend
    log.event("session_create_start", backend, detail)
    try:
        handle = create_session(model, config, require_qnn=True)
        end = log.now()
        claimed = _claimed(handle, expect_context)
    except UserError as exc:
        log.event("session_failed", backend, str(exc))
        raise SessionFailed(str(exc)) from None
    finalize = finalize_seconds(profile)
    if finalize is not None:
        log.event("finalize_start", backend, f"QNN (finalize) time {ms(finalize)}, from QNN profiling",
                  t=end - finalize)
    log.event("session_create_end", backend, claimed, t=end)
    if expect_context:
        log.event("context_loaded", backend, claimed)
    return Slot(backend, handle, bind_memory, output_example)


def _claimed(handle: SessionHandle, expect_context: bool) -> str:
    """Which EP holds what (``create_session(require_qnn=True)`` made sure QNN claimed some)."""
    backend = handle.config.backend
    if backend == "cpu":
        return "all nodes on the CPU EP"
    assigned = handle.assigned_nodes()
    claimed = assigned[QNN_EP]
    others = sum(len(nodes) for ep, nodes in assigned.items() if ep != QNN_EP)
    if expect_context:
        contexts = [name for name, op in claimed if op == "EPContext"]
        if not contexts:
            raise SessionFailed("the cached model loaded, but QNN holds no EPContext node: it was recompiled")
        return f"EPContext node(s) {', '.join(contexts)} loaded by {QNN_EP}; {others} node(s) on the CPU EP"
    return f"{len(claimed)} node(s) on QNN {backend}, {others} on the CPU EP"


def median_latency(slot: Slot, feeds: list[Feeds], runs: int) -> tuple[float, float]:
    """(first run, median of the runs after it) of ``runs`` calls cycling ``feeds``: the one
    measurement both the warm-up and the ``if_faster`` policy use (a first call is always slow)."""
    times = []
    for i in range(max(runs, 1)):
        start = time.perf_counter()
        slot.run(feeds[i % len(feeds)])
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:] or times)


def warm(log: EventLog, slot: Slot, feeds: list[Feeds], runs: int) -> None:
    """Run the warm-up before a session serves (the simulator's and a real HTP's first inference
    is slow); its median is the slot's ``warm_latency``. Where the shared-memory binding turns out
    impossible, the calls fall back to copied inputs and an event says why."""
    log.event("warmup_start", slot.backend)
    try:
        try:
            first, slot.warm_latency = median_latency(slot, feeds, runs)
        except UserError as exc:  # the binding is not possible: copy instead
            if slot.bind_memory is None:
                raise
            slot.bind_memory = None
            log.event("shared_memory", slot.backend, f"unavailable, inputs copied: {exc}")
            first, slot.warm_latency = median_latency(slot, feeds, runs)
    except Exception as exc:
        log.event("session_failed", slot.backend, f"warm-up failed: {one_line(exc)}")
        raise SessionFailed(f"warm-up failed on {slot.backend}: {one_line(exc)}") from None
    log.event("warmup_end", slot.backend, f"{max(runs, 1)} run(s): first {ms(first)}, warmed {ms(slot.warm_latency)}")


class Migration:
    """Which session serves, and the one move from the serving session to a target.

    ``serve`` installs the first session. ``run(backend, open_target)`` is the whole sequence:
    open the target (``open_target`` records its creation events and raises ``SessionFailed``),
    warm it, apply the policy, swap it in atomically, wait for the calls still running on the old
    session and release it. Any failure of the target leaves the serving session serving, records
    ``migration_failed`` with the runtime's reason and sets ``failure``; with no session serving
    at all, callers waiting for one are told why. ``done`` is set when ``run`` ends.
    """

    def __init__(self, log: EventLog, switch: SessionSwitch[Slot] | None = None, *, policy: str = "always",
                 feeds: list[Feeds] | None = None, warmup_runs: int = 3) -> None:
        if policy not in POLICIES:
            raise UserError(f"unknown migration policy {policy!r}; use {' or '.join(map(repr, POLICIES))}")
        self.log = log
        self.switch: SessionSwitch[Slot] = switch or SessionSwitch()
        self.policy = policy
        self.feeds = feeds or []
        self.warmup_runs = warmup_runs
        self.failure: str | None = None
        self.migrated = threading.Event()
        self.done = threading.Event()

    def serve(self, slot: Slot) -> None:
        """Install the first session (nothing served before it)."""
        self.switch.swap(slot, lambda old: self.log.event("serve_start", slot.backend))

    def run(self, backend: str, open_target: Callable[[], Slot]) -> bool:
        """Migrate to the ``backend`` session ``open_target`` creates; True if it was swapped in."""
        try:
            return self._migrate(backend, open_target)
        finally:
            self.done.set()

    def _migrate(self, backend: str, open_target: Callable[[], Slot]) -> bool:
        fast = self.switch.current
        try:
            target = open_target()
            warm(self.log, target, self.feeds, self.warmup_runs)
        except SessionFailed as exc:
            self.failure = str(exc)
            detail = f"{exc} — still serving on {fast.backend}" if fast else str(exc)
            self.log.event("migration_failed", backend, detail)
            if fast is None:
                self.switch.close(f"no session: the fast session failed and {exc}")
            return False
        return self._switch_to(target, fast)

    def _switch_to(self, target: Slot, fast: Slot | None) -> bool:
        if fast is None:  # nothing was serving: the target simply starts
            self.serve(target)
            self.migrated.set()
            return True
        if self.switch.closed:  # the caller stopped serving while the target compiled
            self.release(target)
            return False
        detail = f"{fast.backend} → {target.backend} (warmed {ms(target.warm_latency)}"
        if self.policy == "if_faster":
            try:
                _, fast_latency = median_latency(fast, self.feeds, self.warmup_runs)
            except Exception as exc:  # a serving session that fails its measurement is not the faster one
                fast_latency = float("inf")
                self.log.event("session_failed", fast.backend, f"if_faster measurement failed: {one_line(exc)}")
            comparison = (f"warmed {target.backend} {ms(target.warm_latency)} vs {fast.backend} {ms(fast_latency)} "
                          f"on the same {max(self.warmup_runs, 1)} warm-up run(s)")
            if not target.warm_latency < fast_latency:
                self.log.event("migration_skipped", target.backend,
                               f"policy if_faster: {comparison}; staying on {fast.backend}")
                self.release(target)
                return False
            detail = f"{fast.backend} → {target.backend} (policy if_faster: {comparison}"
        old = self.swap(target, detail + ")")
        self.drain(old)
        self.release(old)
        return True

    def swap(self, target: Slot, detail: str) -> Slot | None:
        """Make ``target`` serve the next call; the event is recorded under the switch's lock, so
        it is ordered before any call on the new session."""

        def announce(old: Slot | None) -> None:
            self.log.event("swap", target.backend, detail)
            self.migrated.set()

        return self.switch.swap(target, announce)

    def drain(self, old: Slot) -> None:
        waiting = self.switch.drain(old)
        self.log.event("drain_end", old.backend, f"{waiting} request(s) in flight at the swap finished")

    def release(self, slot: Slot) -> None:
        slot.release()
        self.log.event("session_released", slot.backend)


def finalize_seconds(profile: Path | None) -> float | None:
    """QNN's own "QNN (finalize) time" from the basic profiling CSV (microseconds)."""
    if profile is None or not profile.is_file():
        return None
    with open(profile, newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.DictReader(handle):
            if row.get("Message") == "FINALIZE" and row.get("Unit of Measurement") == "US":
                try:
                    return float(row["Time"]) / 1e6
                except (TypeError, ValueError):
                    return None
    return None


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f} ms"
