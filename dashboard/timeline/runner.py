"""Hot migration at the application level, run inside the worker (``timeline`` command).

Neither ``hot_migration`` nor ``backend_type=auto`` is in the released onnxruntime-qnn, so this
builds what seed 000 describes on two real sessions: a *fast* session (the QNN GPU on a device; the
CPU EP on a host without one) serves requests as soon as it exists, while the *target* (HTP)
session is created and warmed on a background thread. Once warm it is swapped in atomically (the
next request dispatched goes to it), requests in flight on the old session drain, and the old
session is released. If the target fails (finalize error, a backend that does not initialize, a
warm-up failure) serving simply continues on the fast session and the failure is an event carrying
the runtime's own message.

The same workload (an open-loop arrival schedule: request *i* arrives at *i / rate* whether or
not earlier ones were answered) is served by each strategy in turn, so they compare on equal
terms: ``fast`` only, ``target`` only (cold compile), ``cached`` (target loaded from an EPContext
model built once), ``migrate``, and ``auto`` (the backend the EP's ``backend_type=auto`` rules
pick). Before the first strategy the runtime is primed once (QNN libraries loaded, CPU reference
outputs computed) so no strategy pays a per-process cost the others do not.

Everything is recorded as ``dashboard.timeline.model`` events and requests and streamed to the caller
as it happens, so the page's chart grows while the run is going.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import queue
import statistics
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from dashboard.classify.ep_rules import classify_ep
from dashboard.errors import UserError, one_line
from dashboard.intake.reader import file_digest, load_model
from dashboard.intake.shapes import resolve_dims
from dashboard.messages import (ProgressEvent, Setup, Status, StrategyEnd, StrategyStart, TimelineArgs, TimelineEvent,
                                TimelineRequest)
from dashboard.runtime import scratch
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.qnn import (QNN_EP, BoundRunner, SessionHandle, create_session, hardware, probe_backend,
                                   random_inputs, register, shared_memory_info, shared_memory_status, soc_info,
                                   versions)
from dashboard.timeline.model import Event, Request, StrategyRun, TimelineOptions, TimelineRun
from dashboard.timeline.switch import SessionSwitch

Emit = Callable[[ProgressEvent], None]

BACKEND_LABELS = {"cpu": "CPU EP", "gpu": "QNN GPU", "htp": "QNN HTP"}
NO_GPU_LABEL = "CPU EP (no QNN GPU on this host)"
INPUT_POOL = 4  # distinct input sets, cycled by request id, so outputs can be compared per input
SHARED_MEMORY_RUNS = 10
FIRST_ANSWER_WAIT_S = 10.0  # the target's compile waits at most this long for the fast session's first answer


def run_worker(args: TimelineArgs, emit: Emit) -> TimelineRun:
    """Worker entry: the model (a path on this host) and the options."""
    if not args.model or not Path(args.model).is_file():
        raise UserError(f"model not found on the device: {args.model or '(none given)'}")
    with scratch.folder("qnn-lab-timeline-") as folder:
        return Runner(args.model, args.options, emit, folder).run()


def context_store() -> Path:
    """Where EPContext models are kept (built once per model + options + runtime version)."""
    from dashboard.runtime.worker import model_store

    root = Path(os.environ.get("QNN_LAB_CONTEXT_STORE", model_store().parent / "contexts"))
    root.mkdir(parents=True, exist_ok=True)
    return root


class SessionFailed(Exception):
    """A session could not be created or warmed; the message is the runtime's reason."""


