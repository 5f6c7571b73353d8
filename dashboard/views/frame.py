"""What every page draws first: the page config, the navigation and the sidebar model picker.

Why not ``st.navigation``: the app keeps its pages as files in the top-level ``pages/`` folder,
and Streamlit runs an app with a ``pages/`` folder next to its entry script in its documented
``pages/`` multipage mode (every file of the folder is a page; a URL such as ``/classifier`` runs
that file). Mixing that mode with ``st.navigation`` needs a private flag. So the app uses the
folder convention as documented: ``client.showSidebarNavigation = false`` in
``.streamlit/config.toml`` hides the automatic list, which would show the entry script as a page,
and each page calls ``page()`` here, which draws the list below with ``st.page_link`` and the
model picker. A page opened directly by its URL therefore works the same as one opened from the
list.
"""

from __future__ import annotations

from dataclasses import dataclass

import sys

import streamlit as st

from dashboard import access
from dashboard.runtime.client import WorkerGroup
from dashboard.views import intake, links, report

APP_TITLE = "QNN Backend Lab"
# The tab's icon, a chip, as SVG markup: Streamlit inlines it as a data: URL. A ``:material/...:``
# page icon is not drawn from the bundled icon font like the buttons' icons but fetched as an SVG
# from fonts.gstatic.com on every page, and the dashboard makes no outside request.
PAGE_ICON = ("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 24 24'><g fill='none' stroke='#d62728' "
             "stroke-width='2'><rect x='6' y='6' width='12' height='12' rx='1.5'/><path d='M9 2v4M15 2v4M9 18v4"
             "M15 18v4M2 9h4M2 15h4M18 9h4M18 15h4'/></g><rect x='9.5' y='9.5' width='5' height='5' "
             "fill='#d62728'/></svg>")


@dataclass(frozen=True)
class PageSpec:
    path: str  # relative to the app's folder, as st.page_link and st.switch_page take it
    title: str
    icon: str


PAGES = (
    PageSpec("pages/overview.py", "Overview", ":material/account_tree:"),
    PageSpec("pages/classifier.py", "Classifier", ":material/rule:"),
    PageSpec("pages/partitions.py", "Partitions", ":material/call_split:"),
    PageSpec("pages/profile.py", "Profile", ":material/speed:"),
    PageSpec("pages/accuracy.py", "Quantize & accuracy", ":material/troubleshoot:"),
    PageSpec("pages/devices.py", "Devices", ":material/devices:"),
    PageSpec("pages/timeline.py", "Timeline", ":material/timeline:"),
    PageSpec("pages/compare.py", "Compare", ":material/compare:"),
    PageSpec("pages/sweep.py", "Sweep", ":material/grid_view:"),
)


@st.cache_resource(scope="session", on_release=lambda group: group.close("the browser session ended"),
                   show_spinner=False)
def _session_workers() -> WorkerGroup:
    """The runtime workers this browser session starts. Why: when the session ends (tab closed,
    connection lost) Streamlit asks the script to stop, but a script blocked in a long worker call
    would not notice until the call ends; Streamlit does release the session's cached resources
    at once, and releasing this group stops its workers (the blocked call then fails and the
    script ends)."""
    return WorkerGroup()


def page(title: str) -> None:
    """Set up the page called ``title``: config, the navigation links and the model picker;
    workers started by this run belong to the session (``_session_workers``)."""
    st.set_page_config(layout="wide", page_title=f"{title} · {APP_TITLE}", page_icon=PAGE_ICON)
    require_gate()
    _session_workers().make_current()
    with st.sidebar:
        for spec in PAGES:
            st.page_link(spec.path, label=spec.title, icon=spec.icon)
    intake.sidebar()
    report.sidebar_download()
    _link()


def _link() -> None:
    """The address bar says the model, its settings and the run shown (``views.links``); a run a
    link asked for is shown when this session has it."""
    from dashboard.views import state

    selected = state.current_model()
    if selected is None:
        return
    note = links.apply_run(selected.digest)
    if note:
        st.sidebar.info(note, icon=":material/link_off:")
    links.write(selected)


def require_gate() -> None:
    """Stop the page unless this server stands behind the web gate (``dashboard.views.gate``).
    Why: the gate is what keeps other users and other web pages out, and it is only there when
    Streamlit serves ``app.py`` (``streamlit run app.py``); a page script served some other way
    (``streamlit run pages/overview.py``) would answer anyone. Streamlit's AppTest runs the
    scripts with no server at all, so there is nothing to guard."""
    if access.active_gatekeeper() is None and "streamlit.testing.v1" not in sys.modules:
        st.error("This page is served without the dashboard's sign-in gate, so it would answer anyone who "
                 "reaches the port. Start the dashboard with `streamlit run app.py` (or `make run`).",
                 icon=":material/lock:")
        st.stop()


def landing() -> None:
    """The entry script's page: select ``--model`` at the session's first visit (a failure is
    kept for the picker to show), then the first page takes over."""
    require_gate()
    intake.startup()
    st.switch_page(PAGES[0].path)
