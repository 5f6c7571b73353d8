"""A timeline run on a device, streamed back: the dashboard's and the CLI's side of the worker's
``timeline`` command.

The worker does the serving (``dashboard.timeline.runner``); this side checks the model before any
process starts, makes the model available on the device (uploaded once per digest to a remote
one), forwards the worker's events as they come, and turns the result into a ``TimelineRun``.
"""

from __future__ import annotations

from dashboard.intake.reader import file_digest, load_model
from dashboard.timeline.model import DEFAULT_TIMEOUT, TimelineOptions, TimelineRun


def run_on_device(device, model_path: str, options: TimelineOptions, *, on_event=None,
                  timeout: float | None = DEFAULT_TIMEOUT) -> TimelineRun:
    """Run the comparison on ``device`` (a ``dashboard.runtime.devices.Device``): start its worker, make
    the model available there (uploaded over the protocol to a remote device, once per digest),
    stream the worker's events to ``on_event`` and return the finished run."""
    load_model(model_path)  # a bad model is a one-line error here, before any process starts
    notify = on_event or (lambda message: None)
    with device.connect() as worker:
        remote_path = worker.send_model(model_path, file_digest(model_path),
                                        on_event=lambda e: notify({"type": "upload", **e}))
        result = worker.call("timeline", {"model": remote_path, "options": options.to_json()},
                             timeout=timeout, on_event=notify)
        hello = dict(worker.hello or {})
    info = {**device.to_json(), "worker": hello, "model_path": remote_path}
    run = TimelineRun.from_json({**result, "device": info, "model": model_path})
    return run
