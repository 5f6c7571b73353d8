"""The partition report: what each backend claims, per node, and the classes that follow.

These plain dataclasses are the JSON contract of ``python -m dashboard partition --json`` (issue 3,
item 8), the on-disk cache, and a device report (a file written with ``--out`` on a Snapdragon
device that replaces predicted figures with measured ones)::

    {"model": str, "digest": str, "options": Settings (runtime.knobs: backends, fp16, soc, ...),
     "backends": {"htp": BackendReport, "gpu": BackendReport},
     "classes": {"both": [names], "gpu_only": [...], "htp_only": [...], "neither": [...],
                 "removed": [...]},
     "plans": {"intersection": Plan, "segmented": Plan},
     "blockers": [Blocker], ...}  # derived (partition.blockers): written, ignored when read back

A ``BackendReport`` is ``{"status": "measured" | "predicted" | "failed", "error": str | null,
"runtime": {"onnxruntime", "onnxruntime_qnn", "qnn_sdk"}, "nodes": {NODE: NodeSupport},
"qnn_subgraphs": int, "root_causes": [RootCause], "shape_failures": int, ...}`` (the origins of a
shape-driven fallback apart from the nodes they make fail: ``partition.root_causes``) and a
``NodeSupport`` is ``{"op_type", "supported": bool, "reason": str | null, "qnn_op": str | null,
"status": ...}``. Node names are the model's own (unnamed nodes
get the stable ``<op_type>#<index>`` names of ``model_io.stable_node_names``).

Node ``status`` says how the verdict was reached:

- ``claimed``: the backend took the node (it is in a QNN subgraph);
- ``rejected``: the backend refused it (``reason`` is the EP's own message);
- ``fused``: ONNX Runtime's level-1 optimizer fused the node into another one before partitioning
  (``fused_into``); the node runs wherever that one runs, so it inherits its verdict;
- ``removed``: ONNX Runtime folded the node into a constant or eliminated it before partitioning;
  it runs on no backend. Such nodes are listed under ``classes.removed`` instead of one of the
  four classes, so every node is in exactly one of the five lists;
- ``predicted``: no measurement; the GPU rule table's verdict (``gpu_rules``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from dashboard.errors import UserError
from dashboard.intake.shapes import TensorShape
from dashboard.partition.plans import Plan
from dashboard.runtime.knobs import Settings
from dashboard.serde import Record, SchemaError, loads

SCHEMA = "qnn-backend-lab/partition-report/1"

MEASURED, PREDICTED, FAILED = "measured", "predicted", "failed"
CLAIMED, REJECTED, FUSED, REMOVED, PREDICTED_STATUS = "claimed", "rejected", "fused", "removed", "predicted"
CLASSES = ("both", "gpu_only", "htp_only", "neither")
ALL_LISTS = (*CLASSES, "removed")
CLASS_LABELS = {
    "both": "both (GPU ∩ HTP)",
    "gpu_only": "GPU only",
    "htp_only": "HTP only",
    "neither": "neither (CPU)",
    "removed": "removed by ORT",
}


NodeStatus = Literal["claimed", "rejected", "fused", "removed", "predicted"]
BackendStatus = Literal["measured", "predicted", "failed"]


@dataclass
class NodeSupport(Record):
    """One backend's verdict on one model node."""

    op_type: str
    supported: bool
    reason: str | None = None
    qnn_op: str | None = None
    status: NodeStatus = CLAIMED
    fused_into: str | None = None


@dataclass
class RootCause(Record):
    """One origin of unknown shapes and what its refusal costs downstream (``partition.root_causes``:
    a NonZero or data-dependent Range whose output size is known only at run time)."""

    node: str  # the model node (or graph input) where the dynamic size is born
    op_type: str  # its op type, or "(graph input)"
    supported: bool  # whether the backend itself took the origin
    reason: str | None  # the backend's reason for refusing it (None: it took it, or an input)
    downstream: int  # refused nodes that fail for an unknown shape because of it
    examples: list[str] = field(default_factory=list)  # a few of them, in model order
    fix: str = ""


