"""Plotly figures of cost profiles (no Streamlit): what the notebook, the report and the pages draw
from a ``profile.model.Profile``. Every axis is in its backend's own unit and says which kind of
figure it is (``Profile.label``: ``simulated HTP cycles`` on this host): a chart never puts cycles and
µs on one axis, and never shows simulated cycles as time.
"""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.profile.model import BACKEND_TITLES, IMPORTED_TITLES, Profile

BACKEND_COLORS = {"cpu": "#6b7a8f", "gpu": "#2ca02c", "htp": "#d62728"}
INSERTED_COLOR = "#fdae6b"


def _role(row) -> str:
    if row.inserted:
        return "inserted by the runtime" + (f" for {row.serves}" if row.serves else "")
    return f"fused group of {len(row.members)}" if row.carrier else ""


def top_nodes(profile: Profile, backend: str | None = None, n: int = 15) -> go.Figure:
    """The ``n`` costliest rows of ``backend`` (default: the first that ran) as horizontal bars, in
    its unit, the inserted rows told apart by colour and every bar's share in its hover."""
    backend = backend or next((k for k, b in profile.backends.items() if b.ok), None)
    fig = go.Figure()
    if backend is None:
        fig.update_layout(title=f"{profile.model}: no backend ran", template="plotly_white")
        return fig
    rows = list(reversed(profile.top(n, backend)))
    unit = profile.backends[backend].unit
    fig.add_bar(x=[r.median for r in rows], y=[r.name for r in rows], orientation="h",
                marker_color=[INSERTED_COLOR if r.inserted else BACKEND_COLORS.get(backend, "#444") for r in rows],
                customdata=[[r.op_type, f"{r.share:.1%}", _role(r)] for r in rows],
                hovertemplate="%{y} [%{customdata[0]}]<br>%{x:,.0f} " + ("cycles" if unit == "cycles" else "µs")
                              + " (%{customdata[1]} of the backend)<br>%{customdata[2]}<extra></extra>")
    titles = IMPORTED_TITLES if profile.source == "imported" else BACKEND_TITLES  # a phone's CPU is no CPU EP
    fig.update_layout(
        title=f"{profile.model}: top nodes on the {titles.get(backend, backend)}, {profile.label(backend)} "
              f"(median of {profile.backends[backend].runs} run(s))",
        xaxis_title=profile.label(backend), template="plotly_white", height=max(300, 26 * len(rows) + 120),
        margin={"l": 10, "r": 10, "t": 60, "b": 40})
    fig.update_yaxes(automargin=True)
    fig.update_xaxes(automargin=True)
    return fig
