"""Profile page: where the time goes, per node, on every backend that ran the model.

Built to answer "which ops are slow on the NPU, and what does the CPU fallback cost" in one look:
under the settings (the same knobs as the Partitions page, ``views.settings``) come each backend's
total in its own unit, then the costliest nodes, the op types and the name-scope blocks, each
labelled with the kind of number it shows ("simulated HTP cycles" on this x86_64 host: cycles of
the HTP simulator, which overlap and are never turned into time), and the CPU fallback's µs next
to the copies each CPU node causes between the HTP and the host. A table of every node downloads
as CSV.

A profile runs as the page's background job (``views.jobs``, the runner the Partitions and
Timeline pages use): its step, the time elapsed, Cancel, and it keeps running while the user is
on another page; the finished profile is collected by whichever page of the session is drawn
next. A profile downloaded from Qualcomm AI Hub can be uploaded too: it is shown in the same views
as "measured on <device> by AI Hub", with the layers it could not place on a model node counted
and listed. The Compare section puts two profiles of this session side by side, per node, op type
and block (``profile.model.compare``). The Partitions page's graph draws the profile picked here as a
cost overlay (``render.model_explorer.cost_overlays``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.shapes import is_float_model
from dashboard.profile.model import (BACKEND_TITLES, DEFAULT_RUNS, IMPORTED_TITLES, MAX_RUNS, SIMULATOR_HARDWARE,
                                     UNIT_LABELS, Profile, compare)
from dashboard.render import profile_views as figures
from dashboard.runtime.knobs import TERMS
from dashboard.runtime.socs import SIMULATOR_NOTE
from dashboard.views import jobs, state
from dashboard.views.devices import adopt, select_device
from dashboard.views.results import SessionResults
from dashboard.views.safe import download_name, md, short
from dashboard.views.settings import SettingsForm

if TYPE_CHECKING:
    from dashboard.profile.model import NodeCost

_RUNS = "profile_runs"  # [{"label", "profile": Profile, "digest", "finished", "device"}], oldest first
_SHOWN = "profile_shown"  # model digest -> label of the profile shown (and drawn on the Partitions graph)
_JOB = "profile_job"
_DEVICE_PICK = "pf_device"
_KEEP = 16  # profiles kept per session
ERROR_LIMIT = 300  # characters of an error line shown (an uploaded file names its own text)
AGAIN = "Press Profile to run it again."
ANALYSIS = "profile"
RESULTS = SessionResults(_RUNS, _SHOWN, _JOB, _KEEP, lambda e: f"{e['what']} · {e['device']}")


# -- what other pages read ------------------------------------------------------------------------------
def session_profiles(digest: str) -> list[dict]:
    """This session's profiles of the model ``digest`` (oldest first), the finished job's included."""
    collect()
    return RESULTS.of(digest)


def session_records(digest: str) -> Callable[[], list[Profile]]:
    """This session's profiles of the model ``digest`` (for the HTML report), as a function that
    reads them when called (see ``partitions.session_reports``)."""
    collect()
    store: list = st.session_state.setdefault(_RUNS, [])
    return lambda: [e["profile"] for e in list(store) if e["digest"] == digest]


def _shown_entry(digest: str) -> dict | None:
    collect()
    return RESULTS.shown_entry(digest)


def shown_profile(digest: str) -> Profile | None:
    """The profile picked on this page for the model ``digest`` (else its latest), or None."""
    entry = _shown_entry(digest)
    return entry["profile"] if entry is not None else None


def viewer_key(profile: Profile | None) -> str:
    """What a graph drawn with ``profile``'s cost depends on (a part of the viewer's key), hashed
    once per profile of the session (a 20,000-node profile is megabytes of JSON)."""
    if profile is None:
        return ""
    entry = next((e for e in st.session_state.get(_RUNS, []) if e["profile"] is profile), {})
    if "viewer_key" not in entry:
        blob = json.dumps(profile.to_json(), sort_keys=True, default=str)
        entry["viewer_key"] = "_c" + hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()
    return entry["viewer_key"]


def node_cost(digest: str, name: str) -> None:
    """The node panel's cost lines for model node ``name`` (Partitions page): its cost in each
    backend's unit, its fused group, and rows the EP inserted for it, from the profile shown here."""
    entry = _shown_entry(digest)
    if entry is None:
        st.caption("Cost: none yet. Run a profile on the Profile page to see what this node costs.")
        return
    profile: Profile = entry["profile"]
    rows = [r for r in profile.nodes if r.name == name or (r.inserted and r.serves == name)]
    if not rows:
        st.caption(f"Cost: not in the profile ({md(_origin(profile))}): it ran on no backend that was profiled.")
        return
    st.markdown("  \n".join(_cost_line(profile, r) for r in rows))
    st.caption(f"Cost from profile {md(entry['label'])} ({md(_origin(profile))}); the Profile page picks another.")


