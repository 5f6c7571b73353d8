"""Model Explorer's JSON graph and node-data overlays, built from the weight-free reader (no Streamlit).

Google's Model Explorer (PyPI ``ai-edge-model-explorer``) draws a graph from a JSON graph
collection and colours it with "node data" overlays. Its own ONNX adapter loads the model with
its weights; a multi-GB model must not be read just to draw it, so the graph is built here from
``ModelGraph`` (the project's weight-free reader). The plain dataclasses below are the JSON
contract, with Model Explorer's field names (its ``graph_builder`` and ``node_data_builder``
modules); they are restated rather than imported because importing ``model_explorer`` pulls in
its server (Flask) and its TFLite/MLIR converter (about 480 MB), and only its web app is used.

Name scopes come from node names: ``/model/layers.0/attn/MatMul`` sits in the namespace
``model/layers.0/attn``, so Model Explorer collapses a 20,000-node decoder into its layers. Node
ids are ``n<index>`` (names can collide with namespaces); the full name is the node's first
attribute, and ``node_name`` maps a picked id back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.intake.graph import ModelGraph, Node
from dashboard.intake.shapes import TensorShape
from dashboard.partition.plans import SEGMENT_LABELS
from dashboard.partition.report import CLASS_LABELS, PartitionReport
from dashboard.render.partition_graph import BACKEND_COLORS, CLASS_COLORS

if TYPE_CHECKING:
    from dashboard.accuracy.model import AccuracyReport
    from dashboard.profile.model import NodeCost, Profile

GRAPH_ID = "main"
LABEL_LIMIT = 40
IO_GROUP_MIN = 5  # more graph inputs (or outputs) than this collapse into one group (KV caches)
# A graph whose node names carry no scopes is grouped into blocks (``block_namespaces``) when it
# has more than UNGROUPED_MAX nodes; a block closes where one tensor alone crosses the cut once it
# has BLOCK_MIN nodes, and at BLOCK_MAX nodes in any case; more than PART_BLOCKS blocks nest in parts.
UNGROUPED_MAX, BLOCK_MIN, BLOCK_MAX, PART_BLOCKS = 30, 6, 40, 12
SCOPED_SHARE = 0.2  # below this share of nodes with a name scope, the names do not group the graph
PLAN_COLORS = {**BACKEND_COLORS, "removed": CLASS_COLORS["removed"]}
VERDICT_COLORS = {"claimed": "#2ca02c", "refused": "#d62728", "removed": CLASS_COLORS["removed"]}


# -- the JSON contract (Model Explorer's field names) ------------------------------------------------------
@dataclass
class KeyValue:
    key: str
    value: str


@dataclass
class IncomingEdge:
    sourceNodeId: str
    sourceNodeOutputId: str = "0"
    targetNodeInputId: str = "0"


@dataclass
class MetadataItem:
    id: str
    attrs: list[KeyValue] = field(default_factory=list)


@dataclass
class GraphNode:
    id: str
    label: str
    namespace: str = ""
    attrs: list[KeyValue] = field(default_factory=list)
    incomingEdges: list[IncomingEdge] = field(default_factory=list)
    outputsMetadata: list[MetadataItem] = field(default_factory=list)


@dataclass
class Graph:
    id: str
    nodes: list[GraphNode] = field(default_factory=list)


@dataclass
class GraphCollection:
    label: str
    graphs: list[Graph] = field(default_factory=list)

    def to_json(self) -> str:
        # vars() per object instead of asdict's deep copy: a 20,000-node graph serialises in a third of the time
        return json.dumps(self, default=vars, separators=(",", ":"))


@dataclass
class NodeDataResult:
    value: str | float  # Model Explorer takes numbers or labels; labels give one colour per value
    bgColor: str | None = None


@dataclass
class GraphNodeData:
    """One overlay: a value and a colour per node id, shown as a run in Model Explorer's panel."""

    results: dict[str, NodeDataResult]
    name: str
    showExpandedSummaryOnGroupNode: bool = True  # a group shows its share of each value
    showLabelCountColumnsInChildrenStatsTable: bool = True
    hideInAggregatedStatsTable: bool = True  # min/max/sum mean nothing for labels

    def to_json(self) -> str:
        data = asdict(self)
        data["results"] = {k: {"value": r.value, **({"bgColor": r.bgColor} if r.bgColor else {})}
                           for k, r in self.results.items()}
        return json.dumps({GRAPH_ID: data}, separators=(",", ":"))


