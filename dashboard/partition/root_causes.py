"""Root causes of a shape-driven fallback: the few nodes whose dynamic output makes the rest fail.

Why: a Mask R-CNN-like graph is refused on hundreds of nodes with "Cannot get shape", but only a
handful of them are the problem. ``NonZero`` (its output length is the number of hits) or a
``Range`` whose limit is computed from the data produces a tensor whose size is known only at run
time; every node downstream inherits the unknown size and the EP refuses it for that alone. Listing
those hundreds tells the user nothing to do; naming the origin does (make that one size static, or
split the model there), and the downstream count says how much the fix wins back.

An *origin* is a node whose inputs all have static shapes (or are constants) while one of its
outputs does not: the dynamic size is born there, from values rather than shapes. A graph input
with a dimension left unknown is an origin too. Each node the backend refused for its shape is
traced upstream through non-static tensors to the origins it depends on.

Two rules keep the blame true (issue 27, an int8 CRNN whose LSTM states are ``ConstantOfShape`` of a
computed shape): a node ONNX Runtime removed (folded into a constant, or eliminated) is never an
origin, since it does not exist in the graph the backend sees, so "give it a static size or split
there" would be a fix for nothing; the trace walks on through it. And a refusal of the op type
itself (``Operators of type `DynamicQuantizeLSTM` are not supported``) is not a shape failure, even
when the op's or the node's name holds a shape word: only the reason's own words count.
"""

from __future__ import annotations

import re

from dashboard.intake.graph import ModelGraph, producers_of
from dashboard.intake.shapes import TensorShape
from dashboard.partition.report import REMOVED, BackendReport, NodeSupport, RootCause
from dashboard.runtime.knobs import ref

# Words of the EP's (and the GPU rule table's) refusals for a shape it cannot know statically.
SHAPE_WORDS = ("cannot get shape", "must be static", "not static", "dynamic")
INPUT = "(graph input)"
EXAMPLES = 5


def own_words(reason: str | None, op_type: str = "") -> str:
    """``reason`` without the names in it: those quoted (`node`) and the op type as spelt
    (``DynamicQuantizeLSTM``; "Cannot get shape" of a Shape node stays), which say what was
    refused, not why."""
    text = re.sub(r"`[^`]*`", " ", reason or "")
    if op_type:
        text = re.sub(rf"\b{re.escape(op_type)}\b", " ", text)
    return text


def is_shape_failure(reason: str | None, op_type: str = "") -> bool:
    """Whether the backend refused a node for a shape it cannot know, by the reason's own words
    (``own_words``), so an op type refused as such (``DynamicQuantizeLSTM``) is not a shape failure."""
    return any(word in own_words(reason, op_type).lower() for word in SHAPE_WORDS)


def _static(tensor: str, shapes: dict[str, TensorShape], constants) -> bool:
    if not tensor or tensor in constants:
        return True
    known = shapes.get(tensor)
    return known is not None and known.is_static


def trace(graph: ModelGraph, shapes: dict[str, TensorShape], verdicts: dict[str, NodeSupport]) -> dict[str, list[str]]:
    """Origin (node or graph input name) -> the refused nodes whose unknown shape comes from it,
    each traced upstream through non-static tensors, never stopping at a node ONNX Runtime removed.
    Empty when nothing was refused for its shape."""
    failures = [n for n in graph.nodes if (v := verdicts.get(n.name)) is not None and not v.supported
                and v.status != REMOVED and is_shape_failure(v.reason, n.op_type)]
    removed = {name for name, v in verdicts.items() if v.status == REMOVED}
    constants = set(graph.initializers)
    producers = producers_of(graph.nodes)
    inputs = {spec.name for spec in graph.inputs}

    def origin(node) -> bool:
        if node.name in removed:  # not in the graph the backend sees: the trace walks on through it
            return False
        return (all(_static(t, shapes, constants) for t in node.inputs)
                and not all(_static(t, shapes, constants) for t in node.outputs))

    caused: dict[str, list[str]] = {}
    for failure in failures:
        stack, seen = [failure], {failure.name}
        while stack:
            node = stack.pop()
            if origin(node):
                caused.setdefault(node.name, []).append(failure.name)
                continue
            for tensor in node.inputs:
                producer = None if _static(tensor, shapes, constants) else producers.get(tensor)
                if producer is None and tensor in inputs and not _static(tensor, shapes, constants):
                    caused.setdefault(tensor, []).append(failure.name)
                elif producer is not None and producer.name not in seen:
                    seen.add(producer.name)
                    stack.append(producer)
    return caused


