"""A timeline run on a device, streamed back: the dashboard's and the CLI's side of the worker's
``timeline`` command.

The worker does the serving (``dashboard.timeline.runner``); this side checks the model before any
process starts and runs the command through every long run's mechanism (``runtime.jobs``: the
model sent once per digest to a remote device, the events forwarded as they come, Cancel at any
moment, the worker reaped), then turns the result into a ``TimelineRun``.
"""

from __future__ import annotations

import dataclasses

from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.runtime.jobs import Cancellation, run_command
from dashboard.runtime.protocol import ProgressEvent, Upload
from dashboard.timeline.model import DEFAULT_TIMEOUT, STRATEGY_TITLES, StrategyRun, TimelineOptions, TimelineRun
from dashboard.timeline.protocol import (Setup, Status, StrategyEnd, StrategyStart, TimelineArgs, TimelineEvent,
                                         TimelineRequest)


def run_on_device(device, model_path: str, options: TimelineOptions, *, on_event=None,
                  timeout: float | None = DEFAULT_TIMEOUT, cancel: Cancellation | None = None,
                  digest: str | None = None) -> TimelineRun:
    """Run the comparison on ``device`` (a ``dashboard.runtime.devices.Device``): start its worker, make
    the model available there (uploaded over the protocol to a remote device, once per digest;
    ``digest`` when the caller knows it), stream the worker's events to ``on_event`` and return the
    finished run. ``cancel`` stops it at any moment (``Cancelled`` is raised); a worker that
    crashes, hangs past ``timeout`` or fails the run is its ``WorkerError``."""
    load_model(model_path)  # a bad model is a one-line error here, before any process starts
    if not device.is_local:
        digest = digest or file_digest(model_path)
    answer = run_command(device, model_path, digest, "timeline", lambda path: TimelineArgs(path, options),
                         timeout=timeout, on_event=on_event, cancel=cancel)
    result = answer.value()
    hello = answer.hello.to_json() if answer.hello else {}
    # What the target's figures were measured on, as the worker decided (``qnn.hardware``):
    # "simulator" on an x86_64 host, "npu" on a Snapdragon.
    info = {**device.to_json(), "worker": hello, "model_path": answer.model_path,
            "runtime": {"hardware": result.runtime.get("hardware")}}
    return dataclasses.replace(result, device=info, model=model_path)


def target_hardware(device) -> str:
    """What the HTP of ``device`` is, before any run, for the defaults and the estimate: this
    machine's own interpreter on x86_64 is the HTP simulator (``runtime.doctor.platform_mode``, the
    worker's own rule); any other device is taken for a Snapdragon ("device"). The run itself
    reports what it measured on (``runtime.hardware``)."""
    if device.is_local and device.python is None:
        from dashboard.runtime.doctor import platform_mode, this_host

        return "simulator" if platform_mode(this_host()) == "simulator" else "device"
    return "device"


class LiveRun:
    """A run as it streams in from the worker: what the page's live chart and the CLI's progress
    show. ``feed`` takes each progress event of the run (``dashboard.timeline.protocol``)."""

    def __init__(self, options: TimelineOptions, per_strategy: int | None = None) -> None:
        """``per_strategy``: the requests each strategy is expected to serve, for a workload paced
        until after the swap (``options.after_swap``), whose count the migration decides; the
        estimate (``timeline.estimate``) until the migration, which runs first, has ended."""
        self.strategies: dict[str, StrategyRun] = {}
        self.fast: dict = {}
        self.target: dict = {}
        self.current: str | None = None
        self.status = "starting the worker"
        self._count = len(options.strategies)
        paced = options.after_swap > 0 and "migrate" in options.strategies
        self.per_strategy = (per_strategy or options.requests) if paced else options.requests
        self.total = self.per_strategy * self._count
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
        elif isinstance(message, StrategyEnd):  # the paced migration's count is every strategy's
            self.per_strategy = int(message.metrics.get("expected") or self.per_strategy)
            done = sum(len(s.requests) for s in self.strategies.values())
            self.total = max(done, done + self.per_strategy * (self._count - len(self.strategies)))
        elif isinstance(message, TimelineRequest) and message.strategy in self.strategies:
            self.strategies[message.strategy].requests.append(message.request)
            self.answered += 1

    @property
    def fraction(self) -> float:
        return min(self.answered / self.total, 1.0) if self.total else 0.0
