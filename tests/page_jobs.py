"""AppTest helper for pages whose analysis runs as a background job (``dashboard.views.jobs``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a page is opened: modules that only list the pages stay Streamlit-free
    from streamlit.testing.v1 import AppTest

TIMEOUT = 300
ROOT = Path(__file__).resolve().parent.parent
# The provider-option text areas of the pages that take them, by page (one label: ``runtime.knobs``).
OPTION_AREAS = [("partitions", "Extra QNN provider options (KEY=VALUE per line)"),
                ("timeline", "Extra QNN provider options (KEY=VALUE per line)")]


def page_with_model(name: str, model: Path, title: str = "cnn32", timeout: float = TIMEOUT) -> AppTest:
    """The page ``pages/{name}.py`` of app.py, run once with ``model`` selected by path."""
    from streamlit.testing.v1 import AppTest

    from dashboard.intake.digest import file_digest
    from dashboard.views.state import SelectedModel

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout).switch_page(f"pages/{name}.py")
    at.session_state["selected_model"] = SelectedModel(str(model), title, file_digest(model), "path")
    at.session_state["intake_started"] = True
    return at.run()


def settle(at: AppTest, slot: str = "partition_job", timeout: float = TIMEOUT) -> AppTest:
    """Run the page; while its job runs on its thread, wait for it and run again (what the
    browser's progress fragment does every half second). Fails on a script exception, or when the
    job is not done ``timeout`` seconds after the first run."""
    deadline = time.monotonic() + timeout
    ran = time.monotonic()
    at.run(timeout=timeout)
    job = at.session_state[slot] if slot in at.session_state else None
    # A job that ended during the last run may have been drawn as still running (its fragment then
    # asks for a rerun, which the browser makes and AppTest does not): run until a run starts after it ended.
    while job is not None and (not job.done or job.ended > ran):
        assert time.monotonic() < deadline, f"the page's {slot} did not finish within {timeout} s"
        job.wait(max(0.0, deadline - time.monotonic()))
        ran = time.monotonic()
        at.run(timeout=timeout)
        job = at.session_state[slot]
    assert not at.exception, at.exception
    return at


NODE_PICKER = "Node (or click one in the graph)"


def node_picker(at: AppTest):
    """The Partitions page's node picker (its key is per analysis: ``partitions.node_pick_key``)."""
    return next(s for s in at.selectbox if s.label == NODE_PICKER)