# -- the graph ----------------------------------------------------------------------------------------
def node_id(node: Node) -> str:
    return f"n{node.index}"


def node_name(graph: ModelGraph, picked: str | None) -> str | None:
    """The model node a Model Explorer id names (None for inputs, outputs, groups or garbage)."""
    if not picked or not picked.startswith("n") or not picked[1:].isdigit():
        return None
    index = int(picked[1:])
    return graph.nodes[index].name if index < len(graph.nodes) else None


def namespace_of(name: str) -> str:
    """``/model/layers.0/attn/MatMul`` -> ``model/layers.0/attn``; a name without scopes -> ``""``."""
    parts = [p for p in name.split("/") if p]
    return "/".join(parts[:-1])


def _shapes(graph: ModelGraph, measured: dict[str, TensorShape]) -> dict[str, str]:
    """Tensor -> shape text: the runtime's (a partition report's, with the dimensions it fixed),
    else the file's declared one."""
    texts = {spec.name: f"{spec.dtype}{spec.shape_text()}" for spec in
             (*graph.listed_inputs, *graph.outputs, *graph.value_info.values()) if spec.shape is not None}
    texts.update((name, shape.text()) for name, shape in measured.items())
    return texts


def _label(text: str) -> str:
    return text if len(text) <= LABEL_LIMIT else text[: LABEL_LIMIT - 1] + "…"


def _drawn(text: str) -> str:
    """An overlay value as the graph draws it: its WebGL font has no ∩ or → glyph."""
    return text.replace("∩", "and").replace("→", "->")


def build_graph(graph: ModelGraph, title: str, node_attrs: dict[str, list[KeyValue]] | None = None,
                shapes: dict[str, TensorShape] | None = None) -> GraphCollection:
    """The model's top-level graph as a Model Explorer graph collection: one node per ONNX node
    (label = op type, namespace from its name), an ``Input`` node per graph input and an
    ``Output`` node per graph output, edges from producer outputs to consumer inputs. Weights are
    never read (the reader has none); initializers are listed as constant inputs, not drawn. A
    model with many inputs or outputs (an LLM's KV cache) gets them in one ``inputs`` / ``outputs``
    group each, so they do not spread the first view across the screen."""
    shape_of = _shapes(graph, shapes or {})
    node_attrs = node_attrs or {}
    producer: dict[str, tuple[str, int]] = {}
    nodes: list[GraphNode] = []
    in_group = "inputs" if len(graph.inputs) > IO_GROUP_MIN else ""
    out_group = "outputs" if len(graph.outputs) > IO_GROUP_MIN else ""
    for k, spec in enumerate(graph.inputs):
        gid = f"in{k}"
        producer[spec.name] = (gid, 0)
        nodes.append(GraphNode(gid, _label(spec.name), in_group, attrs=[KeyValue("graph input", spec.name)], outputsMetadata=[
            MetadataItem("0", [KeyValue("tensor_name", spec.name), KeyValue("shape", f"{spec.dtype}{spec.shape_text()}")])]))
    ordered = [graph.nodes[i] for i in graph.topo_order] if graph.topo_order else graph.nodes
    blocks = block_namespaces(ordered)
    for node in ordered:
        for slot, tensor in enumerate(node.outputs):
            if tensor:
                producer[tensor] = (node_id(node), slot)
    for node in ordered:
        edges, constants = [], []
        for slot, tensor in enumerate(node.inputs):
            if tensor in producer:
                src, out = producer[tensor]
                edges.append(IncomingEdge(src, str(out), str(slot)))
            elif tensor:
                constants.append(tensor)
        attrs = [KeyValue("name", node.name), KeyValue("op", node.qualified_op)]
        if constants:
            attrs.append(KeyValue("constant inputs", ", ".join(constants)))
        outputs = []
        for slot, tensor in enumerate(node.outputs):
            meta = [KeyValue("tensor_name", tensor)]
            shape = shape_of.get(tensor) if tensor else None
            if shape:
                meta.append(KeyValue("shape", shape))
            outputs.append(MetadataItem(str(slot), meta))
        nodes.append(GraphNode(node_id(node), node.op_type, blocks.get(node.name, namespace_of(node.name)),
                               attrs + node_attrs.get(node.name, []), edges, outputs))
    for k, spec in enumerate(graph.outputs):
        edges = [IncomingEdge(*map(str, producer[spec.name]), "0")] if spec.name in producer else []
        nodes.append(GraphNode(f"out{k}", _label(spec.name), out_group, attrs=[KeyValue("graph output", spec.name)],
                               incomingEdges=edges))
    return GraphCollection(title, [Graph(GRAPH_ID, nodes)])


