"""Measure which model nodes each QNN backend claims, inside the runtime worker.

Runs as the worker command ``partition`` (``dashboard.runtime.worker``), so a native crash or hang of QNN
never takes the dashboard down. For each requested backend it creates one real session with
``session.record_ep_graph_assignment_info=1`` (which node went to which EP, subgraph by subgraph)
and the EP's framework op trace (``enable_framework_op_trace=1``: the EP's reason for every node it
refused and the QNN op each claimed node became), then maps what the runtime reports back to the
model's own node names:

- The runtime reports node names of the graph *it* partitions, which is not the file: ONNX
  Runtime's level-1 optimizer runs first (constant folding, Conv+BatchNorm and MatMul+Add fusion,
  Identity elimination) at any optimization level but ``disabled``. This module saves that graph
  (``runtime.optimized_model`` with the same dimension overrides) and relates each model node to it:
  kept under its own name, ``fused`` into a node ORT created (found by name prefix, else by the
  tensor that node now produces), or ``removed`` (folded into a constant or eliminated: it runs on
  no backend). The measurement therefore uses the configured optimization level and says so.
- That reference is a CPU-only session, and the two sessions do not rewrite alike (a CPU session
  decomposes HardSwish into HardSigmoid + Mul; the QNN EP takes the HardSwish whole). So the EP's
  word comes first: a model node its session reports under its own name (claimed, left on the CPU
  EP, or refused) gets that verdict, and the reference only explains the nodes it never named.
- The layout transformation of NHWC backends renames claimed nodes (``conv0`` -> ``conv0_token_1``)
  and inserts Transposes; the suffix is stripped, and nodes that are not model nodes are counted as
  ``added_nodes``.
- Unnamed and duplicate-named nodes: the session is fed a copy of the model in which they carry the
  stable names of ``model_io.stable_node_names`` (``Relu#1``), so the runtime reports exactly the
  names the UI and CLI use. The copy is passed from memory; external weights stay where they are.

The GPU backend is measured the same way where it initializes (a Snapdragon device). Where it does
not, the GPU column is predicted by ``gpu_rules`` on the same optimized graph, with shapes inferred
on that graph from the user's dimensions and nothing taken from the HTP session, and labelled so.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph, Node, producers_of
from dashboard.intake.reader import load_model, load_structure
from dashboard.intake.shapes import TensorShape
from dashboard.partition import cache, gpu_rules, session
from dashboard.partition.protocol import PartitionArgs, PartitionResult, Stage
from dashboard.partition.report import (CLAIMED, FUSED, MEASURED, PREDICTED, PREDICTED_STATUS, REJECTED, REMOVED,
                                        BackendReport, NodeSupport, failed)
from dashboard.runtime import scratch
from dashboard.serde import Record

QNN_EP = "QNNExecutionProvider"
_TOKEN = re.compile(r"^(.*)_token_\d+$")

Emit = Callable[[Stage], None]


# -- the graph the runtime partitions -------------------------------------------------------------------
@dataclass
class OptNode:
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict = field(default_factory=dict)
    subgraphs: int = 0


@dataclass
class OptGraph:
    """The graph after ORT's pre-partitioning optimizations (or the model itself when disabled)."""

    nodes: dict[str, OptNode]
    initializers: set[str]

    def producers(self) -> dict[str, str]:
        """Tensor name -> name of the node that produces it."""
        return {tensor: node.name for tensor, node in producers_of(list(self.nodes.values())).items()}


def opt_graph(graph: ModelGraph) -> OptGraph:
    """The runtime's graph as read by ``load_model`` (attributes decoded there, on demand)."""
    nodes = {n.name: OptNode(n.name, n.op_type, n.domain, n.inputs, n.outputs, n.attributes, n.subgraphs)
             for n in graph.nodes}
    return OptGraph(nodes, set(graph.initializers))


# -- model node -> runtime graph node ---------------------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    """Where a model node ended up in the graph the runtime partitions."""

    kind: str  # "same", "fused", "removed"
    target: str | None = None


