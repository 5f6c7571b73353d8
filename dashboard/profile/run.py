"""Profiling a model from the dashboard's side: check the input, run the worker, keep what it said.

``profile_model`` is the one entry point of the CLI, the pages, the report and the notebook. The
work runs in a worker subprocess (``runtime.jobs.run_command``: the same lifecycle, timeout and
Cancel as every run), so a crash or hang of QNN is a failed backend in the profile, never a dead
dashboard.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

from dashboard.errors import UserError
from dashboard.profile.model import DEFAULT_RUNS, DEFAULT_WARMUP, BackendProfile, Profile
from dashboard.profile.protocol import ProfileArgs, check_runs
from dashboard.runtime.jobs import Cancellation
from dashboard.runtime.knobs import TIMEOUTS, Settings

DEFAULT_TIMEOUT = TIMEOUTS["profile"]


def profile_model(model_path: str | os.PathLike, settings: Settings | None = None, *, runs: int = DEFAULT_RUNS,
                  warmup: int = DEFAULT_WARMUP, device=None, timeout: float | None = None, on_event=None,
                  cancel: Cancellation | None = None, data=None, preprocess=None, limit: int | None = None) -> Profile:
    """The cost profile of ``model_path`` under ``settings`` (its ``backends``: ``htp`` and/or
    ``gpu``; the CPU EP comes with the HTP for what it refuses) over ``runs`` timed runs after
    ``warmup``, on ``data`` (a path as ``--data`` takes, or an ``accuracy.data.Dataset``: the runs
    take its samples in turn; None: generated inputs, and the profile says *random inputs*). Bad
    input (an unreadable model or data, bad settings or counts, an unreachable device) is a
    ``UserError``; a runtime failure is a backend's ``status``/``reason``, the rest kept."""
    from dashboard.intake.digest import file_digest
    from dashboard.intake.reader import load_model
    from dashboard.intake.shapes import check_input_shapes, resolve_dims
    from dashboard.runtime.config import SessionConfig
    from dashboard.runtime.devices import Device
    from dashboard.runtime.jobs import run_command

    settings = settings or Settings()
    check_runs(runs, warmup)
    given = Path(model_path).expanduser()
    graph = load_model(given)  # bad input fails here, in one line, before any process starts
    path = str(given.resolve())
    dims = resolve_dims(graph, settings.dims)
    check_input_shapes(graph, settings.shapes, dims)
    device = device or Device.parse("local")
    backends = [b for b in settings.backends if b in ("htp", "gpu")] or ["htp"]
    config = SessionConfig.of(settings, "htp", dims=dims)
    args = ProfileArgs("", config, backends, dict(settings.shapes), runs, warmup)
    digest = None if device.is_local else file_digest(path)  # a remote worker gets the model by digest
    with _saved_data(given, settings, device, data, preprocess, limit) as (saved, label):
        args = dataclasses.replace(args, data=saved)
        answer = run_command(device, path, digest, "profile", lambda located: dataclasses.replace(args, path=located),
                             timeout=timeout or settings.timeout or DEFAULT_TIMEOUT, on_event=on_event, cancel=cancel)
    if answer.failure is not None:
        return crashed(given.name, backends, runs, warmup, str(answer.failure), settings)
    profile: Profile = answer.result
    profile.data = label
    profile.model = given.name
    profile.digest = digest or file_digest(path)
    profile.settings = settings.to_json()
    profile.dims = dict(dims)
    return profile


@contextlib.contextmanager
def _saved_data(model: Path, settings: Settings, device, data, preprocess, limit):
    """(the saved data set's path for the worker, the figures' data label) for the ``with`` block;
    (None, "random inputs") without data. The data is read and checked here, against the inputs the
    settings fix, so a bad file is one line before any session is built."""
    if data is None:
        yield None, "random inputs"
        return
    if not device.is_local:
        raise UserError("--data profiles on this machine only for now: the data set is not sent to a device")
    from dashboard.accuracy.run import dataset_for
    from dashboard.runtime import scratch

    _, _, dataset = dataset_for(model, settings, data, preprocess=preprocess, limit=limit)
    with scratch.folder("qbl-profile-data-") as folder:
        dataset.save(folder / "data.npz")
        yield str(folder / "data.npz"), f"{len(dataset)} sample(s) of {dataset.source}"


def crashed(model: str, backends: list[str], runs: int, warmup: int, reason: str, settings: Settings) -> Profile:
    """The profile of a worker that crashed, hung or failed: every backend failed with its reason."""
    return Profile(model=model, runs=runs, warmup=warmup, settings=settings.to_json(),
                   backends={b: BackendProfile(status="failed", hardware="unknown", unit="cycles", reason=reason)
                             for b in backends})


__all__ = ["profile_model", "UserError"]