def find_root_causes(graph: ModelGraph, shapes: dict[str, TensorShape],
                     verdicts: dict[str, NodeSupport]) -> list[RootCause]:
    """The origins of ``trace``, most downstream failures first."""
    by_name = graph.node_by_name()
    out = []
    for name, downstream in trace(graph, shapes, verdicts).items():
        node, verdict = by_name.get(name), verdicts.get(name)
        others = [n for n in downstream if n != name]
        op_type = node.op_type if node is not None else INPUT
        out.append(RootCause(name, op_type, bool(verdict and verdict.supported),
                             verdict.reason if verdict is not None and not verdict.supported else None,
                             len(others), others[:EXAMPLES], fix_for(op_type, name, node, shapes)))
    return sorted(out, key=lambda r: (-r.downstream, r.node))


def fix_for(op_type: str, name: str, node, shapes: dict[str, TensorShape]) -> str:
    """The change to try, in one or two sentences: a static size for this one tensor, or a split of
    the model just before the origin, so the static part runs on the accelerator as one graph."""
    if op_type == INPUT:
        return (f"input {name} has a dimension with no value: fix it ({ref('dims')}, or the whole shape with "
                f"{ref('shapes')})")
    boundary = ", ".join(t for t in (node.inputs if node is not None else ()) if t and t in shapes)[:120]
    split = (f"or split the model at the dynamic part: everything up to the inputs of {op_type} '{name}' "
             f"({boundary or 'none'}) as one graph for the accelerator, the rest on the CPU")
    if op_type == "NonZero":
        return ("NonZero's output length is the number of hits, known only at run time: give it a static size "
                "(a fixed top-k, or a padded maximum count with a validity mask, exported with static shapes), "
                + split)
    if op_type == "Range":
        return ("this Range's limit is computed from the data, so its length is known only at run time: make the "
                "limit a constant (export at a fixed size), " + split)
    return (f"{op_type}'s output size depends on input values, not shapes: export it with a static size, "
            + split)


def attach(report: BackendReport, graph: ModelGraph, shapes: dict[str, TensorShape]) -> BackendReport:
    """Fill ``report.root_causes`` and ``report.shape_failures`` (the distinct refused nodes traced
    to an origin, the origins themselves excluded) from the report's own verdicts."""
    caused = trace(graph, shapes, report.nodes)
    report.root_causes = find_root_causes(graph, shapes, report.nodes) if caused else []
    report.shape_failures = len(set().union(*caused.values()) - set(caused)) if caused else 0
    return report


def text_lines(report: BackendReport, indent: str = "  ") -> list[str]:
    """The root causes as the CLI prints them, under the backend's status (empty when none)."""
    if not report.root_causes:
        return []
    lines = [f"{indent}root causes: {len(report.root_causes)} node(s) whose output size is known only at run time "
             f"make {report.shape_failures} downstream node(s) fail for their shape:"]
    for cause in report.root_causes:
        more = f"; e.g. {', '.join(cause.examples)}" if cause.examples else ""
        own = f" - {cause.reason}" if cause.reason else (" - taken by this backend" if cause.supported else "")
        lines.append(f"{indent}  {cause.node} [{cause.op_type}]: {cause.downstream} downstream{more}{own}")
        lines.append(f"{indent}    fix: {cause.fix}")
    return lines
