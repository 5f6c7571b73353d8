"""Tables that describe a ``ModelGraph`` for the Overview page (pandas only, no Streamlit).

Each function returns plain data so the page stays a thin layout and tests can check the facts
without a browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dashboard.intake.graph import ModelGraph

TOP_OPS = 40


def human_bytes(count: int | None) -> str:
    """``1536`` -> ``1.5 KB``, ``230785`` -> ``225 KB`` (powers of 1024, at most one decimal and
    three digits before it); ``None`` -> ``?``."""
    if count is None:
        return "?"
    if count < 1024:
        return f"{count} B"
    value, unit = count / 1024, "KB"
    for bigger in ("MB", "GB", "TB"):
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


def op_histogram(model: ModelGraph, top: int = TOP_OPS) -> pd.DataFrame:
    """Op types by count (descending, ties by name), the tail beyond ``top`` folded into one
    ``other`` row so the chart stays readable on models with hundreds of custom ops."""
    counts = model.op_histogram()
    rows = []
    for op, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        domain, _, op_type = op.rpartition("::")
        rows.append({"op": op, "op_type": op_type, "domain": domain or "ai.onnx", "count": count})
    frame = pd.DataFrame(rows, columns=["op", "op_type", "domain", "count"])
    if len(frame) > top:
        tail = frame.iloc[top:]
        other = {"op": f"other ({len(tail)} op types)", "op_type": "other", "domain": "other",
                 "count": int(tail["count"].sum())}
        frame = pd.concat([frame.iloc[:top], pd.DataFrame([other])], ignore_index=True)
    total = max(len(model.nodes), 1)
    frame["share"] = frame["count"] / total
    return frame


def opset_table(model: ModelGraph) -> pd.DataFrame:
    """Imported opsets, the default ONNX domain shown as ``ai.onnx``."""
    rows = [{"domain": domain or "ai.onnx", "version": version}
            for domain, version in sorted(model.opsets.items())]
    return pd.DataFrame(rows, columns=["domain", "version"])


@dataclass(frozen=True)
class Sizes:
    """Where a model's bytes are: the .onnx file itself and its weights, split into weights
    stored inside the file and in external-data files next to it."""

    file_bytes: int
    weight_bytes: int
    embedded_bytes: int
    external_bytes: int
    initializers: int
    external_files: list[str]
    missing_external_files: list[str]


def sizes(model: ModelGraph) -> Sizes:
    """Byte counts from initializer headers; external files are checked for existence (never
    read), because an uploaded .onnx arrives without them."""
    base = Path(model.path).parent
    files = sorted({i.external_location for i in model.initializers.values() if i.external_location})
    missing = [f for f in files if not (base / f).is_file()]
    return Sizes(
        file_bytes=model.file_bytes,
        weight_bytes=model.weight_bytes,
        embedded_bytes=model.weight_bytes - model.external_bytes,
        external_bytes=model.external_bytes,
        initializers=len(model.initializers),
        external_files=files,
        missing_external_files=missing,
    )

