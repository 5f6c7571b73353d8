"""Plotly figures for the pages (no Streamlit: a figure is data the page hands to st.plotly_chart).

Plotly renders a subset of HTML inside text and axis labels (``<b>``, ``<a href>``, ``<br>``), so
every model-derived string is HTML-escaped here; the caller passes labels already shortened for
display.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

DOMAIN_COLORS = {"ai.onnx": "#4C78A8", "com.microsoft": "#F58518", "other": "#9D9D9D"}
CUSTOM_DOMAIN_COLOR = "#54A24B"
BAR_HEIGHT = 22


def op_histogram_figure(frame: pd.DataFrame) -> go.Figure:
    """Horizontal bars of node count per op type, largest on top, coloured by op domain; the part
    inside control-flow bodies (``in_bodies``) is stacked after the top-level part, hatched.

    ``frame`` has the columns of ``overview_data.op_histogram`` plus ``label`` (the display text
    of each op). Rows are placed by position, so two labels that shorten to the same text stay
    two bars.
    """
    rows = frame.reset_index(drop=True)
    positions = list(range(len(rows)))
    bodies = bool(rows["in_bodies"].sum())
    fig = go.Figure()
    for domain, group in rows.groupby("domain", sort=False):
        color = DOMAIN_COLORS.get(str(domain), CUSTOM_DOMAIN_COLOR)
        customdata = list(zip(group["label"].map(html.escape), group["share"]))
        parts = [("top_level", html.escape(str(domain)), "", "at the top level")]
        if bodies:
            parts.append(("in_bodies", f"{html.escape(str(domain))} · inside bodies", "/", "inside control-flow bodies"))
        for index, (column, name, pattern, where) in enumerate(parts):
            last = index == len(parts) - 1
            fig.add_bar(
                x=group[column] if bodies else group["count"],
                y=group.index,
                orientation="h",
                name=name,
                marker={"color": color, "pattern": {"shape": pattern}},
                customdata=customdata,
                hovertemplate="%{customdata[0]}<br>%{x} nodes" + (f" {where}; all levels:" if bodies else "")
                              + " (%{customdata[1]:.1%})<extra></extra>",
                text=group["count"] if last else None,
                textposition="outside",
                cliponaxis=False,
            )
    fig.update_layout(
        height=max(220, 60 + BAR_HEIGHT * len(rows)),
        margin={"l": 10, "r": 40, "t": 10, "b": 30},
        barmode="stack",
        bargap=0.25,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "title": None},
        xaxis={"title": "nodes", "rangemode": "tozero"},
        yaxis={"tickvals": positions, "ticktext": [html.escape(str(v)) for v in rows["label"]],
               "autorange": "reversed", "automargin": True},
    )
    return fig
