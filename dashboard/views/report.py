"""What pages share for downloads: clean file names, and the HTML report of the selected model.

A download is named after the model and what it holds, stamped in UTC
(``cnn_classifier-timeline-20260101T120000Z.json``), never after a session label full of
punctuation. The report (``dashboard.render.report``) gathers what this session has for the
selected model: both classifications, the partition reports the Partitions and Compare pages
produced, and the timeline runs; it is built only when the button is clicked.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def download_name(model_path: str, kind: str, ext: str, when: datetime | None = None) -> str:
    """``<model>-<kind>-<UTC time>.<ext>``: the model file's stem reduced to letters, digits and
    ``._-`` (at most 60 characters), so any file system and shell takes it as it is."""
    stem = _UNSAFE.sub("_", Path(model_path).stem).strip("._-")[:60]
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stem or 'model'}-{kind}-{stamp}.{ext}"