@dataclass
class BackendReport(Record):
    """What one QNN backend claims of the model, measured on a real EP or predicted."""

    backend: str
    status: BackendStatus
    error: str | None = None
    suggestion: str | None = None
    runtime: dict[str, str | None] = field(default_factory=dict)
    nodes: dict[str, NodeSupport] = field(default_factory=dict)
    qnn_subgraphs: int = 0
    added_nodes: list[dict] = field(default_factory=list)  # ORT/EP-inserted nodes (layout Transposes ...)
    source: str = ""  # where the figures come from: host + runtime, rule table, device report file
    seconds: float | None = None
    # Shape-driven fallback, origins apart from the nodes they make fail ("Cannot get shape"):
    root_causes: list[RootCause] = field(default_factory=list)
    shape_failures: int = 0  # refused nodes traced to one of the root causes (the origins excluded)

    @property
    def usable(self) -> bool:
        """Per-node verdicts exist (measured or predicted)."""
        return self.status in (MEASURED, PREDICTED) and bool(self.nodes)


def failed(backend: str, error: str, suggestion: str | None = None, runtime: dict | None = None) -> BackendReport:
    return BackendReport(backend, FAILED, error=error, suggestion=suggestion, runtime=runtime or {})


@dataclass
class NodeClasses(Record):
    """Every model node in exactly one list. Empty with ``note`` set when a backend has no
    per-node verdicts (it failed), since a class needs both verdicts."""

    both: list[str] = field(default_factory=list)
    gpu_only: list[str] = field(default_factory=list)
    htp_only: list[str] = field(default_factory=list)
    neither: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    note: str | None = None

    def of(self) -> dict[str, str]:
        """Node name -> class name."""
        out = {}
        for cls in ALL_LISTS:
            for name in getattr(self, cls):
                out[name] = cls
        return out

    def counts(self) -> dict[str, int]:
        return {cls: len(getattr(self, cls)) for cls in ALL_LISTS}


def classify_nodes(order: list[str], htp: BackendReport, gpu: BackendReport) -> NodeClasses:
    """Class of each node (``order``: model node names in topological order). A node ORT removed
    before partitioning (status ``removed`` on a measured backend) runs nowhere: ``removed``."""
    missing = [r for r in (htp, gpu) if not r.usable]
    if missing:  # the backends' own errors are in their reports: not repeated here
        why = " and ".join(f"{r.backend.upper()} ({'failed' if r.status == FAILED else 'no nodes'})" for r in missing)
        return NodeClasses(note=f"no per-node verdicts from {why}: classes need both backends")
    out = NodeClasses()
    for name in order:
        h, g = htp.nodes.get(name), gpu.nodes.get(name)
        if (h and h.status == REMOVED) or (g and g.status == REMOVED):
            out.removed.append(name)
            continue
        on_htp, on_gpu = bool(h and h.supported), bool(g and g.supported)
        cls = "both" if on_htp and on_gpu else "htp_only" if on_htp else "gpu_only" if on_gpu else "neither"
        getattr(out, cls).append(name)
    return out


@dataclass
class Claims:
    """One backend's headline counts, by the classes' definition: a node ONNX Runtime removed (on
    either backend: it runs nowhere) is counted apart, never as claimed or refused, so the headline's
    claims equal the classes' (GPU: both + GPU only; HTP: both + HTP only)."""

    claimed: int
    refused: int
    removed: int

    @property
    def executed(self) -> int:
        return self.claimed + self.refused


def claims(report: "PartitionReport", backend: str) -> Claims:
    """``backend``'s counts over the model's nodes: removed are the classes' ``removed`` list (when
    classes exist), else the nodes this backend itself reports removed."""
    nodes = report.backends[backend].nodes
    removed = set(report.classes.removed) if not report.classes.note else set()
    removed |= {n for n, v in nodes.items() if v.status == REMOVED}
    claimed = sum(1 for n, v in nodes.items() if v.supported and n not in removed)
    gone = sum(1 for n in nodes if n in removed)
    return Claims(claimed, len(nodes) - gone - claimed, gone)


