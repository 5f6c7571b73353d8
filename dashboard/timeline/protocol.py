"""The timeline capability's messages of the worker protocol: the progress events of a timeline
run and the ``timeline`` command's arguments, registered with the protocol's one mechanism
(``dashboard.runtime.protocol``). Why here: the records are built from this capability's types
(``Event``, ``Request``, ``TimelineOptions``), so their owner defines them and the runtime stays
below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dashboard.runtime.protocol import Command, register_command, register_events
from dashboard.serde import Record
from dashboard.timeline.model import Event, Request, TimelineOptions, TimelineRun


@dataclass
class Status(Record):
    """What a timeline run is doing now, in words."""

    message: str
    type: Literal["status"] = "status"


@dataclass
class Setup(Record):
    """The backends a timeline run chose (fast: the QNN GPU, or the CPU EP without one)."""

    fast: dict
    target: dict
    type: Literal["setup"] = "setup"


@dataclass
class StrategyStart(Record):
    strategy: str
    backends: dict[str, str]
    type: Literal["strategy_start"] = "strategy_start"


@dataclass
class StrategyEnd(Record):
    strategy: str
    metrics: dict
    type: Literal["strategy_end"] = "strategy_end"


@dataclass
class TimelineEvent(Record):
    strategy: str
    event: Event
    type: Literal["event"] = "event"


@dataclass
class TimelineRequest(Record):
    strategy: str
    request: Request
    type: Literal["request"] = "request"


@dataclass
class TimelineArgs(Record):
    model: str
    options: TimelineOptions


register_events(Status, Setup, StrategyStart, StrategyEnd, TimelineEvent, TimelineRequest)
register_command("timeline", Command(TimelineArgs, TimelineRun, "dashboard.timeline.runner:run_worker"))