def block_namespaces(ordered: list[Node]) -> dict[str, str]:
    """Namespaces for a graph whose names group nothing (``Conv_12``, ``node_Add_3``: AI Hub and
    Paddle exports), which Model Explorer would draw as one hairline of hundreds of nodes: node
    name -> ``block NN: ops`` (within ``part NN`` when there are many blocks). Blocks are runs of
    the topological order cut where a single tensor crosses (a residual block's end, a stage's
    output), so a block is a connected piece a reader recognises, named by its commonest ops.
    Empty when the names already carry scopes or the graph is small."""
    if len(ordered) <= UNGROUPED_MAX or sum(1 for n in ordered if namespace_of(n.name)) >= SCOPED_SHARE * len(ordered):
        return {}
    constants = [n for n in ordered if n.op_type == "Constant"]  # they go with their first reader
    computing = [n for n in ordered if n.op_type != "Constant"]
    crossing = _crossing_counts(computing)
    blocks: list[list[Node]] = [[]]
    for position, node in enumerate(computing):
        blocks[-1].append(node)
        size = len(blocks[-1])
        if position + 1 < len(computing) and (size >= BLOCK_MAX or (size >= BLOCK_MIN and crossing[position] <= 1)):
            blocks.append([])
    block_of = {t: k for k, block in enumerate(blocks) for n in block for t in n.inputs if t}
    for node in constants:
        blocks[min((block_of[t] for t in node.outputs if t in block_of), default=0)].append(node)
    out: dict[str, str] = {}
    for k, block in enumerate(blocks):
        ops = sorted({n.op_type for n in block if n.op_type != "Constant"} or {"Constant"},
                     key=lambda op: (-sum(n.op_type == op for n in block), op))[:3]
        name = f"block {k + 1:02d}: {', '.join(ops)}"
        if len(blocks) > PART_BLOCKS:
            name = f"part {k // PART_BLOCKS + 1:02d}/{name}"
        out.update((n.name, name) for n in block)
    return out


def _crossing_counts(ordered: list[Node]) -> list[int]:
    """For each position of the order, how many tensors produced at or before it are read after
    it (graph inputs count from the start): where this is 1, one tensor joins the two sides."""
    produced = {t: i for i, n in enumerate(ordered) for t in n.outputs if t}
    last_read: dict[str, int] = {}
    for i, node in enumerate(ordered):
        for tensor in node.inputs:
            if tensor:
                last_read[tensor] = i
    delta = [0] * (len(ordered) + 1)
    for tensor, last in last_read.items():
        start = produced.get(tensor)
        if start is None:  # a graph input or an initializer: only an input is an edge, but both are harmless
            continue
        if last > start:
            delta[start] += 1
            delta[last] -= 1
    counts, running = [], 0
    for i in range(len(ordered)):
        running += delta[i]
        counts.append(running)
    return counts


# -- the partition overlays ------------------------------------------------------------------------------
def _verdict(report: PartitionReport, backend: str, name: str) -> str | None:
    verdict = report.backends[backend].nodes.get(name) if backend in report.backends else None
    if verdict is None:
        return None
    return "claimed" if verdict.supported else "removed" if verdict.status == "removed" else "refused"


