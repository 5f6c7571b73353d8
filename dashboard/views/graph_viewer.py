"""The embedded Model Explorer graph: the model's graph by name scope, coloured by partition overlays.

Two custom components (Streamlit's public ``declare_component`` with a ``path``) make it work on
the dashboard's own port: one serves Model Explorer's packaged web app as it is, the other is the
bridge page (``model_explorer_bridge/``) that boots it with the graph and overlays passed as the
component's arguments, and reports the node the user picks. Nothing is served from a separate
port, so the viewer works through the same SSH tunnel as the dashboard, and the model's structure
reaches only the session that asked for it (over its own websocket).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st
import streamlit.components.v1 as components

from dashboard.intake.graph import ModelGraph
from dashboard.partition.report import PartitionReport
from dashboard.render import model_explorer as me
from dashboard.views.safe import md

if TYPE_CHECKING:
    from dashboard.profile.model import Profile

BRIDGE_DIR = Path(__file__).resolve().parent / "model_explorer_bridge"
HEIGHT = 720
_registered: dict[str, object] = {}


def _components():
    """The bridge component and the name under which Streamlit serves Model Explorer's web app,
    registered once per process (raises ``ImportError`` when the package is not installed)."""
    if not _registered:
        app = components.declare_component("model_explorer_app", path=str(me.web_app_dir()))
        _registered["app"] = app.name
        _registered["bridge"] = components.declare_component("model_explorer", path=str(BRIDGE_DIR))
    return _registered["bridge"], _registered["app"]


def report_key(report: PartitionReport) -> str:
    """What the overlays depend on: the model, the options, each backend's status and every node's
    class and verdicts (a device report changes the last two without changing the options)."""
    blob = json.dumps({"d": report.digest, "o": report.options.result_json(), "c": report.classes.to_json(),
                       "b": {n: [b.status, {k: [v.supported, v.status, v.reason, v.qnn_op] for k, v in b.nodes.items()}]
                             for n, b in report.backends.items()}}, sort_keys=True, default=str)
    return hashlib.blake2b(blob.encode(), digest_size=10).hexdigest()


@st.cache_data(max_entries=8, show_spinner="Building the graph for the viewer…")
def _payload(_graph: ModelGraph, _report: PartitionReport | None, key: str, title: str,
             _profile: "Profile | None" = None, _accuracy=None) -> tuple[str, dict[str, str]]:
    """Graph JSON and overlay JSONs, built once per ``key`` (model digest, report, profile and
    accuracy report)."""
    if _report is None and _profile is None and _accuracy is None:
        return me.build_graph(_graph, title).to_json(), {}
    attrs = me.partition_attrs(_report) if _report is not None else {}
    overlays = me.partition_overlays(_graph, _report) if _report is not None else {}
    if _profile is not None:  # the cost: its side-panel rows after the verdicts, its overlays after theirs
        for name, rows in me.cost_attrs(_profile).items():
            attrs.setdefault(name, []).extend(rows)
        overlays.update(me.cost_overlays(_graph, _profile))
    if _accuracy is not None:  # the error vs float: its side-panel rows and its overlay last
        for name, rows in me.accuracy_attrs(_graph, _accuracy).items():
            attrs.setdefault(name, []).extend(rows)
        overlays.update(me.accuracy_overlays(_graph, _accuracy))
    collection = me.build_graph(_graph, title, attrs, _report.shapes if _report is not None else None)
    return collection.to_json(), {name: data.to_json() for name, data in overlays.items()}


def show(graph: ModelGraph, key: str, title: str, report: PartitionReport | None = None,
         height: int = HEIGHT, profile: "Profile | None" = None, accuracy=None) -> str | None:
    """Draw the viewer. Returns the model node the user has just picked in it: a pick is returned
    on the run it happens only, so a node chosen elsewhere on the page afterwards stays chosen.
    ``key`` names the model (and report): a new key starts a fresh viewer. ``profile`` adds the
    cost overlays and each node's cost to the side panel (``key`` must then name it too)."""
    try:
        bridge, app = _components()
    except ImportError as exc:
        st.warning(f"The graph viewer is not installed: {md(exc)}. `make run` installs it.", icon=":material/warning:")
        return None
    graph_json, overlays = _payload(graph, report, key, title, profile, accuracy)
    if overlays:
        first = st.selectbox("Colour the graph by", list(overlays), key="me_overlay",
                             help="Every overlay stays one click away in the viewer's node data panel.")
        key = f"{key}_{list(overlays).index(first)}"  # Model Explorer starts with the first overlay drawn
        overlays = {first: overlays[first], **overlays}
    component_key = f"me_{key}"
    picked = bridge(app=app, graph=graph_json, overlays=overlays, height=height, key=component_key, default=None)
    seen = f"{component_key}_seen"
    if not isinstance(picked, str) or st.session_state.get(seen) == picked:
        return None
    st.session_state[seen] = picked
    return me.node_name(graph, picked)
