"""Shape warnings on a page: what ``intake.shape_hints`` finds degenerate in the settings about to
run (an image side or an encoder length of 1, a detector at another size than it says), each as a
warning with the values to set, and the family's typical settings. Why before the run: a
degenerate shape compiles and comes back "HTP claims every node", about a graph nobody serves.

The values to set and the presets are buttons: one fills the model's dimension and shape fields
(``views.settings.fill``, the per-model settings every page shares) and runs nothing; the page
analyses at them when its settings are applied (Partitions' **Apply**, Compare's **Compare**, the
Timeline's run).

``show(graph, settings)`` is all a page calls (Partitions, Timeline, and Compare once per side)."""

from __future__ import annotations

import streamlit as st

from dashboard.intake.graph import ModelGraph
from dashboard.intake.shape_hints import Preset, ShapeHint, hints, presets
from dashboard.intake.shapes import resolve_dims
from dashboard.runtime.knobs import Settings
from dashboard.views import settings as settings_view
from dashboard.views.safe import md


def show(graph: ModelGraph | None, settings: Settings | None, who: str = "", digest: str | None = None) -> int:
    """The warnings for ``settings`` on ``graph`` (``who`` names the side, on Compare), with a
    button per fix and per preset that fills the fields of the model ``digest`` (default: the
    selected model's, when ``graph`` is it); returns how many warnings were shown."""
    if graph is None or settings is None:
        return 0
    digest = digest or _selected_digest(graph)
    side = who.split(":", 1)[0].strip()
    found = hints(graph, resolve_dims(graph, settings.dims), dict(settings.shapes or {}))
    for i, hint in enumerate(found):
        fix = _values_text(hint)
        st.warning(f"{md(who + ': ' if who else '')}**Shape looks degenerate.** {md(hint.message, 500)}"
                   + (f" Set {md(fix)} under the symbolic dimensions / input shapes." if fix else ""),
                   icon=":material/aspect_ratio:")
        if fix and digest is not None:
            st.button(f"Set {fix}", key=f"shape_fix_{side}_{digest}_{i}", icon=":material/edit:",
                      on_click=settings_view.fill, args=(digest, f"{fix}", hint.dims, hint.shapes),
                      help="Fills the fields; nothing runs until the settings are applied")
    typical = presets(graph)
    if typical and digest is not None:
        if found:
            st.caption("Typical settings for this kind of model: " + "; ".join(md(p.text()) for p in typical))
            _preset_buttons(typical, digest, side)
        else:
            with st.expander(f"{md(who + ': ' if who else '')}Typical shapes for this kind of model",
                             icon=":material/aspect_ratio:"):
                _preset_buttons(typical, digest, side)
    waiting = settings_view.waiting_fill(digest)
    if waiting:
        st.info(f"{md(who + ': ' if who else '')}Filled in the settings: **{md(waiting)}**. What is shown is "
                "still at the settings applied last; apply the settings to analyse at these.",
                icon=":material/edit:")
    return len(found)


def _preset_buttons(typical: list[Preset], digest: str, side: str) -> None:
    for i, preset in enumerate(typical):
        st.button(f"Use {preset.title}", key=f"shape_preset_{side}_{digest}_{i}", icon=":material/aspect_ratio:",
                  on_click=settings_view.fill, args=(digest, preset.title, preset.dims, preset.shapes),
                  help=f"{preset.text()} — fills the fields; nothing runs until the settings are applied")


def _values_text(hint: ShapeHint) -> str:
    return ", ".join([f"{k} = {v}" for k, v in hint.dims.items()] +
                     [f"{k} = {','.join(map(str, v))}" for k, v in hint.shapes.items()])


def _selected_digest(graph: ModelGraph) -> str | None:
    from dashboard.views import state

    from pathlib import Path

    selected = state.current_model()
    if selected is None:
        return None
    same = selected.path == graph.path or Path(selected.path).resolve() == Path(graph.path).resolve()
    return selected.digest if same else None
