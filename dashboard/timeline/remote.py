"""A timeline run on a device, streamed back: the dashboard's and the CLI's side of the worker's
``timeline`` command.

The worker does the serving (``dashboard.timeline.runner``); this side checks the model before any
process starts, makes the model available on the device (uploaded once per digest to a remote
one), forwards the worker's events as they come, and turns the result into a ``TimelineRun``.
"""

from __future__ import annotations

import dataclasses

from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.runtime.protocol import ProgressEvent, Upload
from dashboard.timeline.model import DEFAULT_TIMEOUT, STRATEGY_TITLES, StrategyRun, TimelineOptions, TimelineRun
from dashboard.timeline.protocol import Setup, Status, StrategyStart, TimelineArgs, TimelineEvent, TimelineRequest


def run_on_device(device, model_path: str, options: TimelineOptions, *, on_event=None,
                  timeout: float | None = DEFAULT_TIMEOUT) -> TimelineRun:
    """Run the comparison on ``device`` (a ``dashboard.runtime.devices.Device``): start its worker, make
    the model available there (uploaded over the protocol to a remote device, once per digest),
    stream the worker's events to ``on_event`` and return the finished run."""
    load_model(model_path)  # a bad model is a one-line error here, before any process starts
    notify = on_event or (lambda message: None)
    with device.connect() as worker:
        remote_path = worker.send_model(model_path, file_digest(model_path),
                                        on_event=notify)
        result = worker.call("timeline", TimelineArgs(remote_path, options), timeout=timeout, on_event=notify)
        hello = worker.hello.to_json() if worker.hello else {}
    # What the target's figures were measured on, as the worker decided (``qnn.hardware``):
    # "simulator" on an x86_64 host, "npu" on a Snapdragon.
    info = {**device.to_json(), "worker": hello, "model_path": remote_path,
            "runtime": {"hardware": result.runtime.get("hardware")}}
    return dataclasses.replace(result, device=info, model=model_path)


class LiveRun:
    """A run as it streams in from the worker: what the page's live chart and the CLI's progress
    show. ``feed`` takes each progress event of the run (``dashboard.timeline.protocol``)."""

    def __init__(self, options: TimelineOptions) -> None:
        self.strategies: dict[str, StrategyRun] = {}
        self.fast: dict = {}
        self.target: dict = {}
        self.current: str | None = None
        self.status = "starting the worker"
        self.total = options.requests * len(options.strategies)
        self.answered = 0

    def feed(self, message: ProgressEvent) -> None:
        if isinstance(message, Status):
            self.status = message.message
        elif isinstance(message, Setup):
            self.fast, self.target = dict(message.fast), dict(message.target)
        elif isinstance(message, Upload):
            self.status = f"uploading the model: {message.sent / max(message.total, 1):.0%}"
        elif isinstance(message, StrategyStart):
            self.current = message.strategy
            self.strategies[message.strategy] = StrategyRun(name=message.strategy, backends=dict(message.backends))
            self.status = f"{STRATEGY_TITLES.get(message.strategy, message.strategy)}: starting"
        elif isinstance(message, TimelineEvent) and message.strategy in self.strategies:
            event = message.event
            self.strategies[message.strategy].events.append(event)
            title = STRATEGY_TITLES.get(message.strategy, message.strategy)
            self.status = f"{title}: {event.kind.replace('_', ' ')} ({event.backend})"
        elif isinstance(message, TimelineRequest) and message.strategy in self.strategies:
            self.strategies[message.strategy].requests.append(message.request)
            self.answered += 1

    @property
    def fraction(self) -> float:
        return min(self.answered / self.total, 1.0) if self.total else 0.0
