"""The segment strip of a migration plan (plotly, no Streamlit) and the colours every partition
drawing shares (the strip here, the overlays of the Model Explorer graph in ``model_explorer``).

The node graph itself is drawn by Model Explorer (``model_explorer`` builds its JSON); a plan's strip
stays a plotly bar chart: one bar per segment in execution order, cheap for hundreds of segments.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:
    from dashboard.partition.plans import Plan
    from dashboard.partition.report import PartitionReport

CLASS_COLORS = {
    "both": "#2ca02c",      # green: migrates GPU -> HTP
    "gpu_only": "#ff7f0e",  # orange
    "htp_only": "#1f77b4",  # blue
    "neither": "#d62728",   # red: CPU
    "removed": "#b0b0b0",   # grey: runs nowhere
}
BACKEND_COLORS = {"migrating": "#9467bd", "gpu": "#ff7f0e", "htp": "#1f77b4", "cpu": "#d62728"}
BACKEND_LABELS = {"migrating": "migrating GPU→HTP", "gpu": "GPU (stays)", "htp": "HTP only", "cpu": "CPU"}


def strip_figure(plan: Plan, height: int = 120) -> go.Figure:
    """The segment strip: segments side by side in execution order, width = node count (one bar
    trace per backend, however many segments: a strip of hundreds stays cheap to build and draw)."""
    fig = go.Figure()
    starts, start = [], 0
    for seg in plan.segments:
        starts.append(start)
        start += len(seg.nodes)
    for backend, color in BACKEND_COLORS.items():
        members = [(seg, base) for seg, base in zip(plan.segments, starts) if seg.backend == backend]
        if not members:
            continue
        fig.add_trace(go.Bar(
            x=[len(seg.nodes) for seg, _ in members], y=["plan"] * len(members),
            base=[base for _, base in members], orientation="h", marker={"color": color},
            name=BACKEND_LABELS[backend], customdata=[f"segment:{seg.index}" for seg, _ in members],
            hovertext=[f"segment {seg.index} · {BACKEND_LABELS[backend]} · {len(seg.nodes)} nodes · "
                       f"{len(seg.inputs)} in / {len(seg.outputs)} out · {seg.boundary_bytes:,} B"
                       for seg, _ in members],
            hoverinfo="text"))
    fig.update_layout(barmode="overlay", height=height, margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      yaxis={"visible": False}, xaxis={"title": "nodes in execution order"},
                      legend={"orientation": "h", "y": -0.6}, bargap=0.1)
    return fig


def classes_by_op_figure(report: PartitionReport, labels: dict[str, str], top: int = 30) -> go.Figure:
    """Nodes per op type, stacked by class: which op types keep the model off the NPU (the
    ``top`` op types with the most nodes that are not on both backends first). ``labels`` names
    the classes."""
    ops = report.op_types
    counts: dict[str, Counter] = {}
    for name, cls in report.classes.of().items():
        counts.setdefault(ops.get(name, "?"), Counter())[cls] += 1
    order = sorted(counts, key=lambda op: (-(sum(counts[op].values()) - counts[op]["both"]), op))[:top][::-1]
    fig = go.Figure()
    for cls, color in CLASS_COLORS.items():
        fig.add_trace(go.Bar(y=[html.escape(op) for op in order], x=[counts[op][cls] for op in order],
                             orientation="h", name=labels.get(cls, cls), marker={"color": color}))
    fig.update_layout(barmode="stack", height=max(200, 22 * len(order) + 80), margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      xaxis={"title": "nodes"}, legend={"orientation": "h", "y": -0.15})
    return fig
