"""Classifier page: the EP's ``backend_type=auto`` rules and the refined classifier side by side,
every signal with its measurement and evidence, and where the two disagree."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from dashboard.classify.refined import CONFIDENT_MARGIN
from dashboard.classify.verdicts import GENAI, NON_GENAI, UNKNOWN, Classification, Signal, explain_disagreement
from dashboard.cli.classify import report as classify_report
from dashboard.errors import UserError
from dashboard.views import state
from dashboard.views.safe import download_name, md, plain, short

CLASSIFIERS = (
    ("EP rules", "The classifier proposed for the QNN EP (`backend_type=auto`, qnn_model_classifier.cc), "
                 "re-implemented exactly: same op tables, name hints, weights, thresholds and early exits."),
    ("Refined", "This project's classifier: structural evidence for autoregressive decoders (KV caches, causal "
                "masks, step states, greedy loops, target tokens) versus encoders, vision, audio and tabular "
                "models; agrees with the EP rules where they are right."),
)
VERDICT_STYLE = {GENAI: ("violet", "auto_awesome"), NON_GENAI: ("blue", "image"), UNKNOWN: ("gray", "help")}
BACKEND_STYLE = {"gpu": ("orange", "GPU"), "htp": ("green", "HTP (NPU)")}
SIDE_LABEL = {"genai": "GenAI", "non_genai": "NonGenAI", "neutral": "—"}
STATUS = {"fired": "✓ fired", "quiet": "– not fired", "unreached": "↷ not reached"}
ROW_STYLE = {"fired": "background-color: rgba(33, 195, 84, 0.12)", "quiet": "",
             "unreached": "color: rgba(128, 128, 128, 0.9); font-style: italic"}
WORDS = {"kv": "KV", "layernorm": "LayerNorm", "batchnorm": "BatchNorm", "matmul": "MatMul", "nbits": "NBits",
         "4d": "4-D", "genai": "GenAI", "int4": "int4", "id": "ID", "ids": "IDs", "qdq": "QDQ", "ml": "ML", "cnn": "CNN",
         "rnn": "RNN", "mlp": "MLP"}
EVIDENCE_IN_TABLE = 3


def render() -> None:
    selected = state.require_model()
    ep, refined = state.classifications()
    st.title("Backend classifier", anchor=False)
    st.caption(f"{md(selected.name, 120)} · `backend_type=auto` loads the **GPU** backend for GenAI and "
               "the **HTP** (NPU) backend for everything else.")
    _agreement_banner(ep, refined)
    for column, (title, blurb), result in zip(st.columns(2, gap="large"), CLASSIFIERS, (ep, refined)):
        with column:
            _verdict_card(title, blurb, result)
    _disagreement(ep, refined)
    for (title, _), result in zip(CLASSIFIERS, (ep, refined)):
        st.header(f"{title}: signals", anchor=False)
        _signal_table(result)
        _evidence(title, result)
    _optimized_view(selected, ep)
    st.download_button("Download both classifications (JSON)",
                       lambda: json.dumps(classify_report(selected.path), indent=1),
                       file_name=download_name(selected.path, "classification", "json"), mime="application/json",
                       icon=":material/download:", key="classifier_json", on_click="ignore",
                       help="Both classifiers' verdicts, scores and signals: the same object the classify "
                            "command prints as JSON.")


@st.cache_data(show_spinner=False, max_entries=64)
def _classify_optimized(path: str, digest: str) -> tuple[Classification, int]:
    """Cached per model digest: the worker run costs a session creation."""
    from dashboard.classify.optimized import classify_after_ort_optimizations
    from dashboard.runtime.client import optimized_copy

    return classify_after_ort_optimizations(path, optimized_copy)


def _optimized_view(selected, ep: Classification) -> None:
    """The EP rules on the graph ONNX Runtime really hands the EP: its level-1 optimizations
    (BatchNorm folded into Conv, constants folded ...) run before partitioning and can change the
    densities the rules measure."""
    st.header("EP rules on ONNX Runtime's optimized graph", anchor=False)
    st.caption("With default session options ONNX Runtime folds and fuses nodes *before* the EP classifies the "
               "graph. This runs the EP rules on that graph (created by ONNX Runtime in a worker process).")
    if not st.toggle("Classify the optimized graph", key="classify_optimized"):
        return
    try:
        with st.spinner("ONNX Runtime is optimizing the graph in a worker…"):
            optimized, nodes = _classify_optimized(selected.path, selected.digest)
    except UserError as exc:
        st.error(plain(str(exc)))
        return
    change = "same verdict" if optimized.verdict == ep.verdict else f"verdict changes from {ep.verdict}"
    st.metric("EP rules on the optimized graph", optimized.verdict,
              f"{nodes} nodes (file: {len(state.loaded_graph().nodes)}) · {change}", delta_color="off")
    _signal_table(optimized)


def signal_label(name: str) -> str:
    """``layernorm_density`` -> ``LayerNorm density`` (signal names are code-defined, not model text)."""
    words = [WORDS.get(w, w) for w in name.split("_")]
    first = words[0] if words[0] != words[0].lower() else words[0].capitalize()
    return " ".join([first, *words[1:]])


def measured(signal: Signal) -> str:
    """The measured value against its threshold, e.g. ``7.14% > 5%`` for a density or ``2 ≥ 1``
    for a count; the comparison sign is computed from the numbers, so it never claims more than
    they show."""
    value, threshold = signal.value, signal.threshold
    if value is None:
        return "not measured" if signal.reached else "—"
    if _is_number(value) and _is_number(threshold):
        percent = isinstance(threshold, float) and 0 < threshold < 1 and isinstance(value, float)
        fmt = (lambda v: f"{v * 100:.3g}%") if percent else (lambda v: f"{v:g}")
        sign = ">" if value > threshold else "=" if value == threshold else "<"
        if sign == "=" and not percent:
            sign = "≥"
        return f"{fmt(value)} {sign} {fmt(threshold)}"
    if threshold is None or threshold == "":
        return short(value)
    return short(f"{plain(value)} (rule: {plain(threshold)})", 120)


def signal_rows(result: Classification) -> pd.DataFrame:
    """The evidence table of one classification, one row per signal."""
    rows = []
    for sig in result.signals:
        evidence = ", ".join(short(e, 60) for e in sig.evidence[:EVIDENCE_IN_TABLE])
        if len(sig.evidence) > EVIDENCE_IN_TABLE:
            evidence += f" (+{len(sig.evidence) - EVIDENCE_IN_TABLE} more)"
        rows.append({
            "signal": signal_label(sig.name),
            "status": STATUS[_status(sig)],
            "side": SIDE_LABEL.get(sig.side, sig.side),
            "weight": f"{sig.weight:g}",
            "score": f"+{sig.score:g}" if sig.score else "0",
            "measured vs threshold": measured(sig),
            "evidence": evidence,
        })
    return pd.DataFrame(rows, columns=["signal", "status", "side", "weight", "score",
                                       "measured vs threshold", "evidence"])


def _status(sig: Signal) -> str:
    if not sig.reached:
        return "unreached"
    return "fired" if sig.fired else "quiet"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _badges(result: Classification) -> str:
    color, icon = VERDICT_STYLE[result.verdict]
    bcolor, backend = BACKEND_STYLE[result.backend]
    return (f"### :{color}[:material/{icon}: {result.verdict}] &nbsp;→&nbsp; "
            f":{bcolor}[:material/memory: {backend}]")


def _agreement_banner(ep: Classification, refined: Classification) -> None:
    if ep.verdict == refined.verdict:
        st.success(f"Both classifiers say **{ep.verdict}** → **{BACKEND_STYLE[ep.backend][1]}** backend.",
                   icon=":material/check_circle:")
    elif ep.backend == refined.backend:
        st.info(f"The verdicts differ (EP rules **{ep.verdict}**, refined **{refined.verdict}**) but both load "
                f"the **{BACKEND_STYLE[ep.backend][1]}** backend. Details under *Where they disagree*.",
                icon=":material/info:")
    else:
        st.warning(f"The EP rules would load **{BACKEND_STYLE[ep.backend][1]}** ({ep.verdict}); the refined "
                   f"classifier says **{BACKEND_STYLE[refined.backend][1]}** ({refined.verdict}). Details under "
                   "*Where they disagree*.", icon=":material/alt_route:")


def _verdict_card(title: str, blurb: str, result: Classification) -> None:
    with st.container(border=True):
        st.subheader(title, anchor=False)
        st.caption(blurb)
        st.markdown(_badges(result))
        columns = st.columns(3 if result.margin is not None else 2)
        columns[0].metric("GenAI score", f"{result.genai_score:g}")
        columns[1].metric("NonGenAI score", f"{result.non_genai_score:g}")
        if result.margin is not None:
            columns[2].metric("Margin", f"{result.margin:g}", result.confidence, delta_color="off", delta_arrow="off",
                              help=f"The winning side's lead; below {CONFIDENT_MARGIN:g} the verdict is uncertain.")
            _confidence(result)
        if result.early_exit:
            st.info(f"**Early exit:** {md(result.early_exit, 300)}", icon=":material/bolt:")
        if result.summary:
            st.caption(md(result.summary, 400))


def _confidence(result: Classification) -> None:
    """The refined verdict with its decisive evidence in one sentence; below the confidence bar the
    page says the verdict is uncertain, so a thin lead is not read as proof."""
    if result.verdict != UNKNOWN and result.confidence == "uncertain":
        st.warning(f"**Uncertain:** {result.verdict} leads by only {result.margin:g}; a confident verdict needs a "
                   f"lead of {CONFIDENT_MARGIN:g}. Check the signals below before relying on the backend.",
                   icon=":material/help:")
    if result.explanation:
        st.markdown(f":material/lightbulb: {md(result.explanation, 500)}")


def _signal_table(result: Classification) -> None:
    rows = signal_rows(result)
    if rows.empty:
        st.info("No signals: the classifier stopped before measuring anything.")
        return
    statuses = [_status(s) for s in result.signals]
    styled = rows.style.apply(lambda _: [ROW_STYLE[s] for s in statuses])
    st.dataframe(styled, hide_index=True, width="stretch", height="content",
                 column_config={
                     "signal": st.column_config.TextColumn(width="medium", pinned=True),
                     "weight": st.column_config.TextColumn(width="small"),
                     "score": st.column_config.TextColumn(width="small"),
                     "measured vs threshold": st.column_config.TextColumn(width="medium"),
                     "evidence": st.column_config.TextColumn(width="large"),
                 })
    if "unreached" in statuses:
        st.caption("↷ not reached: the classifier returned at its early exit before this check; shown "
                   "for context, it added nothing.")


def _evidence(title: str, result: Classification) -> None:
    with st.expander(f"{title}: every signal's rule and full evidence"):
        for sig in result.signals:
            st.markdown(f"**{signal_label(sig.name)}** · {STATUS[_status(sig)]} · {md(measured(sig))}")
            if sig.description:
                st.caption(md(sig.description))
            if sig.evidence:
                st.code("\n".join(plain(e) for e in sig.evidence), language=None, wrap_lines=True)


def _disagreement(ep: Classification, refined: Classification) -> None:
    st.header("Where they disagree, and why", anchor=False)
    explanation = explain_disagreement(ep, refined)
    if explanation is None:
        st.markdown(f"Not on the verdict: both say **{ep.verdict}** → {BACKEND_STYLE[ep.backend][1]}.")
    else:
        with st.container(border=True):
            st.markdown(f":material/alt_route: {md(explanation)}")
    ep_by_name = {s.name: s for s in ep.signals}
    differing = [(s.name, ep_by_name[s.name], s) for s in refined.signals
                 if s.name in ep_by_name and (ep_by_name[s.name].fired, ep_by_name[s.name].score) != (s.fired, s.score)]
    if differing:
        st.markdown("**Signals both measure, read differently**")
        st.dataframe(pd.DataFrame([{
            "signal": signal_label(name),
            "EP rules": f"{STATUS[_status(a)]}, +{a.score:g} ({measured(a)})",
            "refined": f"{STATUS[_status(b)]}, +{b.score:g} ({measured(b)})",
        } for name, a, b in differing]), hide_index=True, width="stretch")