def place_model_nodes(graph: ModelGraph, opt: OptGraph) -> dict[str, Placement]:
    """Relate every model node to the optimized graph. A node ORT fused away is attributed to the
    node it became part of: first by ORT's naming (fusions name their product after the node they
    start from, e.g. ``<MatMul name>/MatMulAddFusion``), else by the first surviving tensor
    downstream of its outputs (walking through other removed nodes). If every path ends in a
    constant or in a kept node's input, the node was folded or eliminated: ``removed``."""
    producers = opt.producers()
    by_prefix: dict[str, str] = {}  # "<name>/<Fusion>" -> "<name>"
    for name in opt.nodes:
        parent, sep, _ = name.rpartition("/")
        if sep and parent:
            by_prefix.setdefault(parent, name)
    nodes = graph.node_by_name()
    out: dict[str, Placement] = {}
    for node in graph.nodes:
        if node.name in opt.nodes:
            out[node.name] = Placement("same", node.name)
            continue
        fused = by_prefix.get(node.name)
        if fused is None or fused in nodes:
            fused = _downstream_product(node, graph.consumers, producers, opt)
        out[node.name] = Placement("fused", fused) if fused else Placement("removed")
    return out


def _downstream_product(start: Node, consumers: dict[str, list[Node]], producers: dict[str, str],
                        opt: OptGraph) -> str | None:
    queue, seen = deque([start]), {start.name}
    while queue:
        for tensor in queue.popleft().outputs:
            if not tensor or tensor in opt.initializers:
                continue
            producer = producers.get(tensor)
            if producer is not None:
                return producer  # another node (kept, like Conv absorbing BatchNorm, or new) computes it now
            for consumer in consumers.get(tensor, ()):
                if consumer.name not in opt.nodes and consumer.name not in seen:
                    seen.add(consumer.name)
                    queue.append(consumer)
    return None


def resolve_ep_name(name: str, op_type: str | None, opt: OptGraph) -> str | None:
    """The optimized-graph node a runtime-reported name refers to: the name itself, or the name
    before the layout transformation's ``_token_N`` suffixes (with the same op type, when known).
    None for nodes the EP or layout transformation inserted (they are not in the graph it was
    given)."""
    candidate = name
    while True:
        node = opt.nodes.get(candidate)
        if node is not None and (op_type is None or node.op_type == op_type):
            return candidate
        match = _TOKEN.match(candidate)
        if not match:
            return None
        candidate = match.group(1)


# -- one backend's verdicts -----------------------------------------------------------------------------
@dataclass
class Measurement:
    """What one session said: per optimized-graph node, claimed or not, why, and as what."""

    claimed: set[str]
    reasons: dict[str, str]
    qnn_ops: dict[str, list[str]]
    cpu_nodes: set[str]
    added: list[dict]
    qnn_subgraphs: int
    graph: OptGraph | None = None  # the names looked up (``reportable``); None: the optimized graph alone

    @property
    def reported(self) -> set[str]:
        """Nodes the session named: claimed, left on the CPU EP, or refused with a reason."""
        return self.claimed | self.cpu_nodes | set(self.reasons)


def reportable(opt: OptGraph, model: ModelGraph | None) -> OptGraph:
    """The names the EP's session can report: the reference graph's nodes, and the user's own
    nodes that the reference rewrote. The two sessions do not rewrite alike: a CPU-only session
    decomposes HardSwish into HardSigmoid + Mul, while the QNN EP claims the HardSwish whole before
    that happens and reports it under its own name. A model node the EP reports is therefore
    looked up as itself, never through what the CPU path made of it."""
    if model is None:
        return opt
    nodes = dict(opt.nodes)
    for n in model.nodes:
        nodes.setdefault(n.name, OptNode(n.name, n.op_type, n.domain, n.inputs, n.outputs, n.attributes, n.subgraphs))
    return OptGraph(nodes, opt.initializers)


