"""The profile capability's messages of the worker protocol: the ``profile`` command's arguments and
its result (the ``Profile`` record itself), registered with the protocol's one mechanism
(``dashboard.runtime.protocol``). Progress reuses the partition's ``Stage`` event (a step and the
fraction done), so every front end that shows a partition's progress shows a profile's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dashboard.errors import UserError
from dashboard.profile.model import DEFAULT_RUNS, DEFAULT_WARMUP, MAX_RUNS, Profile
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.protocol import Command, register_command
from dashboard.serde import Record


@dataclass
class ProfileArgs(Record):
    """``config``: the HTP session's (its backend field is ignored); ``backends``: which QNN backends
    to profile (the CPU EP always comes with the HTP's session: it runs what the HTP refused)."""

    path: str
    config: SessionConfig
    backends: list[Literal["htp", "gpu"]] = field(default_factory=lambda: ["htp"])
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    runs: int = DEFAULT_RUNS
    warmup: int = DEFAULT_WARMUP
    data: str | None = None  # a saved data set (accuracy.data.Dataset.save) on the worker's host: the runs' inputs

    def __post_init__(self) -> None:
        check_runs(self.runs, self.warmup)


def check_runs(runs: int, warmup: int) -> None:
    if not isinstance(runs, int) or isinstance(runs, bool) or not 1 <= runs <= MAX_RUNS:
        raise UserError(f"the number of timed runs must be between 1 and {MAX_RUNS}, got {runs!r}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or not 0 <= warmup <= 100:
        raise UserError(f"warm-up runs must be between 0 and 100, got {warmup!r}")


register_command("profile", Command(ProfileArgs, Profile, "dashboard.profile.measure:run"))
