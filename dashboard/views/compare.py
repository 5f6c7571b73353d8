"""Compare page: two models, or one model under two option sets, side by side.

Each side is a model (the selected one, a bundled sample, or a path on the server) and the options
that decide what QNN claims (precision, SoC, optimization level), set per side; everything else
(symbolic dimensions, input shapes, provider options) is that model's settings shared with the
other pages (``views.settings``), and the page says so per side. **Compare** analyses both on
the current device as one background job (``views.jobs``: step, time elapsed, Cancel), and the
page then shows, per side: both classifiers' verdicts, the node classes (B's with the difference
from A), the nodes that keep it off the NPU (for one model under two option sets, which nodes
only one side leaves off), and a timeline run of each model from this session. Reports land in
the Partitions page's store, so either page answers the other's options at once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import Classification
from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.intake.samples import SAMPLES, sample_path
from dashboard.intake.shapes import resolve_dims
from dashboard.partition.analysis import analyze
from dashboard.partition.report import CLASS_LABELS, CLASSES, FAILED, REMOVED, PartitionReport, claims
from dashboard.render.report import binary_size
from dashboard.render.timeline_figures import strategy_bars
from dashboard.runtime.knobs import Settings
from dashboard.runtime.socs import hardware_label, resolve_soc
from dashboard.timeline.model import TimelineRun, strategy_table
from dashboard.views import jobs, partitions, shape_hints, state, timeline
from dashboard.views import profile as profile_view
from dashboard.views.devices import adopt, select_device
from dashboard.views.safe import md, short
from dashboard.views.settings import SettingsForm, model_defaults, page_words, shared_values, stored_values

_JOB = "compare_job"
_DEVICE_PICK = "cmp_device"
SIDES = ("A", "B")
SELECTED, PATH = "selected", "path"
NOTHING = "—"  # a fact or figure nobody measured, in every table of the page
SIDE_KNOBS = ("fp16", "soc", "optimization_level")  # what a side's form sets (the rest: the model's shared settings)


@dataclass(frozen=True)
class Side:
    """One column of the comparison: a model and the options to analyse it with."""

    name: str
    path: str
    digest: str
    options: Settings
    file_name: str = ""  # the name the model's file is known by (an upload's as uploaded): what hints read


@st.cache_resource(max_entries=8, show_spinner=False)
def _model(digest: str, path: str, file_name: str = "") -> tuple[ModelGraph, Classification, Classification]:
    graph = load_model(path, file_name or None)
    return graph, classify_ep(graph), classify_refined(graph)


def render() -> None:
    selected = state.require_model()
    st.title("Compare", anchor=False)
    st.caption("Two models, or one model under two option sets, side by side: verdicts, classes, the nodes that "
               "keep each off the NPU, and timelines.")
    try:
        sides, device, submitted = _form(selected)
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    for side in sides:  # each side's model at its shared dimensions: say where those are degenerate
        shape_hints.show(_model(side.digest, side.path, side.file_name)[0], side.options, who=side.name, digest=side.digest)
    keys = [partitions.report_key(s.digest, s.options, device) for s in sides]
    reports = [partitions.stored_report(k) for k in keys]
    if any(r is None for r in reports):
        reports = _run(sides, keys, reports, device, submitted)
        if reports is None:
            return
    _verdicts(sides)
    _classes(sides, reports)
    _failures(sides, reports)
    _what_differs(sides, reports)
    _off_npu(sides, reports)
    _timelines(sides)
    profile_view.compare_sides((sides[0].digest, sides[1].digest), (sides[0].name, sides[1].name))


# -- the form ------------------------------------------------------------------------------------------
def _form(selected) -> tuple[list[Side], object, bool]:
    choices = {SELECTED: f"Selected model: {selected.name}", **{s.file_name: f"Sample: {s.title}" for s in SAMPLES},
               PATH: "A path on the server…"}
    # B starts on the other precision than A's (the model's shared one): two option sets
    graph = state.loaded_graph()
    a_fp16 = bool({**model_defaults(graph), **shared_values(selected.digest, graph)}["fp16"])
    with st.form("compare", border=True):
        device = select_device("Device", key=_DEVICE_PICK, in_form=True)
        raw = []
        for side, column in zip(SIDES, st.columns(2, gap="large")):
            with column:
                st.markdown(f"**{side}**")
                source = st.selectbox("Model", list(choices), format_func=choices.get, key=f"cmp_model_{side}")
                path = st.text_input("Path of an .onnx file on the server", key=f"cmp_path_{side}",
                                     placeholder="used when the model is 'A path on the server…'")
                form = SettingsForm("cmp", side, analysis="partition", defaults={"fp16": a_fp16 != (side == "B")},
                                    **({"model": selected.digest, "remember": False} if side == "A" else {}))
                form.draw("fp16", "soc", "optimization_level")
                raw.append((side, source, path, form))
        submitted = st.form_submit_button("Compare", type="primary", icon=":material/compare:", key="cmp_apply",
                                          on_click=adopt, args=(_DEVICE_PICK,))
    sides = [_side(selected, *values) for values in raw]
    _settings_said(sides)
    return sides, device, submitted


def _settings_said(sides: list[Side]) -> None:
    """What each side is analysed at besides the three knobs above: its model's settings shared
    with the Partitions and Timeline pages (dimensions, input shapes, provider options), or the
    model's defaults when no page set them."""
    lines = []
    for side in sides:
        graph = _model(side.digest, side.path, side.file_name)[0]
        dims = resolve_dims(graph, side.options.dims)
        said = ", ".join(f"{k}={v}" for k, v in dims.items()) or "no symbolic dimensions"
        said += "".join(f"; {k}={','.join(map(str, v))}" for k, v in (side.options.shapes or {}).items())
        whose = "its settings shared with the Partitions and Timeline pages" if stored_values(side.digest) else \
            "its defaults (no page set this model's dimensions yet)"
        lines.append(f"{side.name.split(':')[0]} at {md(said, 200)} — {whose}")
    st.caption("Each side's model is analysed at its symbolic dimensions, input shapes and provider options "
               "as set on the Partitions or Timeline page (change them there); precision, SoC and optimization "
               "level are the side's own, above. " + " · ".join(lines))