def _cost_line(profile: Profile, row: "NodeCost") -> str:
    """``**Cost** on HTP: 40,000 cycles · simulated HTP cycles · 3.8 % of HTP · fused group …``"""
    head = (f"**Inserted by the EP** for it ({md(row.op_type)} {md(short(row.name, 60))})" if row.inserted
            else "**Cost**")
    parts = [f"{head} on {row.backend.upper()}: **{_value(row.median, row.unit)}**", md(profile.label(row.backend)),
             f"{row.share:.1%} of {row.backend.upper()}"]
    if row.carrier:
        parts.append(f"fused group of {len(row.members)} nodes (the group's cost): "
                     + ", ".join(md(short(m, 60)) for m in row.members))
    elif row.fused:
        carrier = profile.node(row.group, row.backend)
        parts[0] = f"**Cost** on {row.backend.upper()}: in a fused group"
        parts.append(f"the group's cost is on {md(short(row.group, 60))}"
                     + (f": {_value(carrier.median, carrier.unit)}" if carrier else ""))
    return " · ".join(parts)


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f} {UNIT_LABELS[unit]}" if unit == "cycles" else f"{value:,.1f} {UNIT_LABELS[unit]}"


def _origin(profile: Profile) -> str:
    if profile.source == "imported":
        hardware = next(iter(profile.backends.values())).hardware if profile.backends else "AI Hub"
        return f"imported from {hardware}"
    return f"of {profile.runs} timed run(s)"


# -- the page -------------------------------------------------------------------------------------------
def render() -> None:
    selected = state.require_model()
    graph = state.loaded_graph()
    st.title("Profile", anchor=False)
    st.caption(f"{md(selected.name, 120)} · where the time goes: what each node costs on each backend, in the "
               "backend's own unit")
    try:
        options, runs, device, submitted = _knobs(graph, selected.digest)
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        options = None
        submitted = False
    if submitted and options is not None:
        _start(selected, options, runs, device)
    _progress(selected)
    _aihub(selected, graph)
    _results(selected, graph)


def _knobs(graph: ModelGraph, digest: str):
    """The settings form (nothing runs until **Profile** is pressed: a profile compiles the model
    and runs it many times)."""
    form = SettingsForm("pf", digest, graph, analysis=ANALYSIS, defaults={"fp16": is_float_model(graph)})
    with st.form(f"pf_options_{digest}", border=True):
        st.markdown("**Profile settings** · the same knobs as the Partitions page")
        left, mid, right = st.columns([2, 2, 3], gap="medium")
        with left:
            device = select_device(TERMS["device"].label, key=_DEVICE_PICK, in_form=True)
            form.draw("backends", "fp16", "soc")
        with mid:
            runs = st.number_input("Timed runs", min_value=1, max_value=MAX_RUNS, value=DEFAULT_RUNS, step=1,
                                   key=f"pf_runs_{digest}", help="Runs measured after the warm-up; each node's "
                                   "figure is its median over them, with the spread.")
            form.draw("optimization_level", "timeout", "provider_options")
        with right:
            form.draw("dims", "shapes")
        submitted = st.form_submit_button("Profile", type="primary", icon=":material/speed:", key="pf_run",
                                          on_click=adopt, args=(_DEVICE_PICK,))
    return form.settings(), int(runs), device, submitted


# -- the run in the background ------------------------------------------------------------------------
def run_key(digest: str, options, runs: int, device) -> str:
    return f"{digest}|{json.dumps(options.result_json(), sort_keys=True)}|{runs}|{device.url}"


def _start(selected, options, runs: int, device) -> None:
    key = run_key(selected.digest, options, runs, device)

    def work(on_event, cancel) -> dict:
        started = time.monotonic()
        profile = measure(selected.path, options, runs=runs, device=device, digest=selected.digest,
                          on_event=on_event, cancel=cancel)
        return {"profile": profile, "digest": selected.digest, "name": selected.name, "device": device.label,
                "finished": datetime.now(timezone.utc), "what": _settings_words(options.result_json(), runs),
                "key": key, "seconds": time.monotonic() - started}

    jobs.start(_JOB, key, f"Profiling {short(selected.name, 40)} on {device.label}", work, timeout=options.timeout)


