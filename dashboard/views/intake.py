"""The sidebar model picker, on every page: a bundled sample, a path on the server, or an upload.

Each way ends in ``state.select``; it only replaces the selection after the new file has been
read, so a failed attempt shows one ``st.error`` line and leaves the previous model in place.
Widgets act through callbacks, which run before the script: the page drawn right after a change
already shows the new model, and an upload is processed once, not on every rerun.

Uploads are stored by ``dashboard.intake.uploads`` (private folder, one copy per content, quota);
the session keeps the ``Lease`` of the uploaded model it shows, so the file goes when the session
does or when it moves on to another model. The upload is streamed to disk in chunks: reading it
whole (``getbuffer``/``getvalue``) would make a second in-memory copy next to Streamlit's.

The picker survives page changes: Streamlit forgets a page's widget values when another page runs,
so the source and path are kept in a plain session key as well (``_KEPT``) and given back
to the widgets on every page, and the source starts on the selected model's own (Path for a model
opened by path). The sample picker always shows the loaded model's sample, or none: what the
sidebar shows is what is loaded. The file uploader cannot be given a file back, so the uploaded model shown is a
chip of its own under it. A session's first run opens what its link asks for (``views.links``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import streamlit as st

from dashboard.errors import UserError
from dashboard.intake import uploads
from dashboard.intake.overview import counts as overview_counts
from dashboard.intake.overview import human_bytes
from dashboard.intake.samples import SAMPLES, sample_path
from dashboard.views import links, state
from dashboard.views.safe import md

SAMPLE, PATH, UPLOAD = "Sample", "Path", "Upload"
SOURCE_LABEL = {"sample": "bundled sample", "path": "path on the server", "upload": "uploaded file"}
MAX_NAME_BYTES = 200
PROGRESS_FROM_BYTES = 256 << 20  # hashing below this takes well under a second: no bar

_STARTED = "intake_started"
_ERROR = "intake_error"
_MODE = "intake_mode"
_SAMPLE = "intake_sample"
_PATH = "intake_path"
_UPLOAD = "intake_upload"
_LEASE = "intake_upload_lease"  # the uploads.Lease of the selected uploaded model
_KEPT = "intake_kept"  # the picker's widget values, kept across pages (not a widget key)
_LINK = "intake_link_notes"  # what the session's link asked for that could not be done
MODE_OF_SOURCE = {"sample": SAMPLE, "path": PATH, "upload": UPLOAD}


def model_argument(argv: list[str]) -> str | None:
    """``--model PATH`` from the script arguments (``streamlit run app.py -- --model PATH``)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--model")
    return parser.parse_known_args(argv)[0].model


def startup(argv: list[str] | None = None) -> None:
    """On a session's first run, open what its link asks for (``views.links``: a model, its
    settings, a run), else the ``--model`` argument, else the first bundled sample; later runs do
    nothing."""
    if not st.session_state.get(_STARTED):
        st.session_state[_STARTED] = True
        request = links.requested()
        opened = request.model is not None and _select_from_link(request)
        if not opened:
            _select_at_startup(model_argument(sys.argv[1:] if argv is None else argv))
        if opened or request.model is None:  # a link's settings are its model's
            _link_settings(request)
        elif request.entries:
            request.problems.append("the settings in the link were not applied: they are its model's")
        links.remember_run(request.run)
        if request.problems:
            st.session_state[_LINK] = request.problems


def _select_from_link(request: links.Request) -> bool:
    """Open the link's model as the sidebar would (a path as a typed path); an upload cannot be."""
    kind, value = request.model
    if kind == "upload":
        request.problems.append(f"the link names an uploaded file ({value}); a link cannot reopen an upload: "
                                "upload it again in the sidebar")
        return False
    if kind == "sample":
        sample = next(s for s in SAMPLES if s.file_name == value)
        st.session_state[_SAMPLE] = sample.file_name
        return _attempt(sample_path(sample.file_name), sample.title, "sample")
    st.session_state[_MODE] = PATH
    st.session_state[_PATH] = value
    return _attempt(value, Path(value).name or value, "path")


def _link_settings(request: links.Request) -> None:
    """The link's settings as the selected model's shared settings (``views.settings``)."""
    from dashboard.views import settings

    selected = state.current_model()
    if selected is None or not request.entries:
        return
    graph = state.loaded_graph()
    values, problems = links.settings_values(request, graph, settings.shared_values(selected.digest, graph))
    request.problems.extend(problems)
    settings.remember_values(selected.digest, values)