def _side(selected, side: str, source: str, path: str, form: SettingsForm) -> Side:
    if source == SELECTED:
        return Side(f"{side}: {selected.name}", selected.path, selected.digest, form.settings(model=selected.digest),
                    state.file_name(selected))
    if source == PATH:
        if not path.strip():
            raise UserError(f"{side}: enter the path of an .onnx file on the server")
        load_model(path.strip())  # a bad path is one line, before anything runs
        model_path = str(path.strip())
        name, digest = model_path.rsplit("/", 1)[-1], file_digest(model_path)
    else:
        sample = next(s for s in SAMPLES if s.file_name == source)
        name, model_path = sample.title, str(sample_path(source))
        digest = file_digest(model_path)
    return Side(f"{side}: {name}", model_path, digest, form.settings(model=digest))


# -- running -------------------------------------------------------------------------------------------
def _run(sides: list[Side], keys: list[str], stored: list[PartitionReport | None], device,
         submitted: bool) -> list[PartitionReport] | None:
    """Both reports: a side already analysed with its options (here or on the Partitions page) is
    reused, the others come from the Compare job, started by the Compare button and shown while
    it runs."""
    key = "|".join(keys)
    job = jobs.current(_JOB)
    missing = [i for i, report in enumerate(stored) if report is None]
    if submitted and (job is None or job.key != key or job.done):
        job = jobs.start(_JOB, key, f"Comparing on {device.label}", lambda on_event, cancel: {
            i: analyze(sides[i].path, sides[i].options, on_event=lambda e, s=sides[i]: on_event(_tagged(e, s)),
                       digest=sides[i].digest, device=device, cancel=cancel) for i in missing})
        job.wait(jobs.QUICK_S)
    if job is None or job.key != key:
        st.info("Pick a model and options for each side, then **Compare**. One model under two option sets shows "
                "which nodes each leaves off the NPU.", icon=":material/compare:")
        return None
    if jobs.finished(_JOB, job) is None:
        return None
    for i, report in job.result.items():
        partitions.remember(keys[i], report)
    return [job.result.get(i) or stored[i] or partitions.stored_report(keys[i]) for i in range(len(sides))]


def _tagged(event, side: Side):
    """A progress event with the side it belongs to in its step (A or B)."""
    stage = getattr(event, "stage", None)
    return dataclasses.replace(event, stage=f"{side.name.split(':')[0]}: {stage}") if stage else event


def _options_text(options: Settings) -> str:
    soc = resolve_soc(options.soc).key if options.soc else "no SoC"
    return f"fp16 {'on' if options.fp16 else 'off'}, {soc}, optimization {options.optimization_level or 'default'}"


