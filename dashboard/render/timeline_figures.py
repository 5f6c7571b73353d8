"""Plotly figures of timeline runs (no Streamlit): the sessions' Gantt, per-request latency with
the swap marked, and the strategy comparison. The same functions draw the live chart while a
run streams in (pass ``end`` = now) and the finished run.
"""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.timeline.model import STRATEGY_TITLES, StrategyRun, TimelineRun, phases, strategy_table

PHASE_COLORS = {"create": "#9ecae1", "finalize": "#3182bd", "warm-up": "#fdae6b", "serve": "#31a354",
                "drain": "#e6550d"}
BACKEND_COLORS = {"cpu": "#6b7a8f", "gpu": "#2ca02c", "htp": "#d62728"}
FAILURE_KINDS = ("migration_failed", "session_failed", "migration_skipped")


def backend_labels(fast: dict, target: dict) -> dict[str, str]:
    """Display names: the fast backend as the run labelled it (e.g. "CPU EP (no QNN GPU on this
    host)"), the target as "QNN HTP". ``fast``/``target`` are ``{"backend", "label"}``."""
    labels = {"cpu": "CPU EP", "gpu": "QNN GPU", "htp": "QNN HTP"}
    for role in (fast, target):
        if role.get("backend"):
            labels[role["backend"]] = role.get("label", labels.get(role["backend"], role["backend"]))
    return labels


def run_labels(run: TimelineRun) -> dict[str, str]:
    """``backend_labels`` of a finished run; the HTP's says when its figures come from the x86_64
    simulator (``runtime.hardware``), so no chart presents simulator latency as the NPU's."""
    labels = backend_labels(run.fast, run.target)
    if run.runtime.get("hardware") == "simulator":
        labels["htp"] = f"{labels.get('htp', 'QNN HTP')} (simulator)"
    return labels


def _swap(strategy: StrategyRun):
    return next((e for e in sorted(strategy.events, key=lambda e: e.t) if e.kind == "swap"), None)


def _mark_swap(fig: go.Figure, strategy: StrategyRun) -> None:
    swap = _swap(strategy)
    if swap is not None:
        fig.add_vline(x=swap.t, line_dash="dash", line_color="#444",
                      annotation_text=f"swap {swap.t:.3f} s", annotation_position="top")


def gantt(strategy: StrategyRun, labels: dict[str, str], end: float | None = None) -> go.Figure:
    """Sessions and their phases per backend (create, finalize, warm-up, serve, drain), with
    failures as markers carrying the runtime's reason."""
    fig = go.Figure()
    bars = phases(strategy.events, end_of_run=end)
    for phase, color in PHASE_COLORS.items():
        chosen = [p for p in bars if p.phase == phase]
        if not chosen:
            continue
        fig.add_trace(go.Bar(
            name=phase, orientation="h", marker_color=color,
            y=[labels.get(p.backend, p.backend) for p in chosen], base=[p.start for p in chosen],
            x=[max(p.end - p.start, 1e-4) for p in chosen],
            customdata=[[p.start, p.end, p.end - p.start] for p in chosen],
            hovertemplate=f"{phase}<br>%{{customdata[0]:.3f}} → %{{customdata[1]:.3f}} s"
                          "<br>%{customdata[2]:.3f} s<extra>%{y}</extra>"))
    failures = [e for e in strategy.events if e.kind in FAILURE_KINDS]
    if failures:
        fig.add_trace(go.Scatter(
            name="failure / skipped", mode="markers", marker=dict(symbol="x", size=12, color="black"),
            x=[e.t for e in failures], y=[labels.get(e.backend, e.backend) for e in failures],
            text=[f"{e.kind}: {e.detail}" for e in failures], hovertemplate="%{text}<extra></extra>"))
    _mark_swap(fig, strategy)
    fig.update_layout(barmode="overlay", height=140 + 60 * len({p.backend for p in bars}),
                      xaxis_title="seconds from start", margin=dict(l=10, r=10, t=30, b=40),
                      legend=dict(orientation="h", y=-0.35))
    return fig


def latency_scatter(strategy: StrategyRun, labels: dict[str, str], end: float | None = None) -> go.Figure:
    """Each answered request at its completion time, service latency in ms, coloured by the
    backend that served it; failed requests as crosses at their arrival; the swap marked."""
    fig = go.Figure()
    answered = [r for r in strategy.requests if r.ok and r.end is not None]
    for backend in sorted({r.backend for r in answered}):
        mine = sorted((r for r in answered if r.backend == backend), key=lambda r: r.end)
        fig.add_trace(go.Scatter(  # SVG: every WebGL chart holds one of the browser's few contexts
            name=labels.get(backend, backend), mode="markers",
            marker=dict(color=BACKEND_COLORS.get(backend), size=6),
            x=[r.end for r in mine], y=[r.latency * 1000 for r in mine],
            customdata=[[r.id, r.response * 1000, r.arrival] for r in mine],
            hovertemplate="request %{customdata[0]}<br>latency %{y:.2f} ms<br>"
                          "arrival→answer %{customdata[1]:.2f} ms<extra>%{fullData.name}</extra>"))
    failed = [r for r in strategy.requests if not r.ok]
    if failed:
        fig.add_trace(go.Scatter(
            name="failed", mode="markers", marker=dict(symbol="x", color="black", size=9),
            x=[r.arrival for r in failed], y=[0.0] * len(failed), text=[r.error or "" for r in failed],
            hovertemplate="request failed: %{text}<extra></extra>"))
    _mark_swap(fig, strategy)
    fig.update_layout(height=340, xaxis_title="seconds from start (answer time)", yaxis_title="latency (ms)",
                      margin=dict(l=10, r=10, t=30, b=40), legend=dict(orientation="h", y=-0.25))
    if end is not None:
        fig.update_xaxes(range=[0, max(end, 0.1)])
    return fig


COMPARED = (("first_response_s", "time to first response"), ("p50_before_s", "p50 before swap / overall"),
            ("p50_after_s", "p50 after swap"), ("p99_s", "p99"))


def strategy_bars(runs: list[tuple[str, TimelineRun]]) -> go.Figure:
    """Grouped bars (ms, log scale: CPU EP and HTP simulator differ by orders of magnitude) of the
    comparison metrics per strategy; several runs side by side when comparing runs."""
    fig = go.Figure()
    for run_label, run in runs:
        rows = strategy_table(run)
        for key, title in COMPARED:
            values = [row[key] for row in rows]
            if all(v is None for v in values):
                continue
            name = f"{title}" if len(runs) == 1 else f"{run_label}: {title}"
            fig.add_trace(go.Bar(
                name=name, x=[STRATEGY_TITLES.get(row["strategy"], row["strategy"]) for row in rows],
                y=[None if v is None else v * 1000 for v in values],
                hovertemplate="%{x}<br>%{y:.2f} ms<extra>" + name + "</extra>"))
    fig.update_layout(barmode="group", height=380, yaxis=dict(type="log", dtick=1, title="ms (log scale)"),
                      margin=dict(l=10, r=10, t=30, b=40), legend=dict(orientation="h", y=-0.3))
    return fig
