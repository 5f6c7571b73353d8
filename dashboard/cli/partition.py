"""``python -m dashboard partition``: which nodes GPU and HTP claim, the classes and both plans.

Without ``--json`` it prints what a model engineer reads first: per backend the status and the
nodes it refuses with the EP's reasons, the class counts, and the segment strip of each plan.
Progress goes to stderr so ``--json`` output stays one clean object. ``--out FILE`` also writes
the JSON (on a device, that file is the device report the dashboard imports).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.cli.common import add_runtime_options
from dashboard.errors import UserError

# The analysis modules are imported by ``run``, after it has started the runtime worker, so the
# worker's imports overlap this process's (see ``runtime.client.prespawn_local_worker``).
if TYPE_CHECKING:
    from dashboard.partition.analysis import PartitionOptions
    from dashboard.partition.report import PartitionReport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model")
    parser.add_argument("--backends", default="htp,gpu", help="comma list of htp, gpu")
    add_runtime_options(parser)
    parser.add_argument("--optimization-level", choices=("disabled", "basic", "extended", "all"),
                        default="all", help="ONNX Runtime graph optimizations before partitioning "
                                            "(default all, as a session gets by default)")
    parser.add_argument("--device-report", action="append", default=[], metavar="FILE",
                        help="support report written by `partition --out` on a device; replaces "
                             "the predicted GPU figures with measured ones")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", metavar="FILE", help="also write the JSON report to FILE")
    parser.set_defaults(run=run)


def options_from_args(args: argparse.Namespace) -> PartitionOptions:
    from dashboard.partition.analysis import PartitionOptions, parse_assignments

    return PartitionOptions(
        backends=tuple(args.backends.split(",")),
        dims=parse_assignments(args.dim, "--dim", integer=True),
        fp16=args.fp16,
        soc=args.soc,
        provider_options=parse_assignments(args.option, "--option"),
        optimization_level=args.optimization_level,
    )


def _progress(event) -> None:
    from dashboard.messages import Stage

    if isinstance(event, Stage):
        print(f"  [{event.progress:4.0%}] {event.stage}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from dashboard.runtime.client import prespawn_local_worker

    prespawn_local_worker()
    from dashboard.partition.analysis import analyze

    options = options_from_args(args)
    devices = []
    for path in args.device_report:
        try:
            devices.append((Path(path).name, Path(path).read_text(encoding="utf-8")))
        except OSError as exc:
            raise UserError(f"{path}: cannot read the device report ({exc.strerror or exc})") from None
    report = analyze(args.model, options, timeout=args.timeout or 900.0, device_reports=devices,
                     on_event=None if args.json else _progress)
    data = report.to_json()
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
    from dashboard.partition.report import CLASS_LABELS, CLASSES, op_type_table

    lines = [f"{report.model}: {len(report.node_order)} nodes"
             + (" (from cache)" if report.cached else ""),
             "dims: " + (", ".join(f"{k}={v}" for k, v in report.dims.items()) or "all static")]
    for name, backend in report.backends.items():
        refused = [(n, v) for n, v in backend.nodes.items() if not v.supported and v.status != "removed"]
        label = backend.status.upper()
        lines.append("")
        lines.append(f"{name.upper()}: {label}" + (f" - {backend.source}" if backend.source else ""))
        if backend.error:
            lines.append(f"  error: {backend.error}")
        if backend.suggestion:
            lines.append(f"  suggestion: {backend.suggestion}")
        if backend.nodes:
            claimed = sum(1 for v in backend.nodes.values() if v.supported)
            removed = sum(1 for v in backend.nodes.values() if v.status == "removed")
            where = f" in {backend.qnn_subgraphs} QNN subgraph(s)" if backend.status == "measured" else ""
            lines.append(f"  {'claims' if backend.status == 'measured' else 'would claim'} {claimed}/"
                         f"{len(backend.nodes)} nodes{where}; refuses {len(refused)}"
                         + (f"; {removed} removed by ONNX Runtime before partitioning" if removed else ""))
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
