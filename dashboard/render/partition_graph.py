"""Drawing data for the partition graph: layout, colours, plotly figures and DOT, no Streamlit.

A model can have thousands of nodes, so the drawing is built for that: a layered layout computed
in linear time (x = depth along the longest path from the inputs, y = position within the layer),
WebGL scatter traces for nodes and one line trace for all edges. Above ``DETAIL_LIMIT`` nodes the
page starts from the *collapsed* view, one marker per segment of the chosen plan sized by its
node count, and zooms into one segment (its nodes plus the neighbours its boundary tensors touch)
on request.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import plotly.graph_objects as go

DETAIL_LIMIT = 1500
CLASS_COLORS = {
    "both": "#2ca02c",      # green: migrates GPU -> HTP
    "gpu_only": "#ff7f0e",  # orange
    "htp_only": "#1f77b4",  # blue
    "neither": "#d62728",   # red: CPU
    "removed": "#b0b0b0",   # grey: runs nowhere
    "context": "#e4e4e4",   # neighbours shown around a zoomed segment
}
BACKEND_COLORS = {"migrating": "#9467bd", "gpu": "#ff7f0e", "htp": "#1f77b4", "cpu": "#d62728"}
BACKEND_LABELS = {"migrating": "migrating GPU→HTP", "gpu": "GPU (stays)", "htp": "HTP only", "cpu": "CPU"}


@dataclass(frozen=True)
class DrawNode:
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def edges_of(nodes: list[DrawNode]) -> list[tuple[str, str]]:
    """Producer -> consumer pairs between the given nodes (one per pair, whatever the tensor)."""
    producer = {t: n.name for n in nodes for t in n.outputs if t}
    seen: set[tuple[str, str]] = set()
    out = []
    for node in nodes:
        for tensor in node.inputs:
            src = producer.get(tensor)
            if src is not None and src != node.name and (src, node.name) not in seen:
                seen.add((src, node.name))
                out.append((src, node.name))
    return out


def layered_layout(names: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Positions: x = longest-path depth (``names`` must be in topological order), y = slot in
    the layer, centred so the drawing stays symmetric."""
    preds: dict[str, list[str]] = defaultdict(list)
    for src, dst in edges:
        preds[dst].append(src)
    depth: dict[str, int] = {}
    for name in names:
        depth[name] = 1 + max((depth[p] for p in preds[name] if p in depth), default=-1)
    layers: dict[int, list[str]] = defaultdict(list)
    for name in names:
        layers[depth[name]].append(name)
    pos = {}
    for x, members in layers.items():
        offset = (len(members) - 1) / 2
        for slot, name in enumerate(members):
            pos[name] = (float(x), offset - slot)
    return pos


def _edge_trace(pos: dict[str, tuple[float, float]], edges: list[tuple[str, str]]) -> go.Scattergl:
    xs: list[float | None] = []
    ys: list[float | None] = []
    for src, dst in edges:
        if src in pos and dst in pos:
            (x0, y0), (x1, y1) = pos[src], pos[dst]
            xs += [x0, x1, None]
            ys += [y0, y1, None]
    return go.Scattergl(x=xs, y=ys, mode="lines", line={"width": 0.6, "color": "#9a9a9a"}, hoverinfo="skip",
                        showlegend=False)