def measure(opt: OptGraph, assignment: list[tuple[str, list[tuple[str, str]]]] | None,
            trace: dict | None, model: ModelGraph | None = None) -> Measurement:
    """Fold the session's assignment info and the EP's op trace onto the optimized graph and, for
    the names it does not hold, onto the ``model``'s own nodes (``reportable``). ``assignment``
    None: QNN claimed nothing, every node of the optimized graph ran on the CPU EP."""
    if assignment is None:
        assignment = [("CPUExecutionProvider", [(n.name, n.op_type) for n in opt.nodes.values()])]
    opt = reportable(opt, model)
    claimed, cpu_nodes, added = set(), set(), {}
    subgraphs = 0
    for ep_name, nodes in assignment:
        subgraphs += ep_name == QNN_EP
        for name, op_type in nodes:
            target = resolve_ep_name(name, op_type, opt)
            if target is None:
                key = (ep_name, op_type)
                added.setdefault(key, {"ep": ep_name, "op_type": op_type, "count": 0, "names": []})
                added[key]["count"] += 1
                if len(added[key]["names"]) < 5:
                    added[key]["names"].append(name)
            elif ep_name == QNN_EP:
                claimed.add(target)
            else:
                cpu_nodes.add(target)
    reasons: dict[str, str] = {}
    qnn_ops: dict[str, list[str]] = {}
    for entry in (trace or {}).get("unsupported_nodes", []):
        target = resolve_ep_name(entry.get("node_name", ""), entry.get("op_type", ""), opt)
        if target and entry.get("reason"):
            reasons.setdefault(target, str(entry["reason"]).strip())
    for sub in (trace or {}).get("subgraph_traces", []):
        for mapping in sub.get("op_mappings", []):
            group = mapping.get("node_group_type", "OrtNodeUnit")
            qnn_op = mapping.get("dst_qnn_op_type") or "?"
            label = qnn_op if group == "OrtNodeUnit" else f"{qnn_op} ({group})"
            for source in mapping.get("sources", []):
                if source.get("type", "OP") != "OP":
                    continue
                target = resolve_ep_name(source.get("name", ""), None, opt)
                if target:
                    ops = qnn_ops.setdefault(target, [])
                    if label not in ops:
                        ops.append(label)
    return Measurement(claimed, reasons, qnn_ops, cpu_nodes, sorted(added.values(), key=lambda a: -a["count"]),
                       subgraphs, opt)


def opt_verdicts(opt: OptGraph, m: Measurement) -> dict[str, NodeSupport]:
    """Verdicts per node the session could name (``m.graph``: the optimized graph and the model
    nodes it rewrote)."""
    out = {}
    for name, node in (m.graph or opt).nodes.items():
        if name in m.claimed:
            out[name] = NodeSupport(node.op_type, True, None, " + ".join(m.qnn_ops.get(name, [])) or None, CLAIMED)
        elif name in m.reasons or name in m.cpu_nodes:
            reason = m.reasons.get(name) or "the EP validated this node but did not claim it (left on CPU)"
            out[name] = NodeSupport(node.op_type, False, reason, None, REJECTED)
        else:  # in no subgraph and never refused: the layout transformation's transpose optimizer removed it
            out[name] = NodeSupport(node.op_type, False, PARTITION_REMOVED_REASON, None, REMOVED)
    return out


PARTITION_REMOVED_REASON = ("eliminated by ONNX Runtime while partitioning (layout transformation / transpose "
                            "optimizer): in no subgraph of the session; runs on no backend")


REMOVED_REASON = ("folded into a constant or eliminated by ONNX Runtime's optimizer before partitioning; "
                  "runs on no backend")


def model_verdicts(graph: ModelGraph, placement: dict[str, Placement],
                   verdicts: dict[str, NodeSupport], reported: set[str] = frozenset()) -> dict[str, NodeSupport]:
    """Verdicts per model node from verdicts per optimized-graph node. A node the session
    ``reported`` under its own name gets the verdict the EP gave it, whatever the reference
    graph made of it (the EP's graph is the truth; the reference only explains nodes the EP
    never saw as themselves)."""
    out = {}
    for node in graph.nodes:
        place = placement[node.name]
        if node.name in reported and node.name in verdicts:
            place = Placement("same", node.name)
        if place.kind == "removed":
            out[node.name] = NodeSupport(node.op_type, False, REMOVED_REASON, None, REMOVED)
            continue
        verdict = verdicts.get(place.target)
        if verdict is None:
            out[node.name] = NodeSupport(node.op_type, False, "not reported by the runtime", None, REJECTED)
        elif place.kind == "same":
            out[node.name] = NodeSupport(node.op_type, verdict.supported, verdict.reason, verdict.qnn_op,
                                         verdict.status)
        else:
            target = place.target
            how = f"fused by ONNX Runtime into {verdict.op_type} `{target}`"
            reason = None if verdict.supported else f"{how}, which is not claimed: {verdict.reason}"
            out[node.name] = NodeSupport(node.op_type, verdict.supported, reason, verdict.qnn_op,
                                         FUSED, target)
    return out


