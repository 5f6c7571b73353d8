"""Partition analysis, end to end: the one entry point the CLI and the Partitions page use.

``analyze(model, options, device=...)`` runs the measurement in a runtime worker process on a
device (this machine by default; a Snapdragon over SSH receives the model over the protocol, once
per digest) with a timeout, so a native crash or hang of QNN is a status in the report, never a
dead dashboard. A ``Cancellation`` handed in stops the worker from another thread (the page's
Cancel button). It then replaces predicted figures with any device report given, computes the node
classes and the two migration plans, and caches the whole report on disk under the model digest
and the options, so asking again (or flipping a knob back) answers from the cache in
milliseconds. Failures - dynamic shapes, ``QNN_COMMON_ERROR_MEM_ALLOC`` at finalize, crashes,
timeouts - come back as a backend status with the runtime's own message and an actionable
suggestion.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import check_input_shapes, default_dims, resolve_dims, unnamed_dynamic_inputs
from dashboard.partition import cache
from dashboard.partition.plans import build_plans, plan_graph
from dashboard.partition.protocol import PartitionArgs, PartitionResult, Stage
from dashboard.partition.report import (FAILED, MEASURED, PREDICTED, BackendReport, PartitionReport, classify_nodes,
                                        failed, measured_backends)
from dashboard.partition.root_causes import INPUT
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.knobs import TIMEOUTS, Settings, ref
from dashboard.runtime.protocol import ProgressEvent
from dashboard.runtime.socs import DEFAULT_SOC

if TYPE_CHECKING:
    from dashboard.runtime.devices import Device

DEFAULT_TIMEOUT = TIMEOUTS["partition"]
PartitionOptions = Settings  # what decides a partition report is the settings, nothing more

Events = Callable[[ProgressEvent], None]


# -- cancelling ---------------------------------------------------------------------------------------
# One mechanism for every long run (``dashboard.runtime.jobs``); imported here, where they were defined,
# so ``from dashboard.partition.analysis import Cancellation`` keeps working.
from dashboard.runtime.jobs import CANCEL_GRACE, CANCELLED, Cancellation, Cancelled  # noqa: E402, F401


# -- suggestions --------------------------------------------------------------------------------------
def suggestion_for(error: str, options: Settings, graph: ModelGraph | None = None) -> str | None:
    """What went wrong and the next step, in one or two sentences, for the failures a user can act
    on (None for others: the runtime's message is then all there is). Settings are named by key
    (``knobs.ref``): each front end words them its own way (``knobs.words``)."""
    text = error.lower()
    if "mem_alloc" in text or "memory allocation" in text:
        if not options.fp16:
            return (f"QNN could not fit the float32 graph in HTP memory when finalizing: turn on fp16 precision "
                    f"({ref('fp16')}, SoC {DEFAULT_SOC} by default) - it halves every tensor and weight.")
        return ("Even in fp16 the graph does not fit in HTP memory: lower the sequence or image dimensions "
                f"({ref('dims')}) or split the model into smaller graphs.")
    if "nhwc" in text and "not selected" in text:
        soc = options.soc or "the default SoC"
        return (f"The HTP, compiling for {soc}, refused the nodes ONNX Runtime had converted to NHWC layout for it, "
                f"so no session can be built with this SoC: choose another SoC ({ref('soc')}, e.g. {DEFAULT_SOC}), "
                f"or measure on the device itself ({ref('device')}).")
    if "fp16" in text and "soc" in text:
        return f"HTP fp16 precision needs a SoC: pick one ({ref('soc')}, e.g. {DEFAULT_SOC})."
    if "killed by" in text or "died during" in text:
        return ("The runtime crashed natively while building the session; no partial result exists. Try "
                f"optimization level 'basic' or 'disabled' ({ref('optimization_level')}), smaller dimensions "
                f"({ref('dims')}) or another SoC ({ref('soc')}); if it also crashes on the device, it is an EP bug "
                "worth reporting with this model.")
    if "did not finish" in text or "timed out" in text:
        return (f"The runtime did not finish in time: raise the timeout ({ref('timeout')}), or use smaller "
                f"dimensions ({ref('dims')}); HTP finalization of large float graphs on the x86_64 HTP simulator "
                "can take many minutes.")
    if "cannot get shape" in text or "dynamic" in text:
        return "QNN needs static shapes: " + _static_shapes_step(options, graph)
    if "initialize" in text and "backend" in text:
        return ("This backend does not initialize on this host (QNN's reason above); its figures are predicted "
                f"where possible, or measured on a device that has it ({ref('device')}).")
    return None


def _static_shapes_step(options: Settings, graph: ModelGraph | None) -> str:
    names = unnamed_dynamic_inputs(graph, options.shapes) if graph is not None else []
    if names:
        return (f"give the whole shape of each input with unnamed dimensions ({ref('shapes')}: "
                f"{', '.join(names[:4])}) and fix every symbolic dimension ({ref('dims')}).")
    return f"fix every symbolic dimension ({ref('dims')})."


def worded(report: PartitionReport, style: str) -> PartitionReport:
    """``report`` with the settings its suggestions, errors and notes name worded for a front end
    (``knobs.CLI``, ``PAGE`` or ``KEYS``); the report itself keeps them by key (it is cached and
    read by every front end)."""
    from dashboard.runtime.knobs import words

    backends = {name: dataclasses.replace(b, suggestion=words(b.suggestion, style), error=words(b.error, style),
                                          root_causes=[dataclasses.replace(c, fix=words(c.fix, style))
                                                       for c in b.root_causes])
                for name, b in report.backends.items()}
    return dataclasses.replace(report, backends=backends, notes=[words(n, style) for n in report.notes])


# -- the analysis -------------------------------------------------------------------------------------
def analyze(model_path: str | os.PathLike, options: Settings | None = None, *,
            timeout: float | None = None, on_event: Events | None = None,
            device_reports: list[tuple[str, str]] = (), use_cache: bool = True, digest: str | None = None,
            device: Device | None = None, cancel: Cancellation | None = None) -> PartitionReport:
    """The partition report of ``model_path`` under ``options``, measured on ``device`` (this
    machine when None). The worker gets ``timeout`` seconds, else the settings' timeout, else
    ``DEFAULT_TIMEOUT``.

    ``device_reports``: (label, JSON text) of reports written with ``partition --out`` on a
    device; their measured backends replace any backend not measured here. ``digest`` skips
    hashing the file when the caller already knows it. Raises ``UserError`` for bad input (an
    unreadable model, a missing external-data file, bad options, a device report of another
    model, an unreachable device) and ``Cancelled`` when ``cancel`` fired; runtime failures are
    statuses inside the report.
    """
    from dashboard.runtime.devices import Device

    started = time.perf_counter()
    options = options or Settings()
    timeout = timeout or options.timeout or DEFAULT_TIMEOUT
    device = device or Device.parse("local")
    cancel = cancel or Cancellation()
    emit = on_event or (lambda event: None)
    given = Path(model_path).expanduser()
    graph = load_model(given)  # bad input fails here, in one line naming the path given, before any work starts
    path = str(given.resolve())
    dims = resolve_dims(graph, options.dims)
    check_input_shapes(graph, options.shapes, dims)
    _check_external_data(graph, device)
    device_digests = [hashlib.blake2b(text.encode(), digest_size=8).hexdigest() for _, text in device_reports]

    def key(known: str) -> str:
        return cache.cache_key(known, options, device_digests, device.url)

    known = digest or cache.remembered_digest(path)
    if known and use_cache and (cached := cache.read(key(known))):
        cached.cached, cached.options = True, options
        cached.elapsed_s = round(time.perf_counter() - started, 4)
        emit(Stage("answered from the cache", 1.0))
        return cached
    if device_reports or not device.is_local:
        known = known or cache.known_digest(path)  # to match device reports; a remote worker gets the model by digest
    devices = _device_backends(device_reports, known, graph) if device_reports else {}
    emit(Stage(f"starting the runtime worker on {device.label}", 0.0))
    digest_thread = _Digest(path, known)
    config = SessionConfig.of(options, "htp", dims=dims)
    as_is = not options.shapes and not graph.renamed_nodes  # the sessions may read the file itself
    result, crash = _run_worker(device, path, known, PartitionArgs("", config, list(options.backends),
                                                                   dict(options.shapes), as_is), timeout, emit, cancel)
    digest = digest_thread.get()
    notes = _notes(graph, options, dims)
    backends = _backend_reports(result, crash, options, graph)
    for name, report in devices.items():
        if name not in backends or backends[name].status != MEASURED:
            backends[name] = report
            notes.append(f"{name.upper()} figures imported from {report.source}")
    shapes = result.shapes if result else {}
    order = [graph.nodes[i].name for i in graph.topo_order]
    classes = classify_nodes(order, backends.get("htp") or failed("htp", "not requested"),
                             backends.get("gpu") or failed("gpu", "not requested"))
    plans = {}
    if classes.note is None:
        plans = build_plans(plan_graph(graph, shapes), classes.of())
    if result:
        notes += _measurement_notes(result, options)
    report = PartitionReport(
        model=path, digest=digest, options=options, backends=backends, classes=classes, plans=plans,
        node_order=order, op_types={n.name: n.qualified_op for n in graph.nodes},
        shapes=shapes, shape_source=result.shape_source if result else "", dims=dims, notes=notes,
        device=device.label, elapsed_s=round(time.perf_counter() - started, 3))
    if use_cache and crash is None:
        cache.write(key(digest), report)
    return report


def _check_external_data(graph: ModelGraph, device: Device) -> None:
    """Every external-data file the model names must exist (else the runtime fails with a message
    about paths, reported as a backend failure); a remote device receives only the .onnx file."""
    folder = Path(graph.path).parent
    files = sorted({i.external_location for i in graph.initializers.values() if i.external_location})
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        raise UserError(f"{Path(graph.path).name}: its external-data file {missing[0]!r} is missing (the model keeps "
                        f"its weights there; looked in {folder})")
    if files and not device.is_local:
        raise UserError(f"{Path(graph.path).name} keeps its weights in external-data files ({', '.join(files[:3])}), "
                        f"which are not sent to {device.label}: copy the model's folder to the device and run "
                        "`python -m dashboard partition` there")


def _device_backends(device_reports, digest: str, graph: ModelGraph) -> dict[str, BackendReport]:
    from dashboard.partition.report import parse_device_report

    out: dict[str, BackendReport] = {}
    names = {n.name for n in graph.nodes}
    for label, text in device_reports:
        device = parse_device_report(text, label)
        out.update(measured_backends(device, digest, names, label))
    return out


def _notes(graph: ModelGraph, options: Settings, dims: dict[str, int]) -> list[str]:
    notes = []
    defaults = default_dims(graph)
    guessed = [name for name, d in defaults.items() if d.guessed and name not in options.dims]
    if guessed:
        notes.append(f"no rule for dimension(s) {', '.join(guessed)}: set to 1, override with {ref('dims')}")
    unnamed = unnamed_dynamic_inputs(graph, options.shapes)
    if unnamed:
        notes.append(f"inputs with unnamed dynamic dimensions, not fixed: {', '.join(unnamed[:5])}; give their "
                     f"whole shape with {ref('shapes')}")
    for name, shape in options.shapes.items():
        notes.append(f"input {name} analysed with shape [{', '.join(map(str, shape))}] (a copy of the model declares "
                     "it; the file is unchanged)")
    if options.fp16 and not options.provider_options.get("soc_model"):
        notes.append(f"HTP fp16 precision compiled for SoC {options.soc}")
    return notes


def _measurement_notes(result: PartitionResult, options: Settings) -> list[str]:
    notes = []
    if options.optimization_level != "disabled":
        notes.append(f"measured at optimization level '{options.optimization_level}': ONNX Runtime's level-1 "
                     f"optimizations run before partitioning ({result.optimized_nodes} nodes reach the EPs); "
                     "nodes they fused inherit their verdict, nodes they folded are listed as removed")
    if result.renamed_nodes:
        notes.append(f"{result.renamed_nodes} unnamed or duplicate-named node(s) were given their stable names "
                     "(<op_type>#<index>) in the copy the sessions analysed")
    return notes


class _Digest:
    """The model's digest and the rest of its cache key, on a thread while the worker measures (a
    multi-GB file takes seconds to hash; the key's version and code stamps tens of milliseconds),
    so neither adds to the run; known digests are returned as they are."""

    def __init__(self, path: str, known: str | None) -> None:
        self.path, self.digest = path, known
        self.error: OSError | None = None
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def _work(self) -> None:
        try:
            if self.digest is None:
                self.digest = cache.known_digest(self.path)
        except OSError as exc:
            self.error = exc
        cache.warm_stamps()

    def get(self) -> str:
        if self.digest is None:
            self.thread.join()
        if self.error is not None:
            raise UserError(f"{self.path}: cannot read it ({self.error.strerror or self.error})")
        return self.digest


def _run_worker(device: Device, path: str, digest: str | None, args: PartitionArgs, timeout: float | None,
                emit: Events, cancel: Cancellation) -> tuple[PartitionResult | None, str | None]:
    """The worker's result, or (None, one-line reason) when it crashed, hung or failed. An
    unreachable device is a ``UserError``; a cancelled run raises ``Cancelled``. The worker's
    lifecycle is every run's (``runtime.jobs.run_command``)."""
    from dashboard.runtime.jobs import run_command

    answer = run_command(device, path, digest, "partition", lambda located: dataclasses.replace(args, path=located),
                         timeout=timeout, on_event=emit, cancel=cancel)
    return answer.result, None if answer.failure is None else str(answer.failure)


def _backend_reports(result: PartitionResult | None, crash: str | None, options: Settings,
                     graph: ModelGraph) -> dict[str, BackendReport]:
    out = {}
    for backend in options.backends:
        if result is None:
            out[backend] = failed(backend, crash or "no result", suggestion_for(crash or "", options, graph))
            continue
        report = result.backends.get(backend) or failed(backend, "the worker did not measure it")
        if report.status == FAILED and report.error:
            report.suggestion = suggestion_for(report.error, options, graph)
        elif report.status in (MEASURED, PREDICTED):
            shapeless = sum(1 for n in report.nodes.values() if n.reason and "Cannot get shape" in n.reason)
            inside = [c for c in report.root_causes if c.op_type != INPUT]  # sizes born in the graph: no
            if shapeless and inside:                                          # setting fixes those
                origins = ", ".join(f"{c.node} [{c.op_type}]" for c in inside[:3])
                report.suggestion = (f"{shapeless} node(s) were refused for unknown shapes, {report.shape_failures} "
                                     f"of them because of {len(report.root_causes)} root cause(s) ({origins}"
                                     f"{', ...' if len(inside) > 3 else ''}): fix those first, "
                                     "as each root cause's fix says")
            elif shapeless:
                report.suggestion = (f"{shapeless} node(s) were refused for unknown shapes: "
                                     + _static_shapes_step(options, graph))
        out[backend] = report
    return out
