"""Overview page: what is in the model, what QNN will need fixed, and its graph in Model Explorer or Netron."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.intake import overview as overview_data
from dashboard.intake.graph import ModelGraph
from dashboard.intake.overview import human_bytes
from dashboard.render import netron as netron_view
from dashboard.render.overview_figures import op_histogram_figure
from dashboard.views import graph_viewer, state
from dashboard.views.safe import full_values, md, short

# Above either limit the Netron frame is opt-in: the user's browser lays out the whole graph.
NETRON_EMBED_NODES = 3000
NETRON_EMBED_BYTES = 256 << 20
NETRON_HEIGHT = 760
VIEWERS = ("Netron", "Model Explorer")
IO_ROWS_SHOWN = 12  # beyond this (an LLM with hundreds of KV tensors) the table scrolls
SYMBOLIC_STYLE = "background-color: rgba(255, 170, 0, 0.22); font-weight: 600"


def render() -> None:
    selected = state.require_model()
    graph = state.loaded_graph()
    st.title("Model overview", anchor=False)
    st.caption(f"{md(selected.name, 120)} · {md(selected.path, 200)}")
    sizes = overview_data.sizes(graph)
    _headline(graph, sizes)
    for warning in graph.warnings:
        st.warning(md(warning), icon=":material/warning:")
    if sizes.missing_external_files:
        st.warning(f"External-data file(s) not found next to the model: "
                   f"{md(', '.join(sizes.missing_external_files), 300)}. Structure and classification "
                   "still work; running it on QNN needs them. Open the model by its server path with its "
                   "data files beside it.", icon=":material/link_off:")
    _inputs_outputs(graph)
    left, right = st.columns([3, 2], gap="large")
    with left:
        _op_histogram(graph)
    with right:
        _opsets_and_sizes(graph, sizes)
    _graph_viewer(selected, graph)


def _headline(graph: ModelGraph, sizes: overview_data.Sizes) -> None:
    opset = graph.opsets.get("")
    counts = overview_data.counts(graph)
    inside = f" + {counts.body_nodes:,} inside control-flow bodies" if counts.bodies else ""
    cells = [
        ("Nodes", f"{counts.nodes:,}", f"{counts.top_nodes:,} at the top level{inside}"),
        ("Op types", f"{counts.op_types:,}", f"{counts.top_op_types:,} at the top level" if counts.bodies else None),
        ("Inputs / outputs", f"{len(graph.inputs)} / {len(graph.outputs)}", None),
        ("File size", human_bytes(graph.file_bytes), None),
        ("Weights", human_bytes(sizes.weight_bytes),
         f"{human_bytes(sizes.embedded_bytes)} embedded, {human_bytes(sizes.external_bytes)} in external-data "
         f"files" + (f"; {human_bytes(sizes.body_bytes)} of it inside control-flow bodies" if counts.bodies else "")),
        ("IR · ai.onnx opset", f"{graph.ir_version} · {opset if opset is not None else '—'}", None),
    ]
    with st.container(horizontal=True):  # wraps on narrow screens instead of truncating values
        for label, value, help_text in cells:
            st.metric(label, value, help=help_text, border=True, width="stretch")
    if counts.bodies:
        st.info(f"**{counts.body_nodes:,} of the {counts.nodes:,} nodes run inside {counts.bodies} control-flow "
                f"bod{'y' if counts.bodies == 1 else 'ies'}** (If branches, Loop and Scan bodies; nested "
                f"{counts.deepest} deep at most): {counts.top_nodes:,} node(s) at the top level. Nodes, op types, "
                f"weights ({human_bytes(sizes.body_bytes)} inside bodies) and the operator chart count "
                "both; the chart marks what is inside bodies.", icon=":material/account_tree:")
    facts = [f"producer **{md(graph.producer, 80)}**" if graph.producer else "no producer recorded"]
    if graph.graph_name:
        facts.append(f"graph **{md(graph.graph_name, 80)}**")
    facts.append(f"{sizes.initializers:,} initializers")
    st.caption(" · ".join(facts))


def _inputs_outputs(graph: ModelGraph) -> None:
    st.subheader("Inputs and outputs", anchor=False)
    table = overview_data.io_table(graph)
    shown = pd.DataFrame({
        "": table["kind"],
        "name": table["name"].map(short),
        "dtype": table["dtype"],
        "shape": table["shape"].map(short),
        "symbolic dims": table["symbolic"].map(short),
        "size": [human_bytes(int(b)) if pd.notna(b) else "—" for b in table["bytes"]],
    })
    symbolic_rows = ~table["static"].to_numpy()
    styled = shown.style.apply(
        lambda column: [SYMBOLIC_STYLE if flag and column.name in ("shape", "symbolic dims") else ""
                        for flag in symbolic_rows])
    st.dataframe(styled, hide_index=True, width="stretch",
                 height="content" if len(shown) <= IO_ROWS_SHOWN else 460,
                 column_config={"": st.column_config.TextColumn(width="small"),
                                "name": st.column_config.TextColumn(width="medium"),
                                "shape": st.column_config.TextColumn(width="large")})
    full_values("Tensor names", table["name"])
    dims = overview_data.symbolic_dim_names(graph)
    if dims:
        st.warning(f"**{len(dims)} symbolic dimension(s)**: {md(', '.join(dims), 300)}. QNN compiles "
                   "static graphs, so each needs a fixed value (a free-dimension override) before QNN "
                   "can claim the nodes that depend on it.", icon=":material/straighten:")
    elif len(table):
        st.success("All input and output shapes are static: QNN can compile them as they are.",
                   icon=":material/check_circle:")


def _opsets_and_sizes(graph: ModelGraph, sizes: overview_data.Sizes) -> None:
    st.subheader("Opsets", anchor=False)
    st.dataframe(overview_data.opset_table(graph), hide_index=True, width="stretch")
    st.subheader("Where the bytes are", anchor=False)
    rows = [
        ("model file (.onnx)", human_bytes(sizes.file_bytes)),
        ("weights, total", human_bytes(sizes.weight_bytes)),
        ("weights inside the file", human_bytes(sizes.embedded_bytes)),
        ("weights in external-data files", human_bytes(sizes.external_bytes)),
        *([("weights held in Constant nodes", human_bytes(sizes.constant_bytes))] if sizes.constant_bytes else []),
        *([("top-level weights", human_bytes(sizes.top_level_bytes)),
           ("weights inside control-flow bodies", human_bytes(sizes.body_bytes))] if sizes.body_bytes else []),
        ("external-data files", ", ".join(short(f, 40) for f in sizes.external_files) or "none"),
    ]
    st.dataframe(pd.DataFrame(rows, columns=["what", "size"]), hide_index=True, width="stretch")


def _op_histogram(graph: ModelGraph) -> None:
    st.subheader("Operators", anchor=False)
    frame = overview_data.op_histogram(graph)
    if frame.empty:
        st.info("The graph has no nodes.")
        return
    frame["label"] = frame["op"].map(lambda op: short(op, 40))
    st.plotly_chart(op_histogram_figure(frame), config={"displayModeBar": False})


def _graph_viewer(selected: state.SelectedModel, graph: ModelGraph) -> None:
    st.subheader("Graph", anchor=False)
    viewer = st.segmented_control("Viewer", VIEWERS, default=VIEWERS[0], key="overview_viewer",
                                  label_visibility="collapsed",
                                  help="Model Explorer groups nodes by name scope (layers) and stays usable on "
                                       "20,000-node graphs; Netron shows every node with its attributes and weights' "
                                       "shapes.") or VIEWERS[0]
    if viewer == "Netron":
        _netron(selected, graph)
    else:
        graph_viewer.show(graph, f"ov_{selected.digest}", selected.name)
        st.caption("Model Explorer runs inside the dashboard (its port, its SSH tunnel). Groups are name "
                   "scopes: double-click one to open it; search with the box at its top left.")


def _netron(selected: state.SelectedModel, graph: ModelGraph) -> None:
    try:
        server = netron_view.serve(selected.path, selected.digest)
    except (OSError, ValueError) as exc:  # unreadable/empty file, no free port
        st.warning(f"Netron could not start: {md(exc)}", icon=":material/warning:")
        return
    page_url = st.context.url
    url = netron_view.browser_url(server, page_url, st.context.headers.get("Host"))
    large = len(graph.nodes) > NETRON_EMBED_NODES or graph.file_bytes > NETRON_EMBED_BYTES
    link, toggle = st.columns([1, 4], vertical_alignment="center")
    link.link_button("Open in a new tab", url, icon=":material/open_in_new:")
    embed = True
    if large:
        embed = toggle.toggle(f"Show it here ({len(graph.nodes):,} nodes, {human_bytes(graph.file_bytes)}: "
                              "your browser lays out the whole graph)", value=False, key="netron_embed")
    if embed:
        st.iframe(url, height=NETRON_HEIGHT)
    notes = [f"Netron serves this model on port {server.port} of the dashboard's server, to this machine only "
             "(loopback, behind a token in its URL). From another machine, forward that port beside the "
             f"dashboard's, then use the link: `{netron_view.tunnel_command(server.port, page_url)}`."]
    if page_url and page_url.startswith("https:"):
        notes.append("The dashboard is on HTTPS and browsers block the plain-HTTP frame: use the link.")
    st.caption(" ".join(notes))
