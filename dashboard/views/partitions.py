"""Partitions page: which nodes HTP and GPU claim, why not, the classes, and the migration plans.

Built to answer "which nodes keep my model off the NPU, and why" in one look: right under the
options come the per-backend status (with the hardware each figure was measured on: the x86_64
HTP simulator is never presented as an NPU), the class counts, and the table of nodes the HTP
refuses with the GPU's verdict and the EP's reason. Below: the per-op-type table, the segment
strip of each plan, the graph in Model Explorer (grouped by name scope, coloured by class, verdict
or plan; ``graph_viewer``) and the selected node's details. Every GPU figure says whether it was
measured or predicted.

The options are a form: nothing runs until Apply (an analysis takes seconds to minutes on real
models). The analysis runs on a background thread (``views.jobs``) on the device picked, with the
step and the time elapsed shown while it runs and a Cancel button that stops its worker.
Answers come from the on-disk cache when seen before, and the page shows what changed against
the previous successful run. The settings' widgets are drawn from their table
(``views.settings``), and hints name them by their labels, never by command-line flags.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pandas as pd
import streamlit as st

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.shapes import is_float_model
from dashboard.partition import gpu_rules
from dashboard.partition.analysis import analyze
from dashboard.partition.plans import SEGMENT_LABELS
from dashboard.partition.report import (CLASS_LABELS, CLASSES, FAILED, MEASURED, PREDICTED, REMOVED, PartitionReport,
                                        claims, op_type_table)
from dashboard.partition.snippet import report_snippet
from dashboard.render import partition_graph as graph_render
from dashboard.runtime.devices import Device
from dashboard.runtime.knobs import BACKENDS, TERMS, Settings
from dashboard.runtime.socs import SIMULATOR_NOTE, hardware_label
from dashboard.views import graph_viewer, jobs, shape_hints, state
from dashboard.views import accuracy as accuracy_view
from dashboard.views import profile as profile_view
from dashboard.views.blockers import render_blockers, render_groups
from dashboard.views.devices import adopt, select_device
from dashboard.views.safe import download_name, frame, md, short
from dashboard.views.settings import SettingsForm, page_words, setting_changes

_REPORTS = "partition_reports"      # options key -> PartitionReport (this session)
_HISTORY = "partition_history"      # [(options key, summary, options)] last two successful runs
_DEVICES = "partition_device_reports"
_JOB = "partition_job"
_NODE = "partition_node"
_NODE_PICK = "pt_node_pick"
_DEVICE_PICK = "pt_device"
STATUS_BADGE = {MEASURED: ":green-badge[measured]", PREDICTED: ":orange-badge[predicted]",
                FAILED: ":red-badge[failed]"}


def session_reports(digest: str) -> Callable[[], list[PartitionReport]]:
    """The partition reports this session has of the model ``digest`` (for the HTML report), as
    a function that reads them when called: the sidebar's report is drawn before the page adds the
    analysis it just finished, and is built later, off the script thread."""
    store: dict = st.session_state.setdefault(_REPORTS, {})
    return lambda: [r for r in list(store.values()) if r.digest == digest]


def render() -> None:
    selected = state.require_model()
    graph = state.loaded_graph()
    st.title("Partitions", anchor=False)
    st.caption(f"{md(selected.name, 120)} · which nodes the QNN HTP and GPU backends claim, why not, and "
               "what hot migration would run where")
    try:
        options, device, applied = _knobs(graph, selected.digest)
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    shape_hints.show(graph, options)
    devices = _device_reports(selected.digest)
    report = _report(selected, options, devices, device, applied)
    if report is None:
        return
    _diff_against_previous(report, options)
    _backend_status(report)
    _class_metrics(report)
    render_blockers(report)
    _off_npu(report, graph)
    identity = graph_viewer.report_key(report)  # this analysis: the viewer's and the node picker's keys
    plan_tab, graph_tab, ops_tab, rules_tab = st.tabs(["Plans", "Graph", "Op types", "GPU rule table"],
                                                      key="pt_tabs")
    with plan_tab:
        _plans(report)
    with graph_tab:
        _graph_and_node(report, graph, selected.name, identity)
    with ops_tab:
        _op_types(report)
    with rules_tab:
        _rule_table()
    _snippet(report)
    for note in report.notes:
        st.caption(f"Note: {md(page_words(note))}")
    st.download_button("Download the report (JSON)", json.dumps(report.to_json(), indent=1),
                       file_name=download_name(selected.path, "partitions", "json"), mime="application/json",
                       icon=":material/download:", on_click="ignore")


# -- knobs ---------------------------------------------------------------------------------------------
def _knobs(graph: ModelGraph, digest: str) -> tuple[Settings, Device, bool]:
    """The options form: its values change only when Apply is pressed (a form's widgets keep their
    last submitted values), so every other interaction leaves the analysis alone."""
    form = SettingsForm("pt", digest, graph, analysis="partition", defaults={"fp16": is_float_model(graph)},
                        model=digest)
    with st.form(f"pt_options_{digest}", border=True):
        st.markdown("**Analysis options** · applied together with **Apply**")
        left, mid, right = st.columns([2, 2, 3], gap="medium")
        with left:
            device = select_device(TERMS["device"].label, key=_DEVICE_PICK, in_form=True)
            form.draw("backends", "fp16", "soc")
        with mid:
            form.draw("optimization_level", "timeout", "provider_options")
        with right:
            form.draw("dims", "shapes")
        applied = st.form_submit_button("Apply", type="primary", icon=":material/play_arrow:", key="pt_apply",
                                        on_click=adopt, args=(_DEVICE_PICK,))
    return form.settings(), device, applied


def _device_reports(digest: str) -> list[tuple[str, str]]:
    stored: dict = st.session_state.setdefault(_DEVICES, {})
    reports = stored.setdefault(digest, [])
    with st.expander("Device report: replace predicted GPU figures with ones measured on a Snapdragon",
                     icon=":material/upload_file:", expanded=False):
        st.markdown("A device you can reach over SSH can be picked in the options above. Otherwise run the "
                    "partition command on the device with the same options, save its JSON report and upload it "
                    "here:")
        st.code("python -m dashboard partition MODEL --out report.json", language="bash")
        upload = st.file_uploader("Device report (JSON)", type=["json"], key=f"pt_device_{digest}")
        if upload is not None:
            text = upload.getvalue().decode("utf-8", "replace")
            if (upload.name, text) not in reports:
                reports.append((upload.name, text))
        for name, _ in reports:
            st.markdown(f"- {md(name)}")
        if reports and st.button("Forget device reports", key=f"pt_forget_{digest}"):
            reports.clear()
            st.rerun()
    return list(reports)


# -- running ---------------------------------------------------------------------------------------------
def _options_key(options: Settings, devices: list[tuple[str, str]], device: Device) -> str:
    blob = json.dumps({"o": options.result_json(), "at": device.url,
                       "d": [hashlib.blake2b(t.encode(), digest_size=8).hexdigest() for _, t in devices]},
                      sort_keys=True)
    return hashlib.blake2b(blob.encode(), digest_size=12).hexdigest()


def report_key(digest: str, options: Settings, device: Device, devices: list[tuple[str, str]] = ()) -> str:
    """The key of a report in this session's store (the Compare page shares it)."""
    return f"{digest}:{_options_key(options, list(devices), device)}"