RUNS_FROM, RUNS_TO = 0.1, 0.8  # the fraction of a profile's progress its runs cover (``profile.measure``)
_PACE = "profile_pace"  # job id -> (time, progress) when its runs were first seen under way


def _time_left(job: jobs.Job) -> None:
    """The time left: once runs are under way, from their pace (the worker reports each run; the
    compile before them is paid once, so it is left out of the rate); before that, from the last
    profile of this session with the same model, settings, runs and device."""
    pace = st.session_state.setdefault(_PACE, {})
    now = time.monotonic()
    if RUNS_FROM < job.progress < RUNS_TO:
        first = pace.setdefault(job.id, (now, job.progress))
        if job.progress > first[1] and now > first[0]:
            left = (RUNS_TO - job.progress) * (now - first[0]) / (job.progress - first[1])
            st.caption(f"About {jobs.duration(left)} left for the runs, going by their pace so far.")
            return
    before = [e["seconds"] for e in st.session_state.get(_RUNS, []) if e.get("key") == job.key and "seconds" in e]
    if before:
        st.caption(f"About {jobs.duration(max(before[-1] - job.elapsed, 0))} left, going by the last profile with "
                   f"these settings ({jobs.duration(before[-1])}).")
    else:
        st.caption("Time left: estimated once the first runs are done (or from an earlier profile with these "
                   "settings).")


def measure(path: str, options, *, runs: int, device, digest: str, on_event, cancel) -> Profile:
    """The profile of the model at ``path`` (the profile capability's runner, on ``device``)."""
    from dashboard.profile.run import profile_model

    return profile_model(path, options, runs=runs, device=device, on_event=on_event, cancel=cancel)


def _settings_words(settings: dict, runs: int) -> str:
    parts = [f"{runs} runs", "fp16" if settings.get("fp16") else "fp32"]
    if settings.get("soc"):
        parts.append(f"SoC {settings['soc']}")
    if settings.get("optimization_level") not in (None, "all"):
        parts.append(f"opt {settings['optimization_level']}")
    return ", ".join(parts)


def _add(entry: dict) -> None:
    RESULTS.add(entry)


def collect() -> None:
    """The finished job's profile into the session's profiles, once (``views.results``)."""
    RESULTS.collect()


def _progress(selected) -> None:
    RESULTS.progress(selected.digest, "Profiled", AGAIN, _time_left)


# -- AI Hub ---------------------------------------------------------------------------------------------
def _aihub(selected, graph: ModelGraph) -> None:
    """An AI Hub profile (``ProfileJob.download_profile()`` saved as JSON) mapped onto this model;
    its size is capped in the browser and again here, before its bytes are read."""
    from dashboard.profile import aihub

    with st.expander("Import a profile measured on a phone by Qualcomm AI Hub", icon=":material/upload_file:"):
        st.markdown("Save an AI Hub profile job's result as JSON (in Python: `json.dump(job.download_profile(), "
                    "f)`) and upload it: its layers are placed on this model's nodes by name.")
        device = st.text_input("Device name (when the file does not name it)", key=f"pf_aihub_device_{selected.digest}")
        upload = st.file_uploader("AI Hub profile (JSON)", type=["json"], key=f"pf_aihub_{selected.digest}",
                                  max_upload_size=max(1, aihub.MAX_FILE_BYTES >> 20),
                                  help=f"Up to {aihub.MAX_FILE_BYTES >> 20} MB (a real profile is a few MB).")
        if upload is None:
            return
        seen = st.session_state.setdefault("profile_imported", set())
        mark = (selected.digest, upload.file_id, device)
        if mark in seen:
            return
        try:
            if upload.size > aihub.MAX_FILE_BYTES:  # before its bytes are taken
                raise aihub.too_large(upload.size, str(upload.name))
            profile = import_aihub(upload.getvalue(), graph, device or None, str(upload.name))
        except UserError as exc:
            st.error(md(exc, ERROR_LIMIT), icon=":material/error:")
            return
        seen.add(mark)
        hardware = next(iter(profile.backends.values())).hardware if profile.backends else "AI Hub"
        _add({"profile": profile, "digest": selected.digest, "name": selected.name, "device": hardware,
              "finished": datetime.now(timezone.utc), "what": f"imported {short(upload.name, 30)}"})


