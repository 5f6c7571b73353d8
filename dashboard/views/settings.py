"""The settings' widgets, drawn from the table of knobs (``runtime.knobs``) for every page.

Why one renderer: the Partitions, Timeline and Compare pages each drew their own toggle, SoC box
and option area, labelled and checked a little differently. ``SettingsForm`` draws a knob's widget
from its row of the table (label, help, choices, default) wherever the page places it, and
``settings()`` turns what was entered into the same ``Settings`` record the command line builds,
validated by the record itself. Errors and hints name knobs by their labels, never a flag.

Widget keys are ``{page}_{widget}_{scope}`` (``pt_fp16_<digest>``): a page's widgets are per model
(or per side of a comparison).

One set of settings per model, shared by every page: the session keeps the values entered last
for each model digest (``current_settings``, ``shared_values``). A form made for a model
(``SettingsForm(..., model=digest)``) starts from them, takes the knobs it does not draw from them,
and stores what ``settings()`` returns back, so 320 set on the Partitions page is 320 on the
Timeline page, and the address bar (``views.links``) carries them. Why values and not only the
record: the record resolves a SoC left unset to fp16's default one, and the form must keep showing
"not set" (and a page's own timeout default) for what the user did not set.

Presets and a warning's values to set (``views.shape_hints``) fill a model's dimension and shape
fields through the same path (``fill``): the fields show them at once, and a page that applies its
settings with a submit button keyed ``{page}_apply`` (Partitions' **Apply**, Compare's
**Compare**) keeps analysing at the settings applied last until it is pressed, so nothing runs
until the user applies. A page without one (the Timeline, whose run has its own button) takes them
as typed values.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard.access import BROWSER
from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.runtime import qnn_options
from dashboard.runtime.knobs import KNOB, PAGE, Knob, Settings, parse_assignments, words, worded_error
from dashboard.runtime.knobs import defaults as knob_defaults
from dashboard.runtime.socs import DEFAULT_SOC, SOCS
from dashboard.views.safe import short

TIMEOUT_RANGE = (10, 7200, 30)  # seconds: min, max, step of the page's timeout field
_SHARED = "settings_by_model"  # model digest -> the knob values entered last for it (every page's)
_FILLS = "settings_fills"  # model digest -> a preset's dims/shapes filled in, not applied yet
FILLED = ("dims", "shapes")  # the knobs a preset fills


def model_defaults(graph: ModelGraph | None) -> dict[str, Any]:
    """What a model's settings are before anyone changes them: the knobs' defaults, with fp16 on for
    a float model (float32 graphs rarely fit the HTP without it)."""
    from dashboard.intake.shapes import is_float_model

    return {**knob_defaults(), "fp16": bool(graph is not None and is_float_model(graph))}


def shared_values(digest: str, graph: ModelGraph | None = None) -> dict[str, Any]:
    """The knob values of the model ``digest`` that every page starts from (``model_defaults``
    until a page stored some). The timeout is None when it is each analysis' own."""
    stored = st.session_state.get(_SHARED, {}).get(digest)
    return dict(stored) if stored is not None else model_defaults(graph)


def current_settings(selected, graph: ModelGraph | None = None) -> Settings:
    """The settings record of ``selected`` (a ``state.SelectedModel``) shared by every page: what
    the Partitions, Timeline, Compare and Profile pages use for that model."""
    if graph is None:
        from dashboard.views import state

        graph = state.graph_or_none(selected)
    return Settings(**shared_values(selected.digest, graph))


def remember_values(digest: str, values: dict[str, Any], analysis: str | None = None) -> None:
    """Store ``values`` (knob key -> value, checked by building the record) as the model's shared
    settings; a timeout equal to ``analysis``' own default is stored as None (each page then shows
    its own). The address bar follows (``views.links``)."""
    values = {key: values[key] for key in KNOB if key in values}
    if analysis is not None and values.get("timeout") == knob_defaults(analysis)["timeout"]:
        values["timeout"] = None
    store: dict = st.session_state.setdefault(_SHARED, {})
    merged = {**store.get(digest, {}), **values} if digest in store else values
    if store.get(digest) == merged:
        return
    store[digest] = merged
    from dashboard.views import links

    links.write_settings(digest)


