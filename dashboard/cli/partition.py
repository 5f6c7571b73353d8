"""``python -m dashboard partition``: which nodes GPU and HTP claim, the classes and both plans.

Without ``--json`` it prints what a model engineer reads first: per backend the status (and the
hardware it was measured on: the HTP simulator is never passed off as an NPU) and the nodes it
refuses with the EP's reasons, the class counts, and the segment strip of each plan. Progress goes
to stderr so ``--json`` output stays one clean object. ``--out FILE`` also writes the JSON (on a
device, that file is the device report the dashboard imports). ``--device URL`` measures on a
device over SSH instead of this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.cli.common import SettingsArgs
from dashboard.cli.data_args import DataArgs
from dashboard.errors import UserError
from dashboard.runtime.knobs import BACKENDS

# The analysis modules are imported by ``analyze_from_args``, after it has started the runtime
# worker, so the worker's imports overlap this process's (see ``runtime.spawn.start_spare``).
if TYPE_CHECKING:
    from dashboard.partition.report import PartitionReport
    from dashboard.runtime.knobs import Settings

SETTINGS = SettingsArgs(analysis="partition")
DATA = DataArgs()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model")
    add_partition_options(parser)
    DATA.add_to(parser)  # partition's own: ``report`` has its --data for the accuracy section
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON report to FILE")
    parser.add_argument("--snippet", nargs="?", const="htp", choices=BACKENDS, metavar="BACKEND",
                        help="print a Python snippet that builds this analysis' session of BACKEND (default htp) "
                             "with the same session and provider options, and exit without analysing")
    parser.set_defaults(run=run)


def add_partition_options(parser: argparse.ArgumentParser, settings: SettingsArgs = SETTINGS) -> None:
    """What decides a partition report (shared with ``report``): where, the settings, device reports."""
    parser.add_argument("--device", default="local", help="where to measure: local, local?python=PATH or "
                                                          "ssh://user@host[:port][?...] (see the Devices page)")
    settings.add_to(parser)
    parser.add_argument("--device-report", action="append", default=[], metavar="FILE",
                        help="support report written by `partition --out` on a device; replaces "
                             "the predicted GPU figures with measured ones")


def options_from_args(args: argparse.Namespace) -> Settings:
    return SETTINGS.parse(args)


def progress(event) -> None:
    """Progress lines on stderr."""
    from dashboard.partition.protocol import Stage
    from dashboard.runtime.protocol import Upload

    if isinstance(event, Stage):
        print(f"  [{event.progress:4.0%}] {event.stage}", file=sys.stderr, flush=True)
    elif isinstance(event, Upload):
        print(f"  sending the model: {event.sent / max(event.total, 1):.0%}", file=sys.stderr, flush=True)


def analyze_from_args(args: argparse.Namespace, quiet: bool = False, settings: Settings | None = None
                      ) -> PartitionReport:
    """The report the arguments ask for (bad arguments, files or devices: one ``UserError``), under
    ``settings`` when the caller parsed them already."""
    from dashboard.runtime.spawn import start_spare

    if args.device.strip() == "local":
        start_spare()
    from dashboard.partition.analysis import analyze
    from dashboard.runtime.devices import Device

    options = settings or options_from_args(args)
    device = Device.parse(args.device)
    devices = []
    for path in args.device_report:
        try:
            devices.append((Path(path).name, Path(path).read_text(encoding="utf-8")))
        except OSError as exc:
            raise UserError(f"{path}: cannot read the device report ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise UserError(f"{path}: not a device report (not UTF-8 text; `partition --out` writes JSON)") from None
    return analyze(args.model, options, device_reports=devices, device=device, on_event=None if quiet else progress)


def data_settings(args: argparse.Namespace) -> tuple[Settings | None, list[str]]:
    """The settings with ``--data``'s shapes (an .npz/.npy fixes the inputs' open dimensions: the
    partition of the shapes the model will really run at), the data checked against the inputs;
    (None, []) without ``--data``. What the partition depends on is the graph and its shapes, never
    the values, so the values are not run here: ``accuracy`` runs them."""
    if not hasattr(args, "data"):  # a Namespace a caller built with the partition options only
        return None, []
    data, preprocess, _ = DATA.parse(args, args.model)
    if data is None:
        return None, []
    from dashboard.accuracy.run import settings_for_data

    fixed, notes = settings_for_data(args.model, options_from_args(args), data, preprocess)
    return fixed, notes + [f"the data ({data}) fits the inputs as fixed: its values decide nothing in a partition"]


def run(args: argparse.Namespace) -> int:
    if getattr(args, "snippet", None):  # (a Namespace built by a caller may not have it)
        from dashboard.partition.snippet import model_snippet

        print(model_snippet(args.model, options_from_args(args), args.snippet), end="")
        return 0
    settings, notes = data_settings(args)
    report = (analyze_from_args(args, quiet=args.json) if settings is None
              else analyze_from_args(args, quiet=args.json, settings=settings))
    report.notes += notes
    from dashboard.partition.analysis import worded  # imported once the worker has started (see above)
    from dashboard.runtime.knobs import CLI, words

    report = worded(report, CLI)  # hints as this command's user spells them, in the text and the JSON
    data = report.to_json()
    for row in data.get("blockers", []):  # derived on the way out: its fixes still name settings by key
        row["fix"] = words(row["fix"], CLI)
    if args.out:
        try:
            Path(args.out).write_text(json.dumps(data, indent=1), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{args.out}: cannot write the report ({exc.strerror or exc})") from None
    if args.json:
        from dashboard.cli.common import print_json

        print_json(data)
    else:
        print("\n".join(render_text(report)))
    return 0


def render_text(report: PartitionReport, limit: int = 25) -> list[str]:
    from dashboard.partition.report import CLASS_LABELS, CLASSES, claims, op_type_table

    lines = [f"{report.model}: {len(report.node_order)} nodes"
             + (f" on {report.device}" if report.device else "") + (" (from cache)" if report.cached else ""),
             "dims: " + (", ".join(f"{k}={v}" for k, v in report.dims.items()) or "all static")]
    shapes = report.options.shapes
    if shapes:
        lines.append("input shapes: " + ", ".join(f"{k}=[{', '.join(map(str, v))}]" for k, v in shapes.items()))
    for name, backend in report.backends.items():
        gone = set(report.classes.removed)  # removed on either backend: runs nowhere, refused by none
        refused = [(n, v) for n, v in backend.nodes.items()
                   if not v.supported and v.status != "removed" and n not in gone]
        label = backend.status.upper()
        lines.append("")
        lines.append(f"{name.upper()}: {label}" + (f" - {backend.source}" if backend.source else ""))
        if backend.error:
            lines.append(f"  error: {backend.error}")
        if backend.suggestion:
            lines.append(f"  suggestion: {backend.suggestion}")
        if backend.nodes:
            counts = claims(report, name)
            where = f" in {backend.qnn_subgraphs} QNN subgraph(s)" if backend.status == "measured" else ""
            lines.append(f"  {'claims' if backend.status == 'measured' else 'would claim'} {counts.claimed}/"
                         f"{counts.executed} nodes{where}; refuses {counts.refused}"
                         + (f"; {counts.removed} removed by ONNX Runtime before partitioning" if counts.removed
                            else ""))
            from dashboard.partition.root_causes import text_lines  # the origins of shape failures first
            lines += text_lines(backend)
            if name == "htp":
                from dashboard.partition import blockers
                from dashboard.runtime.knobs import CLI, words

                lines += [words(line, CLI) for line in blockers.text_lines(blockers.blockers(report))]
            for node, verdict in refused[:limit]:
                lines.append(f"    {node} [{verdict.op_type}]: {verdict.reason}")
            if len(refused) > limit:
                lines.append(f"    ... {len(refused) - limit} more (see --json)")
    lines.append("")
    if report.classes.note:
        lines.append(f"classes: {report.classes.note}")
    else:
        counts = report.classes.counts()
        total = max(sum(counts[c] for c in CLASSES), 1)
        lines.append("classes: " + ", ".join(f"{CLASS_LABELS[c]} {counts[c]} ({counts[c] / total:.0%})"
                                             for c in CLASSES) + f"; removed by ORT {counts['removed']}")
        htp, gpu = report.backends.get("htp"), report.backends.get("gpu")
        if htp and gpu:
            rows = [r for r in op_type_table(report.op_types, htp, gpu)
                    if r.htp_supported < r.count - r.removed or r.gpu_supported < r.count - r.removed]
            if rows:
                lines.append("op types not fully claimed (count, HTP, GPU):")
                for row in rows[:limit]:
                    lines.append(f"  {row.op_type}: {row.count}, {row.htp_supported}, {row.gpu_supported}")
    for kind, plan in report.plans.items():
        strip = " | ".join(f"{s.backend}:{len(s.nodes)}" for s in plan.segments)
        size = f"{plan.transfer_bytes:,} B" + ("" if plan.bytes_complete else
                                               f" + {plan.unknown_tensors} tensor(s) of unknown size")
        lines.append(f"plan {kind}: {plan.segment_count} segments, boundary copies {size}")
        lines.append(f"  {strip}")
    for note in report.notes:
        lines.append(f"note: {note}")
    return lines