class Recorder:
    """One strategy's clock, events and requests; every record is also streamed to the caller.
    A single lock serialises emission, since the protocol's writer is shared by all threads."""

    def __init__(self, strategy: str, emit: Emit, lock: threading.Lock, expected: int) -> None:
        self.strategy = strategy
        self._emit = emit
        self._lock = lock
        self.run = StrategyRun(name=strategy, backends={}, expected_requests=expected)
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def event(self, kind: str, backend: str, detail: str | None = None, t: float | None = None) -> Event:
        event = Event(round(self.now() if t is None else max(t, 0.0), 6), kind, backend, detail)
        with self._lock:
            self.run.events.append(event)
            self._emit(TimelineEvent(self.strategy, event))
        return event

    def request(self, request: Request) -> None:
        with self._lock:
            self.run.requests.append(request)
            self._emit(TimelineRequest(self.strategy, request))


class Slot:
    """A session that serves requests, with its in-flight count (what a swap waits for)."""

    def __init__(self, backend: str, handle: SessionHandle, bind_device=None,
                 output_example: list[np.ndarray] | None = None) -> None:
        self.backend = backend
        self.handle: SessionHandle | None = handle
        self.bind_device = bind_device  # IOBinding memory (HTP shared memory), None = plain run
        self.output_example = output_example or []
        self.warm_latency: float | None = None
        self._runners: dict[int, BoundRunner] = {}

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        session = self.handle.session
        if self.bind_device is None:
            return session.run(None, feeds)
        thread = threading.get_ident()
        runner = self._runners.get(thread)
        if runner is None:
            runner = self._runners[thread] = BoundRunner(session, self.bind_device, feeds, self.output_example)
        return runner.run(feeds)

    def release(self) -> None:
        self._runners.clear()
        self.handle = None


class Server:
    """Serves the open-loop workload on whichever slot is current.

    A dispatcher thread releases request *i* at its arrival time into a queue; ``concurrency``
    server threads take requests and run them on the current slot of a ``SessionSwitch``, so each
    request runs on exactly one session and a swap is atomic for dispatch. Requests arriving before
    any session exists wait; if no session will ever come (``close``) they fail with the reason.
    """

    def __init__(self, rec: Recorder, options: TimelineOptions, inputs: list[dict[str, np.ndarray]]) -> None:
        self.rec = rec
        self.options = options
        self.inputs = inputs
        self.switch: SessionSwitch[Slot] = SessionSwitch()
        self.outputs: dict[tuple[str, int], list[np.ndarray]] = {}
        self.first_answer = threading.Event()
        self._queue: queue.Queue = queue.Queue()
        self._threads = [threading.Thread(target=self._dispatch, daemon=True)]
        self._threads += [threading.Thread(target=self._serve, daemon=True) for _ in range(options.concurrency)]

    def start(self) -> "Server":
        for thread in self._threads:
            thread.start()
        return self

    @property
    def current(self) -> Slot | None:
        return self.switch.current

    def install(self, slot: Slot) -> None:
        self.switch.swap(slot, lambda old: self.rec.event("serve_start", slot.backend))

    def swap(self, slot: Slot, detail: str) -> Slot | None:
        return self.switch.swap(slot, lambda old: self.rec.event("swap", slot.backend, detail))

    def drain(self, old: Slot) -> None:
        waiting = self.switch.drain(old)
        self.rec.event("drain_end", old.backend, f"{waiting} request(s) in flight at the swap finished")

    def close(self, reason: str) -> None:
        """No session will serve: waiting and future requests fail with ``reason``."""
        self.switch.close(reason)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self.rec.event("workload_end", self.current.backend if self.current else "none")

    def _dispatch(self) -> None:
        rate = self.options.rate
        for i in range(self.options.requests):
            arrival = i / rate
            delay = arrival - self.rec.now()
            if delay > 0:
                time.sleep(delay)
            self._queue.put((i, arrival))
        for _ in range(self.options.concurrency):
            self._queue.put(None)

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            rid, arrival = item
            slot = self.switch.acquire(wait=True)
            if slot is None:
                self.rec.request(Request(rid, round(arrival, 6), None, None, None, False, self.switch.closed))
                continue
            start = self.rec.now()
            index = rid % len(self.inputs)
            error = None
            try:
                outputs = slot.run(self.inputs[index])
            except Exception as exc:  # a failed run is a failed request, never a lost one
                outputs, error = None, one_line(exc)
            end = self.rec.now()
            self.switch.release(slot)
            if outputs is not None:
                self.outputs.setdefault((slot.backend, index), outputs)
            self.rec.request(Request(rid, round(arrival, 6), round(start, 6), round(end, 6), slot.backend,
                                     error is None, error))
            self.first_answer.set()


