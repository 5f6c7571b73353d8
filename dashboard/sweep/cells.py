"""One cell of a sweep, what it came back with, how it runs, and how executors plug in.

A ``Cell`` is (model, SoC, setting set, analysis), with the model's content digest and the
``Settings`` it runs under. Its ``key`` is a hash of everything that decides its result (model
name and digest, SoC, the settings' result-deciding knobs, analysis, the project's version), so
a results folder answers a cell again only while the key matches: an edited model, a changed
setting set or a new release reruns it. Its ``cell_id`` names it apart from the key (model name,
SoC, set name, analysis): the store keeps one record per ``cell_id``, and ``sweep diff``
matches cells of two runs by it.

A ``CellResult`` is the cell with ``status`` ``ok`` or ``failed`` (and the one-line ``reason``),
the HTP coverage and the nodes left to the CPU (partition), the verdicts (classify), the cost per
backend and the costliest nodes (profile), the time it took and where it ran.

``run_cell(cell)`` does one cell's work with the project's own machinery: a partition cell is
``partition.analysis.analyze`` on this machine, whose QNN work runs in the runtime worker
subprocess (``runtime.jobs.run_command``), so a native crash, a hang past the timeout or a
killed worker is that cell's ``failed`` row and the sweep goes on; a classify cell is the
``classify`` command's work (the weight-free reader and both classifiers, pure Python, no native
code), done in the calling process, once per model content (its SoC and settings change nothing); a
profile cell is ``profile.run.profile_model`` (the ``profile`` command's work, ``Cell.runs`` timed
runs) in the worker subprocess, like a partition cell, so a crash is one failed row too: a cell
keeps each backend's total in its own unit with the hardware that measured it (on this host
"simulated HTP cycles", never a time) and the top nodes with their share; an accuracy or quantize
cell is the ``accuracy`` / ``quantize`` command's work on the spec's data for the model
(``sweep.accuracy``), its sessions in worker subprocesses too, keeping each comparison's worst
output SQNR, cosine and top-1 (and for quantize the lifted tensors, the coverage of the integer path
and the cycles ratio against float). Bad input for one
cell (a model that does not read, a shape for an input it does not have) is that cell's failure too; only ``Cancelled`` (Ctrl-C, a Cancel)
propagates, and a cancelled cell is not recorded, so a resumed sweep runs it.

Executors. An executor runs cells and yields their results as they finish::

    def run_cells(cells: Iterable[Cell], run_one: RunOne, *, jobs: int,
                  progress: CellProgress | None, cancel: Cancellation) -> Iterator[CellResult]

``cells`` is consumed lazily (a sweep of thousands of cells is never a list); ``run_one(cell,
cancel)`` is ``run_cell`` for a real sweep (a test passes a fake); ``jobs`` is how many cells
run at once (0: the executor's own default, e.g. this machine's cores locally, the cluster's
resources on Ray); ``progress(cell, event)`` receives each running cell's progress events (called
from any thread); ``cancel`` stops every running cell's worker, after which the executor stops
taking cells and ends (``Cancelled`` raised, or the results so far). An executor must yield one
result per cell it took, in any order, and never let one cell's failure end the others: a cell
it could not run (a remote node that vanished) is ``CellResult.failure(cell, reason)``. The
local executor (``executors.run_local``) runs ``run_one`` on ``jobs`` threads, each driving its
cell's worker subprocess; another executor (a Ray cluster, attached devices) calls ``run_cell``
wherever the cell runs (on a Ray node; with a ``Device`` for a board) and sets ``CellResult.host``
/ ``node`` / ``executor``. The runner (``store``) decides which cells run at all (resume) and
records each result as it arrives; an executor never touches the store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Literal, Protocol

from dashboard import __version__
from dashboard.errors import UserError
from dashboard.runtime.knobs import KEYS, Settings, words
from dashboard.serde import Record
from dashboard.sweep.accuracy import AccuracyFigure, CellData, QuantizeFigure, Recipe

if TYPE_CHECKING:
    from dashboard.partition.report import PartitionReport
    from dashboard.runtime.devices import Device
    from dashboard.runtime.jobs import Cancellation
    from dashboard.runtime.protocol import ProgressEvent

SCHEMA = "sweep-cell/1"
OK, FAILED = "ok", "failed"
Analysis = Literal["classify", "partition", "profile", "accuracy", "quantize"]
TOP_NODES = 3  # a profile cell's costliest nodes kept per backend


@dataclass
class Cell(Record):
    """One cell: ``model`` is its name in the spec (relative to the spec's folder), ``path`` the
    file it reads, ``settings`` the setting set with this cell's SoC."""

    model: str
    path: str
    digest: str
    soc: str
    option_set: str
    analysis: Analysis
    settings: Settings
    version: str = __version__
    runs: int | None = None  # profile cells: timed runs (the spec's [profile] runs)
    warmup: int | None = None  # profile cells: untimed runs first
    data: CellData | None = None  # accuracy and quantize cells: the samples (path None: random inputs)
    layers: list[str] = field(default_factory=list)  # accuracy cells: layer modes also run
    recipe: Recipe | None = None  # quantize cells: the quantize command's flags

    @property
    def key(self) -> str:
        """What decides the result: a record with another key is stale (the model's content, the
        set's knobs, a profile's run counts or the project's version changed). The timeout is not
        part of it."""
        data = {"model": self.model, "digest": self.digest, "soc": self.soc, "analysis": self.analysis,
                "settings": self.settings.result_json(), "version": self.version}
        if self.analysis == "profile":
            data.update(runs=self.runs, warmup=self.warmup)
        if self.analysis in ("accuracy", "quantize"):  # the data decides the figures: its content too
            data.update(data=(self.data or CellData()).to_json(), layers=self.layers,
                        recipe=None if self.recipe is None else self.recipe.to_json())
        return _hash(data)

    @property
    def cell_id(self) -> str:
        """Which cell this is, whatever its content: the store's file name, ``sweep diff``'s match."""
        return _hash({"model": self.model, "soc": self.soc, "option_set": self.option_set,
                      "analysis": self.analysis})

    @property
    def label(self) -> str:
        return f"{self.model} · {self.soc} · {self.option_set} · {self.analysis}"


def _hash(data: dict) -> str:
    return hashlib.blake2b(json.dumps(data, sort_keys=True).encode(), digest_size=12).hexdigest()


@dataclass
class CpuNode(Record):
    """A node the HTP refused, which a session with CPU fallback runs on the CPU."""

    node: str
    op_type: str
    reason: str | None = None


@dataclass
class BackendCost(Record):
    """A profile cell's figure for one backend: ``total`` (the median over the runs) in ``unit``
    (``cycles`` for the HTP, ``us`` for the CPU EP and the GPU), ``hardware`` what measured it
    (``HTP simulator (x86_64)`` here) and ``label`` the words no reader can mistake (``simulated
    HTP cycles``). Cycles are never turned into time: HTP ops overlap."""

    backend: str
    status: Literal["ok", "failed"]
    unit: str
    hardware: str
    label: str
    total: float | None = None
    reason: str | None = None


@dataclass
class TopNode(Record):
    """One of a backend's costliest nodes in a profile cell: its ``median`` in the backend's
    ``unit`` and its ``share`` of that backend's total (0-1). ``inserted``: a row the EP's layout
    transformation added (the input Transpose), not a node of the model."""

    name: str
    op_type: str
    backend: str
    unit: str
    median: float
    share: float
    inserted: bool = False


@dataclass
class CellResult(Record):
    """What one cell came back with. ``htp_coverage`` is the share of the model's nodes the HTP
    claims (claimed / (claimed + refused); nodes ONNX Runtime removed count in neither), measured
    on ``hardware`` (``"simulator"`` here: the HTP simulator, never the NPU). ``verdicts`` /
    ``routes``: each classifier's verdict and the backend it routes to (``ep``: the rules of
    ``backend_type=auto``; ``refined``). ``host``: the machine that ran it; ``node``: the
    executor's worker there (a Ray node, a device); ``elapsed_s``: the cell's wall time."""

    cell: Cell
    status: Literal["ok", "failed"]
    reason: str | None = None
    htp_coverage: float | None = None
    htp_claimed: int | None = None
    htp_nodes: int | None = None
    cpu_nodes: list[CpuNode] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    routes: dict[str, str] = field(default_factory=dict)
    hardware: str | None = None
    elapsed_s: float = 0.0
    host: str = ""
    node: str = ""
    executor: str = "local"
    finished: str = ""  # UTC, ISO 8601
    notes: list[str] = field(default_factory=list)
    costs: list[BackendCost] = field(default_factory=list)  # profile: one per backend profiled
    top_nodes: list[TopNode] = field(default_factory=list)  # profile: TOP_NODES per backend, costliest first
    data: str | None = None  # accuracy, quantize: what the figures were computed on ("random inputs", a file)
    accuracy: list[AccuracyFigure] = field(default_factory=list)  # accuracy, quantize: one per comparison
    first_jump: str | None = None  # accuracy with layers: the node where the error first jumps
    quantized: QuantizeFigure | None = None  # quantize: what the recipe built and what it costs
    schema: Literal["sweep-cell/1"] = SCHEMA

    def cost(self, backend: str) -> BackendCost | None:
        return next((c for c in self.costs if c.backend == backend), None)

    @classmethod
    def failure(cls, cell: Cell, reason: str, **fields) -> "CellResult":
        """A failed row: what an executor records for a cell it could not run."""
        return cls(cell=cell, status=FAILED, reason=reason, host=fields.pop("host", platform.node()),
                   finished=fields.pop("finished", _now()), **fields)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def brief(self) -> dict:
        """The cell as ``sweep --json`` lists it: what it is, its status and reason, and its
        analysis' findings (partition: the HTP coverage and the nodes left to the CPU; classify:
        each classifier's verdict and the backend it routes to)."""
        cell = self.cell
        out = {"model": cell.model, "soc": cell.soc, "option_set": cell.option_set, "analysis": cell.analysis,
               "status": self.status, "reason": self.reason}
        if cell.analysis == "partition":
            out.update(htp_coverage=self.htp_coverage, htp_claimed=self.htp_claimed, htp_nodes=self.htp_nodes,
                       cpu_nodes=[node.to_json() for node in self.cpu_nodes], hardware=self.hardware)
        elif cell.analysis == "classify":
            out.update(verdicts=dict(self.verdicts), routes=dict(self.routes))
        elif cell.analysis == "profile":
            out.update(runs=cell.runs, backends={c.backend: {k: v for k, v in c.to_json().items() if k != "backend"}
                                                 for c in self.costs},
                       top_nodes=[node.to_json() for node in self.top_nodes], hardware=self.hardware)
        elif cell.analysis in ("accuracy", "quantize"):
            out.update(data=self.data, accuracy=[f.to_json() for f in self.accuracy], first_jump=self.first_jump,
                       hardware=self.hardware)
            if self.quantized is not None:
                out.update(quantized=self.quantized.to_json())
        out.update(elapsed_s=self.elapsed_s, host=self.host, node=self.node, executor=self.executor)
        return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- executors -----------------------------------------------------------------------------------------
RunOne = Callable[[Cell, "Cancellation"], CellResult]
CellProgress = Callable[[Cell, "ProgressEvent"], None]


class Executor(Protocol):
    """How cells get run (see the module docstring): ``executors.run_local`` and the others."""

    def __call__(self, cells: Iterable[Cell], run_one: RunOne, *, jobs: int, progress: CellProgress | None,
                 cancel: "Cancellation") -> Iterator[CellResult]: ...


# -- running one cell ----------------------------------------------------------------------------------
def run_cell(cell: Cell, cancel: Cancellation | None = None, *, progress: CellProgress | None = None,
             use_cache: bool = True, device: Device | None = None) -> CellResult:
    """``cell``'s result; never raises but ``Cancelled`` (see the module docstring). ``use_cache``:
    a partition may answer from the partition cache (same model digest, settings and device: the
    same measurement); ``device``: where partition cells measure (this machine by default)."""
    from dashboard.runtime.jobs import Cancellation, Cancelled

    cancel = cancel or Cancellation()
    started = time.perf_counter()
    emit = (lambda event: progress(cell, event)) if progress else None
    try:
        if cell.analysis == "classify":
            result = _classify(cell)
        elif cell.analysis == "profile":
            result = _profile(cell, cancel, emit, device)
        elif cell.analysis == "accuracy":
            from dashboard.sweep.accuracy import run_accuracy

            result = run_accuracy(cell, cancel, emit, device)
        elif cell.analysis == "quantize":
            from dashboard.sweep.accuracy import run_quantize

            result = run_quantize(cell, cancel, emit, device)
        else:
            result = _partition(cell, cancel, emit, use_cache, device)
    except Cancelled:
        raise
    except UserError as exc:
        result = CellResult.failure(cell, words(str(exc), KEYS) or str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug on one model must not end a sweep of a hundred
        result = CellResult.failure(cell, f"internal error ({type(exc).__name__}: {exc})")
    result.elapsed_s = round(time.perf_counter() - started, 3)
    result.host = result.host or platform.node()
    result.finished = _now()
    return result


def _classify(cell: Cell) -> CellResult:
    verdicts, routes, warnings = _classified(cell.path, cell.digest)
    return CellResult(cell=cell, status=OK, verdicts=dict(verdicts), routes=dict(routes), notes=list(warnings))


@functools.lru_cache(maxsize=256)
def _classified(path: str, digest: str) -> tuple[tuple, tuple, tuple]:
    """Both classifiers' verdicts on a model, once per content digest: a model's classify cells on
    every SoC and setting set read the same graph and get the same answer (a 100,000-node export
    takes seconds to read). A few hundred bytes an entry; only a model that read is remembered."""
    from dashboard.classify.ep_rules import classify_ep
    from dashboard.classify.refined import classify_refined
    from dashboard.intake.reader import load_model

    model = load_model(path)
    ep, refined = classify_ep(model), classify_refined(model)
    return ((("ep", ep.verdict), ("refined", refined.verdict)), (("ep", ep.backend), ("refined", refined.backend)),
            tuple(model.warnings))


def _partition(cell: Cell, cancel: Cancellation, emit, use_cache: bool, device: Device | None) -> CellResult:
    from dashboard.partition.analysis import analyze

    report = analyze(cell.path, cell.settings, digest=cell.digest, on_event=emit, use_cache=use_cache,
                     cancel=cancel, device=device)
    return partition_result(cell, report)


def partition_result(cell: Cell, report: PartitionReport) -> CellResult:
    """A partition cell's row from its report: ``failed`` when the HTP failed (a crash, a timeout,
    a refused compile), with the runtime's reason; the coverage and CPU nodes otherwise."""
    from dashboard.partition.report import FAILED as BACKEND_FAILED, claims

    notes = [words(n, KEYS) for n in report.notes]
    if report.digest and report.digest != cell.digest:
        notes.append(f"the model changed while the sweep ran (digest {report.digest}, the spec's {cell.digest})")
    htp = report.backends.get("htp")
    if htp is None:
        return CellResult(cell=cell, status=OK, notes=notes + ["the setting set does not measure the HTP"])
    if htp.status == BACKEND_FAILED or not htp.nodes:
        reason = words(htp.error or "the HTP gave no per-node verdicts", KEYS)
        if htp.suggestion:
            reason += f" ({words(htp.suggestion, KEYS)})"
        return CellResult(cell=cell, status=FAILED, reason=reason, notes=notes,
                          hardware=htp.runtime.get("hardware"))
    counts = claims(report, "htp")
    removed = set(report.classes.removed) if not report.classes.note else set()
    order = report.node_order or list(htp.nodes)
    cpu = [CpuNode(name, v.op_type, v.reason) for name in order
           if (v := htp.nodes.get(name)) is not None and not v.supported and v.status != "removed"
           and name not in removed]
    coverage = counts.claimed / counts.executed if counts.executed else None
    return CellResult(cell=cell, status=OK, htp_coverage=None if coverage is None else round(coverage, 6),
                      htp_claimed=counts.claimed, htp_nodes=counts.executed, cpu_nodes=cpu,
                      hardware=htp.runtime.get("hardware"), notes=notes)


def _profile(cell: Cell, cancel: Cancellation, emit, device: Device | None) -> CellResult:
    from dashboard.profile.run import profile_model

    profile = profile_model(cell.path, cell.settings, runs=cell.runs or 3, warmup=1 if cell.warmup is None
                            else cell.warmup, device=device, on_event=emit, cancel=cancel)
    return profile_result(cell, profile)


def profile_result(cell: Cell, profile) -> CellResult:
    """A profile cell's row from its ``profile.model.Profile``: each backend's total with its unit,
    hardware and label, and its costliest nodes; ``failed`` when no QNN backend (HTP, GPU) gave
    figures: the CPU EP's alone are not what a sweep of the NPU asks. The GPU failing where it
    cannot initialize leaves the HTP's figures standing, said in a note."""
    from dashboard.profile.model import SIMULATOR_HARDWARE

    costs = [BackendCost(name, b.status, b.unit, b.hardware, profile.label(name),
                         None if b.total is None else float(b.total), words(b.reason, KEYS) if b.reason else None)
             for name, b in profile.backends.items()]
    top = [TopNode(n.name, n.op_type, n.backend, n.unit, float(n.median), round(float(n.share), 6), n.inserted)
           for name, b in profile.backends.items() if b.ok for n in profile.top(TOP_NODES, backend=name)]
    failed = [c for c in costs if c.status != OK]
    notes = [f"{c.backend}: not profiled ({c.reason})" for c in failed]
    htp = profile.backends.get("htp")
    hardware = None if htp is None else "simulator" if htp.hardware == SIMULATOR_HARDWARE else htp.hardware
    qnn = [c for c in costs if c.backend != "cpu"] or costs
    if qnn and all(c.status != OK for c in qnn):
        reason = "; ".join(f"{c.backend}: {c.reason}" for c in qnn)
        return CellResult(cell=cell, status=FAILED, reason=reason, costs=costs, hardware=hardware)
    return CellResult(cell=cell, status=OK, costs=costs, top_nodes=top, hardware=hardware, notes=notes)
