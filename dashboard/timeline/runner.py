"""Hot migration at the application level, run inside the worker (``timeline`` command).

Neither ``hot_migration`` nor ``backend_type=auto`` is in the released onnxruntime-qnn, so this
builds what seed 000 describes on two real sessions: a *fast* session (the QNN GPU on a device; the
CPU EP on a host without one) serves requests as soon as it exists, while the *target* (HTP)
session is created and warmed on a background thread. Once warm it is swapped in atomically (the
next request dispatched goes to it), requests in flight on the old session drain, and the old
session is released. If the target fails (finalize error, a backend that does not initialize, a
warm-up failure) serving simply continues on the fast session and the failure is an event carrying
the runtime's own message. That sequence is ``dashboard.timeline.migration.Migration``, the same
one ``HotMigrationSession`` runs in your own process; this module adds the workload around it.

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

import hashlib
import json
import os
import queue
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from dashboard import platform
from dashboard.classify.ep_rules import classify_ep
from dashboard.errors import UserError, one_line
from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import check_input_shapes, resolve_dims, rewritten_model
from dashboard.runtime import scratch
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.protocol import ProgressEvent
from dashboard.runtime.qnn import (EXTERNAL_DATA_FOLDER, SessionHandle, create_session, hardware, probe_backend,
                                   random_inputs, register, shared_memory_info, shared_memory_status, soc_info,
                                   versions)
from dashboard.timeline.migration import EventLog, Migration, SessionFailed, Slot, median_latency, open_slot, warm
from dashboard.timeline.model import (CLASS_AXIS, COSINE_AGREE, TOP_K, Request, StrategyRun, TimelineOptions,
                                      TimelineRun)
from dashboard.timeline.protocol import (Setup, Status, StrategyEnd, StrategyStart, TimelineArgs, TimelineEvent,
                                         TimelineRequest)

Emit = Callable[[ProgressEvent], None]

BACKEND_LABELS = {"cpu": "CPU EP", "gpu": "QNN GPU", "htp": "QNN HTP"}
NO_GPU_LABEL = "CPU EP (no QNN GPU on this host)"
INPUT_POOL = 4  # distinct input sets, cycled by request id, so outputs can be compared per input
DATA_POOL = 32  # the user's samples (--data) kept at most: each has its CPU reference computed first
SHARED_MEMORY_RUNS = 10
SCRATCH_PREFIX = "qnn-lab-timeline-"  # + worker pid + "-": see runtime.scratch
FIRST_ANSWER_WAIT_S = 10.0  # the target's compile waits at most this long for the fast session's first answer


def run_worker(args: TimelineArgs, emit: Emit) -> TimelineRun:
    """Worker entry: the model (a path on this host) and the options."""
    if not args.model or not Path(args.model).is_file():
        raise UserError(f"model not found on the device: {args.model or '(none given)'}")
    scratch.sweep(SCRATCH_PREFIX)
    with scratch.folder(SCRATCH_PREFIX) as folder:
        return Runner(args.model, args.options, emit, folder).run()


def context_store() -> Path:
    """Where EPContext models are kept (built once per model + options + runtime version)."""
    from dashboard.runtime.worker import model_store

    root = Path(os.environ.get("QNN_LAB_CONTEXT_STORE", model_store().parent / "contexts"))
    platform.private_folder(root)  # 0700: compiled models of the user's models
    return root


class Recorder(EventLog):
    """One strategy's clock, events and requests; every record is also streamed to the caller.
    One lock serialises emission, since the protocol's writer is shared by all threads."""

    def __init__(self, strategy: str, emit: Emit, lock: threading.Lock, expected: int) -> None:
        super().__init__(lambda event: emit(TimelineEvent(strategy, event)), lock)
        self.strategy = strategy
        self._emit = emit
        self.run = StrategyRun(name=strategy, backends={}, events=self.events, expected_requests=expected)

    def request(self, request: Request) -> None:
        with self.lock:
            self.run.requests.append(request)
            self._emit(TimelineRequest(self.strategy, request))


