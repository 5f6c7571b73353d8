"""Shape warnings on a page: what ``intake.shape_hints`` finds degenerate in the settings about to
run (an image side or an encoder length of 1, a detector at another size than it says), each as a
warning with the values to set, and the family's typical settings. Why before the run: a
degenerate shape compiles and comes back "HTP claims every node", about a graph nobody serves.

``show(graph, settings)`` is all a page calls (the Timeline and Compare pages do; the Partitions
page can with the same line)."""

from __future__ import annotations

import streamlit as st

from dashboard.intake.graph import ModelGraph
from dashboard.intake.shape_hints import hints, presets
from dashboard.intake.shapes import resolve_dims
from dashboard.runtime.knobs import Settings
from dashboard.views.safe import md


def show(graph: ModelGraph | None, settings: Settings | None, who: str = "") -> int:
    """The warnings for ``settings`` on ``graph`` (``who`` names the side, on Compare); returns
    how many were shown."""
    if graph is None or settings is None:
        return 0
    found = hints(graph, resolve_dims(graph, settings.dims), dict(settings.shapes or {}))
    for hint in found:
        fix = ", ".join([f"{k} = {v}" for k, v in hint.dims.items()] +
                        [f"{k} = {','.join(map(str, v))}" for k, v in hint.shapes.items()])
        st.warning(f"{md(who + ': ' if who else '')}**Shape looks degenerate.** {md(hint.message, 500)}"
                   + (f" Set {md(fix)} under the symbolic dimensions / input shapes." if fix else ""),
                   icon=":material/aspect_ratio:")
    if found:
        typical = presets(graph)
        if typical:
            st.caption("Typical settings for this kind of model: " + "; ".join(md(p.text()) for p in typical))
    return len(found)
