"""The address bar: the selected model, its settings and the timeline run shown, as query parameters.

Why: a link must reopen what the user was looking at, to send to a colleague or to keep. Every
page writes the state into ``st.query_params`` (the session's state is the truth; the URL follows
it), and a session's first run reads them back (``requested``/``apply``):

    /partitions?model=sample:cnn_classifier.onnx&fp16=on&soc=sm8650&dim.height=320&run=2

- ``model``: ``sample:<file>`` for a bundled sample, a path on the server otherwise, opened exactly
  as a path typed into the sidebar (read first in a memory-limited child). An uploaded file cannot
  be reopened from a link (its copy belongs to the session that uploaded it): the link says
  ``model=upload:<name>`` and opening it says so.
- one parameter per knob of ``runtime.knobs.Settings`` that differs from the model's default:
  ``backends``, ``fp16``, ``soc``, ``level``, ``timeout``, ``dim.<name>``, ``shape.<input>``
  (``1,3,48,320``) and ``opt.<provider option>``;
- ``run``: the number of the timeline run shown (``#2``). Runs live in the browser session that
  made them, so a link opened in another session says the run is not there.

A link is text from a browser: every value is checked as a page's entry is (the record's own
checks; provider options as a page's, ``qnn_options.check(origin=BROWSER)``, so none loads a
library or writes a file), sizes are capped, and a bad parameter is named in one error and
ignored, never a crash. Reading a link never writes a path or loads a library. A link from another
site does not even reach here: the sign-in cookie is ``SameSite=Strict`` (``views.gate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.runtime.knobs import KNOB, Settings
from dashboard.runtime.knobs import defaults as knob_defaults

MODEL, RUN = "model", "run"
SAMPLE_PREFIX, UPLOAD_PREFIX = "sample:", "upload:"
# Knobs with one value each, by parameter name; the tables are ``prefix + entry``.
SCALARS = {"backends": "backends", "fp16": "fp16", "soc": "soc", "level": "optimization_level",
           "timeout": "timeout"}
TABLES = {"dim.": "dims", "shape.": "shapes", "opt.": "provider_options"}
MAX_PARAMS = 64  # a link with more is refused as a whole
MAX_TEXT = 1024  # characters of one name or value
ON, OFF = ("on", "1", "true", "yes"), ("off", "0", "false", "no")
_RUN_WANTED = "links_run_wanted"


def ours(name: str) -> bool:
    """Whether a query parameter is one this module writes (others, such as a proxy's, are left)."""
    return name in (MODEL, RUN) or name in SCALARS or any(name.startswith(p) for p in TABLES)


# -- writing ---------------------------------------------------------------------------------------------
def model_param(selected) -> str:
    if selected.source == "sample":
        from pathlib import Path

        return SAMPLE_PREFIX + Path(selected.path).name
    if selected.source == "upload":
        return UPLOAD_PREFIX + selected.name
    return selected.path


def params(selected, values: dict[str, Any], graph: ModelGraph | None, run: int | None) -> dict[str, str]:
    """The query parameters that say ``selected``, its knob ``values`` and the run shown: each knob
    only where it differs from the model's default (fp16 always, its default depends on the model)."""
    from dashboard.intake.shapes import default_dims

    out = {MODEL: model_param(selected)}
    plain = knob_defaults()
    for name, key in SCALARS.items():
        value = values.get(key)
        if key == "fp16":
            out[name] = "on" if value else "off"
        elif value is not None and (tuple(value) if key == "backends" else value) != plain[key]:
            out[name] = ",".join(value) if key == "backends" else f"{value:g}" if key == "timeout" else str(value)
    proposed = {n: d.value for n, d in default_dims(graph).items()} if graph is not None else {}
    for prefix, key in TABLES.items():
        for name, value in (values.get(key) or {}).items():
            if key == "dims" and proposed.get(name) == value:
                continue
            out[prefix + name] = ",".join(map(str, value)) if key == "shapes" else str(value)
    if run is not None:
        out[RUN] = str(run)
    return out


def shown_run(digest: str) -> int | None:
    """The number of the timeline run the Timeline page shows for ``digest`` (its label ``#N …``)."""
    label = st.session_state.get("timeline_shown", {}).get(digest)
    head = label.split(" ", 1)[0] if isinstance(label, str) else ""
    return int(head[1:]) if head.startswith("#") and head[1:].isdigit() else None


def write(selected=None) -> None:
    """Mirror the selected model, its shared settings and the run shown into the address bar
    (only this module's parameters change; nothing reruns)."""
    from dashboard.views import settings, state

    selected = selected or state.current_model()
    if selected is None:
        return
    graph = state.graph_or_none(selected)
    wanted = params(selected, settings.shared_values(selected.digest, graph), graph, shown_run(selected.digest))
    current = {k: st.query_params.get(k) for k in st.query_params.keys() if ours(k)}
    if current == wanted:
        return
    for name in current:
        if name not in wanted:
            del st.query_params[name]
    for name, value in wanted.items():
        if current.get(name) != value:
            st.query_params[name] = value


def write_settings(digest: str) -> None:
    """After a page stored new settings for ``digest``: the address bar, when it is the selected model's."""
    from dashboard.views import state

    selected = state.current_model()
    if selected is not None and selected.digest == digest:
        write(selected)


# -- reading -----------------------------------------------------------------------------------------------
@dataclass
class Request:
    """What a link asks for, before anything is opened: the model (``("sample", file)``,
    ``("path", path)``, ``("upload", name)`` or None), the knob entries, the run, and the problems."""

    model: tuple[str, str] | None = None
    entries: dict[str, Any] = field(default_factory=dict)  # knob key -> value (tables: name -> value)
    run: int | None = None
    problems: list[str] = field(default_factory=list)


def requested(query: dict[str, str] | None = None) -> Request:
    """The link's request from ``query`` (the query parameters), every value syntax-checked; what
    does not parse is a problem and left out."""
    query = {k: query[k] for k in query} if query is not None else {k: st.query_params.get(k)
                                                                     for k in st.query_params.keys()}
    query = {k: v for k, v in query.items() if ours(k)}
    out = Request()
    if len(query) > MAX_PARAMS:
        out.problems.append(f"the link has {len(query)} parameters, more than {MAX_PARAMS}: all were ignored")
        return out
    for name, value in query.items():
        try:
            if not isinstance(value, str) or len(value) > MAX_TEXT or len(name) > MAX_TEXT or "\0" in name + value:
                raise UserError("too long or not text")
            _read(out, name, value)
        except UserError as exc:
            out.problems.append(f"{_shown(name)}={_shown(value)}: {exc}")
    return out


def _shown(text) -> str:
    text = str(text)
    return text if len(text) <= 60 else text[:59] + "…"


def _read(out: Request, name: str, value: str) -> None:
    from dashboard.intake.samples import SAMPLES
    from dashboard.intake.shapes import parse_shape

    if name == MODEL:
        if value.startswith(SAMPLE_PREFIX):
            file = value[len(SAMPLE_PREFIX):]
            if file not in {s.file_name for s in SAMPLES}:
                raise UserError("no bundled sample of that name")
            out.model = ("sample", file)
        elif value.startswith(UPLOAD_PREFIX):
            out.model = ("upload", value[len(UPLOAD_PREFIX):])
        elif value.strip():
            out.model = ("path", value.strip())
        return
    if name == RUN:
        if not value.isdigit() or not 0 < int(value) < 1_000_000:
            raise UserError("not a run number")
        out.run = int(value)
        return
    if name in SCALARS:
        key = SCALARS[name]
        if key == "fp16":
            if value.lower() not in ON + OFF:
                raise UserError("not on or off")
            out.entries[key] = value.lower() in ON
        elif key == "backends":
            out.entries[key] = tuple(b for b in value.split(",") if b.strip())
        elif key == "timeout":
            try:
                out.entries[key] = float(value)
            except ValueError:
                raise UserError("not a number of seconds") from None
        else:
            out.entries[key] = value
        _check({key: out.entries[key]})
        return
    prefix = next(p for p in TABLES if name.startswith(p))
    key, entry = TABLES[prefix], name[len(prefix):]
    if not entry.strip():
        raise UserError("no name after the dot")
    if key == "dims":
        if not value.isdigit() or int(value) <= 0:
            raise UserError("a dimension is a positive integer")
        parsed: Any = int(value)
    elif key == "shapes":
        parsed = parse_shape(value, f"input {entry!r}")
    else:
        parsed = value
    table = out.entries.setdefault(key, {})
    _check({key: {**table, entry: parsed}})
    table[entry] = parsed


def _check(entries: dict[str, Any]) -> None:
    """``entries`` build a record on their own (the record's checks), and provider options pass a
    page's check (``BROWSER``: nothing that loads a library or writes a file)."""
    from dashboard.access import BROWSER
    from dashboard.runtime import qnn_options

    Settings(**{k: v for k, v in entries.items() if k in KNOB})
    if "provider_options" in entries:
        qnn_options.check(entries["provider_options"], origin=BROWSER)


def settings_values(request: Request, graph: ModelGraph | None,
                    base: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``base`` (the model's values) with the link's entries on top, as long as they make one
    record together and fit the model (an input shape for an input it has); what does not is
    left out and named."""
    from dashboard.intake.shapes import check_input_shapes

    values, problems = dict(base), []
    for key, value in request.entries.items():
        trial = {**values, key: {**(values.get(key) or {}), **value} if isinstance(value, dict) else value}
        try:
            record = Settings(**{k: v for k, v in trial.items() if k in KNOB})
            if key in ("shapes", "dims") and graph is not None:
                check_input_shapes(graph, record.shapes, record.dims)
        except UserError as exc:
            problems.append(f"{key}: {exc}")
            continue
        values = trial
    return values, problems


def remember_run(run: int | None) -> None:
    st.session_state[_RUN_WANTED] = run


def apply_run(digest: str) -> str | None:
    """Show the run a link named, once, if this session has it; else say why it is not shown."""
    run = st.session_state.pop(_RUN_WANTED, None)
    if run is None:
        return None
    runs = [r for r in st.session_state.get("timeline_runs", []) if r.get("digest") == digest]
    label = next((r["label"] for r in runs if r.get("label", "").startswith(f"#{run} ")), None)
    if label is None:
        return (f"The link shows timeline run #{run}, which is not in this browser session: timeline runs live in "
                "the session that ran them. Run the timeline again on the Timeline page.")
    st.session_state.setdefault("timeline_shown", {})[digest] = label
    return None
