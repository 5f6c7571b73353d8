"""A timeline run on a device, streamed back: the dashboard's and the CLI's side of the worker's
``timeline`` command.

The worker does the serving (``dashboard.timeline.runner``); this side checks the model before any
process starts and runs the command through every long run's mechanism (``runtime.jobs``: the
model sent once per digest to a remote device, the events forwarded as they come, Cancel at any
moment, the worker reaped), then turns the result into a ``TimelineRun``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.runtime.jobs import Cancellation, run_command
from dashboard.runtime.protocol import ProgressEvent, Upload
from dashboard.timeline.estimate import Costs, calibrated, paced, paced_count, ready_s, strategy_seconds
from dashboard.timeline.estimate import duration
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
    show. ``feed`` takes each progress event of the run (``dashboard.timeline.protocol``).

    The total is the count that will run: a workload paced until after the swap serves what
    arrived until the migration swapped and ``after_swap`` more, so its count is predicted from
    the figures measured so far (the compile, once it ended; the swap, once it came: then it is
    exact) rather than from the estimate made before the run. ``time_left`` redoes the estimate's
    walk (``timeline.estimate``) on the costs calibrated on this run's first compile and requests."""

    def __init__(self, options: TimelineOptions, per_strategy: int | None = None, costs: Costs | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``per_strategy``: the requests each strategy is expected to serve, for a workload paced
        until after the swap (``options.after_swap``), whose count the migration decides; the
        estimate (``timeline.estimate``) until the run measures better. ``costs``: the costs that
        estimate rests on, calibrated as the run goes (without them, no ``time_left`` of its own).
        ``clock``: seconds, monotonic (a test's own)."""
        self.options = options
        self.strategies: dict[str, StrategyRun] = {}
        self.fast: dict = {}
        self.target: dict = {}
        self.current: str | None = None
        self.status = "starting the worker"
        self.prior = costs
        self._clock = clock
        self._started: dict[str, float] = {}  # strategy -> when it started (``clock``)
        self._ended: set[str] = set()
        self._count = len(options.strategies)
        self.paced = paced(options)
        self.per_strategy = (per_strategy or options.requests) if self.paced else options.requests
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
            self._started[message.strategy] = self._clock()
            self.status = f"{STRATEGY_TITLES.get(message.strategy, message.strategy)}: starting"
        elif isinstance(message, TimelineEvent) and message.strategy in self.strategies:
            event = message.event
            self.strategies[message.strategy].events.append(event)
            title = STRATEGY_TITLES.get(message.strategy, message.strategy)
            self.status = f"{title}: {event.kind.replace('_', ' ')} ({event.backend})"
            self._recount()
        elif isinstance(message, StrategyEnd):  # the paced migration's count is every strategy's
            self._ended.add(message.strategy)
            self.per_strategy = int(message.metrics.get("expected") or self.per_strategy)
            self._recount()
        elif isinstance(message, TimelineRequest) and message.strategy in self.strategies:
            self.strategies[message.strategy].requests.append(message.request)
            self.answered += 1
            self._recount()

    # -- what will run, and how long it will take ----------------------------------------------
    def costs(self) -> Costs | None:
        """The estimate's costs with what this run measured so far in their place."""
        if self.prior is None:
            return None
        return calibrated(self.prior, list(self.strategies.values()), self.fast.get("backend", "cpu"),
                          self.target.get("backend", self.options.target), self.options.warmup_runs)

    def _swap_at(self) -> float | None:
        """When the migration swapped (or gave up), on its clock: what settles a paced count."""
        migrate = self.strategies.get("migrate")
        settled = [e.t for e in (migrate.events if migrate else ()) if e.kind in ("swap", "migration_failed")]
        return min(settled) if settled else None

    def _ready(self, costs: Costs) -> float:
        """When the migration will swap, from what is known: the swap itself, else the compile's
        end (measured) and the warm-up, else the calibrated compile; never before now."""
        swapped = self._swap_at()
        if swapped is not None:
            return swapped
        migrate = self.strategies.get("migrate")
        target = self.target.get("backend", self.options.target)
        events = list(migrate.events) if migrate else []
        warm = [e.t for e in events if e.kind == "warmup_end" and e.backend == target]
        compiled = [e.t for e in events if e.kind == "session_create_end" and e.backend == target]
        if warm:  # warm: the swap follows at once
            ready = warm[0]
        elif compiled:
            ready = compiled[0] + self.options.warmup_runs * costs.target_request
        else:
            ready = ready_s(self.options, costs)
        return max(ready, self._elapsed("migrate"))

    def _elapsed(self, name: str) -> float:
        return self._clock() - self._started[name] if name in self._started else 0.0

    def _recount(self) -> None:
        """The total: requests answered in the strategies that ended, and the count each strategy
        still running or to come will serve."""
        if self.paced and "migrate" not in self._ended:
            if self._swap_at() is not None:
                self.per_strategy = paced_count(self.options, self._swap_at())
            elif (costs := self.costs()) is not None and self.answered:
                self.per_strategy = paced_count(self.options, self._ready(costs))
        done = sum(len(self.strategies[name].requests) for name in self._ended)
        self.total = max(self.answered, done + self.per_strategy * (self._count - len(self._ended)))

    def time_left(self) -> float | None:
        """Seconds left, the estimate's walk on the calibrated costs: the strategy being served
        from where its clock is, then those to come. None before the first answer (nothing is
        measured yet) and without the estimate's costs."""
        costs = self.costs()
        if costs is None or not self.answered:
            return None
        left = 0.0
        for name in self.options.strategies:
            if name in self._ended:
                continue
            ready = self._ready(costs) if name == "migrate" else None
            whole = strategy_seconds(name, self.options, self.per_strategy, costs, ready)
            if name in self._started:
                run = self.strategies[name]
                still = max(self.per_strategy - len(run.requests), 0)
                last = run.requests[-1].latency if run.requests and run.requests[-1].latency else 0.0
                left += max(whole - self._elapsed(name), still * last / max(self.options.concurrency, 1))
            else:
                left += whole
        return left

    def costs_text(self) -> str:
        """What the time left rests on, said as an estimate."""
        costs = self.costs()
        if costs is None:
            return ""
        return (f"Time left estimated {costs.basis}: HTP request {duration(costs.target_request)}, compile "
                f"{duration(costs.target_create)}; an estimate, not a measurement.")

    @property
    def fraction(self) -> float:
        return min(self.answered / self.total, 1.0) if self.total else 0.0