@dataclass
class OpTypeRow:
    """One line of the per-op-type table."""

    op_type: str
    count: int
    htp_supported: int
    gpu_supported: int
    removed: int
    htp_reasons: list[str]
    gpu_reasons: list[str]


def op_type_table(op_types: dict[str, str], htp: BackendReport, gpu: BackendReport) -> list[OpTypeRow]:
    """Per op type: how many nodes, how many each backend takes, and the distinct reasons it
    refuses the others (``op_types``: node name -> op type). Rows with refusals come first."""
    rows: dict[str, OpTypeRow] = {}
    for name, op in op_types.items():
        row = rows.setdefault(op, OpTypeRow(op, 0, 0, 0, 0, [], []))
        row.count += 1
        h, g = htp.nodes.get(name), gpu.nodes.get(name)
        if (h and h.status == REMOVED) or (g and g.status == REMOVED):
            row.removed += 1
            continue
        for node, attr, reasons in ((h, "htp_supported", row.htp_reasons), (g, "gpu_supported", row.gpu_reasons)):
            if node and node.supported:
                setattr(row, attr, getattr(row, attr) + 1)
            elif node and node.reason and node.reason not in reasons:
                reasons.append(node.reason)
    return sorted(rows.values(), key=lambda r: (-(r.count - r.removed - min(r.htp_supported, r.gpu_supported)),
                                                r.op_type))


@dataclass
class PartitionReport(Record):
    """Everything ``partition`` computes for one model and one set of options."""

    # Derived, written to JSON and ignored when read back (a report printed with --json stays a
    # device report the dashboard imports): the HTP's refusals grouped with their fix.
    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ("blockers",)

    model: str
    digest: str
    options: Settings
    backends: dict[str, BackendReport]
    classes: NodeClasses
    plans: dict[str, Plan]
    node_order: list[str] = field(default_factory=list)  # model node names, topological order
    op_types: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, TensorShape] = field(default_factory=dict)
    shape_source: str = ""
    dims: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    device: str = ""  # where it was measured (the device's label)
    schema: str = SCHEMA
    elapsed_s: float | None = None
    cached: bool = False

    @property
    def blockers(self) -> list:
        """``partition.blockers.blockers`` of this report (without the graph: no data types)."""
        from dashboard.partition.blockers import blockers  # it builds on this module

        return blockers(self)

    def __post_init__(self) -> None:
        if self.schema != SCHEMA:
            raise SchemaError(f"a partition report of another version ({self.schema!r}, this is {SCHEMA!r})")


def parse_device_report(text: str, label: str = "device report") -> PartitionReport:
    """A report written by ``partition --out`` (typically on a Snapdragon device), from its text;
    anything that is not exactly a partition report is one ``SchemaError`` line naming the field."""
    return loads(PartitionReport, text, label)


def measured_backends(device: PartitionReport, model_digest: str, node_names: set[str],
                      label: str) -> dict[str, BackendReport]:
    """The measured backends of a device report that describe this model. Matching by digest is
    exact; a report of a re-exported file is accepted when its node names are the model's."""
    if device.digest and device.digest != model_digest:
        overlap = len(node_names & set(device.op_types or {})) / max(len(node_names), 1)
        if overlap < 0.95:
            raise UserError(f"{label}: it describes another model (digest {device.digest[:12]}…, "
                            f"{overlap:.0%} of node names match)")
    out = {}
    for name, report in device.backends.items():
        if report.status == MEASURED and report.nodes:
            report.source = f"device report {label}" + (f" ({report.source})" if report.source else "")
            out[name] = report
    if not out:
        raise UserError(f"{label}: it has no measured backend to import")
    return out