def partition_attrs(report: PartitionReport) -> dict[str, list[KeyValue]]:
    """Per node: its class; for each backend the verdict, whether the figure is measured or
    predicted, the QNN op and the EP's reason; its segment in each plan (the viewer's side panel)."""
    classes = report.classes.of()
    attrs: dict[str, list[KeyValue]] = {}
    for name in report.node_order:
        rows = [KeyValue("class", CLASS_LABELS.get(classes.get(name, ""), "—"))]
        for backend_name, backend in report.backends.items():
            verdict = backend.nodes.get(name)
            if verdict is None:
                continue
            tag = backend_name.upper()
            rows.append(KeyValue(f"{tag} verdict", f"{_verdict(report, backend_name, name)} ({backend.status})"))
            if verdict.qnn_op:
                rows.append(KeyValue(f"{tag} QNN op", verdict.qnn_op))
            if verdict.reason:
                rows.append(KeyValue(f"{tag} reason", verdict.reason))
            if verdict.fused_into:
                rows.append(KeyValue(f"{tag} fused into", verdict.fused_into))
        attrs[name] = rows
    for kind, plan in report.plans.items():
        for seg in plan.segments:
            for name in seg.nodes:
                attrs.setdefault(name, []).append(
                    KeyValue(f"{kind} plan", f"segment {seg.index}: {SEGMENT_LABELS[seg.backend]}"))
    return attrs


def partition_overlays(graph: ModelGraph, report: PartitionReport) -> dict[str, GraphNodeData]:
    """The overlays, by the name the viewer lists them under: node classes, each backend's verdict
    (its name says measured or predicted) and each migration plan's segments."""
    ids = {n.name: node_id(n) for n in graph.nodes}
    overlays: dict[str, GraphNodeData] = {}
    if not report.classes.note:
        overlays["class"] = GraphNodeData({ids[n]: NodeDataResult(_drawn(CLASS_LABELS[c]), CLASS_COLORS[c])
                                           for n, c in report.classes.of().items() if n in ids}, "class")
    for backend_name, backend in report.backends.items():
        if not backend.nodes:
            continue
        label = f"{backend_name.upper()} ({backend.status})"
        results = {}
        for name in backend.nodes:
            verdict = _verdict(report, backend_name, name)
            if name in ids and verdict:
                results[ids[name]] = NodeDataResult(verdict, VERDICT_COLORS[verdict])
        overlays[label] = GraphNodeData(results, label)
    for kind, plan in report.plans.items():
        label = f"{kind} plan"
        results = {ids[n]: NodeDataResult(_drawn(SEGMENT_LABELS[s.backend]),
                                          PLAN_COLORS[s.backend])
                   for s in plan.segments for n in s.nodes if n in ids}
        results.update({ids[n]: NodeDataResult("removed by ORT", PLAN_COLORS["removed"])
                        for n in report.classes.removed if n in ids})
        overlays[label] = GraphNodeData(results, label)
    return overlays


# -- the cost overlays (a profile) ---------------------------------------------------------------------
# One hue per backend, light for a small share of the backend's total and darkest for all of it.
COST_GRADIENTS = {"htp": ("#deebf7", "#08306b"), "gpu": ("#fee6ce", "#7f2704"), "cpu": ("#fee0d2", "#a50f15")}
COST_OVERLAY = "cost: share of its backend (incl. rows inserted for it)"
INSERTED_OVERLAY = "inserted by the EP: share of its backend"
FALLBACK_OVERLAY = "CPU fallback (µs)"


