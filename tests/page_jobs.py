"""AppTest helper for pages whose analysis runs as a background job (``dashboard.views.jobs``)."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

TIMEOUT = 300


def settle(at: AppTest, slot: str = "partition_job", timeout: float = TIMEOUT) -> AppTest:
    """Run the page; while its job runs on its thread, wait for it and run again (what the
    browser's progress fragment does every half second). Fails on a script exception, or when the
    job is not done ``timeout`` seconds after the first run."""
    deadline = time.monotonic() + timeout
    at.run(timeout=timeout)
    job = at.session_state[slot] if slot in at.session_state else None
    while job is not None and not job.done:
        assert time.monotonic() < deadline, f"the page's {slot} did not finish within {timeout} s"
        job.wait(max(0.0, deadline - time.monotonic()))
        at.run(timeout=timeout)
        job = at.session_state[slot]
    assert not at.exception, at.exception
    return at
