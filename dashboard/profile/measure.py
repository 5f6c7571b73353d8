"""Profile a model inside the runtime worker: warm-up, N timed runs, every row mapped to a model node.

Runs as the worker command ``profile`` (``dashboard.runtime.worker``), so a native crash or hang of
QNN never takes the dashboard down. One HTP session is created with QNN's profiling
(``profiling_level=detailed``, or ``optrace`` when asked; ``profiling_file_path`` and the framework
op trace in the job's scratch folder, removed with it) and ONNX Runtime's own profiler on, so one
session gives both the HTP's cycles per QNN op and the µs of every node the HTP refused and the
CPU EP ran. Where QNN claims nothing, a CPU-only session is profiled instead and the HTP says why.
The GPU is profiled the same way where it initializes (a device); elsewhere it fails with the
probe's reason. Each backend fails alone: a missing or truncated file, a failing session or run is
that backend's ``reason``, and the others are kept.
"""

from __future__ import annotations

import gc
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

from dashboard.errors import UserError, one_line
from dashboard.partition.measure import opt_graph, place_model_nodes, prepare, resolve_ep_name
from dashboard.partition.protocol import Stage
from dashboard.profile.mapping import Graphs, cpu_nodes, htp_nodes, run_totals
from dashboard.profile.model import (SIMULATOR_HARDWARE, BackendProfile, Figure, NodeCost, Profile,
                                     with_shares)
from dashboard.profile.parse import CPU_PROVIDER, ProfileFileError, read_ort_trace, read_qnn_csv, runs_of
from dashboard.profile.protocol import ProfileArgs
from dashboard.runtime import scratch

SCRATCH_PREFIX = "qbl-profile-"
LEVELS = ("detailed", "optrace")
CSV_NAME = "qnn_profile.csv"
Emit = Callable[[Stage], None]


def profiling_options(config, folder: Path, level: str) -> dict[str, str]:
    """The provider options of a profiled session: QNN's per-op profile and the framework op trace,
    both written into ``folder`` (the job's scratch)."""
    return {**config.provider_options, "profiling_level": level, "profiling_file_path": str(folder / CSV_NAME),
            "enable_framework_op_trace": "1", "framework_op_trace_dir": str(folder)}


def requested_level(config) -> tuple[str, list[str]]:
    """The QNN profiling level to run: the user's ``optrace``/``detailed``, else ``detailed``
    (``basic`` and ``off`` give no per-op rows, which is what a profile is)."""
    asked = config.provider_options.get("profiling_level", "detailed").lower()
    if asked in LEVELS:
        return asked, []
    return "detailed", [f"profiling_level={asked} gives no per-node rows: profiled at detailed"]


