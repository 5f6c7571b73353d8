"""The selected model, shared by every page, and the caches keyed on its digest.

A page asks for what it needs and never loads anything itself:

    selected = state.require_model()      # SelectedModel, or an info box and st.stop()
    graph = state.loaded_graph()          # ModelGraph, parsed once per model digest
    ep, refined = state.classifications() # both classifiers, computed once per digest

and keys its own caches on ``selected.digest`` (plus its options).

The selection is a small dataclass in ``st.session_state``; it is replaced only after the new
model has been read successfully (``select``), so a bad file never costs the user the model they
had. The digest is computed once at selection time (it reads the whole file), and every cache is
keyed on it (with the path, since external data is resolved next to the file): a 20,000-node model is parsed and classified once per server process, and later
renders, other pages and other sessions reuse the results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import Classification
from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.digest import Progress, file_digest
from dashboard.intake.memo import MODEL_CACHE_MB, SizedCache, graph_bytes
from dashboard.intake.preflight import check_in_child
from dashboard.intake.reader import load_model, model_file_size
from dashboard.views.safe import md

SOURCES = ("sample", "path", "upload")
_SELECTED = "selected_model"
CACHE_ENTRIES = 8


@dataclass(frozen=True)
class SelectedModel:
    """The model every page shows."""

    path: str  # absolute path on the server (symlinks kept); external data is resolved next to it
    name: str  # what the user knows it as: sample title or original file name
    digest: str  # file_digest of the .onnx file, the key of every cache
    source: str  # one of SOURCES


_GRAPHS: SizedCache[ModelGraph] = SizedCache(lambda: MODEL_CACHE_MB.limit() << 20, graph_bytes)
UNTRUSTED_SOURCES = ("path", "upload")  # from the browser: read in a memory-limited child first


def _graph(digest: str, path: str, file_name: str | None = None) -> ModelGraph:
    """The parsed model, shared by every session; bounded in bytes (``QNN_LAB_MODEL_CACHE_MB``),
    not entries, so a closed session's large model does not stay alive beyond that bound. Keyed on
    the name it is known by as well (``file_name``, an upload's): the same content uploaded as
    ``whisper-decoder.onnx`` and as ``x.onnx`` says different things about itself."""
    name = file_name or Path(path).name
    return _GRAPHS.get((digest, path, name), lambda: load_model(path, name))


def file_name(selected: SelectedModel) -> str:
    """The file name the user knows ``selected`` by: an upload's name as uploaded (its copy on the
    server is ``<digest>/model.onnx``), else its file's name (a sample's title is not one)."""
    return selected.name if selected.source == "upload" else Path(selected.path).name


def graph_of(selected: SelectedModel) -> ModelGraph:
    """``selected``'s graph (cached), named as the user knows it (``file_name``)."""
    return _graph(selected.digest, selected.path, file_name(selected))


@st.cache_resource(max_entries=CACHE_ENTRIES, show_spinner="Classifying…")
def _classifications(digest: str, path: str, name: str) -> tuple[Classification, Classification]:
    graph = _graph(digest, path, name)  # the graph the page holds: one parse per upload, not two
    return classify_ep(graph), classify_refined(graph)


def known_as(path: str) -> str:
    """The file name a user knows the model at ``path`` by: an upload's own file name (its copy on
    the server is named by its digest, which means nothing to them), else ``path`` itself. For
    download names and the report, which would otherwise say ``model-…`` and a cache path."""
    selected = current_model()
    if selected is not None and selected.source == "upload" and str(path) == selected.path:
        return selected.name
    return str(path)


def current_model() -> SelectedModel | None:
    """The selected model, or None before the user (or the startup default) picked one."""
    return st.session_state.get(_SELECTED)


def require_model() -> SelectedModel:
    """The selected model; without one, explain where to pick one and stop the page."""
    selected = current_model()
    if selected is None:
        st.info("No model selected yet. Pick a bundled sample, give a path on the server, or upload "
                "an .onnx file in the sidebar.", icon=":material/arrow_back:")
        st.stop()
    return selected


def loaded_graph() -> ModelGraph:
    """The selected model's graph (cached per digest); stops the page when none is selected."""
    selected = require_model()
    try:
        return graph_of(selected)
    except UserError as exc:  # evicted from the cache and the file changed or vanished since
        st.error(f"The selected model can no longer be read: {md(exc)}", icon=":material/error:")
        st.stop()


def graph_or_none(selected: SelectedModel) -> ModelGraph | None:
    """``selected``'s graph from the cache (read again if evicted), or None when it cannot be read:
    for what only mirrors the state (the address bar), which must neither draw nor stop the page."""
    try:
        return graph_of(selected)
    except UserError:
        return None


def classifications() -> tuple[Classification, Classification]:
    """(EP rules, refined) classification of the selected model, cached per digest."""
    loaded_graph()  # a readable model, or the page stops with the reason
    selected = require_model()
    return _classifications(selected.digest, selected.path, file_name(selected))


def select(path: str | Path, name: str, source: str, digest: str | None = None,
           progress: Progress | None = None, from_browser: bool = True) -> SelectedModel:
    """Read the model at ``path`` and make it the selection (``digest`` when the caller already
    hashed the file, as an upload does, to avoid reading a large file twice; ``progress`` follows
    the hashing otherwise).

    Raises ``UserError``/``ModelError`` (one line, naming ``path`` as given, made absolute but with
    symlinks left as they are) when the file cannot be read as a model; the previous selection is
    then untouched. A path or an upload (``UNTRUSTED_SOURCES``) ``from_browser`` not read before is
    read first in a memory-limited child (``dashboard.intake.preflight``): one needing more than its
    limit is such an error, and the server never tries it. The ``--model`` of the person who
    started the server is not (``from_browser=False``): that check costs a second or two.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown model source {source!r}")
    absolute = Path(os.path.abspath(Path(path).expanduser()))
    model_file_size(absolute)  # missing, a directory, a pipe...: its one-line reason, before hashing
    try:
        digest = digest or file_digest(absolute, progress)
    except OSError as exc:
        raise UserError(f"{absolute}: cannot read it ({exc.strerror or exc})") from None
    selected = SelectedModel(str(absolute), name, digest, source)
    if from_browser and source in UNTRUSTED_SOURCES and \
            (digest, str(absolute), file_name(selected)) not in _GRAPHS:
        check_in_child(absolute)  # a model that would take the server's memory fails there, in one line
    graph_of(selected)
    st.session_state[_SELECTED] = selected
    return selected