def import_aihub(data: bytes, graph: ModelGraph, device: str | None, name: str) -> Profile:
    """The uploaded file as a profile of ``graph`` (the profile capability's AI Hub import)."""
    from dashboard.profile import aihub

    return aihub.import_profile(aihub.parse_bytes(data, name), graph, name, device_name=device)


# -- results ---------------------------------------------------------------------------------------------
def _results(selected, graph: ModelGraph) -> None:
    entries = session_profiles(selected.digest)
    if not entries:
        st.info("No profile yet: pick the settings and press **Profile**, or import an AI Hub profile.",
                icon=":material/speed:")
        return
    entry = RESULTS.picker(selected.digest, "Profile shown (also drawn on the Partitions page's graph)",
                           f"pf_shown_{selected.digest}", entries)
    label = entry["label"]
    profile: Profile = entry["profile"]
    _backends(profile)
    _unmatched(profile)
    usable = [b for b, p in profile.backends.items() if p.ok and profile.backend_nodes(b)]
    if usable:
        top_tab, ops_tab, blocks_tab, cpu_tab, table_tab = st.tabs(
            ["Top nodes", "Op types", "Blocks", "CPU fallback", "All nodes"], key="pf_tabs")
        with top_tab:
            for b in usable:
                st.plotly_chart(figures.top_nodes(profile, b), key=f"pf_top_{b}")
        with ops_tab:
            for b in usable:
                st.plotly_chart(figures.op_types(profile, b), key=f"pf_ops_{b}")
        with blocks_tab:
            depth = st.slider("Block depth (name-scope levels)", 1, 4, 1, key="pf_depth")
            for b in usable:
                st.plotly_chart(figures.blocks(profile, b, depth), key=f"pf_blocks_{b}")
        with cpu_tab:
            _fallback(profile, graph, selected.digest)
        with table_tab:
            _node_table(profile, selected.path, entry.get("finished"))
    _compare(selected, entries, label)



def _backends(profile: Profile) -> None:
    cols = st.columns(max(len(profile.backends), 1))
    for col, (name, backend) in zip(cols, profile.backends.items()):
        with col.container(border=True):
            title = (IMPORTED_TITLES if profile.source == "imported" else BACKEND_TITLES).get(name, name.upper())
            if not backend.ok:
                st.markdown(f"**{md(title)}** :red-badge[failed]")
                st.error(md(backend.reason or "failed"), icon=":material/error:")
                continue
            kind = ":violet-badge[imported]" if profile.source == "imported" else ":green-badge[measured]"
            st.markdown(f"**{md(title)}** {kind} · {md(profile.label(name))}")
            st.metric(f"total · {profile.label(name)}", _value(backend.total, backend.unit),
                      help="The median over the runs of the backend's total (HTP: the accelerator's execute "
                           "cycles; the CPU EP: its kernels' µs).")
            spread = (f"runs {backend.total_min:,.0f} – {backend.total_max:,.0f} {UNIT_LABELS[backend.unit]}"
                      if backend.total_min is not None and backend.total_max is not None else "")
            st.caption(" · ".join(x for x in (f"{backend.runs} run(s) read", spread,
                                                f"level {backend.level}" if backend.level else "") if x))
            if backend.hardware == SIMULATOR_HARDWARE:
                st.caption(f"Simulated HTP cycles: {SIMULATOR_NOTE}. Cycles are never converted into time "
                           "(HTP ops overlap).")
            extra = root_figures(backend)
            if extra:
                with st.expander("Finalize, execute, power-on and VTCM figures"):
                    st.dataframe(pd.DataFrame(extra), hide_index=True, width="stretch")
            for note in backend.notes:
                st.caption(md(note))
    if profile.summary:
        st.dataframe(pd.DataFrame([{"whole model": f.name, "value": f.value, "unit": f.unit} for f in profile.summary]),
                     hide_index=True, width="content")
    if profile.source == "imported":
        hardware = next(iter(profile.backends.values())).hardware if profile.backends else "AI Hub"
        st.info(f"Measured on **{md(hardware.removeprefix('AI Hub, '))}** by AI Hub: a real phone's figures, "
                "imported from the file, not measured here.", icon=":material/smartphone:")


SIMULATOR_TIME = "HTP simulator's time on this host, not the NPU's"