class Session:
    """A profiled session's files after its runs: QNN's CSV, ORT's trace, the op trace."""

    def __init__(self, folder: Path, level: str, notes: list[str]) -> None:
        self.folder, self.level, self.notes = folder, level, notes
        self.ort_trace: str | None = None

    def qnn_csv(self) -> str | None:
        path = self.folder / CSV_NAME
        try:
            return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        except OSError:
            return None

    def op_trace(self) -> dict:
        try:
            data = json.loads((self.folder / "qnn_op_trace.json").read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def ort_text(self) -> str | None:
        try:
            return Path(self.ort_trace).read_text(encoding="utf-8") if self.ort_trace else None
        except OSError:
            return None


def profiled_session(prepared, config, folder: Path, runs: int, warmup: int,
                     on_run: Callable[[int, int], None] | None = None,
                     before_runs: Callable[[], object] | None = None,
                     samples: list[dict] | None = None) -> Session:
    """Create the session (QNN profiling for a QNN backend, ORT's profiler always), run it
    ``warmup + runs`` times on generated inputs, release it. A session that fails to build or
    run is a ``UserError`` with the runtime's message. ``optrace`` that this QAIRT refuses is run
    at ``detailed`` (said in the notes). ``on_run(done, total)`` after each run (progress);
    ``before_runs()`` once the session exists, before the first run: work that may overlap the
    compile but must not share the CPU with the timed runs (the CPU EP's µs are wall time).
    ``samples``: the user's data (``--data``), run in turn (run i takes sample i mod N); None:
    one set of generated inputs, as the figures then say."""
    from dashboard.runtime.qnn import create_session, random_inputs

    folder.mkdir(parents=True, exist_ok=True)
    level, notes = requested_level(config) if config.backend != "cpu" else ("", [])
    session_config = {**config.session_config, **prepared.session_config}
    prefix = str(folder / "ort_profile")

    def build(level: str):
        options = profiling_options(config, folder, level) if config.backend != "cpu" else config.provider_options
        return create_session(prepared.session_input, config.replace(provider_options=options,
                                                                      session_config=session_config),
                              require_qnn=config.backend != "cpu", profile_prefix=prefix)

    try:
        handle = build(level)
    except UserError as exc:
        if level != "optrace" or "profil" not in str(exc).lower():
            raise
        notes.append(f"profiling_level=optrace refused by this QNN ({exc}): profiled at detailed")
        level = "detailed"
        handle = build(level)
    session = Session(folder, level, notes)
    try:
        if before_runs is not None:
            before_runs()
        pool = samples or [random_inputs(handle.session, config.dims)]
        for done in range(1, warmup + runs + 1):
            handle.session.run(None, pool[(done - 1) % len(pool)])
            if on_run is not None:
                on_run(done, warmup + runs)
    except UserError:
        raise
    except Exception as exc:  # onnxruntime raises several pybind types; all mean "the run failed"
        raise UserError(f"a profiled run failed on {config.backend}: {one_line(exc)}") from None
    finally:
        session.ort_trace = handle.session.end_profiling()
        del handle
        gc.collect()  # QNN writes the rest of its profile when the session is released
    return session


# -- assembling a backend from its files (pure: tests feed them truncated or foreign files) -----------
def qnn_backend(text: str | None, op_trace: dict, graphs: Graphs, warmup: int, runs: int, hardware: str,
                level: str, notes: list[str], backend: str = "htp") -> tuple[BackendProfile, list[NodeCost]]:
    """A QNN backend's totals and node rows from its CSV ``text`` (None: the file is missing)."""
    if text is None:
        return _failed(backend, hardware, "QNN wrote no profiling file (profiling_file_path)", notes), []
    try:
        parsed = read_qnn_csv(text)
    except ProfileFileError as exc:
        return _failed(backend, hardware, str(exc), notes), []
    summary = op_trace.get("summary") if isinstance(op_trace.get("summary"), dict) else {}
    graph_count = int(summary.get("qnn_subgraphs") or len(parsed.finalize) or 1)
    timed = runs_of(parsed.blocks, graph_count, warmup)
    notes = list(notes)
    if parsed.truncated or len(timed) < runs:
        notes.append(f"the profiling file ends early: {len(timed)} of {runs} timed runs read")
    if not timed:
        return _failed(backend, hardware, f"the profiling file holds no complete timed run "
                                          f"({len(parsed.blocks)} graph execution(s) for {graph_count} graph(s), "
                                          f"{warmup} warm-up run(s))", notes), []
    nodes = htp_nodes(timed, graphs, resolve_ep_name, _qnn_types(op_trace), backend)
    unit = nodes[0].unit if nodes else "cycles"
    totals = [_sum(b.cycles if unit == "cycles" else b.accel_us for b in run) for run in timed]
    row_sums = [sum(r.value for b in run for r in b.rows) for run in timed]
    if any(abs(t - s) > 0.5 for t, s in zip(totals, row_sums)):
        notes.append("the node rows do not add up to the accelerator's total in every run")
    return BackendProfile(
        status="ok", hardware=hardware, unit=unit, **_total(totals), runs=len(timed),
        execute_us=statistics.median(_sum(b.execute_us for b in run) for run in timed),
        finalize=_finalize(parsed.finalize), figures=_figures(timed), level=level, notes=notes), nodes


def cpu_backend(text: str | None, graphs: Graphs, warmup: int, hardware: str,
                notes: list[str] = (), refine: Callable[[], Graphs] | None = None
                ) -> tuple[BackendProfile, list[NodeCost]]:
    """The CPU EP's totals and node rows from ONNX Runtime's trace ``text``. The CPU EP's nodes
    went through ORT's further optimizations (level 2 and up fuse ``SkipLayerNormalization`` &
    co. after partitioning): when ``graphs`` (level 1) cannot place one of them, ``refine()``
    gives the graph at the session's own level, on which the fused nodes' members are found."""
    if text is None:
        return _failed("cpu", hardware, "ONNX Runtime wrote no profile", list(notes)), []
    try:
        timed = read_ort_trace(text, warmup)
    except ProfileFileError as exc:
        return _failed("cpu", hardware, str(exc), list(notes)), []
    if not timed:
        return _failed("cpu", hardware, "ONNX Runtime's profile holds no timed run", list(notes)), []
    names = {e.name for run in timed for e in run if e.provider == CPU_PROVIDER}
    if refine is not None and any(not graphs.model_nodes(n, resolve_ep_name)[1] for n in names):
        try:
            graphs = refine()
        except UserError:
            pass  # the level-1 graph it is: unplaced nodes are kept as rows of their own
    nodes = cpu_nodes(timed, graphs, resolve_ep_name)
    return BackendProfile(status="ok", hardware=hardware, unit="us", **_total(run_totals(timed)), runs=len(timed),
                          notes=list(notes)), nodes


def _failed(backend: str, hardware: str, reason: str, notes: list[str]) -> BackendProfile:
    return BackendProfile(status="failed", hardware=hardware, unit="us" if backend == "cpu" else "cycles",
                          reason=reason, notes=list(notes))


def _sum(values) -> float:
    return float(sum(v or 0.0 for v in values))


def _total(values: list[float]) -> dict:
    return {"total": float(statistics.median(values)) if values else 0.0,
            "total_min": min(values, default=0.0), "total_max": max(values, default=0.0)}


def _finalize(graphs: list[list[Figure]]) -> list[Figure]:
    """The finalize phases summed over the QNN graphs, in their first graph's order."""
    out: dict[tuple[str, str], float] = {}
    for figures in graphs:
        for f in figures:
            out[(f.name, f.unit)] = out.get((f.name, f.unit), 0.0) + f.value
    return [Figure(name, value, unit) for (name, unit), value in out.items()]


def _figures(runs) -> list[Figure]:
    """Each root figure (VTCM acquire, HVX + HMX power on, accelerator µs) as its median over the
    runs of its sum over the graphs."""
    per_run: list[dict[tuple[str, str], float]] = []
    for run in runs:
        sums: dict[tuple[str, str], float] = {}
        for block in run:
            for f in block.figures + ([Figure("Accelerator (execute) time", block.accel_us, "us")]
                                      if block.accel_us is not None else []):
                sums[(f.name, f.unit)] = sums.get((f.name, f.unit), 0.0) + f.value
        per_run.append(sums)
    keys = dict.fromkeys(k for sums in per_run for k in sums)
    return [Figure(name, float(statistics.median(s.get((name, unit), 0.0) for s in per_run)), unit)
            for name, unit in keys]


def _qnn_types(op_trace: dict) -> dict[str, str]:
    """QNN op name -> QNN op type, from the framework op trace (inserted rows' op types)."""
    out = {}
    for graph in op_trace.get("subgraph_traces") or []:
        for m in (graph.get("op_mappings") or []) if isinstance(graph, dict) else []:
            if isinstance(m, dict) and isinstance(m.get("dst_name"), str):
                out[m["dst_name"]] = str(m.get("dst_qnn_op_type") or "")
    return out


def hardware_of(backend: str, soc: str | None) -> str:
    """What produced a backend's figures, in the words every surface shows."""
    from dashboard.runtime.qnn import hardware

    kind = hardware("htp")
    if backend == "cpu":
        return f"{platform.machine()} CPU"
    if kind == "simulator":  # an x86_64 host: QNN's HTP simulator, and no QNN GPU at all
        return SIMULATOR_HARDWARE if backend == "htp" else f"no QNN GPU on this {platform.machine()} host"
    unit = "NPU" if backend == "htp" else "GPU"
    from dashboard.runtime.doctor import soc_check, this_host

    _, found = soc_check(this_host())  # the part this host is, as the device doctor identifies it
    if found is not None:
        return f"{found.name} {unit}"
    if soc:  # the part the session was compiled for, when the host does not say
        from dashboard.runtime.socs import resolve_soc

        try:
            return f"{resolve_soc(soc).name} {unit} (as set with --soc)"
        except UserError:
            pass
    return f"{unit} of {platform.node()}"


def model_graphs(prepared, config, workdir: str, level: str = "basic") -> Graphs:
    """The graph the runtime partitions (ORT's level-1 optimizations applied, as the EP sees it;
    ``level``: a CPU session's own, with its later fusions) and the model's nodes placed on it."""
    from dashboard.intake.reader import load_model
    from dashboard.platform import discard_into
    from dashboard.runtime.qnn import optimized_model

    graph = prepared.graph
    if config.optimization_level == "disabled":
        opt = opt_graph(graph)
    else:
        out = str(Path(workdir, f"optimized-{level}.onnx"))
        discard_into(out + ".data")
        optimized_model(prepared.session_input, out, level=level, dims=config.dims,
                        session_config=prepared.session_config)
        opt = opt_graph(load_model(out))
    order = [graph.nodes[i].name for i in graph.topo_order]
    return Graphs(opt, place_model_nodes(graph, opt), order, {n.name: n.op_type for n in graph.nodes})


class MappedGraphs:
    """The graphs the rows are mapped on, built once (``get``: ``model_graphs`` on its thread), never
    a backend's failure: when ONNX Runtime cannot write the pre-partition graph (a ``UserError``),
    the rows are mapped on the model as written (no level-1 fusions; layout renames still undone)
    and ``notes`` says so. Every backend that ran keeps its figures."""

    def __init__(self, get: Callable[[], Graphs], prepared) -> None:
        self.get, self.prepared = get, prepared
        self.notes: list[str] = []
        self._graphs: Graphs | None = None

    def build(self) -> None:
        """``before_runs``: the graphs ready before the timed runs (their CPU work apart from them)."""
        self()

    def __call__(self) -> Graphs:
        if self._graphs is None:
            try:
                self._graphs = self.get()
            except UserError as exc:
                self.notes.append(f"ONNX Runtime's pre-partition graph failed ({one_line(exc)}): rows mapped on the "
                                  "model as written, so nodes ORT fuses first may show as rows of their own")
                graph = self.prepared.graph
                opt = opt_graph(graph)
                order = [graph.nodes[i].name for i in graph.topo_order]
                self._graphs = Graphs(opt, place_model_nodes(graph, opt), order, {n.name: n.op_type for n in graph.nodes})
        return self._graphs


# -- the worker command -------------------------------------------------------------------------------------
def run(args: ProfileArgs, emit: Emit) -> Profile:
    """Worker handler: the profile of ``args.path`` under ``args.config`` on ``args.backends``.

    ONNX Runtime releases the GIL while it builds a session, so the pre-partition graph (a CPU
    session that writes the optimized model, needed only to map the rows) is built on a thread
    beside the HTP session and its runs, as the partition analysis does."""
    from concurrent.futures import ThreadPoolExecutor

    from dashboard.runtime.qnn import register, versions

    started = time.perf_counter()
    emit(Stage("reading model", 0.02))
    prepared = prepare(args.path, dict(args.input_shapes))
    base = args.config.replace(backend="htp")
    samples = _samples(args)
    scratch.sweep(SCRATCH_PREFIX)
    workdir = scratch.make(SCRATCH_PREFIX)
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        register()
        emit(Stage("ONNX Runtime pre-partition graph", 0.05))
        graphs = MappedGraphs(pool.submit(model_graphs, prepared, base, str(workdir)).result, prepared)  # when mapped
        backends: dict[str, BackendProfile] = {}
        nodes: list[NodeCost] = []
        if "htp" in args.backends:
            _profile_htp(prepared, base, args, workdir, graphs, backends, nodes, emit, samples)
        else:
            _profile_cpu_only(prepared, base, args, workdir, graphs, backends, nodes, None, samples)
        if "gpu" in args.backends:
            _profile_gpu(prepared, base, args, workdir, graphs, backends, nodes, emit, samples)
        emit(Stage("done", 1.0))
        return Profile(model=Path(args.path).name, runs=args.runs, warmup=args.warmup, backends=backends,
                       nodes=with_shares(nodes, backends), settings=args.config.to_json(), runtime=versions(),
                       seconds=round(time.perf_counter() - started, 3))
    finally:
        pool.shutdown(wait=True)
        scratch.remove(workdir)


def _samples(args) -> list[dict] | None:
    """The data set the dashboard saved for ``--data`` (``accuracy.data.Dataset.save``), read and
    checked as every file crossing processes is; None: generated inputs."""
    if not args.data:
        return None
    from dashboard.accuracy.data import load_saved

    return load_saved(args.data).samples


def _profile_htp(prepared, base, args, workdir, graphs, backends, nodes, emit, samples=None) -> None:
    hardware = hardware_of("htp", base.soc)
    emit(Stage(f"creating the HTP session and profiling {args.runs} run(s)", 0.1, "htp"))
    graphs = graphs if isinstance(graphs, MappedGraphs) else MappedGraphs(graphs, prepared)
    try:
        session = profiled_session(prepared, base, workdir / "htp", args.runs, args.warmup,
                                   _progress(emit, "htp", args.warmup), before_runs=graphs.build, samples=samples)
    except UserError as exc:
        backends["htp"] = _failed("htp", hardware, str(exc), [])
        _profile_cpu_only(prepared, base, args, workdir, graphs, backends, nodes,
                          "the whole model, on the CPU EP: the HTP session failed", samples)
        return
    emit(Stage("reading QNN's profile", 0.8, "htp"))
    mapped = graphs()
    backends["htp"], rows = qnn_backend(session.qnn_csv(), session.op_trace(), mapped, args.warmup, args.runs,
                                        hardware, session.level, session.notes + graphs.notes)
    graphs = mapped
    nodes += rows
    cpu, cpu_rows = cpu_backend(session.ort_text(), graphs, args.warmup, hardware_of("cpu", None),
                                ["the nodes the HTP refused, from ONNX Runtime's profiler in the same session"],
                                _refine(prepared, base, workdir, graphs))
    if cpu_rows or cpu.status == "failed":
        backends["cpu"] = cpu
        nodes += cpu_rows


def _progress(emit: Emit, backend: str, warmup: int) -> Callable[[int, int], None]:
    """Each run of a profiled session as a step (a model can take a minute a run on the simulator)."""
    def on_run(done: int, total: int) -> None:
        emit(Stage(f"run {done} of {total} ({'warm-up' if done <= warmup else 'timed'})", 0.1 + 0.7 * done / total,
                   backend))
    return on_run


def _profile_cpu_only(prepared, base, args, workdir, graphs, backends, nodes, note: str | None,
                      samples=None) -> None:
    hardware = hardware_of("cpu", None)
    graphs = graphs if isinstance(graphs, MappedGraphs) else MappedGraphs(graphs, prepared)
    try:
        session = profiled_session(prepared, base.replace(backend="cpu", provider_options={}),
                                   workdir / "cpu", args.runs, args.warmup, before_runs=graphs.build, samples=samples)
    except UserError as exc:
        backends["cpu"] = _failed("cpu", hardware, str(exc), [])
        return
    mapped = graphs()
    notes = ([note] if note else []) + graphs.notes
    backends["cpu"], rows = cpu_backend(session.ort_text(), mapped, args.warmup, hardware, notes,
                                        _refine(prepared, base, workdir, mapped))
    nodes += rows


def _refine(prepared, base, workdir, graphs: Graphs) -> Callable[[], Graphs] | None:
    """The CPU EP's graph at the session's optimization level, when that is above level 1."""
    if base.optimization_level in ("disabled", "basic"):
        return None
    return lambda: model_graphs(prepared, base, str(workdir), level=base.optimization_level)


def _profile_gpu(prepared, base, args, workdir, graphs, backends, nodes, emit, samples=None) -> None:
    from dashboard.partition.measure import probe_gpu_cached

    hardware = hardware_of("gpu", base.soc)
    emit(Stage("probing the GPU backend", 0.85, "gpu"))
    ok, error, when = probe_gpu_cached()
    if not ok:
        reason = f"the QNN GPU backend does not initialize here: {error} (probed {when})"
        backends["gpu"] = BackendProfile(status="failed", hardware=hardware, unit="us", reason=reason)
        return
    try:
        session = profiled_session(prepared, base.replace(backend="gpu", fp16=False), workdir / "gpu",
                                   args.runs, args.warmup, samples=samples)
    except UserError as exc:
        backends["gpu"] = BackendProfile(status="failed", hardware=hardware, unit="us", reason=str(exc))
        return
    graphs = graphs if isinstance(graphs, MappedGraphs) else MappedGraphs(graphs, prepared)
    backends["gpu"], rows = qnn_backend(session.qnn_csv(), session.op_trace(), graphs(), args.warmup, args.runs,
                                        hardware, session.level, session.notes + graphs.notes, backend="gpu")
    nodes += rows