def _mix(low: str, high: str, t: float) -> str:
    """The colour a fraction ``t`` (0..1) of the way from ``low`` to ``high``."""
    t = min(max(t, 0.0), 1.0)
    a = [int(low[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(high[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _figure_text(profile: "Profile", row: "NodeCost") -> str:
    """``123,456 simulated HTP cycles (12.3 % of HTP)``: the figure with what kind of number it is."""
    value = f"{row.median:,.0f}" if row.unit == "cycles" else f"{row.median:,.1f}"
    unit_words = profile.label(row.backend)
    if row.unit == "us" and profile.source != "imported":
        unit_words = f"µs on {profile.backends[row.backend].hardware}"
    return f"{value} {unit_words} ({row.share:.1%} of {row.backend.upper()})"


def _group_cost(index: dict, row: "NodeCost") -> "NodeCost":
    """The row that carries ``row``'s cost: its fused group's carrier, else itself (``index`` is
    ``Profile.index()``)."""
    if row.fused:
        return index.get((row.group, row.backend), row)
    return row


def cost_attrs(profile: "Profile") -> dict[str, list[KeyValue]]:
    """Per model node, for the viewer's side panel: its cost on each backend that ran it (in its
    unit and words), its fused group (the group's cost is on one member, which lists the others),
    and the rows the EP inserted for it (the input layout ``Transpose``)."""
    origin = "imported" if profile.source == "imported" else "measured"
    index = profile.index()
    attrs: dict[str, list[KeyValue]] = {}
    for row in profile.nodes:
        tag = row.backend.upper()
        if row.inserted:
            if row.serves:
                attrs.setdefault(row.serves, []).append(
                    KeyValue(f"{tag} inserted for it", f"{row.op_type} {row.name!r}: {_figure_text(profile, row)}; "
                                                       f"the cost overlay includes its {row.share:.1%}"))
            continue
        rows = attrs.setdefault(row.name, [])
        if not row.fused:  # a member's own 0 would read as free: the group's line says where its cost is
            rows.append(KeyValue(f"{tag} cost ({origin})", _figure_text(profile, row)))
        if row.carrier:
            rows.append(KeyValue(f"{tag} fused group", f"{len(row.members)} nodes, the group's cost: "
                                                      + ", ".join(row.members)))
        elif row.fused:
            carrier = _group_cost(index, row)
            rows.append(KeyValue(f"{tag} fused group", f"in {row.group}'s group; the group's cost: "
                                                      f"{_figure_text(profile, carrier)}"))
    return attrs


def cost_overlays(graph: ModelGraph, profile: "Profile") -> dict[str, GraphNodeData]:
    """The cost overlays, by the name the viewer lists them under, from ``Profile.overlay()`` (what
    each model node draws). ``cost``: each node's share of its own backend's total (a fused group's
    share on each of its members, plus the share of the rows the EP inserted for it: the input
    ``Transpose`` can be most of the HTP's cycles and must not vanish), coloured by a gradient per
    backend: shares of different backends are never of the same total, so each backend has its own
    hue, and the colour is the share itself (100 % darkest), never stretched to the costliest node
    drawn, so a 24 % node does not look like a 100 % one. ``inserted by the EP``: the nodes rows
    were inserted for, with those rows' share. ``CPU fallback``: the nodes the CPU EP ran, with
    their µs. The side panel names the inserted rows (``cost_attrs``)."""
    ids = {n.name: node_id(n) for n in graph.nodes}
    drawn = {name: entry for name, entry in profile.overlay().items() if name in ids}
    cost: dict[str, NodeDataResult] = {}
    inserted: dict[str, NodeDataResult] = {}
    for name, entry in drawn.items():
        low, high = COST_GRADIENTS.get(entry["backend"], COST_GRADIENTS["htp"])
        extra = sum(i["share"] for i in entry["inserted"])
        share = entry["group_share"] + extra
        cost[ids[name]] = NodeDataResult(round(share * 100, 2), _mix(low, high, share))
        if entry["inserted"]:
            inserted[ids[name]] = NodeDataResult(round(extra * 100, 2), _mix(low, high, extra))
    overlays = {COST_OVERLAY: GraphNodeData(cost, COST_OVERLAY, showExpandedSummaryOnGroupNode=False,
                                            showLabelCountColumnsInChildrenStatsTable=False)}
    if inserted:
        overlays[INSERTED_OVERLAY] = GraphNodeData(inserted, INSERTED_OVERLAY, showExpandedSummaryOnGroupNode=False,
                                                   showLabelCountColumnsInChildrenStatsTable=False)
    fallback = {ids[name]: NodeDataResult(round(entry["median"], 1), COST_GRADIENTS["cpu"][1])
                for name, entry in drawn.items() if entry["backend"] == "cpu" and entry["unit"] == "us"}
    if fallback:
        overlays[FALLBACK_OVERLAY] = GraphNodeData(fallback, FALLBACK_OVERLAY, showExpandedSummaryOnGroupNode=False,
                                                   showLabelCountColumnsInChildrenStatsTable=False,
                                                   hideInAggregatedStatsTable=False)
    return overlays


def web_app_dir() -> Path:
    """The packaged Model Explorer web app (its files are served as they are, never changed).
    Raises ``ImportError`` when the package is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("model_explorer")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ai-edge-model-explorer is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "web_app"
    if not (folder / "index.html").is_file():
        raise ImportError(f"Model Explorer's web app is missing from {folder}")
    return folder


# -- the accuracy overlay (an accuracy report's layers) ------------------------------------------------
ACCURACY_OVERLAY = "error vs float (SQNR dB, its own)"
SQNR_COLOURS = ("#a50f15", "#fee08b", "#1a9850")  # bad, middling, fine
SQNR_RANGE = (10.0, 60.0)  # dB drawn from the first colour to the last: 10 dB is broken, 60 dB is fp16-fine


def _sqnr_colour(db: float) -> str:
    low, high = SQNR_RANGE
    t = min(max((db - low) / (high - low), 0.0), 1.0)
    return _mix(SQNR_COLOURS[0], SQNR_COLOURS[1], t * 2) if t < 0.5 else _mix(SQNR_COLOURS[1], SQNR_COLOURS[2],
                                                                              t * 2 - 1)


def _layer_nodes(graph: ModelGraph, report: "AccuracyReport") -> dict[str, object]:
    """Model node name -> its layer row: the node of the user's graph that writes the row's tensor
    (a QDQ target's node names are the quantizer's; the tensor names are the float model's)."""
    writer = {out: node.name for node in graph.nodes for out in node.outputs}
    rows = {}
    for row in report.layers.rows if report.layers is not None and report.layers.ok else []:
        name = writer.get(row.tensor)
        if name is not None:
            rows[name] = row
    return rows


def accuracy_overlays(graph: ModelGraph, report: "AccuracyReport") -> dict[str, GraphNodeData]:
    """Each layer's own error against float (layerwise SQNR, else cumulative), coloured from red
    (10 dB and below) to green (60 dB and above): the first jump stands out as the first red node."""
    ids = {n.name: node_id(n) for n in graph.nodes}
    results = {}
    for name, row in _layer_nodes(graph, report).items():
        value = row.layerwise if row.layerwise is not None else row.cumulative
        if value is not None and name in ids:
            results[ids[name]] = NodeDataResult(round(value, 1), _sqnr_colour(value))
    if not results:
        return {}
    return {ACCURACY_OVERLAY: GraphNodeData(results, ACCURACY_OVERLAY, showExpandedSummaryOnGroupNode=False,
                                            showLabelCountColumnsInChildrenStatsTable=False,
                                            hideInAggregatedStatsTable=False)}


def accuracy_attrs(graph: ModelGraph, report: "AccuracyReport") -> dict[str, list[KeyValue]]:
    """Per model node, for the side panel: its error in each mode, the reference's range, its
    quantization parameters and why, as measured on the report's data."""
    data = report.data.label
    attrs: dict[str, list[KeyValue]] = {}
    for name, row in _layer_nodes(graph, report).items():
        lines = [KeyValue("error vs float", ", ".join(
            f"{mode} {value:.1f} dB" for mode, value in (("cumulative", row.cumulative), ("layerwise", row.layerwise),
                                                         ("CPU EP cumulative", row.cpu_cumulative))
            if value is not None) + f" ({data})")]
        if row.ref_low is not None:
            lines.append(KeyValue("float range", f"[{row.ref_low:.4g}, {row.ref_high:.4g}], std {row.ref_std:.3g}"))
        if row.quant is not None:
            q = row.quant
            lines.append(KeyValue("quantization", f"{q.dtype} scale {q.scale:.4g} zero point {q.zero_point}: "
                                                  f"[{q.low:.4g}, {q.high:.4g}]"))
        if row.why:
            lines.append(KeyValue("why", row.why))
        attrs[name] = lines
    return attrs