# -- GPU prediction inputs ---------------------------------------------------------------------------------
def node_facts(opt: OptGraph, shapes: dict[str, TensorShape], scalars: dict[str, float]) -> list[gpu_rules.NodeFacts]:
    def tensor(name: str) -> gpu_rules.TensorFacts:
        known = shapes.get(name)
        dtype, shape = (known.dtype, known.shape) if known is not None else (None, None)
        constant = name in opt.initializers or name in scalars
        return gpu_rules.TensorFacts(name, dtype, shape, constant, scalars.get(name))

    return [gpu_rules.NodeFacts(n.name, n.op_type, n.domain, n.attrs,
                                tuple(tensor(t) for t in n.inputs if t), tuple(tensor(t) for t in n.outputs if t),
                                n.subgraphs)
            for n in opt.nodes.values()]


def predicted_verdicts(runtime_graph: "RuntimeGraph") -> dict[str, NodeSupport]:
    """GPU verdicts from the rule table, on the graph the EP receives and its own shapes: nothing
    the HTP session said goes in, so the column does not move with the HTP's options."""
    opt = runtime_graph.opt
    out = {}
    for name, p in gpu_rules.predict(node_facts(opt, runtime_graph.shapes, runtime_graph.scalars)).items():
        reason = p.reason if not p.supported else None
        out[name] = NodeSupport(opt.nodes[name].op_type, p.supported, reason, p.qnn_op, PREDICTED_STATUS)
    return out


def scalar_constants(structure) -> dict[str, float]:
    """One-element constants of a weight-free ``ModelProto`` (initializers and Constant nodes),
    by tensor name: the values the EP's fusion patterns compare (sqrt(2), 1, 0.5)."""
    from dashboard.intake.arrays import to_array

    tensors = [(t.name, t) for t in structure.graph.initializer]
    tensors += [(node.output[0], attr.t) for node in structure.graph.node if node.op_type == "Constant"
                and node.output for attr in node.attribute if attr.name == "value" and attr.HasField("t")]
    out = {}
    for name, tensor in tensors:
        if len(tensor.dims) <= 1 and all(d == 1 for d in tensor.dims) and not tensor.external_data:
            try:
                out[name] = float(to_array(tensor).reshape(-1)[0])
            except (ValueError, TypeError, IndexError):
                continue  # strings, or a header without its data
    return out


# -- the worker command ---------------------------------------------------------------------------------
@dataclass
class Prepared:
    graph: ModelGraph
    structure: object  # onnx.ModelProto without weight data (model_io.load_structure), for shape inference
    session_input: str | bytes
    session_config: dict[str, str]
    renamed: int


def prepare(path: str, shapes: dict[str, tuple[int, ...]] | None = None) -> Prepared:
    """Read the model; in the copy the sessions get, give unnamed/duplicate nodes their stable
    names and declare the user's input ``shapes`` (``shapes.rewritten_model``: the file copied at
    the wire level, external weights read from the original folder)."""
    from dashboard.intake.shapes import fix_input_shapes, rewritten_model

    shapes = shapes or {}
    graph = load_model(path)
    structure = load_structure(path)
    fix_input_shapes(structure, shapes)
    renamed = graph.renamed_nodes
    if not renamed and not shapes:  # the sessions read the file itself
        return Prepared(graph, structure, path, {}, 0)
    from dashboard.runtime.qnn import EXTERNAL_DATA_FOLDER

    data = rewritten_model(path, shapes, [n.name for n in graph.nodes] if renamed else None)
    folder = str(Path(path).resolve().parent)
    return Prepared(graph, structure, data, {EXTERNAL_DATA_FOLDER: folder}, renamed)


@dataclass
class RuntimeGraph:
    """The graph ORT hands the EPs, with every tensor's shape inferred on it from the user's
    dimensions (ORT wrote it with the inputs fixed and shape computations folded, so far more
    shapes are static than the file's own inference gets), and its one-element constants."""

    opt: OptGraph
    shapes: dict[str, TensorShape] | None  # None until filled: optimizations disabled, the model's own
    scalars: dict[str, float] | None


def _runtime_graph(prepared: Prepared, config, workdir: str) -> RuntimeGraph:
    """Only the structure of the optimized model is read back, so the weights ORT writes beside
    it are discarded where the platform can (``runtime.optimized_model`` names the side file
    ``<out>.data``), else written into the scratch folder and removed with it."""
    from dashboard.intake.shapes import infer_tensor_shapes
    from dashboard.platform import discard_into
    from dashboard.runtime.qnn import optimized_model

    if config.optimization_level == "disabled":  # the caller adds the model's shapes and constants
        return RuntimeGraph(opt_graph(prepared.graph), None, None)
    out = os.path.join(workdir, "optimized.onnx")
    discard_into(out + ".data")
    optimized_model(prepared.session_input, out, dims=config.dims, session_config=prepared.session_config)
    structure = load_structure(out)
    shapes, _ = infer_tensor_shapes(structure, config.dims)
    return RuntimeGraph(opt_graph(load_model(out)), shapes, scalar_constants(structure))


