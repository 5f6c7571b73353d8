"""The settings' widgets, drawn from the table of knobs (``runtime.knobs``) for every page.

Why one renderer: the Partitions, Timeline and Compare pages each drew their own toggle, SoC box
and option area, labelled and checked a little differently. ``SettingsForm`` draws a knob's widget
from its row of the table (label, help, choices, default) wherever the page places it, and
``settings()`` turns what was entered into the same ``Settings`` record the command line builds,
validated by the record itself. Errors and hints name knobs by their labels, never a flag.

Widget keys are ``{page}_{widget}_{scope}`` (``pt_fp16_<digest>``): a page's widgets are per model
(or per side of a comparison).
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
    (``knobs.TIMEOUTS``); ``defaults`` are the page's own (fp16 on for a float model)."""

    def __init__(self, page: str, scope: str, graph: ModelGraph | None = None, *, analysis: str | None = None,
                 defaults: dict[str, Any] | None = None) -> None:
        self.page, self.scope, self.graph = page, scope, graph
        self.defaults = {**knob_defaults(analysis), **(defaults or {})}
        self.raw: dict[str, Any] = {}

    def key(self, knob: Knob, name: str | None = None) -> str:
        return f"{self.page}_{knob.widget}_{self.scope}" + (f"_{name}" if name is not None else "")

    def draw(self, *keys: str) -> None:
        for key in keys:
            knob = KNOB[key]
            self.raw[key] = DRAW[knob.kind](self, knob, self.defaults[key])

    def settings(self, record: type = Settings, **fields):
        """``record`` (``Settings`` or one built on it) from the widgets and the page's other
        ``fields``; a bad value is one ``UserError`` in the page's words."""
        try:
            values = {key: PARSE[KNOB[key].kind](raw) for key, raw in self.raw.items()}
            return record(**values, **fields)
        except UserError as exc:
            raise worded_error(exc, PAGE) from None


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
    return st.text_area(f"{knob.label} (KEY=VALUE per line)", key=form.key(knob), height=90, help=knob.help,
                        placeholder="htp_graph_finalization_optimization_mode=3")


def _dims(form: SettingsForm, knob: Knob, default) -> dict[str, int]:
    """A field per symbolic dimension of the model, pre-filled with its default and why."""
    from dashboard.intake.shapes import default_dims

    proposed = default_dims(form.graph) if form.graph is not None else {}
    dims = {}
    if proposed:
        st.markdown(f"**{knob.label}** (pre-filled; QNN needs them fixed)")
        cols = st.columns(2)
        for i, (name, dim) in enumerate(proposed.items()):
            dims[name] = int(cols[i % 2].number_input(
                short(name, 40), min_value=1, value=int(default.get(name, dim.value)), step=1,
                key=form.key(knob, name), help=dim.why + (" — a guess" if dim.guessed else "")))
    return dims


def _shapes(form: SettingsForm, knob: Knob, default) -> dict[str, str]:
    """A field per input with unnamed dimensions (``?``): its whole shape, pre-filled with what is
    known (fixed sizes, named dimensions' defaults) and ``?`` where the user must decide."""
    from dashboard.intake.shapes import default_dims, unnamed_dynamic_inputs

    if form.graph is None:
        return {}
    proposed = default_dims(form.graph)
    unnamed = unnamed_dynamic_inputs(form.graph)
    if not unnamed:
        if not proposed:
            st.markdown("All input shapes are static.")
        return {}
    st.markdown(f"**{knob.label}** (inputs with unnamed dimensions: replace each ? with a size)")
    specs = {t.name: t for t in form.graph.inputs}
    out = {}
    for name in unnamed:
        shape = specs[name].shape or ()
        prefill = ", ".join(str(d) if isinstance(d, int) else str(proposed[d].value) if d in proposed else "?"
                            for d in shape)
        out[name] = st.text_input(short(name, 40), value=prefill, key=form.key(knob, name), placeholder="e.g. 1, 576",
                                  help=f"Declared {specs[name].shape_text()}. {knob.help}.")
    return out


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
