"""``python -m dashboard profile``: where the time goes, per node, on every backend.

Without ``--json`` it prints what a model engineer reads first: per backend what its figures are
(``simulated HTP cycles`` on this x86_64 host: never turned into time) and its total, then the top
nodes, the op types and the blocks (name scopes), each with its share of its own backend's total.
``--json`` prints the ``Profile`` record (``dashboard.profile.model``); ``--csv FILE`` writes its node
table. ``--aihub FILE`` imports a profile downloaded from Qualcomm AI Hub instead of measuring here
(``--device-name`` names the phone when the file does not). Same settings as ``partition``.
``--data`` runs the timed runs on the user's samples in turn (a real detector's NMS or TopK costs
what the data makes it cost); without it one set of generated inputs, said as ``random inputs``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.cli.common import SettingsArgs
from dashboard.cli.data_args import DataArgs
from dashboard.errors import UserError

if TYPE_CHECKING:
    from dashboard.profile.model import Profile

SETTINGS = SettingsArgs(analysis="profile")
DATA = DataArgs()
TOP = 10


def runs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of runs, got {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dashboard.profile.model import DEFAULT_RUNS

    parser.add_argument("model")
    parser.add_argument("--runs", type=runs, default=DEFAULT_RUNS, help=f"timed runs after one warm-up "
                                                                         f"(default {DEFAULT_RUNS})")
    parser.add_argument("--device", default="local", help="where to measure: local, local?python=PATH or "
                                                          "ssh://user@host[:port][?...] (see the Devices page)")
    SETTINGS.add_to(parser)
    DATA.add_to(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (the profile record)")
    parser.add_argument("--csv", metavar="FILE", help="also write the node table to FILE")
    parser.add_argument("--aihub", metavar="FILE", help="import a profile downloaded from Qualcomm AI Hub "
                                                         "(ProfileJob.download_profile) instead of measuring here")
    parser.add_argument("--device-name", metavar="NAME", help="the AI Hub device, when the file does not name it")
    parser.add_argument("--against", metavar="PROFILE.json",
                        help="compare with a profile written by `profile --json` (other settings, or another model "
                             "with the same node names): per-node and per-op-type changes")
    parser.add_argument("--top", type=runs, default=TOP, help=f"nodes, op types and blocks shown (default {TOP})")
    parser.set_defaults(run=run)


def measuring_flags(args: argparse.Namespace) -> list[str]:
    """The flags given that only a measurement here uses (``--runs``, ``--device`` and every setting
    flag away from its default): an ``--aihub`` import measures nothing, so they would be ignored."""
    from dashboard.profile.model import DEFAULT_RUNS

    given = [flag for flag, value, default in (("--runs", args.runs, DEFAULT_RUNS), ("--device", args.device, "local"),
                                               ("--data", args.data, None)) if value != default]
    for knob in SETTINGS.knobs:
        default = SETTINGS._argument(knob).get("default", False)
        if getattr(args, knob.flag[2:].replace("-", "_")) != default:
            given.append(knob.flag)
    return given


def profile_from_args(args: argparse.Namespace, quiet: bool = False) -> "Profile":
    if args.aihub:
        from dashboard.profile.aihub import import_file

        ignored = measuring_flags(args)
        if ignored:
            raise UserError(f"{', '.join(ignored)} set how to measure here; --aihub imports a profile measured by "
                            "AI Hub with its own settings: leave them out (or drop --aihub to measure)")

        return import_file(args.aihub, args.model, args.device_name)
    if args.device_name:
        raise UserError("--device-name names the device of an --aihub file; without --aihub, --device says where "
                        "to measure")
    from dashboard.runtime.spawn import start_spare

    settings = SETTINGS.parse(args)
    data, preprocess, limit = DATA.parse(args, args.model)  # bad data flags: one line now
    if data is not None:  # the data's shapes fix the open dimensions, as for partition
        from dashboard.accuracy.run import settings_for_data

        settings, _ = settings_for_data(args.model, settings, data, preprocess)
    if args.device.strip() == "local":
        start_spare()
    from dashboard.cli.partition import progress
    from dashboard.profile.run import profile_model
    from dashboard.runtime.devices import Device

    return profile_model(args.model, settings, runs=args.runs, device=Device.parse(args.device),
                         on_event=None if quiet else progress, data=data, preprocess=preprocess, limit=limit)


def read_profile(path: str) -> "Profile":
    """A profile written by ``profile --json``: one line ``UserError`` when it is not one."""
    from dashboard.profile.model import Profile
    from dashboard.serde import loads

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the profile ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a profile (not UTF-8 text; `profile --json` writes JSON)") from None
    return loads(Profile, text, f"{path}")


def run(args: argparse.Namespace) -> int:
    before = read_profile(args.against) if args.against else None  # a bad file fails before anything runs
    profile = profile_from_args(args, quiet=args.json)
    if args.csv:
        try:
            profile.frame().to_csv(args.csv, index=False)
        except OSError as exc:
            raise UserError(f"{args.csv}: cannot write the node table ({exc.strerror or exc})") from None
    if args.json:
        from dashboard.cli.common import print_json

        data = profile.to_json()
        if before is not None:
            data["compared"] = comparison_json(before, profile)
        print_json(data)
    else:
        lines = render_text(profile, args.top)
        if before is not None:
            lines += compare_text(before, profile, args.against, args.top)
        print("\n".join(lines))
    return 0


def _shared_backends(a: "Profile", b: "Profile") -> list[str]:
    return [k for k in b.backends if k in a.backends and a.backends[k].ok and b.backends[k].ok]


def comparison_json(a: "Profile", b: "Profile") -> dict:
    """Per backend both ran: the per-node and per-op-type changes (``profile.model.compare``)."""
    from dashboard.profile.model import compare, no_ratio
    from dashboard.serde import dump

    out = {}
    for backend in _shared_backends(a, b):
        out[backend] = {"a": a.label(backend), "b": b.label(backend), "no_ratio": no_ratio(a, b, backend),
                        **{by: compare(a, b, backend, by).to_dict("records") for by in ("name", "op_type")}}
    return dump(out)  # NaN (one side only, or units that do not divide) as null: JSON has no NaN


def compare_text(a: "Profile", b: "Profile", path: str, top: int = TOP) -> list[str]:
    from dashboard.profile.model import compare, no_ratio

    lines = ["", f"compared with {path} ({a.model}, {a.runs} run(s)): change of share of each backend's total"]
    shared = _shared_backends(a, b)
    if not shared:
        return lines + ["  no backend ran in both profiles"]
    for backend in shared:
        lines.append(f"{backend.upper()}: then {a.label(backend)}, now {b.label(backend)}")
        why = no_ratio(a, b, backend)
        if why:
            lines.append(f"  no ratio B / A: {why}; only the shares of each backend's own total compare")
        for by in ("op_type", "name"):
            frame = compare(a, b, backend, by).head(top)
            lines.append(f"  {'op types' if by == 'op_type' else 'nodes'}:")
            for row in frame.itertuples(index=False):
                ratio = "" if row.ratio != row.ratio else f", {row.ratio:.2f}x"  # NaN: units differ or one side only
                lines.append(f"    {row.a_share:6.1%} -> {row.b_share:6.1%} ({row.share_change:+.1%}{ratio})  "
                             f"{getattr(row, by)}")
    return lines


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} cycles" if unit == "cycles" else f"{value:,.1f} µs"


def render_text(profile: "Profile", top: int = TOP) -> list[str]:
    from dashboard.profile.model import summaries

    source = "imported from AI Hub" if profile.source == "imported" else "measured"
    lines = [f"{profile.model}: {source}, {profile.runs} timed run(s)"
             + (f" after {profile.warmup} warm-up" if profile.warmup else "")
             + "; medians over the runs, shares of each backend's own total", f"inputs: {profile.data}"]
    if profile.dims:
        lines.append("dims: " + ", ".join(f"{k}={v}" for k, v in profile.dims.items()))
    if profile.summary:
        lines.append("whole model: " + ", ".join(f"{f.name} {f.value:,.0f} {f.unit}" for f in profile.summary))
    for name, b in profile.backends.items():
        lines.append("")
        if not b.ok:
            lines.append(f"{name.upper()}: FAILED on {b.hardware}: {b.reason}")
            continue
        lines.append(f"{name.upper()}: {profile.label(name)} - total {_figure(b.total, b.unit)} per run "
                     f"(min {_figure(b.total_min, b.unit)}, max {_figure(b.total_max, b.unit)})")
        if b.execute_us is not None:
            host = " (the simulator's own time on this host, not the NPU's)" if "simulator" in b.hardware else ""
            lines.append(f"  QNN execute {b.execute_us:,.0f} µs per run{host}")
        simulated = " (simulator host time)" if "simulator" in b.hardware else ""
        if b.finalize:
            lines.append(f"  finalize{simulated}: " + ", ".join(f"{f.name} {f.value:,.0f} {f.unit}"
                                                             for f in b.finalize[:4]))
        for f in b.figures[:4]:
            lines.append(f"  {f.name}: {f.value:,.0f} {f.unit}{simulated if f.unit == 'us' else ''}")
        for note in b.notes:
            lines.append(f"  note: {note}")
        rows = profile.top(top, name)
        if rows:
            lines.append(f"  top nodes ({profile.label(name)}):")
            for n in rows:
                extra = ((" inserted by the runtime" + (f" for {n.serves}" if n.serves else "")) if n.inserted
                         else f" fused group of {len(n.members)}: {', '.join(n.members[1:4])}" if n.carrier else "")
                lines.append(f"    {n.share:6.1%}  {_figure(n.median, n.unit):>18}  {n.name} [{n.op_type}]{extra}")
        for title, sums in summaries(profile.backend_nodes(name), top):
            if sums:
                lines.append(f"  {title}:")
                for label, unit, count, median, share in sums:
                    lines.append(f"    {share:6.1%}  {_figure(median, unit):>18}  {label} ({count} node(s))")
    if profile.unmatched:
        lines.append("")
        lines.append(f"{len(profile.unmatched)} layer(s) of the file match no node of the model:")
        for layer in profile.unmatched[:top]:
            lines.append(f"    {layer.name} [{layer.type}] on {layer.compute_unit}: {layer.value:,.1f} µs")
        if len(profile.unmatched) > top:
            lines.append(f"    ... {len(profile.unmatched) - top} more (see --json)")
    return lines