def _merged_shapes(model: dict[str, TensorShape], runtime: dict[str, TensorShape]) -> dict[str, TensorShape]:
    """The model's tensor shapes, with a static shape from the runtime's graph wherever the file's
    own inference left the same tensor symbolic (plans price boundary tensors with them)."""
    out = dict(model)
    for name, shape in model.items():
        better = runtime.get(name)
        if not shape.is_static and better is not None and better.is_static:
            out[name] = better
    return out


PROBE_TTL_S = 24 * 3600
SCRATCH_PREFIX = session.SCRATCH_PREFIX


@dataclass
class GpuProbe(Record):
    """Whether the GPU backend initialized, on which host and runtime (``key``), and when."""

    key: str
    at: float
    ok: bool
    error: str | None


def probe_gpu_cached() -> tuple[bool, str | None, str]:
    """Whether the GPU backend initializes on this host: (ok, error, when). A failed probe costs a
    session; its outcome is kept for a day per host and runtime version, under the worker's cache
    (``QNN_LAB_CACHE``), so repeated analyses do not pay it."""
    from dashboard.runtime.qnn import probe_backend, versions

    key = f"{platform.node()}|{json.dumps(versions(), sort_keys=True)}"
    path = cache.cache_dir() / "gpu_probe.json"
    known = cache.read_valid(path, GpuProbe, None)
    if known is not None and known.key == key and time.time() - known.at < PROBE_TTL_S:
        return known.ok, known.error, time.strftime("%Y-%m-%d %H:%M", time.localtime(known.at))
    result = probe_backend("gpu")
    # Best-effort, like every cache write: a full or unwritable cache only costs the next probe,
    # and leaves no empty or partial file behind.
    cache.write_json(path, GpuProbe(key, time.time(), result.ok, result.error).to_json())
    return result.ok, result.error, "now"


def run(args: PartitionArgs, emit: Emit) -> PartitionResult:
    """Worker handler: ``args.path`` (the model on this host), ``args.config`` (its backend field
    is ignored), ``args.backends``, ``args.input_shapes``. Returns per-backend reports keyed by
    model node name, tensor shapes, and how the optimized graph relates to the model.

    ONNX Runtime releases the GIL while it builds a session, so the fixed costs run beside the
    session being measured: the pre-partition graph (a CPU session that writes the optimized
    model) on one thread, the QNN sessions on another, and shape inference on this one while QNN
    compiles; the HTP session may even have started before this handler was imported (``session``:
    the head start, taken here when it is the session this request would create). The analysis
    costs little more than the session it measures."""
    from concurrent.futures import ThreadPoolExecutor

    from dashboard.intake.shapes import infer_tensor_shapes
    from dashboard.partition.root_causes import attach as attach_root_causes
    from dashboard.runtime.qnn import hardware, register, versions

    started = time.perf_counter()
    backends = list(args.backends)
    emit(Stage("reading model", 0.02))
    prepared = prepare(args.path, dict(args.input_shapes))
    base = args.config.replace(backend="htp")
    scratch.sweep(SCRATCH_PREFIX)
    early = session.take(prepared.session_input, prepared.session_config, base)
    workdir = early.workdir if early else str(scratch.make(SCRATCH_PREFIX))
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        register()
        graph_future = pool.submit(_runtime_graph, prepared, base, workdir)
        emit(Stage("inferring tensor shapes", 0.05))
        sessions = pool.submit(_sessions, prepared, base, backends, workdir, emit, early)
        shapes, shape_source = infer_tensor_shapes(prepared.structure, base.dims)
        for backend in backends:  # the doctor's answer (its imports, the installed packages) while QNN compiles
            hardware(backend)
        raw = sessions.result()
        emit(Stage("ONNX Runtime pre-partition graph", 0.92))
        try:
            runtime_graph = graph_future.result()
        except UserError as exc:
            raise UserError(f"cannot build the graph ONNX Runtime partitions: {exc}") from None
        if runtime_graph.shapes is None:  # optimizations disabled: the EPs get the model's own graph
            runtime_graph = RuntimeGraph(runtime_graph.opt, shapes, scalar_constants(prepared.structure))
        placement = place_model_nodes(prepared.graph, runtime_graph.opt)
        merged = _merged_shapes(shapes, runtime_graph.shapes)
        reports = _reports(prepared, runtime_graph, placement, raw, versions(), emit)
        for report in reports.values():
            if report.nodes:
                attach_root_causes(report, prepared.graph, merged)
        emit(Stage("done", 1.0))
        return PartitionResult(
            backends={b: reports[b] for b in backends}, shapes=merged,
            shape_source=shape_source, placement={name: (p.kind, p.target) for name, p in placement.items()},
            optimized_nodes=len(runtime_graph.opt.nodes), renamed_nodes=prepared.renamed, runtime=versions(),
            seconds=round(time.perf_counter() - started, 3))
    finally:
        pool.shutdown(wait=True)
        scratch.remove(workdir)


