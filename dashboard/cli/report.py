"""``python -m dashboard report MODEL --out report.html``: one self-contained HTML file to share.

It classifies the model (both classifiers), analyses its partitions and runs a short timeline on
the device (``--device``, this machine by default), then writes everything with
``dashboard.render.report``: charts and pictures inline, nothing fetched when it is opened. The
partition options are ``partition``'s; ``--no-timeline`` leaves the timeline out; ``--profile-runs N``
adds where the time goes per node (``profile``), ``--aihub FILE`` an AI Hub profile of the model and
``--accuracy`` the HTP against float layer by layer (``accuracy``) on ``--data`` or random inputs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dashboard.cli.common import SettingsArgs
from dashboard.cli.data_args import DataArgs
from dashboard.cli.partition import add_partition_options, analyze_from_args
from dashboard.errors import UserError
from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.runtime.knobs import CLI, worded_error
from dashboard.runtime.protocol import ProgressEvent
from dashboard.timeline.model import DEFAULT_TIMEOUT, STRATEGY_TITLES, TimelineOptions
from dashboard.timeline.protocol import Status, StrategyStart


SETTINGS = SettingsArgs()  # no analysis' timeout: each of the report's analyses has its own unless --timeout


DATA = DataArgs()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model")
    parser.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    add_partition_options(parser, SETTINGS)
    parser.add_argument("--strategies", default="fast,migrate",
                        help="timeline strategies to run (default fast,migrate; see `timeline`)")
    parser.add_argument("--requests", type=int, default=20, help="timeline requests per strategy (default 20)")
    parser.add_argument("--rate", type=float, default=20.0, help="timeline requests per second (default 20)")
    parser.add_argument("--no-timeline", action="store_true", help="leave the timeline out")
    parser.add_argument("--profile-runs", type=int, default=0, metavar="N",
                        help="add a profile of N timed runs (where the time goes per node; see `profile`)")
    parser.add_argument("--aihub", metavar="FILE", help="add an AI Hub profile (see `profile --aihub`)")
    parser.add_argument("--accuracy", action="store_true", help="add the accuracy layer by layer (see `accuracy`), on "
                                                                "--data or random inputs")
    DATA.add_to(parser)
    parser.add_argument("--device-name", metavar="NAME", help="the AI Hub file's device, when it does not say")
    parser.set_defaults(run=run)


def _timeline_progress(event: ProgressEvent) -> None:
    if isinstance(event, StrategyStart):
        print(f"  timeline: {STRATEGY_TITLES.get(event.strategy, event.strategy)}", file=sys.stderr, flush=True)
    elif isinstance(event, Status):
        print(f"  timeline: {event.message}", file=sys.stderr, flush=True)


def _profiles(args: argparse.Namespace, settings, graph) -> tuple[list, str | None]:
    """The profiles the report shows: one measured on the device (``--profile-runs``), the AI Hub
    import (``--aihub``, read before anything ran). A profile that cannot run is said in the report."""
    from dashboard.runtime.client import WorkerError
    from dashboard.runtime.devices import Device

    profiles, error = [], None
    if args.profile_runs:
        from dashboard.cli.partition import progress
        from dashboard.profile.run import profile_model

        print("profiling", file=sys.stderr, flush=True)
        try:
            profiles.append(profile_model(args.model, settings, runs=args.profile_runs,
                                          device=Device.parse(args.device), on_event=progress))
        except (UserError, WorkerError) as exc:
            error = str(exc)
            print(f"warning: the profile could not run: {error}", file=sys.stderr, flush=True)
    if args.aihub_profile is not None:
        profiles.append(args.aihub_profile)
    return profiles, error


def _accuracy(args: argparse.Namespace, settings, data) -> tuple[list, str | None]:
    """The accuracy section (``--accuracy``): layer by layer on the data. One that cannot run is said."""
    from dashboard.runtime.client import WorkerError

    if not args.accuracy:
        return [], None
    from dashboard.accuracy.run import accuracy_model
    from dashboard.cli.partition import progress

    path, preprocess, limit = data
    print("measuring the accuracy", file=sys.stderr, flush=True)
    try:
        return [accuracy_model(args.model, path, settings, layers=("cumulative", "layerwise"), preprocess=preprocess,
                               limit=limit, on_event=progress)], None
    except (UserError, WorkerError) as exc:
        print(f"warning: the accuracy could not run: {exc}", file=sys.stderr, flush=True)
        return [], str(exc)


def run(args: argparse.Namespace) -> int:
    from dashboard.classify.ep_rules import classify_ep
    from dashboard.classify.refined import classify_refined
    from dashboard.render.report import ReportInput, binary_size, build_html
    from dashboard.runtime.client import WorkerError
    from dashboard.runtime.devices import Device
    from dashboard.timeline.remote import run_on_device

    out = Path(args.out)
    if not out.parent.is_dir():
        raise UserError(f"{args.out}: its folder does not exist")
    graph = load_model(args.model)
    settings = SETTINGS.parse(args)  # bad settings or devices: one error line, before anything runs
    if args.profile_runs:
        from dashboard.profile.protocol import check_runs

        check_runs(args.profile_runs, 1)
    aihub = None
    if args.aihub:
        from dashboard.profile.aihub import import_profile, read_file

        aihub = import_profile(read_file(args.aihub), graph, args.aihub, args.device_name)  # bad file: one line now
    args.aihub_profile = aihub
    data = DATA.parse(args, args.model)  # bad data flags: one line now
    if data[0] is not None and not args.accuracy:
        raise UserError("--data feeds the accuracy section: add --accuracy (or leave --data out)")
    Device.parse(args.device)
    timeline_options = None
    if not args.no_timeline:
        strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
        try:
            timeline_options = TimelineOptions.from_settings(settings, strategies=strategies, requests=args.requests,
                                                             rate=args.rate)
        except UserError as exc:
            raise worded_error(exc, CLI) from None
    print("classifying", file=sys.stderr, flush=True)
    classifications = (classify_ep(graph), classify_refined(graph))
    partition = analyze_from_args(args, settings=settings)
    timelines, timeline_error = [], None
    if timeline_options is not None:
        print("running the timeline", file=sys.stderr, flush=True)
        try:
            timelines.append(run_on_device(Device.parse(args.device), args.model, timeline_options,
                                           on_event=_timeline_progress,
                                           timeout=timeline_options.timeout or DEFAULT_TIMEOUT))
        except (UserError, WorkerError) as exc:  # the model may not run at all: report what was found
            timeline_error = str(exc)
            print(f"warning: the timeline could not run: {timeline_error}", file=sys.stderr, flush=True)
        else:
            timelines[0].label = f"{', '.join(timeline_options.strategies)} on {timelines[0].device.get('label')}"
    profiles, profile_error = _profiles(args, settings, graph)
    accuracy, accuracy_error = _accuracy(args, settings, data)
    document = build_html(ReportInput(Path(args.model).name, str(Path(args.model).resolve()),
                                      partition.digest or file_digest(args.model), graph, classifications,
                                      [partition], timelines, timeline_error, profiles, profile_error,
                                      accuracy, accuracy_error))
    try:
        out.write_text(document, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{args.out}: cannot write the report ({exc.strerror or exc})") from None
    print(f"{out} ({binary_size(len(document.encode()))}): classifier {classifications[1].verdict}, "
          f"{len(partition.node_order)} nodes partitioned on {partition.device}"
          + (f", timeline of {len(timelines[0].strategies)} strategies" if timelines else "")
          + (", timeline failed (see the report)" if timeline_error else ""))
    return 0