def root_figures(backend) -> list[dict]:
    """A backend's finalize, execute, power-on and VTCM rows, each saying what its figure is: on the
    simulator every µs row is the simulator's time on this host (never the NPU's)."""
    rows = [{"phase": "QNN execute time", "value": backend.execute_us, "unit": "us"}] \
        if backend.execute_us is not None else []
    rows += [{"phase": f.name, "value": f.value, "unit": f.unit} for f in (*backend.finalize, *backend.figures)]
    simulated = backend.hardware == SIMULATOR_HARDWARE
    for row in rows:
        row["what"] = SIMULATOR_TIME if simulated and row["unit"] == "us" else (
            "simulated HTP cycles" if simulated and row["unit"] == "cycles" else backend.hardware)
    return rows


def _unmatched(profile: Profile) -> None:
    if profile.source != "imported" and not profile.unmatched:
        return
    count = len(profile.unmatched)
    if not count:
        st.success("Every layer of the file was placed on a model node.", icon=":material/check_circle:")
        return
    st.warning(f"**{count} layer(s)** of the file could not be placed on a node of this model; they are listed "
               "here and left out of the views.", icon=":material/warning:")
    with st.expander(f"The {count} unmatched layer(s)"):
        st.dataframe(pd.DataFrame([u.to_json() for u in profile.unmatched]), hide_index=True, width="stretch")


def _fallback(profile: Profile, graph: ModelGraph, digest: str) -> None:
    rows = figures.fallbacks(profile, graph, _known_shapes(digest))
    if not rows:
        st.success("No node fell back to the CPU EP.", icon=":material/check_circle:")
        return
    label = profile.label("cpu") if "cpu" in profile.backends else "µs"
    st.markdown(f"**{len(rows)} node(s) ran on the CPU EP** ({md(label)}), each with the tensors it exchanges "
                "with nodes another backend runs: copies between the HTP's memory and the host on every inference.")
    table = [{"node": short(f.node.name, 60), "op": f.node.op_type, "µs (median)": round(f.node.median, 2),
              "share of CPU": f"{f.node.share:.1%}", "tensors crossing": len(f.crossings),
              "bytes copied": f.copy_bytes if f.unknown < len(f.crossings) else None, "unknown sizes": f.unknown,
              "with": ", ".join(sorted({f"{c.peer_backend.upper()} {short(c.peer, 30)}" for c in f.crossings}))}
             for f in rows]
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
    st.caption("Bytes per inference of the tensors whose size is known: from the shapes the Partitions page measured "
               "for this model when it has run here, else from the file's declared shapes; a tensor of unknown size "
               "is counted, not guessed (run the Partitions page for the sizes).")


def _known_shapes(digest: str) -> dict:
    """The tensor shapes of this model's latest partition report in this session (fixed dimensions)."""
    from dashboard.views import partitions  # it draws this page's cost overlays: imported here, not at the top

    reports = partitions.session_reports(digest)()
    return reports[-1].shapes if reports else {}


def _node_table(profile: Profile, model_path: str, finished) -> None:
    frame = profile.frame()
    frame.insert(4, "figure", [profile.label(b) for b in frame["backend"]])
    st.dataframe(frame.assign(name=[short(n) for n in frame["name"]]), hide_index=True, width="stretch",
                 column_config={"share": st.column_config.NumberColumn(format="percent")})
    st.download_button("Download the node table (CSV)", frame.to_csv(index=False),
                       file_name=download_name(model_path, "profile-nodes", "csv", finished), mime="text/csv",
                       icon=":material/download:", on_click="ignore", key="pf_nodes_csv")
    st.download_button("Download the profile (JSON)", json.dumps(profile.to_json(), indent=1),
                       file_name=download_name(model_path, "profile", "json", finished), mime="application/json",
                       icon=":material/download:", on_click="ignore", key="pf_json")


# -- compare -------------------------------------------------------------------------------------------
BY = {"name": "node", "op_type": "op type", "scope": "block"}


