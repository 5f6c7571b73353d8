"""Plotly figures of accuracy reports (no Streamlit): what the Quantize & accuracy page, the notebook
and the report draw from a ``accuracy.model.AccuracyReport``.

Every figure says what it was measured on (the comparison's ``hardware``: "HTP simulator (x86_64)"
on this host, never the NPU) and on what data (``DataInfo.label``: "random inputs" when no data was
given), in its title, so a chart copied out of the page still carries both.

- ``layer_chart``: every probed tensor's SQNR against float in graph order, the cumulative error
  (the whole model ran: errors add up) as a line and the layerwise error (each node fed the float
  reference's inputs: its own error) as bars, the same QDQ model on the CPU EP as a dotted line
  when measured, and the first layer where the error jumps marked;
- ``output_chart``: each output's SQNR per comparison (HTP fp16 vs CPU fp32, QDQ on the HTP / on
  the CPU EP vs float).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:
    from dashboard.accuracy.model import AccuracyReport

CUMULATIVE_COLOR = "#d62728"
LAYERWISE_COLOR = "#1f77b4"
CPU_COLOR = "#6b7a8f"
JUMP_COLOR = "#ff7f0e"
COMPARISON_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b")
SQNR_AXIS = "SQNR against float (dB, higher is better)"
_NAME = 40


def _cut(text: str, limit: int = _NAME) -> str:
    text = str(text)
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def layer_hardware(report: "AccuracyReport") -> str:
    """What the layers were measured on, from the comparison of the model the layers ran (its HTP's
    ``hardware``), else from the layers' own target words."""
    layers = report.layers
    target = layers.target if layers is not None else ""
    for c in report.comparisons:
        if c.ok and c.hardware and c.hardware != "CPU EP" and c.hardware in target:
            return c.hardware
    for c in report.comparisons:
        if c.ok and c.hardware and c.hardware != "CPU EP":
            return c.hardware
    return "unknown hardware"


def layer_chart(report: "AccuracyReport") -> go.Figure:
    """Per-layer SQNR in graph order: cumulative (line), layerwise (bars), the CPU EP's cumulative on
    the same QDQ model (dotted, when measured); the first jump marked with a line and its name."""
    fig = go.Figure()
    layers = report.layers
    label = report.data.label
    if layers is None or not layers.ok or not layers.rows:
        why = "not measured" if layers is None else (layers.reason or "no probed tensor")
        fig.update_layout(title=f"{report.model}: no layer errors ({why}) · {label}", template="plotly_white")
        return fig
    rows = sorted(layers.rows, key=lambda r: r.order)
    x = [f"{r.order}. {_cut(r.node)}" for r in rows]
    custom = [[r.node, r.op_type, r.tensor, r.why or ""] for r in rows]
    hover = ("%{customdata[0]} [%{customdata[1]}]<br>tensor %{customdata[2]}<br>%{fullData.name}: "
             "%{y:.1f} dB<br>%{customdata[3]}<extra></extra>")
    if any(r.layerwise is not None for r in rows):
        fig.add_bar(x=x, y=[r.layerwise for r in rows], name="layerwise (the layer's own error)",
                    marker_color=LAYERWISE_COLOR, opacity=0.75, customdata=custom, hovertemplate=hover)
    if any(r.cumulative is not None for r in rows):
        fig.add_scatter(x=x, y=[r.cumulative for r in rows], name="cumulative (errors add up)", mode="lines+markers",
                        line={"color": CUMULATIVE_COLOR, "width": 2}, customdata=custom, hovertemplate=hover)
    if any(r.cpu_cumulative is not None for r in rows):
        fig.add_scatter(x=x, y=[r.cpu_cumulative for r in rows], name="cumulative, same QDQ model on the CPU EP",
                        mode="lines", line={"color": CPU_COLOR, "dash": "dot"}, customdata=custom, hovertemplate=hover)
    jump = next((i for i, r in enumerate(rows) if r.tensor == layers.first_jump), None)
    if jump is not None:
        row = rows[jump]
        fig.add_vline(x=jump, line_color=JUMP_COLOR, line_dash="dash", line_width=2)
        fig.add_annotation(x=x[jump], yref="paper", y=1.0, yanchor="bottom", showarrow=False,
                           text=f"first jump: {_cut(row.node, 30)} [{row.op_type}]", font={"color": JUMP_COLOR})
    hardware = layer_hardware(report)
    where = layers.target if hardware in layers.target else f"{layers.target} · {hardware}"
    fig.update_layout(
        title=f"{report.model}: per-layer SQNR against float in graph order · {where} · {label}",
        xaxis_title="probed tensor (graph order: node that writes it)", yaxis_title=SQNR_AXIS, template="plotly_white",
        barmode="overlay", height=460, legend={"orientation": "h", "y": -0.35},
        margin={"l": 10, "r": 10, "t": 70, "b": 40})
    fig.update_xaxes(automargin=True, tickangle=-45, type="category")
    fig.update_yaxes(automargin=True)
    return fig


def output_chart(report: "AccuracyReport") -> go.Figure:
    """Each output's overall SQNR, one bar group per comparison that ran (the hardware in its name)."""
    fig = go.Figure()
    label = report.data.label
    ran = [c for c in report.comparisons if c.ok and c.outputs]
    for i, c in enumerate(ran):
        fig.add_bar(x=[_cut(o.name) for o in c.outputs], y=[o.overall.sqnr_db for o in c.outputs],
                    name=f"{c.target} vs {c.reference} ({c.hardware})",
                    marker_color=COMPARISON_COLORS[i % len(COMPARISON_COLORS)],
                    customdata=[[o.name, o.overall.cosine, o.overall.max_abs] for o in c.outputs],
                    hovertemplate="%{customdata[0]}<br>SQNR %{y:.1f} dB<br>cosine %{customdata[1]:.6f}<br>"
                                  "max |diff| %{customdata[2]:.4g}<extra>%{fullData.name}</extra>")
    hardware = sorted({c.hardware for c in ran if c.hardware != "CPU EP"}) or ["CPU EP"]
    title = (f"{report.model}: SQNR per output · {', '.join(hardware)} · {label}" if ran
             else f"{report.model}: no comparison ran · {label}")
    fig.update_layout(title=title, xaxis_title="model output", yaxis_title=SQNR_AXIS, template="plotly_white",
                      barmode="group", height=380, legend={"orientation": "h", "y": -0.3},
                      margin={"l": 10, "r": 10, "t": 60, "b": 40})
    fig.update_xaxes(automargin=True, type="category")
    return fig