UNAVAILABLE = "unavailable: "


def _sessions(prepared: Prepared, base, backends: list[str], workdir: str, emit: Emit,
              early: session.Early | None = None) -> dict[str, tuple | str]:
    """Per backend: (assignment, trace, seconds) of its session, its failure as one line, or
    ``UNAVAILABLE`` + why for a GPU that does not initialize here (then it is predicted). The HTP
    one is ``early``'s when the head start created it. One session at a time, the GPU probe
    included (a failed GPU session: its native error lines must not mix with those of a failing
    HTP session; its outcome is cached for a day)."""
    raw: dict[str, tuple | str] = {}
    share = 0.8 / max(len(backends), 1)
    for i, backend in enumerate(backends):
        progress = 0.1 + i * share
        if early is not None and backend != "htp":
            early.wait()  # a GPU listed before the HTP: its probe and session come after the head start's
        if backend == "gpu":
            emit(Stage("probing the GPU backend", progress, backend))
            ok, error, when = probe_gpu_cached()
            if not ok:
                raw[backend] = f"{UNAVAILABLE}{error} (probed {when})"
                continue
        emit(Stage(f"creating the {backend.upper()} session (QNN compiles the graph)", progress + share * 0.1,
                   backend))
        if backend == "htp" and early is not None:
            raw[backend] = early.outcome()
            continue
        raw[backend] = session.timed(prepared.session_input, prepared.session_config,
                                     base.replace(backend=backend), workdir)
    return raw


HARDWARE_WORDS = {"simulator": "the HTP simulator of", "npu": "the NPU of", "gpu": "the GPU of"}


def _reports(prepared: Prepared, runtime_graph: RuntimeGraph, placement: dict[str, Placement],
             raw: dict[str, tuple | str], runtime: dict[str, str], emit: Emit) -> dict[str, BackendReport]:
    """A ``BackendReport`` per backend. Each carries ``runtime.hardware`` (``qnn.hardware``): what
    its figures were measured on, or None for a prediction."""
    from dashboard.runtime.qnn import hardware

    opt = runtime_graph.opt
    reports: dict[str, BackendReport] = {}
    for backend, outcome in raw.items():
        where = {**runtime, "hardware": hardware(backend)}
        if isinstance(outcome, tuple):
            assignment, trace, seconds = outcome
            m = measure(opt, assignment, trace, prepared.graph)
            reports[backend] = BackendReport(
                backend, MEASURED, runtime=where,
                nodes=model_verdicts(prepared.graph, placement, opt_verdicts(opt, m), m.reported),
                qnn_subgraphs=m.qnn_subgraphs, added_nodes=m.added,
                source=f"measured on {HARDWARE_WORDS.get(where['hardware'], 'the hardware of')} {platform.node()} "
                       f"with onnxruntime-qnn {runtime.get('onnxruntime_qnn')} (QNN SDK {runtime.get('qnn_sdk')})",
                seconds=round(seconds, 3))
        elif not outcome.startswith(UNAVAILABLE):
            reports[backend] = failed(backend, outcome, runtime=where)
        else:
            emit(Stage("predicting GPU support from the rule table", 0.96))
            reports[backend] = BackendReport(
                backend, PREDICTED, runtime={**runtime, "hardware": None},
                nodes=model_verdicts(prepared.graph, placement, predicted_verdicts(runtime_graph)),
                source="predicted by the GPU rule table (the GPU backend does not initialize here: "
                       f"{outcome.removeprefix(UNAVAILABLE)})")
    return reports
