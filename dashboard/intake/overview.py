"""Tables that describe a ``ModelGraph`` for the Overview page (pandas only, no Streamlit).

Each function returns plain data so the page stays a thin layout and tests can check the facts
without a browser. Counts cover the whole model: what runs inside control-flow bodies (If
branches, Loop and Scan bodies, at any depth) is counted too, and kept apart from the top level
so the page can say which is which; a model whose work sits inside an If is not "5 nodes".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dashboard.intake.graph import ModelGraph

TOP_OPS = 40


def human_bytes(count: int | None) -> str:
    """``1536`` -> ``1.5 KiB``, ``230785`` -> ``225 KiB`` (at most one decimal and three digits
    before it); ``None`` -> ``?``. The one size rule of every page, the report and the CLI: powers
    of 1024, named so (KiB, MiB, GiB), never a binary size labelled KB or MB."""
    if count is None:
        return "?"
    if count < 1024:
        return f"{count} B"
    value, unit = count / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1000:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"


def io_table(model: ModelGraph) -> pd.DataFrame:
    """One row per graph input (initializers excluded) and output: name, dtype, shape, the
    symbolic dimensions QNN will need fixed, and the size when the shape is static."""
    rows = []
    for kind, specs in (("input", model.inputs), ("output", model.outputs)):
        for spec in specs:
            symbolic = spec.symbolic_dims if spec.shape is not None else ["rank unknown"]
            rows.append({
                "kind": kind,
                "name": spec.name,
                "dtype": spec.dtype,
                "shape": spec.shape_text(),
                "symbolic": ", ".join(symbolic),
                "static": spec.is_static,
                "bytes": spec.nbytes() if spec.is_static else None,
            })
    return pd.DataFrame(rows, columns=["kind", "name", "dtype", "shape", "symbolic", "static", "bytes"])


def symbolic_dim_names(model: ModelGraph) -> list[str]:
    """Distinct symbolic dimension names over all inputs, in first-seen order (what a user must
    give values for before QNN can compile the graph)."""
    names: dict[str, None] = {}
    for spec in model.inputs:
        for dim in spec.symbolic_dims:
            names.setdefault(dim, None)
    return list(names)


@dataclass(frozen=True)
class Counts:
    """Nodes, op types and weights of the top level and of every control-flow body below it."""

    top_nodes: int
    body_nodes: int
    bodies: int  # control-flow bodies at any depth (each If branch is one)
    deepest: int  # nesting depth of the deepest body (0: none)
    op_types: int  # distinct op types over all levels
    top_op_types: int

    @property
    def nodes(self) -> int:
        return self.top_nodes + self.body_nodes


def counts(model: ModelGraph) -> Counts:
    """What the headline shows; bodies are decoded here (once per graph, cached)."""
    bodies = model.bodies
    top_level, inside = _op_counts(model)
    return Counts(
        top_nodes=len(model.nodes),
        body_nodes=sum(len(body.graph.nodes) for body in bodies),
        bodies=len(bodies),
        deepest=max((body.depth for body in bodies), default=0),
        op_types=len(set(top_level) | set(inside)),
        top_op_types=len(top_level),
    )


def _op_counts(model: ModelGraph) -> tuple[Counter, Counter]:
    """Op counts of the top level and of everything inside bodies."""
    inside = Counter(n.qualified_op for body in model.bodies for n in body.graph.nodes)
    return model.op_histogram(), inside


def op_histogram(model: ModelGraph, top: int = TOP_OPS) -> pd.DataFrame:
    """Op types by count over all levels (descending, ties by name), with the part at the top
    level and the part inside control-flow bodies; the tail beyond ``top`` folded into one
    ``other`` row so the chart stays readable on models with hundreds of custom ops."""
    top_level, inside = _op_counts(model)
    rows = []
    for op, count in sorted((top_level + inside).items(), key=lambda item: (-item[1], item[0])):
        domain, _, op_type = op.rpartition("::")
        rows.append({"op": op, "op_type": op_type, "domain": domain or "ai.onnx", "count": count,
                     "top_level": top_level[op], "in_bodies": inside[op]})
    frame = pd.DataFrame(rows, columns=["op", "op_type", "domain", "count", "top_level", "in_bodies"])
    if len(frame) > top:
        tail = frame.iloc[top:]
        other = {"op": f"other ({len(tail)} op types)", "op_type": "other", "domain": "other",
                 **{column: int(tail[column].sum()) for column in ("count", "top_level", "in_bodies")}}
        frame = pd.concat([frame.iloc[:top], pd.DataFrame([other])], ignore_index=True)
    frame["share"] = frame["count"] / max(int(frame["count"].sum()), 1)
    return frame


def opset_table(model: ModelGraph) -> pd.DataFrame:
    """Imported opsets, the default ONNX domain shown as ``ai.onnx``."""
    rows = [{"domain": domain or "ai.onnx", "version": version}
            for domain, version in sorted(model.opsets.items())]
    return pd.DataFrame(rows, columns=["domain", "version"])


@dataclass(frozen=True)
class Sizes:
    """Where a model's bytes are: the .onnx file itself and its weights (initializers and the
    tensors of Constant nodes, at every level), split into weights stored inside the file and in external-data files next to it, and
    into the top level and control-flow bodies."""

    file_bytes: int
    weight_bytes: int
    embedded_bytes: int
    external_bytes: int
    top_level_bytes: int
    body_bytes: int
    initializers: int
    external_files: list[str]
    missing_external_files: list[str]
    constant_bytes: int = 0  # of ``weight_bytes``: tensors held in Constant nodes (an exporter's folded weights)


def sizes(model: ModelGraph) -> Sizes:
    """Byte counts from initializer headers; external files are checked for existence (never
    read), because an uploaded .onnx arrives without them."""
    base = Path(model.path).parent
    inside = [i for body in model.bodies for i in body.graph.initializers.values()]
    everything = [*model.initializers.values(), *inside]
    files = sorted({i.external_location for i in everything if i.external_location})
    missing = [f for f in files if not (base / f).is_file()]
    top_constants = _constant_bytes(model.nodes)
    constants = top_constants + sum(_constant_bytes(body.graph.nodes) for body in model.bodies)
    weights = sum(i.nbytes for i in everything) + constants
    external = sum(i.nbytes for i in everything if i.external_location)
    return Sizes(
        file_bytes=model.file_bytes,
        weight_bytes=weights,
        embedded_bytes=weights - external,
        external_bytes=external,
        top_level_bytes=model.weight_bytes + top_constants,
        body_bytes=weights - model.weight_bytes - top_constants,
        initializers=len(everything),
        external_files=files,
        missing_external_files=missing,
        constant_bytes=constants,
    )


def _constant_bytes(nodes) -> int:
    """Bytes of the tensors Constant nodes hold (``value``, from headers: never read). Why count
    them: some exporters fold every weight into Constant nodes, and such a model showed "Weights
    0 B" with all its bytes in the file."""
    total = 0
    for node in nodes:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for value in node.attributes.values():
                total += getattr(value, "nbytes", 0) or 0
    return total