def keep_state() -> None:
    """Carry the picker's widget values to the page being drawn. Each page draws its own picker,
    and Streamlit forgets the values of a page's widgets when another page runs: they are given
    back from ``_KEPT`` (a plain key, which Streamlit keeps) and re-assigned, Streamlit's
    documented way to keep them (the file uploader's value cannot be assigned: the uploaded model
    has its own chip). Without either, the source is the selected model's. The sample picker is
    not kept but shows the loaded model: its sample, or none when the model was opened otherwise
    (a sample kept from before would show one model while another is loaded, and picking it
    again would change nothing, so open nothing)."""
    kept: dict = st.session_state.setdefault(_KEPT, {})
    for key in (_MODE, _PATH):
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
        elif key in kept:
            st.session_state[key] = kept[key]
    selected = state.current_model()
    st.session_state[_SAMPLE] = _loaded_sample(selected)
    if _MODE not in st.session_state and selected is not None:
        st.session_state[_MODE] = MODE_OF_SOURCE[selected.source]
    if _PATH not in st.session_state and selected is not None and selected.source == "path":
        st.session_state[_PATH] = selected.path


def _keep() -> None:
    st.session_state[_KEPT] = {key: st.session_state[key] for key in (_MODE, _PATH)
                               if key in st.session_state}


def sidebar(argv: list[str] | None = None) -> None:
    """Draw the picker (after ``startup``)."""
    startup(argv)
    keep_state()
    with st.sidebar:
        card = st.container()  # filled last: reading the model must not keep the picker from drawing
        error = st.session_state.pop(_ERROR, None)
        if error:
            st.error(md(error), icon=":material/error:")
        for note in st.session_state.pop(_LINK, []):
            st.error(f"Link: {md(note)} (ignored)", icon=":material/link_off:")
        st.session_state.setdefault(_MODE, SAMPLE)
        mode = st.segmented_control("Open a model from", [SAMPLE, PATH, UPLOAD], key=_MODE, required=True,
                                    width="stretch", on_change=_keep)
        if mode == SAMPLE:
            _sample_picker()
        elif mode == PATH:
            _path_form()
        else:
            _uploader()
        _keep()
        with card:
            _current_model()