def stored_values(digest: str) -> dict[str, Any]:
    """Only what a page stored for ``digest`` (empty before): the knobs a form does not draw take
    these, over their defaults."""
    return dict(st.session_state.get(_SHARED, {}).get(digest) or {})


def fill(digest: str, title: str, dims: dict[str, int] | None = None,
         shapes: dict[str, tuple[int, ...]] | None = None) -> None:
    """Fill the dimension and shape fields of the model ``digest`` with a preset's (or a warning's)
    values: the next form drawn for it shows them; a page with an Apply button analyses at them once
    it is pressed (``SettingsForm.settings``). A button's callback."""
    st.session_state.setdefault(_FILLS, {})[digest] = {
        "title": title, "dims": {k: int(v) for k, v in (dims or {}).items()},
        "shapes": {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}, "set": set(), "waiting": False}


def waiting_fill(digest: str | None) -> str | None:
    """The title of a preset filled into ``digest``'s form and not applied yet, if any."""
    pending = st.session_state.get(_FILLS, {}).get(digest) if digest is not None else None
    return pending["title"] if pending and pending["waiting"] else None


def _filled(digest: str | None) -> dict | None:
    return st.session_state.get(_FILLS, {}).get(digest) if digest is not None else None


def page_words(text: str | None) -> str | None:
    """A hint (a suggestion, a note, a runtime message) with the settings it names as this page's
    fields (``option ‘HTP fp16 precision’``)."""
    return words(text, PAGE)


def setting_changes(old: dict, new: dict) -> list[str]:
    """What differs between two settings' JSON (``Settings.result_json``, plus e.g. ``device``), as
    a reader says it: each knob by its page label, only the entries of a dimension or option table
    that changed, ``on``/``off`` and ``not set`` instead of Python's ``True`` and ``None``."""
    out = []
    for key in dict.fromkeys([*new, *old]):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        label = KNOB[key].label if key in KNOB else key.replace("_", " ").capitalize()
        if isinstance(before, dict) or isinstance(after, dict):
            before, after = before or {}, after or {}
            entries = [f"{name} {_said(before.get(name))} → {_said(after.get(name))}"
                       for name in dict.fromkeys([*before, *after]) if before.get(name) != after.get(name)]
            out.append(f"{label}: {', '.join(entries)}")
        else:
            out.append(f"{label}: {_said(before)} → {_said(after)}")
    return out


def _said(value) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return "×".join(map(str, value)) if all(isinstance(v, int) for v in value) else ", ".join(map(str, value))
    return str(value)


def page_provider_options(lines: list[str]) -> dict[str, str]:
    """Provider options typed into a page's text area, checked as a page's (``BROWSER``): nothing
    that loads a library or writes a file (``runtime.qnn_options``)."""
    options = parse_assignments(lines, "provider option")
    qnn_options.check(options, origin=BROWSER)
    return options


