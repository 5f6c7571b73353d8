"""Showing model-derived text safely.

Node, tensor and file names come from whoever wrote the model: they may hold HTML, script tags,
markdown, control characters, right-to-left overrides or 10,000 characters. Pages show such text
only through elements that never interpret it (``st.dataframe``, ``st.code``, ``st.text``) or
after ``md()`` has escaped it for ``st.markdown`` and friends; tables get ``short()`` values and
``full_values()`` keeps the untruncated text one click away.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

import streamlit as st

from dashboard.printable import plain

TABLE_LIMIT = 80
MISSING = "—"  # what a table shows for a value that is not there (a dataframe would print "None")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&\"'=/^%@;?,])")


def short(text: object, limit: int = TABLE_LIMIT) -> str:
    """``plain(text)`` cut to ``limit`` characters with an ellipsis, for table cells and labels."""
    value = plain(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def md(text: object, limit: int | None = None) -> str:
    """``text`` escaped for ``st.markdown``: every markdown/HTML punctuation character is
    backslash-escaped (legal for any ASCII punctuation in CommonMark), so ``<script>``,
    ``[link](javascript:...)``, ``:red[...]`` and ``$math$`` show as typed."""
    value = plain(text) if limit is None else short(text, limit)
    return _MD_SPECIAL.sub(r"\\\1", value)


def frame(rows, columns: list[str] | None = None):
    """``rows`` (dicts) as a ``pandas.DataFrame`` for ``st.dataframe``, a missing value (None, NaN)
    shown as ``MISSING``: Streamlit prints a raw ``None``, which reads like a bug."""
    import pandas as pd

    table = pd.DataFrame(rows, columns=columns)
    for column in table.columns:
        missing = table[column].isna()
        if missing.any():  # one type per column (Arrow's): text, the missing ones as MISSING
            table[column] = [MISSING if gone else str(value) for value, gone in zip(table[column], missing)]
    return table


def full_values(label: str, values: Iterable[object], limit: int = TABLE_LIMIT) -> None:
    """An expander with the untruncated form of any value a table had to shorten (nothing when
    every value fit)."""
    long = [plain(v) for v in values if len(plain(v)) > limit]
    if not long:
        return
    with st.expander(f"{label}: {len(long)} full value(s) shortened in the table"):
        st.code("\n".join(long), language=None, wrap_lines=True)


# A download is named after the model and what it holds, stamped in UTC
# (``cnn_classifier-timeline-20260101T120000Z.json``), never after a session label full of punctuation.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def download_name(model_path: str, kind: str, ext: str, when: datetime | None = None) -> str:
    """``<model>-<kind>-<UTC time>.<ext>``: the model file's stem reduced to letters, digits and
    ``._-`` (at most 60 characters), so any file system and shell takes it as it is. An uploaded
    model is named by its own file name (``state.known_as``), not by its copy's on the server."""
    from dashboard.views.state import known_as

    return stamped_name(Path(known_as(model_path)).stem, kind, ext, when)


def stamped_name(stem: str, kind: str, ext: str, when: datetime | None = None) -> str:
    """``<stem>-<kind>-<UTC time>.<ext>``, ``stem`` made safe as ``download_name`` says: every
    download's name, whatever it holds (a model's results, a sweep's folder)."""
    safe = _UNSAFE.sub("_", stem).strip("._-")[:60]
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    return f"{safe or 'model'}-{kind}-{stamp}.{ext}"