def stored_report(key: str) -> PartitionReport | None:
    return st.session_state.get(_REPORTS, {}).get(key)


def remember(key: str, report: PartitionReport) -> None:
    """Keep ``report`` in this session's store (the last 16)."""
    reports: dict = st.session_state.setdefault(_REPORTS, {})
    if len(reports) >= 16 and key not in reports:
        reports.pop(next(iter(reports)))
    reports[key] = report


def _report(selected, options: Settings, devices: list[tuple[str, str]], device: Device,
            applied: bool) -> PartitionReport | None:
    """The report for these options: from the session, else from the analysis job (started on the
    first visit, and again on Apply). A job still running is shown with its progress and Cancel;
    a cancelled or failed one says so until the options are applied again."""
    key = report_key(selected.digest, options, device, devices)
    if (known := stored_report(key)) is not None:
        return known
    job = jobs.current(_JOB)
    if job is None or job.key != key or (applied and job.done):
        job = jobs.start(_JOB, key, f"Analysing on {device.label}", lambda on_event, cancel: analyze(
            selected.path, options, on_event=on_event, device_reports=devices,
            digest=selected.digest, device=device, cancel=cancel))
        job.wait(jobs.QUICK_S)
    if jobs.finished(_JOB, job) is None:
        return None
    remember(key, job.result)
    report: PartitionReport = job.result
    failed = [b.upper() for b, r in report.backends.items() if r.status == FAILED]
    st.caption(("Answered from the cache" if report.cached else f"Analysed in {report.elapsed_s:.1f} s")
               + f" on {md(report.device or device.label)}" + (f" · {', '.join(failed)} failed" if failed else ""))
    return report