class SettingsForm:
    """A page's settings widgets. ``draw(*keys)`` draws those knobs' widgets in the current
    container (the page decides the layout); ``settings()`` is the record from what was entered,
    knobs not drawn at their defaults. ``analysis`` names whose timeout is the default
    (``knobs.TIMEOUTS``); ``defaults`` are the page's own (fp16 on for a float model).

    With ``model`` (a digest) the form is that model's shared settings (``shared_values``): they
    are its defaults (over ``defaults``) and the values of the knobs it does not draw, and
    ``settings()`` stores what was entered back for every page, unless ``remember`` is False (a
    form that only starts from them, as Compare's side A)."""

    def __init__(self, page: str, scope: str, graph: ModelGraph | None = None, *, analysis: str | None = None,
                 defaults: dict[str, Any] | None = None, model: str | None = None, remember: bool = True) -> None:
        self.page, self.scope, self.graph, self.analysis = page, scope, graph, analysis
        self.model, self.remember = model, remember and model is not None
        # Only what a page stored: before that, the page's own defaults (fp16 on for a float model).
        self.shared = stored_values(model) if model is not None else {}
        self.defaults = {**knob_defaults(analysis), **(defaults or {}),
                         **{k: v for k, v in self.shared.items() if not (k == "timeout" and v is None)}}
        self.raw: dict[str, Any] = {}

    def key(self, knob: Knob, name: str | None = None) -> str:
        return f"{self.page}_{knob.widget}_{self.scope}" + (f"_{name}" if name is not None else "")

    def filled(self, knob: Knob, name: str, value: str | int | None) -> None:
        """Put a preset's ``value`` (None: none for this field) into the field ``name`` of ``knob``,
        once per field shown (again when the field was gone from the page in between)."""
        pending = _filled(self.model)
        key = self.key(knob, name)
        if pending is None or value is None or (key in pending["set"] and key in st.session_state):
            return
        st.session_state[key] = value
        pending["set"].add(key)

    def applies(self) -> bool:
        """Whether what the widgets say is applied now: always on a page without an Apply button
        (``{page}_apply``), else in the run its press started."""
        pressed = st.session_state.get(f"{self.page}_apply")
        return pressed is None or bool(pressed)

    def draw(self, *keys: str) -> None:
        for key in keys:
            knob = KNOB[key]
            self.raw[key] = DRAW[knob.kind](self, knob, self.defaults[key])

    def settings(self, record: type = Settings, *, model: str | None = None, **fields):
        """``record`` (``Settings`` or one built on it) from the widgets and the page's other
        ``fields``; a bad value is one ``UserError`` in the page's words. Knobs not drawn take the
        shared values of the form's model, or of ``model`` when it names another (a Compare side set
        to another file), over their defaults. A preset filled in (``fill``) and not applied yet
        leaves the dimensions and shapes applied last."""
        target = self.model if model is None else model
        base = self.shared if target == self.model else stored_values(target)
        try:
            values = {key: PARSE[KNOB[key].kind](raw) for key, raw in self.raw.items()}
            values = {**{k: v for k, v in base.items() if k in KNOB}, **values}
            store = self._take_fill(target, base, values)
            built = record(**values, **fields)
        except UserError as exc:
            raise worded_error(exc, PAGE) from None
        if self.remember and target == self.model:
            remember_values(self.model, values, self.analysis)
        elif store:
            remember_values(target, {k: values[k] for k in FILLED if k in values})
        return built

    def _take_fill(self, target: str | None, base: dict[str, Any], values: dict[str, Any]) -> bool:
        """A preset filled in for ``target``: applied (into ``values``; True: to be stored as the
        model's) when the form applies, else ``values`` keep the dims and shapes applied last."""
        pending = _filled(target)
        if pending is None:
            return False
        if not self.applies():
            for key in FILLED:
                if key in self.raw:  # the fields show the preset; the analysis keeps what was applied
                    if key in base:
                        values[key] = base[key]
                    else:
                        values.pop(key, None)
            pending["waiting"] = True
            return False
        for key in FILLED:
            if key not in self.raw:  # not drawn here (Compare's sides): the preset over what was stored
                values[key] = {**(values.get(key) or {}), **pending[key]}
        st.session_state[_FILLS].pop(target, None)
        return True


# -- one widget per kind of knob ------------------------------------------------------------------------
def _backends(form: SettingsForm, knob: Knob, default) -> list[str]:
    return st.multiselect(knob.label, list(knob.choices), default=list(default), key=form.key(knob), help=knob.help)


def _flag(form: SettingsForm, knob: Knob, default) -> bool:
    return st.toggle(knob.label, value=bool(default), key=form.key(knob), help=knob.help)


def _soc(form: SettingsForm, knob: Knob, default) -> str | None:
    names = {s.key: s.name for s in SOCS}
    choices = [None, *knob.choices]
    return st.selectbox(knob.label, choices, index=choices.index(default), key=form.key(knob), help=knob.help,
                        format_func=lambda k: names[k] if k else f"not set (fp16: {names[DEFAULT_SOC]})")


def _choice(form: SettingsForm, knob: Knob, default) -> str:
    return st.selectbox(knob.label, list(knob.choices), index=knob.choices.index(default), key=form.key(knob),
                        help=knob.help)


def _seconds(form: SettingsForm, knob: Knob, default) -> float:
    low, high, step = TIMEOUT_RANGE
    return float(st.number_input(knob.label, min_value=low, max_value=high, value=int(default), step=step,
                                 key=form.key(knob), help=knob.help))


