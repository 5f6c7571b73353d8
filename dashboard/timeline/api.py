"""``backend_type=auto`` and ``hot_migration`` for your own Python code, on the released runtime.

Neither option exists in onnxruntime-qnn yet (seed 000). These two entry points give an
application the same behaviour today, on real sessions:

    from dashboard.timeline.api import HotMigrationSession, auto_session
    from dashboard.runtime.config import SessionConfig

    with HotMigrationSession("model.onnx", fast=SessionConfig(backend="gpu"),
                             target=SessionConfig(backend="htp", fp16=True, soc="sm8650")) as sess:
        logits = sess.run(None, feeds)      # answered by the GPU at once, by the HTP once it is warm

    handle, verdict = auto_session("model.onnx")   # GPU for GenAI, HTP otherwise, with the evidence

The migration follows the seed: the fast session serves from the start; the target is created and
warmed on a background thread; the swap is atomic (each ``run`` call goes to exactly one session);
calls in flight on the old session finish before it is released; if the target fails, serving
stays on the fast session and ``failure`` holds the runtime's reason. Unlike the EP proposal it is
not limited to the nodes both backends support: each session partitions the model for itself.

This runs in the caller's process. The dashboard itself never does that (a native crash would take
it down); it runs the same logic in a worker, see ``dashboard.timeline.runner``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import Classification
from dashboard.errors import UserError, one_line
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import resolve_dims
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.qnn import SessionHandle, create_session, random_inputs
from dashboard.timeline.switch import SessionSwitch


@dataclass(frozen=True)
class MigrationEvent:
    """Seconds since the session was opened, the kind (``session_create_start`` …
    ``migration_failed``, as in the timeline) and the backend it concerns."""

    t: float
    kind: str
    backend: str
    detail: str | None = None


class HotMigrationSession:
    """Serve on ``fast`` at once, migrate to ``target`` when it is warm (see the module docstring).

    ``policy="if_faster"`` keeps the fast session when the warmed target is not faster than the
    fast session's measured latency on the same warm-up inputs.
    """

    def __init__(self, model: str, fast: SessionConfig, target: SessionConfig, *,
                 warmup_feeds: list[dict[str, np.ndarray]] | None = None, warmup_runs: int = 3,
                 policy: str = "always", on_event: Callable[[MigrationEvent], None] | None = None) -> None:
        if policy not in ("always", "if_faster"):
            raise UserError(f"unknown migration policy {policy!r}; use 'always' or 'if_faster'")
        self.model = model
        self.policy = policy
        self.events: list[MigrationEvent] = []
        self.failure: str | None = None
        self.migrated = threading.Event()
        self._on_event = on_event
        self._warmup_feeds = warmup_feeds
        self._warmup_runs = max(warmup_runs, 1)
        self._t0 = time.perf_counter()
        self._switch: SessionSwitch[SessionHandle] = SessionSwitch()
        self._switch.swap(self._open(fast))
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._migrate, args=(target,), daemon=True)
        self._thread.start()

    # -- serving -----------------------------------------------------------------------------
    def run(self, output_names, feeds: dict[str, np.ndarray], run_options=None) -> list:
        """``InferenceSession.run`` on whichever session is current when the call starts."""
        handle = None if self._switch.closed else self._switch.acquire()
        if handle is None:
            raise UserError("this HotMigrationSession is closed")
        try:
            return handle.session.run(output_names, feeds, run_options)
        finally:
            self._switch.release(handle)

    @property
    def backend(self) -> str:
        """The backend that answers the next call."""
        return self._switch.current.config.backend

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the migration has swapped or failed; True if it swapped."""
        self._done.wait(timeout)
        return self.migrated.is_set()

    def close(self) -> None:
        """Refuse new calls, wait for the migration thread, and let the sessions go."""
        self._switch.close("closed")
        self._done.wait()

    def __enter__(self) -> "HotMigrationSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- migration -----------------------------------------------------------------------------
    def _event(self, kind: str, backend: str, detail: str | None = None) -> None:
        event = MigrationEvent(round(time.perf_counter() - self._t0, 6), kind, backend, detail)
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)

    def _open(self, config: SessionConfig) -> SessionHandle:
        self._event("session_create_start", config.backend)
        handle = create_session(self.model, config, require_qnn=True)
        self._event("session_create_end", config.backend, f"{handle.create_s:.3f} s")
        return handle

    def _warm(self, handle: SessionHandle) -> float:
        """Median latency of the warm-up runs after the first (the first is always slow)."""
        feeds = self._warmup_feeds or [random_inputs(handle.session, handle.config.dims)]
        self._event("warmup_start", handle.config.backend)
        times = []
        for i in range(self._warmup_runs):
            start = time.perf_counter()
            handle.session.run(None, feeds[i % len(feeds)])
            times.append(time.perf_counter() - start)
        warmed = float(np.median(times[1:] or times))
        self._event("warmup_end", handle.config.backend, f"warmed {warmed * 1e3:.2f} ms")
        return warmed

    def _migrate(self, target_config: SessionConfig) -> None:
        try:
            target = self._open(target_config)
            target_latency = self._warm(target)
            if self.policy == "if_faster":
                fast_latency = self._warm(self._switch.current)
                if target_latency >= fast_latency:
                    self._event("migration_skipped", target_config.backend,
                                f"warmed {target_latency * 1e3:.2f} ms >= fast {fast_latency * 1e3:.2f} ms")
                    return
            if self._switch.closed:
                return

            def announce(old: SessionHandle) -> None:
                self._event("swap", target.config.backend, f"{old.config.backend} -> {target.config.backend}")
                self.migrated.set()

            old = self._switch.swap(target, announce)
            waiting = self._switch.drain(old)
            self._event("drain_end", old.config.backend, f"{waiting} call(s) in flight at the swap finished")
            self._event("session_released", old.config.backend)
        except Exception as exc:  # any target failure leaves the fast session serving
            self.failure = one_line(exc)
            self._event("migration_failed", target_config.backend, self.failure)
        finally:
            self._done.set()


def auto_session(model: str, *, dims: dict[str, int] | None = None, classifier: str = "ep",
                 gpu: SessionConfig | None = None, htp: SessionConfig | None = None
                 ) -> tuple[SessionHandle, Classification]:
    """What ``backend_type=auto`` would load: classify the model (``classifier="ep"`` for the
    proposed EP rules, ``"refined"`` for this project's), then create the session on GPU for GenAI
    and on HTP otherwise. Symbolic dims get the same defaults as the partitions page."""
    graph = load_model(model)
    verdict = (classify_refined if classifier == "refined" else classify_ep)(graph)
    fixed = resolve_dims(graph, dims or {})
    chosen = (gpu or SessionConfig(backend="gpu")) if verdict.backend == "gpu" else (htp or SessionConfig(backend="htp"))
    config = chosen.replace(dims={**fixed, **chosen.dims})
    return create_session(model, config, require_qnn=True), verdict