class Runner:
    """Primes the runtime once, then runs each requested strategy on the same workload."""

    def __init__(self, model: str, options: TimelineOptions, emit: Emit, scratch: Path) -> None:
        self.model = model
        self.options = options
        self._emit = emit
        self.scratch = scratch
        self.lock = threading.Lock()
        self.dims = dict(options.dims)
        self.fast: dict = {}
        self.inputs: list[dict[str, np.ndarray]] = []
        self.reference: list[list[np.ndarray]] = []
        self.shared: dict = {"requested": options.shared_memory}
        self._profiles = 0

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> TimelineRun:
        prime = self._prime()
        strategies = {}
        for name in self.options.strategies:
            run = strategies[name] = getattr(self, f"_strategy_{name}")()
            run.events.sort(key=lambda e: e.t)
            run.requests.sort(key=lambda r: r.id)
            with self.lock:
                self._emit(StrategyEnd(name, run.metrics))
        if self.shared.get("available"):
            self.shared.update(self._copy_vs_zero_copy())
        return TimelineRun(
            device={}, model=self.model, options=self.options.to_json(),
            workload={"requests": self.options.requests, "rate": self.options.rate,
                      "concurrency": self.options.concurrency, "input_sets": len(self.inputs),
                      "inputs": self.options.inputs or "generated from the model's input specs", "dims": self.dims},
            strategies=strategies, fast=self.fast,
            target={"backend": self.options.target, "label": BACKEND_LABELS[self.options.target]},
            shared_memory=self.shared, prime=prime,
            runtime={**versions(), "soc": soc_info(), "hardware": hardware(self.options.target)})

    def _prime(self) -> dict:
        """Load the QNN libraries, pick the fast backend, build the inputs and CPU reference."""
        start = time.perf_counter()
        self._status("priming the runtime (QNN libraries, reference outputs)")
        register()
        self._fill_dims()
        gpu = probe_backend("gpu") if self.options.fast != "gpu" else None
        if self.options.fast == "gpu":
            self.fast = {"backend": "gpu", "label": BACKEND_LABELS["gpu"], "reason": "chosen"}
        elif gpu is not None and gpu.ok and self.options.fast is None:
            self.fast = {"backend": "gpu", "label": BACKEND_LABELS["gpu"], "reason": "the QNN GPU initializes here"}
        else:
            label = BACKEND_LABELS["cpu"] if gpu is not None and gpu.ok else NO_GPU_LABEL
            reason = "chosen" if self.options.fast == "cpu" else f"the QNN GPU does not initialize here: {gpu.error}"
            self.fast = {"backend": "cpu", "label": label, "reason": reason}
        target_probe = probe_backend(self.options.target)
        reference = create_session(self.model, SessionConfig(backend="cpu", dims=self.dims))
        self.inputs = self._load_inputs(reference)
        self.reference = [reference.session.run(None, feeds) for feeds in self.inputs]
        if self.options.shared_memory:
            ok, reason = shared_memory_status()
            self.shared.update({"available": ok, "reason": reason})
        with self.lock:
            self._emit(Setup(self.fast, {"backend": self.options.target,
                                         "label": BACKEND_LABELS[self.options.target]}))
        return {"seconds": round(time.perf_counter() - start, 3),
                "target_probe": {"ok": target_probe.ok, "error": target_probe.error}}

    def _fill_dims(self) -> None:
        """QNN needs static shapes: symbolic dimensions the user left open get the partitions
        page's defaults (``shapes.resolve_dims``)."""
        self.dims = resolve_dims(load_model(self.model), self.options.dims)

    def _load_inputs(self, reference: SessionHandle) -> list[dict[str, np.ndarray]]:
        session = reference.session
        if not self.options.inputs:
            return [random_inputs(session, self.dims, seed) for seed in range(min(INPUT_POOL, self.options.requests))]
        try:
            with np.load(self.options.inputs, allow_pickle=False) as data:
                supplied = {name: data[name] for name in data.files}
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read the inputs file {self.options.inputs}: {exc}") from None
        expected = {spec.name for spec in session.get_inputs()}
        if set(supplied) != expected:
            raise UserError(f"the inputs file has {sorted(supplied)}; the model needs {sorted(expected)}")
        return [supplied]

    # -- strategies ------------------------------------------------------------------------------
    def _strategy_fast(self) -> StrategyRun:
        return self._single(self._recorder("fast", {"fast": self.fast["backend"]}), self.fast["backend"],
                            self.model, warm=False)

    def _strategy_target(self) -> StrategyRun:
        target = self.options.target
        return self._single(self._recorder("target", {"target": target}), target, self.model, warm=True)

    def _strategy_cached(self) -> StrategyRun:
        self._status("building / finding the EPContext model")
        target = self.options.target
        try:
            context, built_s, reused = self._context_model()
        except SessionFailed as exc:
            rec = self._recorder("cached", {"target": target})
            rec.event("session_failed", target, f"cannot build the EPContext model: {exc}")
            return self._serve_nothing(rec, str(exc))
        note = (f"EPContext model reused from the cache: {context}" if reused else
                f"EPContext model built once in {built_s:.3f} s before this run (not on its clock): {context}")
        rec = self._recorder("cached", {"target": target})
        rec.run.notes.append(note)
        rec.event("context_build", target, note)
        return self._single(rec, target, str(context), warm=True, expect_context=True)

    def _strategy_auto(self) -> StrategyRun:
        rec = self._recorder("auto", {})
        verdict = classify_ep(load_model(self.model))
        backend = self.fast["backend"] if verdict.backend == "gpu" else self.options.target
        detail = f"EP rules: {verdict.verdict} → {verdict.backend}"
        if verdict.backend == "gpu" and backend != "gpu":
            detail += f"; served by the {self.fast['label']}"
        rec.run.backends = {"auto": backend}
        rec.event("auto_choice", backend, detail)
        return self._single(rec, backend, self.model, warm=backend == self.options.target)

    def _strategy_migrate(self) -> StrategyRun:
        fast_backend, target = self.fast["backend"], self.options.target
        rec = self._recorder("migrate", {"fast": fast_backend, "target": target})
        server = Server(rec, self.options, self.inputs).start()
        fast = self._open(rec, fast_backend, self.model, "fast")
        if fast is not None:
            server.install(fast)
        background = threading.Thread(target=self._migrate_in_background, args=(rec, server, fast), daemon=True)
        background.start()
        server.join()
        background.join()
        current = server.current
        if current is not None:
            self._release(rec, current)
        self._check_outputs(rec.run, server, swap=(fast_backend, target))
        return rec.run

    def _migrate_in_background(self, rec: Recorder, server: Server, fast: Slot | None) -> None:
        """Create and warm the target; swap it in, drain and release the fast session. On any
        failure serving stays on the fast session and the reason is a ``migration_failed`` event.

        Compiling for the HTP is CPU work (on a device too: QNN prepares the graph on the CPU), so
        it starts once the fast session has given its first answer: the time to first response,
        which is what migration is for, never shares the cores with the compile."""
        target_backend = self.options.target
        if fast is not None:
            server.first_answer.wait(FIRST_ANSWER_WAIT_S)
        try:
            target = self._open(rec, target_backend, self.model, "target", raise_failure=True)
            self._warm(rec, target)
        except SessionFailed as exc:
            rec.event("migration_failed", target_backend,
                      f"{exc} — still serving on {fast.backend}" if fast else str(exc))
            if fast is None:
                server.close(f"no session: fast failed and {exc}")
            return
        if fast is None:  # nothing was serving: the target simply starts
            server.install(target)
            return
        if self.options.policy == "if_faster":
            fast_p50 = _served_p50(rec, fast.backend)
            if fast_p50 is not None and target.warm_latency >= fast_p50:
                rec.event("migration_skipped", target_backend,
                          f"policy if_faster: warmed {target_backend} {_ms(target.warm_latency)} ≥ "
                          f"{fast.backend} p50 {_ms(fast_p50)}; staying on {fast.backend}")
                self._release(rec, target)
                return
        old = server.swap(target, f"{fast.backend} → {target_backend} (warmed {_ms(target.warm_latency)})")
        server.drain(old)
        self._release(rec, old)

    # -- building blocks -----------------------------------------------------------------------------
    def _recorder(self, name: str, backends: dict[str, str]) -> Recorder:
        rec = Recorder(name, self._emit, self.lock, self.options.requests)
        rec.run.backends = dict(backends)
        with self.lock:
            self._emit(StrategyStart(name, backends))
        return rec

    def _single(self, rec: Recorder, backend: str, model: str, *, warm: bool,
                expect_context: bool = False) -> StrategyRun:
        """Serve the whole workload on one session (created, optionally warmed, then serving)."""
        server = Server(rec, self.options, self.inputs).start()
        try:
            slot = self._open(rec, backend, model, rec.strategy, raise_failure=True, expect_context=expect_context)
            if warm:
                self._warm(rec, slot)
            server.install(slot)
        except SessionFailed as exc:
            slot = None
            server.close(str(exc))
        server.join()
        if slot is not None:
            self._release(rec, slot)
        self._check_outputs(rec.run, server)
        return rec.run

    def _serve_nothing(self, rec: Recorder, reason: str) -> StrategyRun:
        server = Server(rec, self.options, self.inputs).start()
        server.close(reason)
        server.join()
        return rec.run

    def _config(self, backend: str) -> tuple[SessionConfig, Path | None]:
        """Session options per backend. The fast backend gets the shapes only (the user's QNN
        options are for the target); the target gets everything, plus QNN basic profiling
        (the finalize time of the Gantt) and the shared-memory allocator when requested."""
        if backend != self.options.target:
            return SessionConfig(backend=backend, dims=self.dims), None
        provider = dict(self.options.provider_options)
        profile = None
        if self.options.qnn_profiling and "profiling_level" not in provider:
            self._profiles += 1
            profile = self.scratch / f"qnn_profile_{self._profiles}.csv"
            provider.update({"profiling_level": "basic", "profiling_file_path": str(profile)})
        if self.shared.get("available"):
            provider["enable_htp_shared_memory_allocator"] = "1"
        config = SessionConfig(backend=backend, dims=self.dims, fp16=self.options.fp16, soc=self.options.soc,
                               provider_options=provider)
        return config, profile

    def _open(self, rec: Recorder, backend: str, model: str, role: str, *, raise_failure: bool = False,
              expect_context: bool = False) -> Slot | None:
        """Create a session and check QNN really holds it (a QNN session whose backend failed
        to set up silently runs on the CPU EP; that is a failure here, with QNN's message)."""
        config, profile = self._config(backend)
        rec.event("session_create_start", backend, f"{role} session on {self._label(backend)}")
        try:
            handle = create_session(model, config, require_qnn=True)
            end = rec.now()
            detail = self._check_claimed(handle, backend, expect_context)
        except (UserError, SessionFailed) as exc:
            rec.event("session_failed", backend, str(exc))
            if raise_failure:
                raise SessionFailed(str(exc)) from None
            return None
        finalize = _finalize_seconds(profile)
        if finalize is not None:
            rec.event("finalize_start", backend, f"QNN (finalize) time {_ms(finalize)}, from QNN profiling",
                      t=end - finalize)
        rec.event("session_create_end", backend, detail, t=end)
        if expect_context:
            rec.event("context_loaded", backend, detail)
        bind = None
        if self.shared.get("available") and backend == self.options.target:
            bind = shared_memory_info()
        return Slot(backend, handle, bind, self.reference[0])

    def _check_claimed(self, handle: SessionHandle, backend: str, expect_context: bool) -> str:
        if backend == "cpu":
            return "all nodes on the CPU EP"
        assigned = handle.assigned_nodes()  # create_session(require_qnn=True) made sure QNN claimed some
        claimed = assigned[QNN_EP]
        others = sum(len(nodes) for ep, nodes in assigned.items() if ep != QNN_EP)
        if expect_context:
            contexts = [name for name, op in claimed if op == "EPContext"]
            if not contexts:
                raise SessionFailed("the cached model loaded, but QNN holds no EPContext node: it was recompiled")
            return f"EPContext node(s) {', '.join(contexts)} loaded by {QNN_EP}; {others} node(s) on the CPU EP"
        return f"{len(claimed)} node(s) on QNN {backend}, {others} on the CPU EP"

    def _warm(self, rec: Recorder, slot: Slot) -> None:
        """Run the input sets ``warmup_runs`` times before serving (the simulator's and a real
        HTP's first inference is slow); the median after the first is the warmed latency."""
        rec.event("warmup_start", slot.backend)
        times = []
        try:
            for i in range(self.options.warmup_runs):
                feeds = self.inputs[i % len(self.inputs)]
                start = time.perf_counter()
                try:
                    slot.run(feeds)
                except UserError as exc:  # the shared-memory binding is not possible: copy instead
                    if slot.bind_device is None:
                        raise
                    slot.bind_device = None
                    rec.event("shared_memory", slot.backend, f"unavailable, inputs copied: {exc}")
                    slot.run(feeds)
                times.append(time.perf_counter() - start)
        except Exception as exc:
            rec.event("session_failed", slot.backend, f"warm-up failed: {one_line(exc)}")
            raise SessionFailed(f"warm-up failed on {slot.backend}: {one_line(exc)}") from None
        slot.warm_latency = statistics.median(times[1:] or times)
        rec.event("warmup_end", slot.backend,
                  f"{len(times)} run(s): first {_ms(times[0])}, warmed {_ms(slot.warm_latency)}")

    def _release(self, rec: Recorder, slot: Slot) -> None:
        slot.release()
        rec.event("session_released", slot.backend)

    def _context_model(self) -> tuple[Path, float | None, bool]:
        """The target's EPContext model (``ep.context_enable=1``), built once per model digest,
        target options and runtime version, then reused; returns (path, build seconds, reused)."""
        config, _ = self._config(self.options.target)
        config.provider_options.pop("profiling_level", None)
        config.provider_options.pop("profiling_file_path", None)
        key_source = json.dumps({"model": file_digest(self.model), "config": config.to_json(),
                                 "runtime": versions()}, sort_keys=True)
        key = hashlib.blake2b(key_source.encode(), digest_size=12).hexdigest()
        folder = context_store() / key
        context = folder / (Path(self.model).stem + "_ctx.onnx")
        if context.is_file():
            return context, None, True
        building = scratch.make(f".{key}.", context_store())
        config.session_config.update({"ep.context_enable": "1", "ep.context_embed_mode": "0",
                                      "ep.context_file_path": str(building / context.name)})
        start = time.perf_counter()
        try:
            create_session(self.model, config)
        except UserError as exc:
            scratch.remove(building)
            raise SessionFailed(str(exc)) from None
        built = time.perf_counter() - start
        if not (building / context.name).is_file():
            scratch.remove(building)
            raise SessionFailed("the runtime wrote no EPContext model (QNN claimed nothing to compile)")
        try:
            building.rename(folder)
            scratch.keep(building)
        except OSError:  # another run built it meanwhile
            scratch.remove(building)
        return context, built, False

    def _check_outputs(self, run: StrategyRun, server: Server, swap: tuple[str, str] | None = None) -> None:
        """Served outputs against the CPU EP reference, and (migration) before vs after the swap."""
        atol, rtol = self.options.atol, self.options.rtol
        checks = []
        for backend in sorted({b for b, _ in server.outputs}):
            pairs = [(server.outputs[(backend, i)], self.reference[i])
                     for i in range(len(self.inputs)) if (backend, i) in server.outputs]
            checks.append({"a": backend, "b": "cpu reference", **_compare(pairs, atol, rtol)})
        if swap is not None and swap[0] != swap[1]:
            before, after = swap
            pairs = [(server.outputs[(after, i)], server.outputs[(before, i)]) for i in range(len(self.inputs))
                     if (before, i) in server.outputs and (after, i) in server.outputs]
            checks.append({"a": f"{after} (after swap)", "b": f"{before} (before swap)", **_compare(pairs, atol, rtol)})
        compared = [c for c in checks if c["compared"]]
        run.outputs = {"atol": atol, "rtol": rtol, "checks": checks,
                       "agree": all(c["agree"] for c in compared) if compared else None}

    def _copy_vs_zero_copy(self) -> dict:
        """Same warmed HTP session, same inputs: plain runs (inputs copied to the NPU) against
        IOBinding in HTP shared memory."""
        self._status("comparing copy vs zero-copy on the HTP")
        config, _ = self._config(self.options.target)
        config.provider_options.pop("profiling_level", None)
        config.provider_options.pop("profiling_file_path", None)
        try:
            handle = create_session(self.model, config)
            plain = Slot(self.options.target, handle)
            bound = Slot(self.options.target, handle, shared_memory_info(), self.reference[0])
            copy_s = _timed_runs(plain, self.inputs, SHARED_MEMORY_RUNS)
            zero_s = _timed_runs(bound, self.inputs, SHARED_MEMORY_RUNS)
        except Exception as exc:
            return {"comparison_error": one_line(exc)}
        return {"copy_p50_s": round(copy_s, 6), "zero_copy_p50_s": round(zero_s, 6), "runs": SHARED_MEMORY_RUNS}

    def _label(self, backend: str) -> str:
        return self.fast["label"] if backend == self.fast.get("backend") else BACKEND_LABELS.get(backend, backend)

    def _status(self, message: str) -> None:
        with self.lock:
            self._emit(Status(message))


