"""The two hot-migration plans of seed 000, built from the node classes.

Hot migration serves a session on the GPU while the HTP finalizes in the background, then swaps
to the HTP. The seed describes two ways to partition for it:

- **intersection**: the EP claims only nodes both backends support (GPU ∩ HTP); they start on
  the GPU and migrate to the HTP. Every other node falls to the CPU EP for the whole session.
- **segmented**: contiguous runs by backend affinity become their own segments: *migrating*
  segments (both), *gpu* segments (GPU only: they stay on the GPU after the swap), *htp*
  segments (HTP only: they can run only once the HTP is ready; until then the CPU must stand in)
  and *cpu* segments (neither). Segments run in sequence with intermediate buffers between them.

Segments are contiguous runs in a topological order. Any topological order is valid; this one
is chosen greedily to keep runs long (among the nodes whose inputs are ready it prefers those of
the current segment's backend, ties by graph position), because every switch is a boundary
whose tensors must be copied.

Boundaries: a segment's *inputs* are the non-constant tensors its nodes read that are produced
outside it (by another segment, or graph inputs fed by the application); its *outputs* are the
tensors it produces that another segment or the application (graph outputs) reads. Their byte
sizes come from the static shapes after the dimension overrides (``shapes``). A tensor whose
shape is still unknown or symbolic has ``bytes = None``: it is listed, counted in
``unknown_tensors``, and left out of ``boundary_bytes`` (which is then a lower bound, flagged by
``bytes_complete = False``). ``transfer_bytes`` of a plan counts each tensor that crosses any
boundary once (the copy cost of one inference).

Nodes ONNX Runtime removed before partitioning (class ``removed``) run nowhere; they are not in
any segment and are transparent for boundaries: a tensor read through an eliminated node is
charged where it is finally read, and one that only depends on folded constants is a constant.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from dashboard.intake.graph import ModelGraph, producers_of
from dashboard.intake.shapes import TensorShape
from dashboard.serde import Record

MIGRATING, GPU, HTP, CPU = "migrating", "gpu", "htp", "cpu"
INTERSECTION, SEGMENTED = "intersection", "segmented"
PLAN_BACKEND = {
    INTERSECTION: {"both": MIGRATING, "gpu_only": CPU, "htp_only": CPU, "neither": CPU},
    SEGMENTED: {"both": MIGRATING, "gpu_only": GPU, "htp_only": HTP, "neither": CPU},
}
SEGMENT_LABELS = {MIGRATING: "migrating GPU→HTP", GPU: "stays on GPU", HTP: "HTP only", CPU: "CPU"}


@dataclass(frozen=True)
class PlanNode:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class PlanGraph:
    """What a plan needs of a model: nodes in graph order with their tensors, which tensors are
    constants, graph inputs and outputs, and each tensor's size."""

    nodes: list[PlanNode]
    graph_inputs: set[str]
    graph_outputs: set[str]
    constants: set[str]
    tensors: dict[str, TensorShape] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.producer = producers_of(self.nodes)

    def nbytes(self, tensor: str) -> int | None:
        shape = self.tensors.get(tensor)
        return shape.nbytes if shape is not None else None

    def shape_text(self, tensor: str) -> str:
        shape = self.tensors.get(tensor)
        return shape.text() if shape is not None else "?"


def plan_graph(graph: ModelGraph, shapes: dict[str, TensorShape]) -> PlanGraph:
    return PlanGraph(
        nodes=[PlanNode(n.name, n.inputs, n.outputs) for n in graph.nodes],
        graph_inputs={t.name for t in graph.inputs},
        graph_outputs={t.name for t in graph.outputs},
        constants=set(graph.initializers),
        tensors=shapes,
    )


@dataclass
class TensorRef(Record):
    name: str
    bytes: int | None
    shape: str
    peer: list[str]  # other segments (by index) or "host" it comes from / goes to


@dataclass
class Segment(Record):
    index: int
    backend: Literal["migrating", "gpu", "htp", "cpu"]
    nodes: list[str]
    inputs: list[TensorRef]
    outputs: list[TensorRef]
    boundary_bytes: int
    unknown_tensors: int


@dataclass
class Plan(Record):
    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ("segment_count", "segments_by_backend")

    kind: str
    segments: list[Segment]
    transfer_bytes: int
    unknown_tensors: int
    bytes_complete: bool

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    @property
    def segments_by_backend(self) -> dict[str, int]:
        """Segments per backend."""
        out: dict[str, int] = {}
        for seg in self.segments:
            out[seg.backend] = out.get(seg.backend, 0) + 1
        return out