def graph_figure(nodes: list[DrawNode], color_key: dict[str, str], colors: dict[str, str],
                 labels: dict[str, str], hover: dict[str, str], selected: str | None = None,
                 height: int = 560) -> go.Figure:
    """The node graph: one WebGL trace per colour key (so the legend reads as the classes or plan
    backends), node names in ``customdata`` for click selection, the selected node ringed."""
    names = [n.name for n in nodes]
    edges = edges_of(nodes)
    pos = layered_layout(names, edges)
    fig = go.Figure()
    fig.add_trace(_edge_trace(pos, edges))
    size = 11 if len(nodes) <= 200 else 7 if len(nodes) <= DETAIL_LIMIT else 4
    by_key: dict[str, list[DrawNode]] = defaultdict(list)
    for node in nodes:
        by_key[color_key.get(node.name, "context")].append(node)
    for key in [k for k in colors if k in by_key]:
        members = by_key[key]
        fig.add_trace(go.Scattergl(
            x=[pos[n.name][0] for n in members], y=[pos[n.name][1] for n in members], mode="markers",
            name=f"{labels.get(key, key)} ({len(members)})",
            marker={"size": size, "color": colors[key], "line": {"width": 0.5, "color": "#333"}},
            customdata=[n.name for n in members], hovertext=[hover.get(n.name, n.name) for n in members],
            hoverinfo="text"))
    if selected in pos:
        x, y = pos[selected]
        fig.add_trace(go.Scattergl(x=[x], y=[y], mode="markers", name="selected", hoverinfo="skip",
                                   marker={"size": size + 10, "color": "rgba(0,0,0,0)",
                                           "line": {"width": 3, "color": "#000"}}))
    _style(fig, height)
    return fig


def segment_figure(plan: dict, height: int = 420) -> go.Figure:
    """The collapsed graph of a plan: one marker per segment (area ~ node count), edges where
    tensors cross between segments, laid out in order."""
    segments = plan.segments
    edges = sorted({(int(peer), seg.index) for seg in segments for ref in seg.inputs
                    for peer in ref.peer if peer.isdigit()})
    names = [str(s.index) for s in segments]
    pos = layered_layout(names, [(str(a), str(b)) for a, b in edges])
    fig = go.Figure()
    fig.add_trace(_edge_trace(pos, [(str(a), str(b)) for a, b in edges]))
    for backend, color in BACKEND_COLORS.items():
        members = [s for s in segments if s.backend == backend]
        if not members:
            continue
        fig.add_trace(go.Scattergl(
            x=[pos[str(s.index)][0] for s in members], y=[pos[str(s.index)][1] for s in members],
            mode="markers", name=f"{BACKEND_LABELS[backend]} ({len(members)})",
            marker={"size": [8 + 3 * math.sqrt(len(s.nodes)) for s in members], "color": color,
                    "line": {"width": 0.5, "color": "#333"}},
            customdata=[f"segment:{s.index}" for s in members],
            hovertext=[f"segment {s.index} · {BACKEND_LABELS[backend]} · {len(s.nodes)} nodes · "
                       f"boundary {s.boundary_bytes:,} B" for s in members],
            hoverinfo="text"))
    _style(fig, height)
    return fig


def strip_figure(plan: dict, height: int = 120) -> go.Figure:
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


def zoom_nodes(all_nodes: list[DrawNode], members: set[str]) -> tuple[list[DrawNode], set[str]]:
    """A segment's nodes plus their direct producers and consumers (the context around it)."""
    producer = {t: n.name for n in all_nodes for t in n.outputs if t}
    member_outputs = {t for n in all_nodes if n.name in members for t in n.outputs}
    context = set()
    for node in all_nodes:
        if node.name in members:
            context.update(producer[t] for t in node.inputs if t in producer)
        elif any(t in member_outputs for t in node.inputs):
            context.add(node.name)
    context -= members
    keep = members | context
    return [n for n in all_nodes if n.name in keep], context


def to_dot(nodes: list[DrawNode], color_key: dict[str, str], colors: dict[str, str]) -> str:
    """Graphviz DOT of the coloured graph (for a download; nothing here needs Graphviz)."""
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph partitions {", "  rankdir=LR; node [shape=box, style=filled, fontsize=10];"]
    for node in nodes:
        color = colors.get(color_key.get(node.name, "context"), "#ffffff")
        lines.append(f"  {quote(node.name)} [label={quote(node.op_type)}, tooltip={quote(node.name)}, "
                     f"fillcolor={quote(color)}];")
    for src, dst in edges_of(nodes):
        lines.append(f"  {quote(src)} -> {quote(dst)};")
    lines.append("}")
    return "\n".join(lines)


def _style(fig: go.Figure, height: int) -> None:
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 10, "b": 10}, hovermode="closest",
                      plot_bgcolor="white", legend={"orientation": "h", "y": -0.08},
                      xaxis={"visible": False}, yaxis={"visible": False}, dragmode="pan",
                      clickmode="event+select")