def upload_file_name(name: str) -> str:
    """The browser's file name reduced to a safe base name (no directories or NUL, at most
    ``MAX_NAME_BYTES`` UTF-8 bytes with the extension kept); ``upload.onnx`` when nothing usable
    is left."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].replace("\0", "")
    if len(base.encode("utf-8")) > MAX_NAME_BYTES:
        suffix = Path(base).suffix if len(Path(base).suffix) <= 10 else ""
        head = base.encode("utf-8")[: MAX_NAME_BYTES - len(suffix.encode("utf-8"))]
        base = head.decode("utf-8", "ignore") + suffix
    return base if base not in ("", ".", "..") else "upload.onnx"


def _select_at_startup(model: str | None) -> None:
    """Open ``--model`` (a bundled sample keeps its title); when it is absent or unreadable, the
    first bundled sample, so the user always starts on a model (the error says what went wrong)."""
    if model is not None:
        sample = _sample_for(Path(model))
        if sample is not None:
            st.session_state[_SAMPLE] = sample.file_name
            if _attempt(model, sample.title, "sample"):
                return
        else:
            st.session_state[_MODE] = PATH
            st.session_state[_PATH] = model
            if _attempt(model, Path(model).name or model, "path", from_browser=False):
                return
    if SAMPLES:  # a successful attempt leaves the error of a failed --model in place
        _attempt(sample_path(SAMPLES[0].file_name), SAMPLES[0].title, "sample")


def _sample_for(path: Path):
    """The bundled sample a path points at, if any (so ``--model samples/x.onnx`` shows its title)."""
    for sample in SAMPLES:
        candidate = sample_path(sample.file_name)
        if path.exists() and candidate.exists() and path.resolve() == candidate.resolve():
            return sample
    return None


def _attempt(path: str | Path, name: str, source: str, lease: uploads.Lease | None = None,
             from_browser: bool = True) -> bool:
    """Select the model at ``path``; on success the session keeps ``lease`` (an upload's) in
    place of the previous one, which releases that upload. A path or an upload ``from_browser``
    is read in a memory-limited child first (``state.select``); the ``--model`` argument is not."""
    try:
        with st.spinner(f"Reading {md(name, 60)}…", show_time=True):
            state.select(path, name, source, digest=lease.digest if lease else None, progress=_hash_progress(name),
                         from_browser=from_browser)
    except UserError as exc:
        message = str(exc)
        if lease is not None:  # the user knows the file by its name, not by our storage path
            message = message.replace(str(lease.path), name)
        st.session_state[_ERROR] = message
        return False
    st.session_state.pop(_LEASE, None)  # deleting (not overwriting) drops the previous run's copy too
    if lease is not None:
        st.session_state[_LEASE] = lease
    return True


def _hash_progress(name: str):
    """A progress callback for hashing ``name`` that draws a sidebar bar once the file is large
    (a 3 GB model takes seconds to hash); whole percents only, so the browser is not flooded."""
    shown: dict[str, object] = {}

    def progress(done: int, total: int) -> None:
        if total < PROGRESS_FROM_BYTES:
            return
        percent = done * 100 // total
        if "bar" not in shown:
            with st.sidebar:
                shown["bar"], shown["percent"] = st.progress(0, text=f"Hashing {md(name, 60)}…"), -1
        if percent != shown["percent"]:
            shown["percent"] = percent
            shown["bar"].progress(percent, text=f"Hashing {md(name, 60)}: {human_bytes(done)} of "
                                                f"{human_bytes(total)}")
        if done >= total:
            shown["bar"].empty()

    return progress


def _current_model() -> None:
    selected = state.current_model()
    if selected is None:
        st.caption("No model selected")
        return
    graph = state.loaded_graph()
    st.markdown(f":material/deployed_code: **{md(selected.name, 60)}**")
    counts = overview_counts(graph)
    nodes = f"{counts.nodes:,} node{'' if counts.nodes == 1 else 's'}"
    if counts.bodies:
        nodes += f" ({counts.body_nodes:,} inside control flow)"
    st.caption(f"{SOURCE_LABEL[selected.source]} · {nodes} · "
               f"{human_bytes(graph.file_bytes)} · digest `{selected.digest[:10]}`")


def _loaded_sample(selected: state.SelectedModel | None) -> str | None:
    """The file name of the bundled sample that is loaded, or None when the loaded model is not one."""
    current = _sample_for(Path(selected.path)) if selected and selected.source == "sample" else None
    return current.file_name if current else None


def _sample_picker() -> None:
    titles = {s.file_name: s.title for s in SAMPLES}
    choice = st.selectbox("Bundled sample", list(titles), key=_SAMPLE, format_func=titles.__getitem__,
                          on_change=_on_sample, placeholder="Choose a sample…")
    if choice is not None:
        st.caption(next(s for s in SAMPLES if s.file_name == choice).description)


def _on_sample() -> None:
    choice = st.session_state[_SAMPLE]
    if choice is None:
        return
    sample = next(s for s in SAMPLES if s.file_name == choice)
    _attempt(sample_path(sample.file_name), sample.title, "sample")


def _path_form() -> None:
    with st.form("intake_path_form", border=False):
        st.text_input("Path of an .onnx file on the server", key=_PATH,
                      placeholder="/models/phi-3-mini/model.onnx",
                      help="The way to open multi-GB models: external-data files are read from the "
                           "model's folder, nothing is copied.")
        st.form_submit_button("Open", icon=":material/folder_open:", on_click=_on_path)


def _on_path() -> None:
    raw = (st.session_state.get(_PATH) or "").strip()
    if not raw:
        st.session_state[_ERROR] = "enter the path of an .onnx file on the server"
        return
    _attempt(raw, Path(raw).name or raw, "path")


def _uploader() -> None:
    st.file_uploader("Upload an .onnx file", type=["onnx"], key=_UPLOAD, on_change=_on_upload,
                     help="Up to 2 GB. A model with external-data files needs the server path "
                          "instead: an upload carries only the .onnx file.")
    selected = state.current_model()
    lease = st.session_state.get(_LEASE)
    if selected is not None and selected.source == "upload" and st.session_state.get(_UPLOAD) is None:
        # The uploader forgets its file when the page changes; the model it opened stays selected.
        size = f" · {human_bytes(lease.size)}" if lease is not None else ""
        st.markdown(f":material/upload_file: Uploaded: **{md(selected.name, 60)}**{size}")
    st.caption("A link to this page cannot reopen an uploaded file (its copy is this session's): upload it again.")


def _on_upload() -> None:
    uploaded = st.session_state.get(_UPLOAD)
    if uploaded is None:  # the user removed the file; keep the selection
        return
    try:
        lease = uploads.store(uploaded, uploaded.size)
    except UserError as exc:
        st.session_state[_ERROR] = str(exc)
        return
    except OSError as exc:
        st.session_state[_ERROR] = f"could not store the upload on the server: {exc.strerror or exc}"
        return
    _attempt(lease.path, upload_file_name(uploaded.name), "upload", lease)
