"""The Profile page's figures and tables, from the profile record (plotly, no Streamlit).

Every axis names the kind of number it shows (``Profile.label``: "simulated HTP cycles" on this
host, "µs on the CPU EP", "µs measured on <device> by AI Hub"); one figure never mixes backends,
since their units differ and HTP cycles are never turned into time. The CPU fallback's table puts
each CPU node's µs next to the copies it causes: the tensors it exchanges with nodes another
backend runs, which cross between the HTP's memory and the host's on every inference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import html

import plotly.graph_objects as go

from dashboard.render.model_explorer import COST_GRADIENTS

if TYPE_CHECKING:
    from dashboard.intake.graph import ModelGraph
    from dashboard.intake.shapes import TensorShape
    from dashboard.profile.model import NodeCost, Profile

INSERTED_COLOR = "#9467bd"
BAR_HEIGHT = 26
SIDE_COLORS = ("#1f77b4", "#ff7f0e")


def _color(backend: str) -> str:
    return COST_GRADIENTS.get(backend, COST_GRADIENTS["htp"])[1]


def _bar_name(row: "NodeCost", limit: int = 48) -> str:
    name = row.name if len(row.name) <= limit else "…" + row.name[-(limit - 1):]
    if row.inserted:
        return f"{name} (inserted)"
    if row.carrier:
        return f"{name} (+{len(row.members) - 1} fused)"
    return name


def _bars(labels: list[str], values: list[float], colors: list[str] | str, title: str, axis: str,
          hover: list[str]) -> go.Figure:
    """Horizontal bars, the largest on top, sized to their count. Plotly reads tags in its texts
    (``<a href>``, ``<b>``), and node names and device names come from files: every text is escaped
    (a hover's line breaks are added after)."""
    fig = go.Figure(go.Bar(x=values[::-1], y=[html.escape(t) for t in labels[::-1]], orientation="h",
                           marker_color=colors[::-1] if isinstance(colors, list) else colors,
                           hovertext=["<br>".join(html.escape(part) for part in h.split("\n")) for h in hover[::-1]],
                           hoverinfo="text"))
    fig.update_layout(title=html.escape(title), template="plotly_white",
                      height=120 + BAR_HEIGHT * max(len(labels), 1), margin={"l": 10, "r": 10, "t": 50, "b": 40},
                      xaxis_title=html.escape(axis))
    fig.update_yaxes(automargin=True)
    return fig


def top_nodes(profile: "Profile", backend: str | None = None, n: int = 15) -> go.Figure:
    """The ``n`` costliest rows of ``backend`` (default: the first that ran): model nodes, fused
    groups (their carrier, with how many nodes it holds) and the rows the EP inserted (in their own
    colour, with the node served). The one top-nodes chart: the page, the report and the notebook
    draw this one, so their labels agree."""
    backend = backend or next((k for k, b in profile.backends.items() if b.ok), None)
    if backend is None:
        return _bars([], [], [], f"{profile.model}: no backend ran", "", [])
    rows = [r for r in profile.top(n, backend) if r.median > 0]
    label = profile.label(backend)
    hover = [f"{r.name}\n{r.op_type} · {r.median:,.0f} {label} · {r.share:.1%} of {backend.upper()}"
             + (f"\ninserted by the EP for {r.serves}" if r.inserted and r.serves else "") for r in rows]
    return _bars([_bar_name(r) for r in rows], [r.median for r in rows],
                 [INSERTED_COLOR if r.inserted else _color(backend) for r in rows],
                 f"Top nodes · {label}", label, hover)


def _summed(profile: "Profile", backend: str, key, limit: int) -> list[tuple[str, int, float, float]]:
    from dashboard.profile.model import summed

    sums = summed(profile.nodes, key, backend)
    rows = [(k, count, median, share) for (_, _, k), (count, median, share) in sums.items()]
    return sorted(rows, key=lambda r: (-r[2], r[0]))[:limit]


def op_types(profile: "Profile", backend: str, limit: int = 20) -> go.Figure:
    """Cost summed per op type on ``backend`` (inserted rows count under their own op type)."""
    rows = _summed(profile, backend, lambda r: r.op_type, limit)
    label = profile.label(backend)
    return _bars([r[0] for r in rows], [r[2] for r in rows], _color(backend), f"Op types · {label}", label,
                 [f"{r[0]}: {r[1]} row(s) · {r[2]:,.0f} {label} · {r[3]:.1%}" for r in rows])


def blocks(profile: "Profile", backend: str, depth: int = 1, limit: int = 20) -> go.Figure:
    """Cost summed per name-scope block cut at ``depth`` levels (``/encoder/layer.0``)."""
    from dashboard.profile.model import cut_scope

    rows = _summed(profile, backend, lambda r: cut_scope(r.scope, depth) or "(no scope)", limit)
    label = profile.label(backend)
    return _bars([r[0] for r in rows], [r[2] for r in rows], _color(backend), f"Blocks · {label}", label,
                 [f"{r[0]}: {r[1]} row(s) · {r[2]:,.0f} {label} · {r[3]:.1%}" for r in rows])


def share_changes(frame, key: str, what: str, backend: str, limit: int = 15) -> go.Figure:
    """A and B's share of ``backend``'s total per ``what`` (a ``profile.model.compare`` frame), the
    largest changes first: shares compare across units and hardware, figures do not."""
    rows = frame.head(limit)
    names = [html.escape(str(k) if len(str(k)) <= 48 else "…" + str(k)[-47:]) for k in rows[key]][::-1]
    fig = go.Figure([go.Bar(name="A", y=names, x=list(rows["a_share"])[::-1], orientation="h",
                            marker_color=SIDE_COLORS[0]),
                     go.Bar(name="B", y=names, x=list(rows["b_share"])[::-1], orientation="h",
                            marker_color=SIDE_COLORS[1])])
    fig.update_layout(barmode="group", template="plotly_white", legend={"orientation": "h"},
                      title=f"Share of the {backend.upper()} total per {what}, A and B (largest changes)",
                      xaxis={"title": f"share of the {backend.upper()} total", "tickformat": ".0%"},
                      height=140 + 2 * BAR_HEIGHT * max(len(rows), 1), margin={"l": 10, "r": 10, "t": 50, "b": 40})
    fig.update_yaxes(automargin=True)
    return fig


# -- the CPU fallback and the copies it causes -------------------------------------------------------
@dataclass
class Crossing:
    """One tensor between a CPU-fallback node and a node another backend runs."""

    tensor: str
    direction: str  # "in" (to the CPU node) or "out" (from it)
    peer: str  # the other node
    peer_backend: str
    bytes: int | None  # None: its size is not known (no shape for it)


@dataclass
class Fallback:
    """A node the CPU EP ran: its µs and the copies it causes per inference."""

    node: "NodeCost"
    crossings: list[Crossing] = field(default_factory=list)

    @property
    def copy_bytes(self) -> int:
        return sum(c.bytes or 0 for c in self.crossings)

    @property
    def unknown(self) -> int:
        return sum(c.bytes is None for c in self.crossings)


def fallbacks(profile: "Profile", graph: "ModelGraph", shapes: "dict[str, TensorShape] | None" = None) -> list[Fallback]:
    """Each CPU-fallback node of ``profile`` with the tensors it exchanges with nodes that run on
    another backend, costliest first. Sizes come from ``shapes`` (a partition report's, which
    knows the fixed dimensions), else from the file's declared shapes; graph inputs and outputs
    cross to the application whatever runs them, so they are not counted."""
    backend_of = {r.name: r.backend for r in profile.nodes if not r.inserted}
    nodes = {n.name: n for n in graph.nodes}
    producer = {t: n.name for n in graph.nodes for t in n.outputs if t}
    consumers: dict[str, list[str]] = {}
    for n in graph.nodes:
        for t in n.inputs:
            if t:
                consumers.setdefault(t, []).append(n.name)
    sizes = _sizes(graph, shapes or {})
    out = []
    for row in profile.nodes:
        if row.backend != "cpu" or row.inserted or row.name not in nodes:
            continue
        node, crossings = nodes[row.name], []
        for t in node.inputs:
            peer = producer.get(t)
            if peer and backend_of.get(peer, "cpu") != "cpu":
                crossings.append(Crossing(t, "in", peer, backend_of[peer], sizes.get(t)))
        for t in node.outputs:
            for peer in consumers.get(t, []):
                if backend_of.get(peer, "cpu") != "cpu":
                    crossings.append(Crossing(t, "out", peer, backend_of[peer], sizes.get(t)))
        out.append(Fallback(row, crossings))
    return sorted(out, key=lambda f: (-f.node.median, f.node.name))


def _sizes(graph: "ModelGraph", shapes: "dict[str, TensorShape]") -> dict[str, int]:
    """Tensor -> bytes: the given shapes', else the file's declared static ones."""
    from dashboard.intake.graph import dtype_bits

    sizes = {name: shape.nbytes for name, shape in shapes.items() if shape.nbytes is not None}
    for spec in (*graph.listed_inputs, *graph.outputs, *graph.value_info.values()):
        if spec.name in sizes or spec.shape is None or not all(isinstance(d, int) for d in spec.shape):
            continue
        bits = dtype_bits(spec.elem_type)
        if bits:
            count = 1
            for d in spec.shape:
                count *= d
            sizes[spec.name] = count * bits // 8
    return sizes