# -- results ---------------------------------------------------------------------------------------------
def _verdicts(sides: list[Side]) -> None:
    st.subheader("Verdicts", anchor=False)
    for side, column in zip(sides, st.columns(2, gap="large")):
        _, ep, refined = _model(side.digest, side.path, side.file_name)
        column.markdown(f"**{md(side.name, 80)}**")
        column.markdown(f"EP rules: **{ep.verdict}** → {ep.backend.upper()} · refined: **{refined.verdict}** → "
                        f"{refined.backend.upper()}" + (f" ({refined.confidence})" if refined.confidence else ""))
        if refined.explanation:
            column.caption(md(refined.explanation, 300))


def _classes(sides: list[Side], reports: list[PartitionReport]) -> None:
    st.subheader("Classes", anchor=False)
    base = reports[0].classes.counts() if not reports[0].classes.note else None
    for side, report, column in zip(sides, reports, st.columns(2, gap="large")):
        with column:
            st.markdown(f"**{md(side.name, 80)}** · {_status_line(report)}")
            if report.classes.note:
                st.warning(md(report.classes.note), icon=":material/warning:")
                continue
            counts = report.classes.counts()
            for col, cls in zip(st.columns(len(CLASSES) + 1), (*CLASSES, "removed")):
                delta = counts[cls] - base[cls] if base is not None and report is not reports[0] else None
                col.metric(CLASS_LABELS[cls], counts[cls], delta, delta_color="off")


def _status_line(report: PartitionReport) -> str:
    parts = []
    for name, backend in report.backends.items():
        where = backend.runtime.get("hardware") if backend.status == "measured" else None
        parts.append(f"{name.upper()} {backend.status}" + (f" on the {hardware_label(where)}" if where else ""))
    return md(" · ".join(parts))


def _refused(report: PartitionReport) -> dict[str, str] | None:
    """The nodes the HTP refused, by name with its reason; None when the HTP has no per-node
    verdicts (it failed, or was not analysed): then nothing can be said about its nodes."""
    htp = report.backends.get("htp")
    if htp is None or htp.status == FAILED:
        return None
    return {n: v.reason or "" for n, v in htp.nodes.items() if not v.supported and v.status != REMOVED}


def _failures(sides: list[Side], reports: list[PartitionReport]) -> None:
    """A side whose backend failed says why, with the next step when there is one, and the
    runtime's own message one click away."""
    for side, report in zip(sides, reports):
        for name, backend in report.backends.items():
            if backend.status != FAILED:
                continue
            reason = page_words(backend.suggestion or backend.error) or "the runtime gave no reason"
            st.error(f"**{md(side.name, 80)}: {name.upper()} failed.** {md(reason, 600)}", icon=":material/error:")
            if backend.suggestion and backend.error:
                with st.expander(f"{side.name.split(':')[0]}: the runtime's own message"):
                    st.code(page_words(backend.error), language=None, wrap_lines=True)


def _what_differs(sides: list[Side], reports: list[PartitionReport]) -> None:
    """Per side, what tells two option sets apart: the SoC with its HTP architecture and
    ``soc_model``, precision, optimization level, and what the HTP measured (its session creation,
    which is QNN's compile for that SoC, and its QNN subgraphs). Shown when the options differ."""
    if sides[0].options.result_json() == sides[1].options.result_json():
        return
    st.subheader("What tells the sides apart", anchor=False)
    rows = [side_facts(side.options, report, runs_of(timeline.session_runs(side.path)(), side.options))
            for side, report in zip(sides, reports)]
    frame = pd.DataFrame(rows, index=[short(s.name, 60) for s in sides]).T
    st.dataframe(frame.fillna(NOTHING).astype(str), width="stretch")  # a fact one side lacks: —, never nan
    st.caption("HTP session creation is QNN's compile for that SoC, measured by this analysis (on the HTP "
               "simulator on x86_64: the simulator's compile, not a device's). The compiled context's size is "
               "measured by a timeline run with the cached EPContext strategy and these options.")


