"""``python -m dashboard timeline``: serve a workload with each strategy and compare, on this
machine or on a device over SSH. No Streamlit; the runtime only in the worker process.

``--json`` prints ``{"device", "strategies": {NAME: {"events", "requests", "metrics", ...}}, ...}``
(see ``dashboard.timeline.model``); progress goes to stderr either way. ``--data`` makes the
requests take the user's samples in turn (at most 32, each with its CPU reference), the record's
workload saying which; without it, generated inputs (``random inputs``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys

from dashboard.cli.common import SettingsArgs
from dashboard.cli.data_args import DataArgs
from dashboard.errors import UserError
from dashboard.runtime.devices import Device
from dashboard.runtime.knobs import KNOB
from dashboard.runtime.protocol import ProgressEvent, Upload
from dashboard.runtime.socs import SIMULATOR_NOTE, hardware_label
from dashboard.timeline.model import (DEFAULT_TIMEOUT, FAST_BACKENDS, POLICIES, STRATEGY_TITLES, TARGET_BACKENDS,
                                      TimelineOptions, TimelineRun, cached_vs_cold, default_workload, output_text,
                                      strategy_table)
from dashboard.timeline.protocol import Status, StrategyEnd, StrategyStart
from dashboard.timeline.remote import LiveRun, run_on_device, target_hardware


# A timeline's backends are its fast and target roles: every other knob is the partition's.
SETTINGS = SettingsArgs(keys=tuple(key for key in KNOB if key != "backends"), analysis="timeline")
DATA = DataArgs()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model")
    parser.add_argument("--device", default="local", help="local, local?python=PATH or ssh://user@host[:port][?...]")
    parser.add_argument("--fast", choices=FAST_BACKENDS, default=None,
                        help="backend that serves first (default: gpu where it works, else cpu)")
    parser.add_argument("--target", choices=TARGET_BACKENDS, default="htp")
    parser.add_argument("--requests", type=int, default=None,
                        help="per strategy (default: 40 on a device; on the HTP simulator at most 2000, paced "
                             "by --after-swap); with --after-swap, the most a strategy serves")
    parser.add_argument("--rate", type=float, default=None, help="requests per second (default: 20; simulator 5)")
    parser.add_argument("--after-swap", type=int, default=None, metavar="N",
                        help="pace the workload until N requests arrived after the migration's swap; every "
                             "strategy then serves that many (default: 5 on the HTP simulator when --requests "
                             "is not given, else 0: exactly --requests)")
    parser.add_argument("--strategies", default=None,
                        help="comma-separated (default: fast,target,cached,migrate,auto; simulator fast,migrate)")
    parser.add_argument("--snippet", action="store_true",
                        help="print a Python script that runs this hot migration (same sessions, provider options "
                             "and workload) outside the dashboard, and stop")
    parser.add_argument("--estimate", action="store_true",
                        help="print how long the run would take (an estimate from the model's size) and stop")
    parser.add_argument("--policy", choices=POLICIES, default="always",
                        help="migrate: always swap once the target is warm, or only if it measures faster "
                             "than the fast backend on the same warm-up inputs")
    parser.add_argument("--shared-memory", action="store_true",
                        help="bind HTP inputs/outputs in shared memory (seed 001)")
    SETTINGS.add_to(parser)
    DATA.add_to(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def options_from_args(args: argparse.Namespace, hardware: str = "device") -> TimelineOptions:
    """The flags, with the workload defaults of ``hardware`` (``timeline.model.WORKLOADS``) for
    those not given; a workload sized by ``--requests`` is served exactly unless ``--after-swap``
    says otherwise."""
    default = default_workload(hardware)
    after = args.after_swap if args.after_swap is not None else 0 if args.requests is not None else \
        default["after_swap"]
    strategies = default["strategies"] if args.strategies is None else \
        [s.strip() for s in args.strategies.split(",") if s.strip()]
    requests = args.requests if args.requests is not None else default["requests"] if after else 40
    return SETTINGS.parse(args, TimelineOptions, fast=args.fast, target=args.target, strategies=strategies,
                          requests=requests, rate=default["rate"] if args.rate is None else args.rate,
                          after_swap=after, policy=args.policy, shared_memory=args.shared_memory)


class _Progress:
    """One stderr line whenever the worker's status changes, and one per finished strategy."""

    def __init__(self, live: LiveRun, first: str = "") -> None:
        self.live = live
        self.shown = ""
        self.first = first  # said once the worker answers (a run that cannot start says only its error)

    def __call__(self, message: ProgressEvent) -> None:
        if self.first:
            print(self.first, file=sys.stderr)
            self.first = ""
        self.live.feed(message)
        if isinstance(message, StrategyEnd):
            m = message.metrics
            swap = f", swap at {m['swap_at_s']:.3f} s" if m.get("swap_at_s") is not None else ""
            print(f"  {message.strategy}: {m['expected'] - m['failed']}/{m['expected']} answered{swap}",
                  file=sys.stderr)
        elif self.live.status != self.shown and isinstance(message, (Status, StrategyStart, Upload)):
            self.shown = self.live.status
            print(f"[{self.live.fraction:4.0%}] {self.shown}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Interrupted (Ctrl-C, SIGTERM), the run stops its worker through its ``Cancellation``, as the
    page's Cancel does, and waits for it to end before the command exits."""
    from dashboard.runtime.jobs import Cancellation

    device = Device.parse(args.device)
    hardware = target_hardware(device)
    options = options_from_args(args, hardware)
    if args.snippet:
        from dashboard.timeline.snippet import model_timeline_snippet

        print(model_timeline_snippet(args.model, options), end="")
        return 0
    guess = _estimate(args.model, options, hardware)
    if args.estimate:
        print(guess.text(), file=sys.stderr)
        return 0
    progress = _Progress(LiveRun(options, guess.requests, guess.costs), guess.text())
    with _data(args, options, device) as options:
        result = run_on_device(device, args.model, options, on_event=progress,
                               timeout=args.timeout or DEFAULT_TIMEOUT, cancel=Cancellation())
    if args.json:
        from dashboard.cli.common import print_json

        print_json(result.to_json())
        return 0
    print("\n".join(report_lines(result)))
    return 0


@contextlib.contextmanager
def _data(args: argparse.Namespace, options: TimelineOptions, device: Device):
    """``options`` with ``--data``'s samples as the requests' inputs (saved for the worker, read and
    checked here first: a bad file is one line before any session); unchanged without it."""
    data, preprocess, limit = DATA.parse(args, args.model)
    if data is None:
        yield options
        return
    if not device.is_local:
        raise UserError("--data runs timelines on this machine only for now: the data set is not sent to a device")
    from dashboard.accuracy.run import dataset_for, settings_for_data
    from dashboard.runtime import scratch

    options, _ = settings_for_data(args.model, options, data, preprocess)  # its shapes fix the open dimensions
    _, _, dataset = dataset_for(args.model, options, data, preprocess=preprocess, limit=limit)
    with scratch.folder("qbl-timeline-data-") as folder:
        dataset.save(folder / "data.npz")
        yield dataclasses.replace(options, inputs=str(folder / "data.npz"),
                                  inputs_label=f"{len(dataset)} sample(s) of {dataset.source}")


def _estimate(model: str, options: TimelineOptions, hardware: str):
    from dashboard.intake.reader import load_model
    from dashboard.timeline.estimate import costs_from_size, estimate

    graph = load_model(model)
    return estimate(options, costs_from_size(graph.weight_bytes, len(graph.nodes), hardware))


def _s(value) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def report_lines(result: TimelineRun) -> list[str]:
    """The readable summary: setup, the comparison table, then what went wrong and why."""
    fast = result.fast
    hardware = result.runtime.get("hardware")
    lines = [f"{result.model} on {result.device.get('label', 'local')}",
             f"fast backend: {fast.get('label', fast.get('backend'))}; target: {result.target.get('label', '')}"
             f" on the {hardware_label(hardware)}"]
    if hardware == "simulator":
        lines.append(f"note: {SIMULATOR_NOTE}; run on a Snapdragon device (--device) for NPU figures")
    paced = result.workload.get("after_swap")
    lines += [f"workload: {result.workload.get('requests')} requests at {result.workload.get('rate')}/s, "
              f"{result.workload.get('concurrency')} at a time"
              + (f" (paced until {paced} arrived after the migration's swap)" if paced else ""),
              f"inputs: {result.workload.get('inputs', 'generated')}", ""]
    header = f"{'strategy':<30} {'1st answer':>10} {'swap at':>9} {'p50 before':>10} {'p50 after':>10} " \
             f"{'p99':>9} {'req/s':>7} {'failed':>6}"
    lines.append(header)
    for row in strategy_table(result):
        rps = "-" if row["throughput_rps"] is None else f"{row['throughput_rps']:.1f}"
        lines.append(f"{row['title']:<30} {_s(row['first_response_s']):>10} {_s(row['swap_at_s']):>9} "
                     f"{_s(row['p50_before_s']):>10} {_s(row['p50_after_s']):>10} {_s(row['p99_s']):>9} "
                     f"{rps:>7} {row['failed']:>6}")
    lines.append("")
    explained = cached_vs_cold(result)
    if explained:
        lines += [f"cached vs cold: {explained}", ""]
    for name, strategy in result.strategies.items():
        for event in strategy.events:
            if event.kind in ("migration_failed", "session_failed", "migration_skipped", "shared_memory"):
                lines.append(f"{STRATEGY_TITLES.get(name, name)}: {event.kind} at {event.t:.3f} s: {event.detail}")
        agreement = strategy.outputs.get("checks", [])
        for check in agreement:
            if check.get("compared") and check["a"] != "cpu":
                verdict = "agree" if check["agree"] else "DIFFER"
                lines.append(f"{STRATEGY_TITLES.get(name, name)}: outputs {check['a']} vs {check['b']} {verdict} "
                             f"(max |diff| {check['max_abs_diff']:.3g}, atol {strategy.outputs['atol']:g}, "
                             f"rtol {strategy.outputs['rtol']:g})")
                lines += [f"  {row['name']}: {output_text(row)}" for row in check.get("outputs", [])]
    shared = result.shared_memory
    if shared.get("requested"):
        if shared.get("available"):
            lines.append(f"shared memory: copy p50 {_s(shared.get('copy_p50_s'))}, "
                         f"zero-copy p50 {_s(shared.get('zero_copy_p50_s'))}")
        else:
            lines.append(f"shared memory unavailable: {shared.get('reason')}")
    return lines

