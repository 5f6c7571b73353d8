"""AppTest helper for pages whose analysis runs as a background job (``dashboard.views.jobs``)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

TIMEOUT = 300


def settle(at: AppTest, slot: str = "partition_job", timeout: float = TIMEOUT) -> AppTest:
    """Run the page; while its job runs on its thread, wait for it and run again (what the
    browser's progress fragment does every half second). Fails on a script exception."""
    at.run(timeout=timeout)
    job = at.session_state[slot] if slot in at.session_state else None
    while job is not None and not job.done:
        job.wait(timeout)
        at.run(timeout=timeout)
        job = at.session_state[slot]
    assert not at.exception, at.exception
    return at