def affinity_order(graph: PlanGraph, label: dict[str, str]) -> list[str]:
    """A topological order of the labelled nodes that keeps equal labels together (greedy)."""
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    memo: dict[str, frozenset[str]] = {}
    deps: dict[str, set[str]] = {}
    for node in graph.nodes:
        if node.name in label:
            deps[node.name] = {p for t in node.inputs if t for p in _sources(t, graph, label, memo)
                               if p not in (node.name, "host")}
    users: dict[str, list[str]] = {name: [] for name in deps}
    for name, sources in deps.items():
        for src in sources:
            users[src].append(name)
    waiting = {name: len(sources) for name, sources in deps.items()}
    ready: dict[str, list[tuple[int, str]]] = {}
    for name, count in waiting.items():
        if count == 0:
            heapq.heappush(ready.setdefault(label[name], []), (index[name], name))
    order: list[str] = []
    current = None
    while any(ready.values()):
        if not ready.get(current):
            current = min((heap[0][0], lab) for lab, heap in ready.items() if heap)[1]
        _, name = heapq.heappop(ready[current])
        order.append(name)
        for user in users[name]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready.setdefault(label[user], []), (index[user], user))
    return order


def _sources(tensor: str, graph: PlanGraph, label: dict[str, str], memo: dict[str, frozenset[str]]) -> frozenset[str]:
    """Executed nodes whose outputs ``tensor`` depends on, looking through removed nodes; the
    marker "host" for graph inputs; empty for constants."""
    if tensor in memo:
        return memo[tensor]
    memo[tensor] = frozenset()  # cycle guard (graphs are acyclic; this only stops recursion)
    producer = graph.producer.get(tensor)
    if tensor in graph.graph_inputs:
        result = frozenset({"host"})
    elif tensor in graph.constants or producer is None:
        result = frozenset()
    elif producer.name in label:
        result = frozenset({producer.name})
    else:  # produced by a removed node: its own inputs are the real sources
        result = frozenset().union(*(_sources(t, graph, label, memo) for t in producer.inputs if t))
    memo[tensor] = result
    return result


def build_plan(kind: str, graph: PlanGraph, classes: dict[str, str]) -> Plan:
    """Segments of plan ``kind`` (``intersection`` or ``segmented``). ``classes``: node name ->
    ``both``/``gpu_only``/``htp_only``/``neither``/``removed``."""
    mapping = PLAN_BACKEND[kind]
    label = {name: mapping[cls] for name, cls in classes.items() if cls in mapping}
    order = affinity_order(graph, label)
    segment_of: dict[str, int] = {}
    runs: list[tuple[str, list[str]]] = []
    for name in order:
        if not runs or runs[-1][0] != label[name]:
            runs.append((label[name], []))
        runs[-1][1].append(name)
        segment_of[name] = len(runs) - 1

    memo: dict[str, frozenset[str]] = {}
    reads: dict[int, dict[str, set[str]]] = {i: {} for i in range(len(runs))}  # segment -> tensor -> peers
    writes: dict[int, dict[str, set[str]]] = {i: {} for i in range(len(runs))}
    crossing: set[str] = set()
    for node in graph.nodes:
        if node.name not in segment_of:
            continue
        seg = segment_of[node.name]
        for tensor in node.inputs:
            if not tensor:
                continue
            for src in _sources(tensor, graph, label, memo):
                src_seg = "host" if src == "host" else segment_of[src]
                if src_seg == seg:
                    continue
                crossing.add(tensor)
                reads[seg].setdefault(tensor, set()).add(str(src_seg))
                if src_seg != "host":
                    writes[src_seg].setdefault(_produced_name(tensor, src, graph), set()).add(str(seg))
        for tensor in node.outputs:
            if tensor in graph.graph_outputs:
                crossing.add(tensor)
                writes[seg].setdefault(tensor, set()).add("host")

    segments = []
    unknown_total = set()
    for i, (backend, names) in enumerate(runs):
        inputs = [_ref(graph, t, peers) for t, peers in sorted(reads[i].items())]
        outputs = [_ref(graph, t, peers) for t, peers in sorted(writes[i].items())]
        known = [r.bytes for r in (*inputs, *outputs) if r.bytes is not None]
        unknown = sum(1 for r in (*inputs, *outputs) if r.bytes is None)
        unknown_total.update(r.name for r in (*inputs, *outputs) if r.bytes is None)
        segments.append(Segment(i, backend, names, inputs, outputs, sum(known), unknown))
    transfer = sum(b for t in crossing if (b := graph.nbytes(t)) is not None)
    unknown_crossing = sum(1 for t in crossing if graph.nbytes(t) is None)
    return Plan(kind, segments, transfer, unknown_crossing, unknown_crossing == 0)


def _produced_name(tensor: str, src: str, graph: PlanGraph) -> str:
    """The tensor a producing segment hands over: ``tensor`` itself, or, when ``tensor`` is read
    through removed nodes, the output of ``src`` it derives from (the first one)."""
    node = graph.by_name[src]
    return tensor if tensor in node.outputs else next((t for t in node.outputs if t), tensor)


def _ref(graph: PlanGraph, tensor: str, peers: set[str]) -> TensorRef:
    return TensorRef(tensor, graph.nbytes(tensor), graph.shape_text(tensor),
                     sorted(peers, key=lambda p: (p != "host", int(p) if p.isdigit() else -1)))


def build_plans(graph: PlanGraph, classes: dict[str, str]) -> dict[str, Plan]:
    return {kind: build_plan(kind, graph, classes) for kind in (INTERSECTION, SEGMENTED)}