def _summary(report: PartitionReport) -> dict:
    return {"counts": report.classes.counts(), "classes": report.classes.of(),
            "segments": {k: p.segment_count for k, p in report.plans.items()}}


def _diff_against_previous(report: PartitionReport, options: Settings) -> None:
    """What changed against the previous run that produced classes (a failed run has none, and
    comparing with it would show every class dropping to 0)."""
    if report.classes.note:
        return
    history: list = st.session_state.setdefault(_HISTORY, [])
    key = f"{report.digest}:{json.dumps(options.result_json(), sort_keys=True)}:{report.device}"
    if not history or history[-1][0] != key:
        history.append((key, _summary(report), {**options.result_json(), "device": report.device}))
        del history[:-2]
    if len(history) < 2 or not history[0][0].startswith(report.digest) or history[-1][0] != key:
        return
    (_, before, old_opts), (_, after, new_opts) = history
    moved = [(n, before["classes"].get(n, "—"), c) for n, c in after["classes"].items()
             if before["classes"].get(n) != c]
    with st.container(border=True):
        st.markdown("**Compared with the previous run** — changed: "
                    + md("; ".join(setting_changes(old_opts, new_opts)) or "nothing"))
        cols = st.columns(len(CLASSES) + 1)
        for col, cls in zip(cols, (*CLASSES, "removed")):
            col.metric(CLASS_LABELS[cls], after["counts"][cls], after["counts"][cls] - before["counts"][cls])
        if moved:
            st.dataframe(pd.DataFrame([{"node": short(n), "before": CLASS_LABELS.get(b, b),
                                        "after": CLASS_LABELS.get(a, a)} for n, b, a in moved[:500]]),
                         hide_index=True, width="stretch", height=min(38 + 35 * len(moved), 260))


# -- headline --------------------------------------------------------------------------------------------
def _figure_badge(backend) -> str:
    """``measured · HTP simulator (x86_64)`` for a measurement, the bare status otherwise."""
    badge = STATUS_BADGE.get(backend.status, backend.status)
    if backend.status == MEASURED and backend.runtime.get("hardware"):
        color = "orange" if backend.runtime["hardware"] == "simulator" else "green"
        badge += f" :{color}-badge[on the {hardware_label(backend.runtime['hardware'])}]"
    return badge


def _backend_status(report: PartitionReport) -> None:
    cols = st.columns(max(len(report.backends), 1))
    for col, (name, backend) in zip(cols, report.backends.items()):
        with col.container(border=True):
            st.markdown(f"**{name.upper()}** {_figure_badge(backend)}")
            if backend.nodes:
                counts = claims(report, name)
                where = f" in {backend.qnn_subgraphs} QNN subgraph(s)" if backend.status == MEASURED else ""
                gone = f" ({counts.removed} removed by ONNX Runtime run nowhere)" if counts.removed else ""
                st.markdown(f"{'claims' if backend.status == MEASURED else 'predicted to claim'} "
                            f"**{counts.claimed} of {counts.executed}** executed nodes{where}{gone}")
            st.caption(md(backend.source or "", 300))
            if backend.status == MEASURED and backend.runtime.get("hardware") == "simulator":
                st.caption(f"Claims are the HTP's; timings from here are not NPU timings: {SIMULATOR_NOTE}.")
            _failure(backend)
            if backend.added_nodes:
                added = ", ".join(f"{a['count']}× {a['op_type']}" for a in backend.added_nodes)
                st.caption(f"Nodes the runtime inserted (not model nodes): {md(added)}")


