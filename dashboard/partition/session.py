"""The session a partition analysis measures on one backend, and its head start in the worker.

``measured`` creates the real session with the assignment record and the EP's op trace and returns
both (``measure`` maps them onto the model). It imports only the runtime, so that:

**The head start.** A worker's first request waits for the runtime (numpy, onnxruntime, the QNN EP:
about 0.1 s), then for its capability's records and handler (the report's types, shape inference,
the plans: about 40 ms more), and only then would create the session it measures, which is most of a
first ``partition`` of a small model. ONNX Runtime releases the GIL while it builds a session, so
the worker starts that HTP session from the request's raw arguments as soon as its runtime is
loaded (``head_start``, named in ``runtime.protocol.HEAD_STARTS``), and the records, the handler
and the model are imported and read while QNN compiles. ``measure.run`` takes the session when it is
the one it would have created (same file, same configuration). One it does not take (arguments the
request then refuses, a file that must be rewritten after all) is waited for and its folder removed
when the request ends: nothing outlives the request, and no two sessions ever build at once.

Only a file the client vouched for starts early (``PartitionArgs.as_is``: it read the file and found
nothing the sessions' copy must change, every node named once and no input shape to declare).
Deciding that here would mean reading the model first, which needs the very imports the head start
overlaps.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Iterator

from dashboard.errors import UserError
from dashboard.runtime import scratch

RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"
SCRATCH_PREFIX = "qbl-partition-"


def measured(session_input: str | bytes, session_config: dict[str, str], config,
             workdir: str) -> tuple[list | None, dict | None]:
    """Create the real session of ``config.backend`` on ``session_input`` (a path, or the bytes of
    the rewritten model with its ``session_config``); return its assignment info (one entry per
    subgraph; None when every node went to the CPU EP) and the EP's op trace (None when the EP
    wrote none).

    A backend that cannot set up (no Adreno, an HTP without its DSP libraries) still yields a
    session, silently on the CPU EP; ``create_session(require_qnn=True)``, the rule timelines use,
    makes that a ``UserError`` with QNN's own message, so it is reported as failed, never as a
    measurement in which QNN claimed nothing. A backend that did set up and refused every node
    writes its reasons in the op trace: that is a measurement, and is returned as one."""
    from dashboard.runtime.qnn import create_session

    trace_dir = os.path.join(workdir, f"trace-{config.backend}")
    config = config.replace(
        session_config={**config.session_config, **session_config, RECORD_ASSIGNMENT: "1"},
        provider_options={**config.provider_options, "enable_framework_op_trace": "1",
                          "framework_op_trace_dir": trace_dir})
    try:
        handle = create_session(session_input, config, require_qnn=True)
    except UserError:
        trace = read_trace(trace_dir)
        if trace and trace.get("unsupported_nodes"):
            return None, trace
        raise
    assignment = handle.assignment()
    del handle  # release the QNN context before the next backend compiles
    return assignment, read_trace(trace_dir)


def read_trace(trace_dir: str) -> dict | None:
    trace_file = Path(trace_dir, "qnn_op_trace.json")
    try:
        return json.loads(trace_file.read_text(encoding="utf-8")) if trace_file.is_file() else None
    except (OSError, ValueError):
        return None


def timed(session_input: str | bytes, session_config: dict[str, str], config, workdir: str) -> tuple | str:
    """``measured`` as ``measure`` records it: (assignment, trace, seconds), or the failure's line."""
    start = time.perf_counter()
    try:
        return *measured(session_input, session_config, config, workdir), time.perf_counter() - start
    except UserError as exc:
        return str(exc)


class Early:
    """An HTP session started by ``head_start``: where it writes (``workdir``, the request's scratch
    folder once taken) and, from ``outcome``, what ``timed`` returned."""

    def __init__(self, path: str, config, workdir: str) -> None:
        self.path, self.config, self.workdir = path, config, workdir
        self._outcome: tuple | str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._build, daemon=True, name="partition head start")
        self._thread.start()

    def _build(self) -> None:
        try:
            self._outcome = timed(self.path, {}, self.config, self.workdir)
        except BaseException as exc:  # noqa: BLE001 - raised again by ``outcome``, in the request
            self._error = exc

    def matches(self, session_input: str | bytes, session_config: dict[str, str], config) -> bool:
        return session_input == self.path and not session_config and config == self.config

    def wait(self) -> None:
        self._thread.join()

    def outcome(self) -> tuple | str:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._outcome


_lock = threading.Lock()
_pending: Early | None = None


@contextlib.contextmanager
def head_start(args: object) -> Iterator[None]:
    """For the worker, around a ``partition`` request whose raw arguments are ``args``: start its
    HTP session now if it can (``_begin``); when the request ends, a session it did not ``take`` is
    waited for and its folder removed."""
    global _pending
    early = _begin(args)
    with _lock:
        _pending = early
    try:
        yield
    finally:
        with _lock:
            left, _pending = _pending, None
        if left is not None:
            left.wait()
            scratch.remove(left.workdir)


def take(session_input: str | bytes, session_config: dict[str, str], config) -> Early | None:
    """The head-started session, if it is the one ``config`` on ``session_input`` would create (it
    may still be compiling); the caller then owns it and its folder. None otherwise."""
    global _pending
    with _lock:
        if _pending is None or not _pending.matches(session_input, session_config, config):
            return None
        early, _pending = _pending, None
    return early


def _begin(args: object) -> Early | None:
    """The HTP session of a partition request the client vouched for (``as_is``, no input shapes,
    ``htp`` among the backends), started once the runtime is loaded; None for any other request or
    any argument this cannot read (the request's own decoding reports those)."""
    if not (isinstance(args, dict) and args.get("as_is") is True and not args.get("input_shapes")
            and isinstance(args.get("backends"), list) and "htp" in args["backends"]
            and isinstance(args.get("path"), str)):
        return None
    from dashboard.runtime.config import SessionConfig
    from dashboard.serde import load

    try:
        config = load(SessionConfig, args.get("config"), "partition configuration").replace(backend="htp")
        from dashboard.runtime.qnn import register

        register()  # waits for the worker's preload of the runtime (the import lock)
    except Exception:  # noqa: BLE001 - the request's own decoding and runtime report what this could not read
        return None
    return Early(args["path"], config, str(scratch.make(SCRATCH_PREFIX)))