def _timed_runs(slot: Slot, inputs: list[dict[str, np.ndarray]], runs: int) -> float:
    slot.run(inputs[0])  # warm (and, bound, allocate the buffers)
    times = []
    for i in range(runs):
        start = time.perf_counter()
        slot.run(inputs[i % len(inputs)])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _served_p50(rec: Recorder, backend: str) -> float | None:
    latencies = [r.latency for r in list(rec.run.requests) if r.ok and r.backend == backend and r.latency is not None]
    return statistics.median(latencies) if latencies else None


def _compare(pairs: list[tuple[list[np.ndarray], list[np.ndarray]]], atol: float, rtol: float) -> dict:
    """Largest difference over all outputs of all compared inputs; floats within
    ``atol + rtol * |b|``, everything else exactly equal."""
    worst, agree = 0.0, True
    for outputs_a, outputs_b in pairs:
        for a, b in zip(outputs_a, outputs_b):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape:
                agree = False
                continue
            if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
                if diff.size:
                    worst = max(worst, float(np.nanmax(diff)))
                    agree &= bool(np.all(diff <= atol + rtol * np.abs(b.astype(np.float64))))
            else:
                agree &= bool(np.array_equal(a, b))
    return {"compared": len(pairs), "max_abs_diff": round(worst, 9), "agree": agree if pairs else None}


def _finalize_seconds(profile: Path | None) -> float | None:
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


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f} ms"