class Server:
    """Serves the open-loop workload on whichever slot its ``Migration`` has current.

    A dispatcher thread releases request *i* at its arrival time into a queue; ``concurrency``
    server threads take requests and run them on the current slot of the migration's
    ``SessionSwitch``, so each request runs on exactly one session and a swap is atomic for
    dispatch. Requests arriving before any session exists wait; if no session will ever come
    (``switch.close``) they fail with the reason.

    ``count`` requests are dispatched; ``paced`` (a migration with ``options.after_swap``) instead
    dispatches until ``after_swap`` requests arrived once the migration swapped or failed, at most
    ``options.requests``: a workload sized by the swap, so serving after it is always seen.
    ``dispatched`` is how many were.
    """

    def __init__(self, rec: Recorder, options: TimelineOptions, inputs: list[dict[str, np.ndarray]], *,
                 count: int | None = None, paced: bool = False) -> None:
        self.rec = rec
        self.options = options
        self.inputs = inputs
        self.count = options.requests if count is None else count
        self.paced = paced and options.after_swap > 0
        self.dispatched = 0
        self.capped = False  # a paced workload reached ``options.requests`` before the migration settled
        self.migration = Migration(rec, policy=options.policy, feeds=inputs, warmup_runs=options.warmup_runs)
        self.switch = self.migration.switch
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

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self.rec.event("workload_end", self.current.backend if self.current else "none")

    def _dispatch(self) -> None:
        rate = self.options.rate
        limit = self.options.requests if self.paced else self.count
        settled_at: int | None = None  # the first request dispatched once the migration swapped or failed
        for i in range(limit):
            arrival = i / rate
            delay = arrival - self.rec.now()
            if delay > 0:
                time.sleep(delay)
            if self.paced:
                if settled_at is None and (self.migration.migrated.is_set() or self.migration.done.is_set()):
                    settled_at = i
                if settled_at is not None and i - settled_at >= self.options.after_swap:
                    break
            self._queue.put((i, arrival))
            self.dispatched = i + 1
        self.capped = self.paced and settled_at is None
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
        self.session_model: str | bytes = model  # a copy declaring the user's input shapes, if any (``_fix_shapes``)
        self.fast: dict = {}
        self.inputs: list[dict[str, np.ndarray]] = []
        self.reference: list[list[np.ndarray]] = []
        self.shared: dict = {"requested": options.shared_memory}
        self._profiles = 0
        self.count = options.requests  # requests per strategy: a paced migration's count, once it ran
        self.context_bytes: int | None = None  # the EPContext model's files, once the cached strategy built it

    # -- the run -------------------------------------------------------------------------------
    def order(self) -> list[str]:
        """The strategies in the order they run: a paced workload's migration first, since its swap
        sizes the workload every other strategy then serves."""
        names = list(self.options.strategies)
        if self.options.after_swap and "migrate" in names:
            names.remove("migrate")
            names.insert(0, "migrate")
        return names

    def run(self) -> TimelineRun:
        prime = self._prime()
        strategies = {}
        for name in self.order():
            run = strategies[name] = getattr(self, f"_strategy_{name}")()
            run.events.sort(key=lambda e: e.t)
            run.requests.sort(key=lambda r: r.id)
            with self.lock:
                self._emit(StrategyEnd(name, run.metrics))
        strategies = {name: strategies[name] for name in self.options.strategies}
        if self.shared.get("available"):
            self.shared.update(self._copy_vs_zero_copy())
        return TimelineRun(
            device={}, model=self.model, options=self.options.to_json(),
            workload={"requests": self.count, "rate": self.options.rate, "after_swap": self.options.after_swap,
                      "concurrency": self.options.concurrency, "input_sets": len(self.inputs),
                      "inputs": self.options.inputs_label or self.options.inputs or "generated from the model's "
                      "input specs (random inputs)", "dims": self.dims},
            strategies=strategies, fast=self.fast,
            target={"backend": self.options.target, "label": BACKEND_LABELS[self.options.target],
                    **({"context_bytes": self.context_bytes} if self.context_bytes is not None else {})},
            shared_memory=self.shared, prime=prime,
            runtime={**versions(), "soc": soc_info(), "hardware": hardware(self.options.target)})

    def _prime(self) -> dict:
        """Load the QNN libraries, pick the fast backend, build the inputs and CPU reference."""
        start = time.perf_counter()
        self._status("priming the runtime (QNN libraries, reference outputs)")
        register()
        self._fix_shapes()
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
        reference = create_session(self.session_model, self._with_data(self._config("cpu")[0]))
        self.inputs = self._load_inputs(reference)
        self.reference = [reference.session.run(None, feeds) for feeds in self.inputs]
        self.output_names = [o.name for o in reference.session.get_outputs()]
        if self.options.shared_memory:
            ok, reason = shared_memory_status()
            self.shared.update({"available": ok, "reason": reason})
        with self.lock:
            self._emit(Setup(self.fast, {"backend": self.options.target,
                                         "label": BACKEND_LABELS[self.options.target]}))
        return {"seconds": round(time.perf_counter() - start, 3),
                "target_probe": {"ok": target_probe.ok, "error": target_probe.error}}

    def _fix_shapes(self) -> None:
        """QNN needs static shapes: symbolic dimensions the user left open get the partitions
        page's defaults (``shapes.resolve_dims``), and inputs whose dimensions have no name get
        the user's whole shapes, declared in a copy of the model every session of the run reads
        (``shapes.rewritten_model``, as the partition analysis does; external weights are read from
        the model's folder)."""
        graph = load_model(self.model)
        self.dims = resolve_dims(graph, self.options.dims)
        check_input_shapes(graph, self.options.shapes, self.dims)
        if self.options.shapes:
            self.session_model = rewritten_model(self.model, self.options.shapes)

    def _with_data(self, config: SessionConfig, model: str | bytes | None = None) -> SessionConfig:
        """``config`` for a session of ``model`` (the run's model by default): one given as bytes
        finds its external weights in the original model's folder."""
        if not isinstance(self.session_model if model is None else model, bytes):
            return config
        folder = str(Path(self.model).resolve().parent)
        return config.replace(session_config={**config.session_config, EXTERNAL_DATA_FOLDER: folder})

    def _saved_inputs(self) -> list[dict[str, np.ndarray]] | None:
        """The samples of a data set ``--data`` saved (``accuracy.data.Dataset.save``), requests
        taking them in turn; None when ``inputs`` is a plain .npz (one array per input)."""
        from dashboard.accuracy.data import META_KEY, load_saved

        try:
            loaded = np.load(self.options.inputs, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None  # said by the plain reader's own error
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            return None
        with loaded:
            if META_KEY not in loaded.files:
                return None
        return load_saved(self.options.inputs).samples[:DATA_POOL]

    def _load_inputs(self, reference: SessionHandle) -> list[dict[str, np.ndarray]]:
        session = reference.session
        if not self.options.inputs:
            return [random_inputs(session, self.dims, seed) for seed in range(min(INPUT_POOL, self.options.requests))]
        saved = self._saved_inputs()
        if saved is not None:
            return saved
        try:
            loaded = np.load(self.options.inputs, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):  # a single .npy array has no input names
                raise ValueError("not an .npz archive (np.savez, one array per model input)")
            with loaded as data:
                supplied = {name: data[name] for name in data.files}
        except (OSError, ValueError, EOFError) as exc:
            raise UserError(f"cannot read the inputs file {self.options.inputs}: {exc}") from None
        expected = {spec.name for spec in session.get_inputs()}
        if set(supplied) != expected:
            raise UserError(f"the inputs file has {sorted(supplied)}; the model needs {sorted(expected)}")
        return [supplied]

    # -- strategies ------------------------------------------------------------------------------
    def _strategy_fast(self) -> StrategyRun:
        return self._single(self._recorder("fast", {"fast": self.fast["backend"]}), self.fast["backend"],
                            self.session_model, warm_up=False)

    def _strategy_target(self) -> StrategyRun:
        target = self.options.target
        return self._single(self._recorder("target", {"target": target}), target, self.session_model, warm_up=True)

    def _strategy_cached(self) -> StrategyRun:
        self._status("building / finding the EPContext model")
        target = self.options.target
        try:
            context, built_s, reused = self._context_model()
        except SessionFailed as exc:
            rec = self._recorder("cached", {"target": target})
            rec.event("session_failed", target, f"cannot build the EPContext model: {exc}")
            return self._serve_nothing(rec, str(exc))
        # The compiled context's size on disk (the model and its QNN binary): what a SoC's compile
        # produced, which Compare shows next to the option sets.
        self.context_bytes = sum(f.stat().st_size for f in context.parent.iterdir() if f.is_file())
        note = (f"EPContext model reused from the cache: {context}" if reused else
                f"EPContext model built once in {built_s:.3f} s before this run (not on its clock): {context}")
        rec = self._recorder("cached", {"target": target})
        rec.run.notes.append(note)
        rec.event("context_build", target, note)
        return self._single(rec, target, str(context), warm_up=True, expect_context=True)

    def _strategy_auto(self) -> StrategyRun:
        rec = self._recorder("auto", {})
        verdict = classify_ep(load_model(self.model))
        backend = self.fast["backend"] if verdict.backend == "gpu" else self.options.target
        detail = f"EP rules: {verdict.verdict} → {verdict.backend}"
        if verdict.backend == "gpu" and backend != "gpu":
            detail += f"; served by the {self.fast['label']}"
        rec.run.backends = {"auto": backend}
        rec.event("auto_choice", backend, detail)
        return self._single(rec, backend, self.session_model, warm_up=backend == self.options.target)

    def _strategy_migrate(self) -> StrategyRun:
        fast_backend, target = self.fast["backend"], self.options.target
        rec = self._recorder("migrate", {"fast": fast_backend, "target": target})
        server = Server(rec, self.options, self.inputs, count=self.count, paced=True).start()
        migration = server.migration
        try:
            migration.serve(self._open(rec, fast_backend, self.session_model, "fast"))
        except SessionFailed:
            pass  # recorded as session_failed; the target may still serve
        background = threading.Thread(target=self._migrate_in_background, args=(rec, server), daemon=True)
        background.start()
        server.join()
        background.join()
        if server.paced:
            self.count = rec.run.expected_requests = server.dispatched
            if server.capped:
                rec.run.notes.append(f"The migration had not swapped after {server.dispatched} requests (the most "
                                     "this run may serve): raise the requests to see serving after the swap.")
        if server.current is not None:
            migration.release(server.current)
        self._check_outputs(rec.run, server, swap=(fast_backend, target))
        return rec.run

    def _migrate_in_background(self, rec: Recorder, server: Server) -> None:
        """The migration (``Migration.run``) to the target. Compiling for the HTP is CPU work (on
        a device too: QNN prepares the graph on the CPU), so it starts once the fast session has
        given its first answer: the time to first response, which is what migration is for,
        never shares the cores with the compile."""
        if server.current is not None:
            server.first_answer.wait(FIRST_ANSWER_WAIT_S)
        target = self.options.target
        server.migration.run(target, lambda: self._open(rec, target, self.session_model, "target"))

    # -- building blocks -----------------------------------------------------------------------------
    def _recorder(self, name: str, backends: dict[str, str]) -> Recorder:
        rec = Recorder(name, self._emit, self.lock, self.count)
        rec.run.backends = dict(backends)
        with self.lock:
            self._emit(StrategyStart(name, backends))
        return rec

    def _single(self, rec: Recorder, backend: str, model: str, *, warm_up: bool,
                expect_context: bool = False) -> StrategyRun:
        """Serve the whole workload on one session (created, optionally warmed, then serving)."""
        server = Server(rec, self.options, self.inputs, count=self.count).start()
        slot = None
        try:
            slot = self._open(rec, backend, model, rec.strategy, expect_context=expect_context)
            if warm_up:
                warm(rec, slot, self.inputs, self.options.warmup_runs)
            server.migration.serve(slot)
        except SessionFailed as exc:
            server.switch.close(str(exc))
        server.join()
        if slot is not None:
            server.migration.release(slot)
        self._check_outputs(rec.run, server)
        return rec.run

    def _serve_nothing(self, rec: Recorder, reason: str) -> StrategyRun:
        server = Server(rec, self.options, self.inputs, count=self.count).start()
        server.switch.close(reason)
        server.join()
        return rec.run

    def _config(self, backend: str) -> tuple[SessionConfig, Path | None]:
        """Session options per backend, from the run's settings (``SessionConfig.of``). Every
        session gets the dimensions and the optimization level (they decide the graph); the fast
        backend nothing more (the user's QNN options are for the target); the target everything,
        plus QNN basic profiling (the finalize time of the Gantt) and the shared-memory allocator
        when requested."""
        if backend != self.options.target:
            return SessionConfig.of(self.options, backend, dims=self.dims, qnn=False), None
        provider = dict(self.options.provider_options)
        profile = None
        if self.options.qnn_profiling and "profiling_level" not in provider:
            self._profiles += 1
            profile = self.scratch / f"qnn_profile_{self._profiles}.csv"
            provider.update({"profiling_level": "basic", "profiling_file_path": str(profile)})
        if self.shared.get("available"):
            provider["enable_htp_shared_memory_allocator"] = "1"
        config = SessionConfig.of(self.options, backend, dims=self.dims).replace(provider_options=provider)
        return config, profile

    def _open(self, rec: Recorder, backend: str, model: str, role: str, *, expect_context: bool = False) -> Slot:
        """``migration.open_slot`` with this run's options for ``backend``; the target binds its
        calls in HTP shared memory when that was asked for and is available."""
        config, profile = self._config(backend)
        config = self._with_data(config, model)
        bind = shared_memory_info() if self.shared.get("available") and backend == self.options.target else None
        return open_slot(rec, model, config, f"{role} session on {self._label(backend)}", profile=profile,
                         expect_context=expect_context, bind_memory=bind, output_example=self.reference[0])

    def _context_model(self) -> tuple[Path, float | None, bool]:
        """The target's EPContext model (``ep.context_enable=1``), built once per model digest,
        target options and runtime version, then reused; returns (path, build seconds, reused)."""
        config, _ = self._config(self.options.target)
        config.provider_options.pop("profiling_level", None)
        config.provider_options.pop("profiling_file_path", None)
        key_source = json.dumps({"model": file_digest(self.model), "shapes": self.options.to_json()["shapes"],
                                 "config": config.to_json(), "runtime": versions()}, sort_keys=True)
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
            create_session(self.session_model, self._with_data(config))
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
            checks.append({"a": backend, "b": "cpu reference", **_compare(pairs, atol, rtol, self.output_names)})
        if swap is not None and swap[0] != swap[1]:
            before, after = swap
            pairs = [(server.outputs[(after, i)], server.outputs[(before, i)]) for i in range(len(self.inputs))
                     if (before, i) in server.outputs and (after, i) in server.outputs]
            checks.append({"a": f"{after} (after swap)", "b": f"{before} (before swap)",
                           **_compare(pairs, atol, rtol, self.output_names)})
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
            handle = create_session(self.session_model, self._with_data(config))
            plain = Slot(self.options.target, handle)
            bound = Slot(self.options.target, handle, shared_memory_info(), self.reference[0])
            _, copy_s = median_latency(plain, self.inputs, SHARED_MEMORY_RUNS + 1)
            _, zero_s = median_latency(bound, self.inputs, SHARED_MEMORY_RUNS + 1)
        except Exception as exc:
            return {"comparison_error": one_line(exc)}
        return {"copy_p50_s": round(copy_s, 6), "zero_copy_p50_s": round(zero_s, 6), "runs": SHARED_MEMORY_RUNS}

    def _label(self, backend: str) -> str:
        return self.fast["label"] if backend == self.fast.get("backend") else BACKEND_LABELS.get(backend, backend)

    def _status(self, message: str) -> None:
        with self.lock:
            self._emit(Status(message))


def _compare(pairs: list[tuple[list[np.ndarray], list[np.ndarray]]], atol: float, rtol: float,
             names: list[str] | None = None) -> dict:
    """Served outputs against a reference, per output over all compared inputs (``output_agreement``),
    and the verdict: every output agrees. Why per output and not one absolute tolerance: a
    detector's box coordinates (hundreds of pixels) and its scores (0 to 1) cannot share one, and a
    classifier's logits agree when they rank the classes alike even where fp16 moves them."""
    outputs = output_agreement(pairs, atol, rtol, names)
    worst = max((o["max_abs_diff"] for o in outputs if o["max_abs_diff"] is not None), default=0.0)
    agree = all(o["agree"] for o in outputs) if pairs else None
    return {"compared": len(pairs), "max_abs_diff": round(worst, 9), "agree": agree, "outputs": outputs}


def output_agreement(pairs, atol: float, rtol: float, names: list[str] | None = None) -> list[dict]:
    """One row per output: its largest absolute difference, its relative error (``||a - b|| /
    ||b||``: scale-free, so boxes and scores read alike), the cosine similarity, and for class
    scores (a last axis of ``CLASS_AXIS`` or more) the share of rows whose top-1 class matches and
    the overlap of their top-k. A float output agrees when every element is within ``atol + rtol *
    |b|``, or its relative error is within ``rtol`` and its cosine at least ``COSINE_AGREE``; other
    dtypes must be equal. The ranks are shown, not judged: a last axis may be anchors, not classes."""
    count = max((len(a) for a, _ in pairs), default=0)
    rows = []
    for index in range(count):
        got = [np.asarray(a[index]) for a, b in pairs if index < len(a) and index < len(b)]
        want = [np.asarray(b[index]) for a, b in pairs if index < len(a) and index < len(b)]
        name = names[index] if names and index < len(names) else f"output {index}"
        rows.append({"name": name, **_agreement(got, want, atol, rtol)})
    return rows


def _agreement(got: list[np.ndarray], want: list[np.ndarray], atol: float, rtol: float) -> dict:
    row = {"shape": list(want[0].shape) if want else None, "max_abs_diff": None, "rel_error": None, "cosine": None,
           "top1": None, "topk": None}
    if any(a.shape != b.shape for a, b in zip(got, want)):
        return {**row, "agree": False, "why": "shapes differ"}
    if not all(np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating) for a, b in zip(got, want)):
        return {**row, "agree": all(np.array_equal(a, b) for a, b in zip(got, want))}
    a = np.concatenate([x.astype(np.float64).ravel() for x in got]) if got else np.zeros(0)
    b = np.concatenate([x.astype(np.float64).ravel() for x in want]) if want else np.zeros(0)
    if not a.size:
        return {**row, "agree": True}
    diff = np.abs(a - b)
    norm_a, norm_b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    row["max_abs_diff"] = round(float(np.nanmax(diff)), 9)
    row["rel_error"] = round(float(np.linalg.norm(a - b)) / norm_b, 9) if norm_b else None
    row["cosine"] = round(float(a @ b) / (norm_a * norm_b), 9) if norm_a and norm_b else None
    if want[0].ndim >= 1 and want[0].shape[-1] >= CLASS_AXIS:
        row["top1"], row["topk"] = _ranks(got, want)
    close = bool(np.all(diff <= atol + rtol * np.abs(b)))
    direction = (row["rel_error"] is not None and row["rel_error"] <= rtol and row["cosine"] is not None
                 and row["cosine"] >= COSINE_AGREE)
    return {**row, "agree": close or direction}


def _ranks(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float]:
    """(share of rows with the same top-1 class, mean overlap of the top-k classes) over the last axis."""
    a = np.concatenate([x.reshape(-1, x.shape[-1]) for x in got]).astype(np.float64)
    b = np.concatenate([x.reshape(-1, x.shape[-1]) for x in want]).astype(np.float64)
    k = min(TOP_K, a.shape[-1])
    top1 = float(np.mean(np.argmax(a, axis=-1) == np.argmax(b, axis=-1)))
    top_a, top_b = np.argsort(-a, axis=-1)[:, :k], np.argsort(-b, axis=-1)[:, :k]
    overlap = float(np.mean([len(set(x) & set(y)) / k for x, y in zip(top_a, top_b)]))
    return round(top1, 6), round(overlap, 6)
