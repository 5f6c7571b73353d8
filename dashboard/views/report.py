"""What pages share for downloads: clean file names, and the HTML report of the selected model.

A download is named after the model and what it holds, stamped in UTC
(``cnn_classifier-timeline-20260101T120000Z.json``), never after a session label full of
punctuation. The report (``dashboard.render.report``) gathers what this session has for the
selected model: both classifications, the partition reports the Partitions and Compare pages
produced, and the timeline runs; it is built only when the button is clicked.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def download_name(model_path: str, kind: str, ext: str, when: datetime | None = None) -> str:
    """``<model>-<kind>-<UTC time>.<ext>``: the model file's stem reduced to letters, digits and
    ``._-`` (at most 60 characters), so any file system and shell takes it as it is."""
    stem = _UNSAFE.sub("_", Path(model_path).stem).strip("._-")[:60]
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stem or 'model'}-{kind}-{stamp}.{ext}"


def sidebar_download() -> None:
    """The report of the selected model with what this session has for it, as a sidebar download
    on every page. The HTML (plotly.js included, about 5 MB) is built only when clicked, on
    Streamlit's download thread, from data captured now."""
    import streamlit as st

    from dashboard.views import partitions, state, timeline

    selected = state.current_model()
    if selected is None:
        return
    graph = state.loaded_graph()
    reports = partitions.session_reports(selected.digest)
    runs = timeline.session_runs(selected.path)

    def build() -> str:
        from dashboard.classify.ep_rules import classify_ep
        from dashboard.classify.refined import classify_refined
        from dashboard.render.report import ReportInput, build_html

        return build_html(ReportInput(selected.name, selected.path, selected.digest, graph,
                                      (classify_ep(graph), classify_refined(graph)), reports, runs))

    with st.sidebar:
        st.download_button("Report (HTML)", build, file_name=download_name(selected.path, "report", "html"),
                           mime="text/html", icon=":material/summarize:", key="report_html",
                           help=f"One self-contained file: classifier evidence, {len(reports)} partition "
                                f"analysis(es) and {len(runs)} timeline run(s) of this model from this session.")
