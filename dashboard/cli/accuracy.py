"""``python -m dashboard accuracy MODEL [--data D] [--quantized Q.onnx] [--layers MODES]``: does the
HTP give the right answer on this data, and which layer breaks it.

Without ``--json`` it prints the verdicts first (each comparison's worst output SQNR, ORT's rule for
a QDQ model said as which one deviates, the first layer where the error jumps), then per comparison
and output the metrics (SQNR dB, max |diff|, relative error, cosine, top-1/top-k for class scores)
and the worst samples, then the layer table. Every figure says what it was measured on (the HTP
simulator here) and the data (``random inputs`` when no ``--data``). ``--json`` prints the
``AccuracyReport`` record (``dashboard.accuracy.model``); ``--csv FILE`` writes the per-output
table, and the layer table beside it (``FILE.layers.csv``) when layers ran.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dashboard.cli.common import SettingsArgs
from dashboard.cli.data_args import DataArgs
from dashboard.errors import UserError

if TYPE_CHECKING:
    from dashboard.accuracy.model import AccuracyReport

SETTINGS = SettingsArgs(analysis="accuracy")
DATA = DataArgs()
TOP = 10


def layer_modes(text: str) -> list[str]:
    from dashboard.accuracy.model import LAYER_MODES

    modes = ["cumulative", "layerwise"] if text == "both" else [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in LAYER_MODES]
    if bad:
        raise argparse.ArgumentTypeError(f"modes are cumulative, layerwise or both, got {text!r}")
    return modes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model")
    parser.add_argument("--quantized", metavar="Q.onnx", help="the model's QDQ form (e.g. from `quantize`): compared on "
                                                              "the HTP, on the CPU EP and against float")
    parser.add_argument("--layers", type=layer_modes, default=[], metavar="MODES",
                        help="layer by layer: cumulative (the whole model runs, errors add up), layerwise (each node "
                             "fed the float reference's inputs: its own error), or both")
    DATA.add_to(parser)
    SETTINGS.add_to(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (the accuracy record)")
    parser.add_argument("--csv", metavar="FILE", help="also write the per-output table to FILE (and the layers "
                                                      "to FILE.layers.csv)")
    parser.add_argument("--top", type=int, default=TOP, help=f"layers and worst samples shown (default {TOP})")
    parser.set_defaults(run=run)


def report_from_args(args: argparse.Namespace, quiet: bool = False) -> "AccuracyReport":
    from dashboard.accuracy.run import accuracy_model
    from dashboard.cli.partition import progress
    from dashboard.runtime.spawn import start_spare

    settings = SETTINGS.parse(args)
    data, preprocess, limit = DATA.parse(args, args.model)
    start_spare()
    return accuracy_model(args.model, data, settings, quantized=args.quantized, layers=args.layers,
                          preprocess=preprocess, limit=limit, on_event=None if quiet else progress)


def run(args: argparse.Namespace) -> int:
    report = report_from_args(args, quiet=args.json)
    if args.csv:
        write_csv(report, args.csv)
    if args.json:
        from dashboard.cli.common import print_json

        print_json(report.to_json())
    else:
        print("\n".join(render_text(report, args.top)))
    return 0


def write_csv(report: "AccuracyReport", path: str) -> None:
    try:
        report.frame().to_csv(path, index=False)
        if report.layers is not None:
            report.layer_frame().to_csv(f"{path}.layers.csv", index=False)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the table ({exc.strerror or exc})") from None


def _db(value) -> str:
    return "-" if value is None else f"{value:.1f} dB"


def _num(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def render_text(report: "AccuracyReport", top: int = TOP) -> list[str]:
    data = report.data
    lines = [f"{report.model}" + (f" and its QDQ form {report.quantized}" if report.quantized else "")
             + f": {data.description or data.label}"]
    if data.random:
        lines.append("RANDOM INPUTS: no --data given; the figures below say how the backends differ on noise, "
                     "not on your data")
    lines += [f"note: {n}" for n in report.notes]
    lines.append("")
    lines += [f"* {v}" for v in report.verdicts]
    for c in report.comparisons:
        lines.append("")
        if not c.ok:
            lines.append(f"{c.target} vs {c.reference}: FAILED: {c.reason}")
            continue
        lines.append(f"{c.target} vs {c.reference} ({c.hardware}, {data.label}):")
        for o in c.outputs:
            m = o.overall
            ranks = (f", top-1 {m.top1:.1%}, top-5 overlap {m.topk:.1%}" if m.top1 is not None else "")
            lines.append(f"  {o.name} {o.shape}: SQNR {_db(m.sqnr_db)}, max |diff| {_num(m.max_abs)}, "
                         f"relative error {_num(m.rel_error)}, cosine {_num(m.cosine, 6)}{ranks}"
                         + (f" ({m.note})" if m.note else ""))
            if len(o.samples) > 1:
                worst = ", ".join(f"{_sample(report, i)} {_db(o.samples[i].sqnr_db)}" for i in o.worst[:min(top, 5)])
                lines.append(f"    worst samples: {worst}")
    if report.layers is not None:
        lines += layer_lines(report, top)
    return lines


def _sample(report: "AccuracyReport", index: int) -> str:
    names = report.data.names
    return names[index] if index < len(names) else f"#{index}"


def layer_lines(report: "AccuracyReport", top: int) -> list[str]:
    layers = report.layers
    lines = ["", f"layers ({layers.target}, {', '.join(layers.modes)}; SQNR against float on the CPU EP, "
                 f"{report.data.label}):"]
    if not layers.ok:
        return lines + [f"  FAILED: {layers.reason}"]
    lines += [f"  partition: {p}" for p in layers.partition]
    if layers.first_jump:
        lines.append(f"  the error first jumps at {layers.first_jump}")
    key = (lambda r: r.layerwise) if "layerwise" in layers.modes else (lambda r: r.cumulative)
    ranked = sorted((r for r in layers.rows if key(r) is not None), key=key)[:top]
    lines.append(f"  worst {len(ranked)} of {len(layers.rows)} (cumulative / layerwise"
                 + (" / CPU EP cumulative" if any(r.cpu_cumulative is not None for r in layers.rows) else "") + "):")
    for r in ranked:
        cpu = f" / {_db(r.cpu_cumulative)}" if r.cpu_cumulative is not None else ""
        q = f" [{r.quant.dtype} scale {r.quant.scale:.3g}]" if r.quant else ""
        lines.append(f"    {_db(r.cumulative):>9} / {_db(r.layerwise):>9}{cpu}  {r.node} [{r.op_type}]{q}")
        if r.why:
            lines.append(f"        why: {r.why}")
    return lines