def _failure(backend) -> None:
    """One message with the next step; the runtime's own text one click away. Without a known
    next step the runtime's message is the message."""
    if backend.suggestion:
        kind = st.error if backend.status == FAILED else st.info
        kind(md(page_words(backend.suggestion)), icon=":material/error:" if backend.status == FAILED
             else ":material/lightbulb:")
        if backend.error:
            with st.expander("The runtime's own message"):
                st.code(page_words(backend.error), language=None, wrap_lines=True)
    elif backend.error:
        st.error(md(page_words(backend.error), 600), icon=":material/error:")


def _class_metrics(report: PartitionReport) -> None:
    if report.classes.note:
        st.warning(md(report.classes.note), icon=":material/warning:")
        return
    counts = report.classes.counts()
    total = max(sum(counts[c] for c in CLASSES), 1)
    gpu = report.backends.get("gpu")
    if gpu is not None and gpu.status == PREDICTED:
        st.caption("Classes use the **predicted** GPU verdicts (no GPU on this device); a device report or a "
                   "Snapdragon device replaces them with measured ones.")
    cols = st.columns(len(CLASSES) + 1)
    for col, cls in zip(cols, CLASSES):
        col.metric(CLASS_LABELS[cls], f"{counts[cls]}", f"{counts[cls] / total:.0%} of executed nodes",
                   delta_color="off", delta_arrow="off", border=True)
    cols[-1].metric(CLASS_LABELS["removed"], counts["removed"], "run on no backend", delta_color="off",
                    delta_arrow="off", border=True, help="Folded into constants or eliminated before partitioning.")


def _off_npu(report: PartitionReport, graph: ModelGraph | None = None) -> None:
    htp = report.backends.get("htp")
    if htp is None or not htp.nodes:
        return
    gpu = report.backends.get("gpu")
    gone = set(report.classes.removed)  # removed on either backend: it runs nowhere (as in the classes)
    refused = [(n, v) for n, v in htp.nodes.items() if not v.supported and v.status != REMOVED and n not in gone]
    st.subheader(f"{len(refused)} node(s) keep the model off the NPU", anchor=False)
    if not refused:
        st.success("The HTP claims every node ONNX Runtime hands it.", icon=":material/check_circle:")
        return
    render_groups(report, graph)
    gpu_column = f"GPU ({gpu.status})" if gpu else "GPU"
    rows = []
    for name, verdict in refused:
        g = gpu.nodes.get(name) if gpu else None
        rows.append({"node": short(name, 60), "op": verdict.op_type,
                     gpu_column: "—" if g is None else "claims" if g.supported else "refuses",
                     "HTP reason": verdict.reason or "",
                     "GPU reason": (g.reason or "") if g is not None and not g.supported else ""})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(38 + 35 * len(rows), 420),
                 column_config={"node": st.column_config.TextColumn(width="medium"),
                                "op": st.column_config.TextColumn(width="small"),
                                gpu_column: st.column_config.TextColumn(width="small"),
                                "HTP reason": st.column_config.TextColumn(width="large"),
                                "GPU reason": st.column_config.TextColumn(width="medium")})
    full = [{**row, "node": name} for row, (name, _) in zip(rows, refused)]  # whole names, not shortened
    st.download_button("Download these nodes (CSV)", pd.DataFrame(full).to_csv(index=False),
                       file_name=download_name(report.model, "off-npu-nodes", "csv"), mime="text/csv",
                       icon=":material/download:", on_click="ignore", key="pt_nodes_csv")