def _compare(selected, entries: list[dict], shown_label: str) -> None:
    """Two profiles of this session side by side on one backend (``profile.model.compare``): this
    model under two setting sets, or another model whose nodes share names (every profile of the
    session is offered). Shares of the backend's total always compare; a ratio only within one unit
    on one piece of hardware."""
    st.subheader("Compare", anchor=False)
    everything = st.session_state.get(_RUNS, [])
    labels = [e["label"] for e in everything]
    if len(labels) < 2:
        st.caption("Profile the model again with other settings (fp16 off, another SoC), profile a QDQ copy, or "
                   "import an AI Hub profile: two profiles are compared here per node, op type and block.")
        return
    left, mid, right = st.columns([3, 3, 2])
    a_label = left.selectbox("A", labels, index=max(labels.index(shown_label) - 1, 0) if shown_label in labels else 0,
                             key="pf_cmp_a")
    b_label = mid.selectbox("B", labels, index=labels.index(shown_label) if shown_label in labels else len(labels) - 1,
                            key="pf_cmp_b")
    if a_label == b_label:
        st.caption("Pick two different profiles with a backend that ran in both.")
        return
    a = next(e["profile"] for e in everything if e["label"] == a_label)
    b = next(e["profile"] for e in everything if e["label"] == b_label)
    compare_pair(a, b, "pf_cmp", right)


def compare_sides(digests: tuple[str, str], names: tuple[str, str]) -> None:
    """The Compare page's "Where the time goes": a profile of side A's model against one of side
    B's, both from this session's Profile page (two setting sets of one model, or two models with
    the same node names), drawn as this page's Compare section draws it."""
    st.subheader("Where the time goes", anchor=False)
    sides = [session_profiles(d) for d in digests]
    missing = [n for n, entries in zip(names, sides) if not entries]
    if missing:
        st.info(f"No profile of {md(' or '.join(dict.fromkeys(missing)), 120)} in this session: profile it on the "
                "Profile page to compare what each node costs.", icon=":material/speed:")
        return
    left, mid, right = st.columns([3, 3, 2])
    a_labels, b_labels = [e["label"] for e in sides[0]], [e["label"] for e in sides[1]]
    one_model = digests[0] == digests[1]  # two setting sets: A the one before the latest
    a_label = left.selectbox("Profile A", a_labels, index=max(len(a_labels) - (2 if one_model else 1), 0),
                             key="cmp_pf_a")
    b_label = mid.selectbox("Profile B", b_labels, index=len(b_labels) - 1, key="cmp_pf_b")
    if a_label == b_label:
        st.caption("Both sides pick the same profile: profile the model again with side B's settings on the Profile "
                   "page, or pick another.")
        return
    a = next(e["profile"] for e in sides[0] if e["label"] == a_label)
    b = next(e["profile"] for e in sides[1] if e["label"] == b_label)
    compare_pair(a, b, "cmp_pf", right)


def compare_pair(a: Profile, b: Profile, prefix: str, column) -> None:
    """Profile ``b`` against ``a`` on a backend both ran (picked in ``column``), per node, op type or
    block: the table (a ratio only when the figures divide, else why not) and the share chart."""
    common = [k for k in a.backends if k in b.backends and a.backends[k].ok and b.backends[k].ok]
    if not common:
        st.caption("Pick two different profiles with a backend that ran in both.")
        return
    backend = column.selectbox("Backend", common, format_func=lambda k: BACKEND_TITLES.get(k, k),
                               key=f"{prefix}_backend")
    by = st.radio("Per", list(BY), format_func=BY.get, horizontal=True, key=f"{prefix}_by")
    frame = compare(a, b, backend, by=by)
    shared = int((frame["a"].notna() & frame["b"].notna()).sum())
    if by == "name" and not shared:
        st.warning("These two profiles share no node name on this backend: nothing to compare node by node.",
                   icon=":material/warning:")
        return
    st.markdown(f"**A**: {md(frame.attrs.get('a', ''))} · **B**: {md(frame.attrs.get('b', ''))} · {shared} "
                f"{BY[by]}(s) in both")
    why = frame.attrs.get("no_ratio")
    if why:
        st.caption(f"No ratio B / A: {md(why)}. Simulated cycles are not a phone's cycles, nor a phone's µs this "
                   "host's: their shares of each backend's own total compare, their figures do not.")
    view = frame.assign(**{by: [short(k, 60) for k in frame[by]]})
    st.dataframe(view, hide_index=True, width="stretch", height=min(38 + 35 * len(view), 420),
                 column_config={"a": st.column_config.NumberColumn("A", format="%.1f"),
                                "b": st.column_config.NumberColumn("B", format="%.1f"),
                                "a_share": st.column_config.NumberColumn("A share", format="percent"),
                                "b_share": st.column_config.NumberColumn("B share", format="percent"),
                                "share_change": st.column_config.NumberColumn("share B − A", format="percent"),
                                "ratio": st.column_config.NumberColumn("B / A", format="%.3f")})
    st.plotly_chart(figures.share_changes(frame, by, BY[by], backend), key=f"{prefix}_chart")
