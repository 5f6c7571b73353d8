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
it down); it runs the same ``dashboard.timeline.migration.Migration`` in a worker, see
``dashboard.timeline.runner``.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import Classification
from dashboard.errors import UserError
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import resolve_dims
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.qnn import SessionHandle, create_session, random_inputs
from dashboard.timeline.migration import EventLog, Migration, open_slot
from dashboard.timeline.model import Event


class HotMigrationSession:
    """Serve on ``fast`` at once, migrate to ``target`` when it is warm (see the module docstring).

    The sequence and the policies are ``dashboard.timeline.migration.Migration``'s, the ones the
    dashboard's timeline runs: ``policy="if_faster"`` swaps only if the warmed target's median
    latency beats the fast session's, both measured on the same warm-up inputs (``warmup_feeds``,
    default one random input set) at the same moment. ``events`` are ``timeline.model.Event``
    records with the timeline's kinds, ``t`` in seconds since the session was opened.
    """

    def __init__(self, model: str, fast: SessionConfig, target: SessionConfig, *,
                 warmup_feeds: list[dict[str, np.ndarray]] | None = None, warmup_runs: int = 3,
                 policy: str = "always", on_event: Callable[[Event], None] | None = None) -> None:
        self.model = model
        self._log = EventLog(on_event)
        self.events: list[Event] = self._log.events
        self._migration = Migration(self._log, policy=policy, feeds=warmup_feeds, warmup_runs=warmup_runs)
        self._switch = self._migration.switch
        first = open_slot(self._log, model, fast, "fast session")
        if not warmup_feeds:
            self._migration.feeds = [random_inputs(first.handle.session, {**target.dims, **fast.dims})]
        self._migration.serve(first)
        self._thread = threading.Thread(target=self._migration.run, daemon=True,
                                        args=(target.backend, lambda: open_slot(self._log, model, target,
                                                                                "target session")))
        self._thread.start()

    # -- serving -----------------------------------------------------------------------------
    def run(self, output_names, feeds: dict[str, np.ndarray], run_options=None) -> list:
        """``InferenceSession.run`` on whichever session is current when the call starts."""
        slot = None if self._switch.closed else self._switch.acquire()
        if slot is None:
            raise UserError("this HotMigrationSession is closed")
        try:
            return slot.handle.session.run(output_names, feeds, run_options)
        finally:
            self._switch.release(slot)

    @property
    def backend(self) -> str:
        """The backend that answers the next call."""
        return self._switch.current.backend

    @property
    def migrated(self) -> threading.Event:
        """Set once the target serves."""
        return self._migration.migrated

    @property
    def failure(self) -> str | None:
        """Why the target did not take over (the runtime's reason), if it failed."""
        return self._migration.failure

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the migration has swapped, skipped or failed; True if it swapped."""
        self._migration.done.wait(timeout)
        return self.migrated.is_set()

    def close(self) -> None:
        """Refuse new calls, wait for the migration thread, and let the sessions go."""
        self._switch.close("closed")
        self._migration.done.wait()

    def __enter__(self) -> "HotMigrationSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