# -- tabs ------------------------------------------------------------------------------------------------
def _plans(report: PartitionReport) -> None:
    if not report.plans:
        st.info("Plans need per-node verdicts from both backends.")
        return
    for kind, plan in report.plans.items():
        counts = ", ".join(f"{n} {SEGMENT_LABELS[b]}" for b, n in plan.segments_by_backend.items())
        size = f"{plan.transfer_bytes:,} bytes" + ("" if plan.bytes_complete else
                                                      f" + {plan.unknown_tensors} tensor(s) of unknown size")
        st.markdown(f"**{kind}** plan: {plan.segment_count} segment(s) ({counts}); boundary copies {size}")
        st.plotly_chart(graph_render.strip_figure(plan), key=f"strip_{kind}", config={"displayModeBar": False})
        with st.expander(f"{kind}: segments and the tensors crossing their boundaries"):
            rows = [{"#": s.index, "backend": SEGMENT_LABELS[s.backend], "nodes": len(s.nodes),
                     "first node": short(s.nodes[0], 50), "inputs": len(s.inputs),
                     "outputs": len(s.outputs), "boundary bytes": s.boundary_bytes,
                     "unknown sizes": s.unknown_tensors} for s in plan.segments]
            st.dataframe(frame(rows), hide_index=True, width="stretch")
            pick = st.selectbox("Segment", [s.index for s in plan.segments], key=f"pt_seg_{kind}")
            seg = plan.segments[pick]
            st.dataframe(frame(
                [{"direction": "in", "tensor": short(r.name), "shape": r.shape, "bytes": r.bytes,
                  "from/to": ", ".join(r.peer)} for r in seg.inputs]
                + [{"direction": "out", "tensor": short(r.name), "shape": r.shape, "bytes": r.bytes,
                    "from/to": ", ".join(r.peer)} for r in seg.outputs]), hide_index=True, width="stretch")
    st.caption("Segments are contiguous runs in a topological order chosen to keep runs long; 'host' is the "
               "application (graph inputs and outputs). Unknown sizes are listed but not added to the bytes.")


def node_pick_key(identity: str) -> str:
    """The node picker's widget key for the analysis ``identity`` (``graph_viewer.report_key``).
    Why per analysis: a picker kept across analyses kept its old selection on screen while the
    details below followed the session's value; a new analysis is a new picker, started on the
    node picked before when the new analysis has it."""
    return f"{_NODE_PICK}_{identity}"


@st.fragment
def _graph_and_node(report: PartitionReport, graph: ModelGraph, title: str, identity: str) -> None:
    """The viewer and the picked node's details, as one fragment. Why: a pick (in the viewer or the
    picker) used to rerun the whole page, and the browser redrew every table, chart and form of it
    (6 to 25 s on a few-hundred-node graph on a busy machine) for a change that is only here; now a
    pick reruns these two, and nothing else is sent or redrawn."""
    _graph(report, graph, title, identity)
    _node_details(report, graph, identity)


def _graph(report: PartitionReport, graph: ModelGraph, title: str, identity: str) -> None:
    cost = profile_view.shown_profile(report.digest)  # the Profile page's pick: the cost overlays
    error = accuracy_view.shown_report(report.digest)  # the accuracy page's: the error vs float overlay
    key = f"pt_{identity}{profile_view.viewer_key(cost)}{accuracy_view.viewer_key(error)}"
    picked = graph_viewer.show(graph, key, title, report, profile=cost, accuracy=error)
    if picked:
        st.session_state[_NODE] = picked
        st.session_state[node_pick_key(identity)] = picked  # the node selector below is drawn after this
    st.caption("Groups are name scopes: double-click one to open it. Every overlay is also in the viewer's "
               "node data panel (its eye icon switches). Pick a node, or Alt+click a search result, to see its "
               "details below (a pick redraws only the viewer and the details).")


def _op_types(report: PartitionReport) -> None:
    htp, gpu = report.backends.get("htp"), report.backends.get("gpu")
    if not (htp and gpu):
        st.info("The op-type table compares both backends.")
        return
    gpu_label = f"GPU ({gpu.status})"
    rows = [{"op type": r.op_type, "nodes": r.count, "HTP claims": r.htp_supported, f"{gpu_label} claims":
             r.gpu_supported, "removed by ORT": r.removed, "HTP reasons": " | ".join(r.htp_reasons),
             f"{gpu_label} reasons": " | ".join(r.gpu_reasons)} for r in op_type_table(report.op_types, htp, gpu)]
    st.dataframe(frame(rows), hide_index=True, width="stretch")