def _options(form: SettingsForm, knob: Knob, default) -> str:
    text = "\n".join(f"{k}={v}" for k, v in (default or {}).items())
    return st.text_area(f"{knob.label} (KEY=VALUE per line)", value=text, key=form.key(knob), height=90,
                        help=knob.help, placeholder="htp_graph_finalization_optimization_mode=3")


def _dims(form: SettingsForm, knob: Knob, default) -> dict[str, int]:
    """A field per symbolic dimension of the model, pre-filled with its default and why."""
    from dashboard.intake.shapes import default_dims

    proposed = default_dims(form.graph) if form.graph is not None else {}
    dims = {}
    if proposed:
        st.markdown(f"**{knob.label}** (pre-filled; QNN needs them fixed)")
        cols = st.columns(2)
        for i, (name, dim) in enumerate(proposed.items()):
            form.filled(knob, name, form_fill(form, "dims").get(name))
            key = form.key(knob, name)
            dims[name] = int(cols[i % 2].number_input(
                short(name, 40), min_value=1, value=_initial(key, int(default.get(name, dim.value)), "min"), step=1,
                key=key, help=dim.why + (" — a guess" if dim.guessed else "")))
    return dims


def _shapes(form: SettingsForm, knob: Knob, default) -> dict[str, str]:
    """A field per input with unnamed dimensions (``?``): its whole shape, pre-filled with what is
    known (fixed sizes, named dimensions' defaults) and ``?`` where the user must decide."""
    from dashboard.intake.shapes import default_dims, unnamed_dynamic_inputs

    if form.graph is None:
        return {}
    from dashboard.intake.shape_hints import default_shapes

    proposed = default_dims(form.graph)
    unnamed = unnamed_dynamic_inputs(form.graph)
    known = default_shapes(form.graph, {name: d.value for name, d in proposed.items()})
    if not unnamed:
        if not proposed:
            st.markdown("All input shapes are static.")
        return {}
    st.markdown(f"**{knob.label}** (inputs with unnamed dimensions: replace each ? with a size)")
    specs = {t.name: t for t in form.graph.inputs}
    out = {}
    for name in unnamed:
        shape = specs[name].shape or ()
        prefill = ", ".join("?" if d is None else str(d) for d in known.get(name, shape))
        if name in (default or {}):  # the model's shared settings (another page's entry, a link)
            prefill = ", ".join(map(str, default[name]))
        preset = form_fill(form, "shapes").get(name)
        form.filled(knob, name, ", ".join(map(str, preset)) if preset else None)
        key = form.key(knob, name)
        out[name] = st.text_input(short(name, 40), value=_initial(key, prefill, ""), key=key, placeholder="e.g. 1, 576",
                                  help=f"Declared {specs[name].shape_text()}. {knob.help}.")
    return out


def _initial(key: str, value, unset):
    """A field's starting ``value``, or ``unset`` (the widget's own "no default") once its key
    holds a value: the field's own, or a preset's just filled in (``SettingsForm.filled``).
    Streamlit warns about a widget given both a default and a value set through the session
    state, which every preset button did."""
    return unset if key in st.session_state else value


def form_fill(form: SettingsForm, key: str) -> dict:
    """The preset's values of ``key`` (dims or shapes) waiting for the form's model, if any."""
    pending = _filled(form.model)
    return pending[key] if pending else {}


DRAW = {"backends": _backends, "flag": _flag, "soc": _soc, "choice": _choice, "seconds": _seconds,
        "options": _options, "dims": _dims, "shapes": _shapes}


# -- what was entered, as the record's values -----------------------------------------------------------
def _shape_values(texts: dict[str, str]) -> dict[str, tuple[int, ...]]:
    from dashboard.intake.shapes import parse_shape

    return {name: parse_shape(text, f"input {name!r}") for name, text in texts.items()
            if text.strip() and "?" not in text}


PARSE = {"backends": lambda chosen: tuple(chosen or ("htp",)), "flag": bool, "soc": lambda soc: soc,
         "choice": lambda value: value, "seconds": float, "dims": dict, "shapes": _shape_values,
         "options": lambda text: page_provider_options([line for line in (text or "").splitlines() if line.strip()])}