def side_facts(options: Settings, report: PartitionReport, runs: list[TimelineRun] = ()) -> dict[str, str]:
    """One column of "what tells the sides apart" (``socs.resolve_soc`` for the part's figures);
    ``runs``: the side's timeline runs, whose cached strategy measured the compiled context."""
    facts = {"SoC": "not set (the EP's default)", "HTP architecture": NOTHING, "soc_model": NOTHING}
    if options.soc:
        soc = resolve_soc(options.soc)
        facts = {"SoC": soc.name, "HTP architecture": f"v{soc.htp_arch}",
                 "soc_model": "not published" if soc.soc_model is None else str(soc.soc_model)}
    facts["HTP fp16 precision"] = "on" if options.fp16 else "off"
    facts["optimization level"] = str(options.optimization_level or "default")
    htp = report.backends.get("htp")
    if htp is None:
        facts["HTP"] = "not analysed"
    elif htp.status == FAILED:
        facts["HTP"] = "failed"
    else:
        where = hardware_label(htp.runtime.get("hardware"))
        facts["HTP"] = f"{htp.status} on the {where}"
        counts = claims(report, "htp")
        facts["HTP claims"] = f"{counts.claimed} of {counts.executed} executed nodes"
        facts["QNN subgraphs"] = NOTHING if htp.qnn_subgraphs is None else str(htp.qnn_subgraphs)
        facts["HTP session creation (compile)"] = NOTHING if htp.seconds is None else f"{htp.seconds:.2f} s"
    sizes = [r.target["context_bytes"] for r in runs if r.target.get("context_bytes") is not None]
    facts["EPContext size"] = binary_size(sizes[-1]) if sizes else "not measured (run the cached strategy)"
    return facts


def _off_npu(sides: list[Side], reports: list[PartitionReport]) -> None:
    st.subheader("Nodes that keep each off the NPU", anchor=False)
    refused = [_refused(r) for r in reports]
    for side, nodes, column in zip(sides, refused, st.columns(2, gap="large")):
        with column:
            if nodes is None:
                st.markdown(f"**{md(side.name, 80)}**: the HTP failed, so it has no per-node verdicts (see why above)")
                continue
            st.markdown(f"**{md(side.name, 80)}**: {len(nodes)} node(s)")
            if nodes:
                st.dataframe(pd.DataFrame([{"node": short(n, 60), "HTP reason": r} for n, r in nodes.items()]),
                             hide_index=True, width="stretch", height=min(38 + 35 * len(nodes), 320))
    if any(nodes is None for nodes in refused):
        if sides[0].digest == sides[1].digest:
            st.caption("Which nodes only one side leaves off the NPU needs the HTP's verdicts on both sides.")
        return
    if sides[0].digest == sides[1].digest:
        only = [(n, side.name.split(":")[0]) for side, mine, other in ((sides[0], refused[0], refused[1]),
                                                                       (sides[1], refused[1], refused[0]))
                for n in mine if n not in other]
        st.markdown(f"Same model: **{len(only)}** node(s) are off the NPU on one side only.")
        if only:
            st.dataframe(pd.DataFrame([{"node": short(n, 80), "off the NPU only in": s} for n, s in only]),
                         hide_index=True, width="stretch")


def _cell(value) -> str:
    """A figure as the tables show it: ``—`` where nothing was measured (a table showed ``None``
    beside the facts' ``—``)."""
    return NOTHING if value is None else str(value)


def runs_of(runs: list[TimelineRun], options: Settings) -> list[TimelineRun]:
    """The runs made with the options that decide what QNN claims (``SIDE_KNOBS``) of a side: in
    setting-set mode each side shows its own run, not the model's last."""
    wanted = options.to_json()
    return [r for r in runs if all(r.options.get(k) == wanted.get(k) for k in SIDE_KNOBS)]


def _timelines(sides: list[Side]) -> None:
    st.subheader("Timelines", anchor=False)
    chosen: list[TimelineRun] = []
    for side, column in zip(sides, st.columns(2, gap="large")):
        with column:
            runs = runs_of(timeline.session_runs(side.path)(), side.options)
            if not runs:
                st.info(f"No timeline run of {md(side.name.split(': ', 1)[1], 60)} with these options "
                        f"({md(_options_text(side.options))}) in this session: run one on the Timeline page.",
                        icon=":material/timeline:")
                continue
            labels = [r.label for r in runs]
            picked = st.selectbox("Run", labels, index=len(labels) - 1, key=f"cmp_run_{side.name[0]}")
            run = runs[labels.index(picked)]
            chosen.append(dataclasses.replace(run, label=f"{side.name[0]}: {run.label}"))
            st.dataframe(pd.DataFrame([{"strategy": r["title"], "first response (s)": _cell(r["first_response_s"]),
                                        "p50 after swap (s)": _cell(r["p50_after_s"]), "p99 (s)": _cell(r["p99_s"]),
                                        "req/s": _cell(r["throughput_rps"]), "failed": r["failed"]}
                                       for r in strategy_table(run)]), hide_index=True, width="stretch")
            if run.runtime.get("hardware") == "simulator":
                st.caption("HTP figures from the x86_64 HTP simulator: not NPU latency.")
    if len(chosen) == 2:
        st.plotly_chart(strategy_bars([(r.label, r) for r in chosen]), key="cmp_bars")