def _verdict_rows(report: PartitionReport, name: str) -> list[dict]:
    rows = []
    for backend_name, backend in report.backends.items():
        verdict = backend.nodes.get(name)
        hardware = backend.runtime.get("hardware") if backend.status == MEASURED else None
        rows.append({"backend": backend_name.upper(),
                     "figure": backend.status + (f" on the {hardware_label(hardware)}" if hardware else ""),
                     "verdict": "—" if verdict is None else "claimed" if verdict.supported else
                     "removed" if verdict.status == "removed" else "refused",
                     "status": verdict.status if verdict else "—",
                     "QNN op": (verdict.qnn_op or "") if verdict else "",
                     "reason": (verdict.reason or "") if verdict else "",
                     "fused into": (verdict.fused_into or "") if verdict else ""})
    return rows


def node_labels(names: list[str]) -> dict[str, str]:
    """A label per node for the picker, each different: Streamlit identifies a selectbox's choice by
    its label, so two long names cut to the same ``short()`` label would show one node and select
    another. A clash keeps the end of the name (where scoped names differ) and, if still equal, a number."""
    labels = {n: short(n) for n in names}
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    taken: set[str] = set()
    for name, label in labels.items():
        if seen[label] > 1:
            label = name if len(name) <= 80 else f"{name[:30]}…{name[-49:]}"
        while label in taken:
            label = f"{label} ({len(taken)})"
        taken.add(label)
        labels[name] = label
    return labels


def _node_details(report: PartitionReport, graph: ModelGraph, identity: str) -> None:
    names = report.node_order
    if not names:
        return
    key = node_pick_key(identity)
    if st.session_state.get(key) not in names:
        carried = st.session_state.get(_NODE)
        st.session_state[key] = carried if carried in names else _first_node(report)
    st.subheader("Node", anchor=False)
    labels = node_labels(names)
    name = st.selectbox("Node (or click one in the graph)", names, key=key, format_func=labels.__getitem__)
    st.session_state[_NODE] = name
    node = graph.node_by_name()[name]
    cls = report.classes.of().get(name)
    st.markdown(f"**{md(name, 200)}** · op **{md(node.qualified_op)}** · class "
                f"**{md(CLASS_LABELS.get(cls, cls or '—'))}**")
    st.dataframe(frame(_verdict_rows(report, name)), hide_index=True, width="stretch",
                 column_config={"reason": st.column_config.TextColumn(width="large")})
    profile_view.node_cost(report.digest, name)
    accuracy_view.node_error(report.digest, graph, name)
    shapes = report.shapes
    rows = [{"io": io, "tensor": short(t), "shape": shapes[t].text() if t in shapes else "?",
             "constant": t in graph.initializers} for io, tensors in (("in", node.inputs), ("out", node.outputs))
            for t in tensors if t]
    st.dataframe(frame(rows), hide_index=True, width="stretch")


def _first_node(report: PartitionReport) -> str:
    """Where the node panel starts: the first node that keeps the model off the NPU (it runs, on
    the CPU), else the first node that runs at all; never one ONNX Runtime removed."""
    htp = report.backends.get("htp")
    removed = set(report.classes.removed)
    running = [n for n in report.node_order if n not in removed
               and not (htp and n in htp.nodes and htp.nodes[n].status == REMOVED)]
    refused = [n for n in running if htp and n in htp.nodes and not htp.nodes[n].supported]
    return (refused or running or report.node_order)[0]


def _snippet(report: PartitionReport) -> None:
    """The session of this analysis as Python to paste into a script (``partition.snippet``)."""
    backends = [b for b in BACKENDS if b in report.backends] or ["htp"]
    with st.expander("Reproduce outside the dashboard: the same session in Python", icon=":material/code:"):
        backend = st.radio("Backend", backends, horizontal=True, key="pt_snippet_backend",
                           format_func=str.upper) if len(backends) > 1 else backends[0]
        try:
            code = report_snippet(report, backend)
        except UserError as exc:
            st.error(md(page_words(str(exc))), icon=":material/error:")
            return
        st.caption("The session and provider options this analysis used (its op trace, which writes files, "
                   "left out); the partition command prints the same script.")
        st.code(code, language="python")


def _rule_table() -> None:
    st.markdown("Where the GPU backend cannot run (no Adreno GPU on this host), its column is **predicted** "
                "from this table; a device report replaces it with measured figures.")
    st.dataframe(frame(gpu_rules.rule_table()), hide_index=True, width="stretch",
                 column_config={"source": st.column_config.TextColumn(width="large")})
