"""The HTML report of the selected model, offered in every page's sidebar.

The report (``dashboard.render.report``) gathers what this session has for the
selected model: both classifications, the partition reports the Partitions and Compare pages
produced, the timeline runs, the Profile page's profiles and the Quantize & accuracy page's results;
it is built only when the button is clicked.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from dashboard.views.safe import download_name


def sidebar_download() -> None:
    """The report of the selected model with what this session has for it, as a sidebar download
    on every page. The HTML (plotly.js included, about 5 MiB) is built only when clicked, on
    Streamlit's download thread, with what the session has by then (an analysis this run finishes
    included). Like every download here it does not rerun the page (``on_click="ignore"``): a
    download changes nothing the page shows."""
    import streamlit as st

    from dashboard.views import partitions, state, timeline
    from dashboard.views import profile as profile_view

    selected = state.current_model()
    if selected is None:
        return
    graph = state.loaded_graph()
    reports = partitions.session_reports(selected.digest)
    runs = timeline.session_runs(selected.path)
    profiles = profile_view.session_records(selected.digest)

    from dashboard.views import accuracy as accuracy_view

    entries = accuracy_view.session_results(selected.digest)  # read now: the download runs on another thread

    def accuracy() -> list:
        return [entry["report"] for entry in entries]

    file_name, build = report_file(selected, graph, reports, runs, profiles=profiles, accuracy=accuracy)
    with st.sidebar:
        st.download_button("Report (HTML)", build, file_name=file_name,
                           mime="text/html", icon=":material/summarize:", key="report_html", on_click="ignore",
                           help="One self-contained file: classifier evidence, and the partition analyses, "
                                "timeline runs and profiles of this model from this session.")


def report_file(selected, graph, reports: Callable[[], list], runs: Callable[[], list],
                when: datetime | None = None, profiles: Callable[[], list] = list,
                accuracy: Callable[[], list] = list) -> tuple[str, Callable[[], str]]:
    """The download's file name and the function that builds its HTML, both stamped with one time
    (the file's name is fixed when the button is drawn, so the report says that time too, not
    the later click's)."""
    when = when or datetime.now(timezone.utc)
    # An upload's copy on the server is named by its digest: the report names the file the user uploaded.
    shown = f"{selected.name} (uploaded)" if selected.source == "upload" else selected.path

    def build() -> str:
        from dashboard.classify.ep_rules import classify_ep
        from dashboard.classify.refined import classify_refined
        from dashboard.render.report import ReportInput, build_html

        return build_html(ReportInput(selected.name, shown, selected.digest, graph,
                                      (classify_ep(graph), classify_refined(graph)), reports(), runs(),
                                      profiles=profiles(), accuracy=accuracy(), generated=when))

    return download_name(selected.path, "report", "html", when), build
