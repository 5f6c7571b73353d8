"""Plotly figure of classifications (no Streamlit): each classifier's fired signals as a tug of war,
GenAI evidence to the right and NonGenAI evidence to the left, so where two classifiers disagree
the signals that pull them apart are side by side. Evidence (model-derived) is HTML-escaped.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from dashboard.classify.verdicts import Classification

SIDE_COLORS = {"genai": "#d62728", "non_genai": "#1f77b4"}
SIDE_TITLES = {"genai": "GenAI → GPU", "non_genai": "NonGenAI → HTP"}


def signal_scores(results: dict[str, Classification]) -> go.Figure:
    """Horizontal bars of every scoring signal per classifier (``results``: title -> result):
    GenAI scores positive, NonGenAI negative; the hover names the evidence."""
    fig = go.Figure()
    for side, color in SIDE_COLORS.items():
        rows = [(title, s) for title, result in results.items() for s in result.signals if s.side == side and s.score]
        if not rows:
            continue
        sign = 1 if side == "genai" else -1
        fig.add_trace(go.Bar(
            name=SIDE_TITLES[side], orientation="h", marker_color=color,
            x=[sign * s.score for _, s in rows], y=[[title for title, _ in rows], [s.name for _, s in rows]],
            customdata=[html.escape("; ".join(s.evidence[:3])) or "-" for _, s in rows],
            hovertemplate="%{y}<br>score %{x}<br>%{customdata}<extra></extra>"))
    verdicts = ", ".join(f"{html.escape(title)}: {r.verdict} → {r.backend}" for title, r in results.items())
    fig.update_layout(barmode="relative", title=verdicts, xaxis_title="score (GenAI +, NonGenAI −)",
                      height=160 + 26 * sum(1 for r in results.values() for s in r.signals if s.score),
                      margin=dict(l=10, r=10, t=50, b=40), legend=dict(orientation="h", y=-0.2))
    return fig
