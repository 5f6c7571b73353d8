"""Deadlines for the tests' waits: a wait that never ends fails its test with a message saying
what did not happen, instead of hanging until pytest-timeout (or the CI run) gives up.

The deadlines are generous (a loaded, shared 2-core machine), never timed assertions: reaching
one means something is stuck, not slow.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

import pytest

T = TypeVar("T")

DEADLINE = 120.0  # seconds; a stuck wait, not a slow one, reaches it


def wait_until(condition: Callable[[], object], what: str, seconds: float = DEADLINE, interval: float = 0.001) -> None:
    """Poll ``condition`` until it is true; fail with ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds:.0f} s")
        time.sleep(interval)


def within(call: Callable[[], T], what: str, seconds: float = DEADLINE) -> T:
    """``call()`` on a daemon thread (a blocking call of the code under test that takes no
    timeout of its own); its result, or a failure naming ``what`` when it has not returned
    after ``seconds``. Exceptions of ``call`` are raised here."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"within: {what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{what}: still waiting after {seconds:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[return-value]


def join_all(threads: list[threading.Thread], what: str, seconds: float = DEADLINE) -> None:
    """Join every thread within one shared deadline; fail naming ``what`` if any is still alive."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        pytest.fail(f"{what}: {len(alive)} thread(s) still running after {seconds:.0f} s ({', '.join(alive)})")
