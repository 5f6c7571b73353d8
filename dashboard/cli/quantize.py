"""``python -m dashboard quantize MODEL --data D --out Q.onnx [...] [--target SQNR_DB|cosine=X]``:
the QDQ model for the HTP, built with ONNX Runtime's QNN recipe and calibrated on the data.

It reports what ORT left in float, each step of the mixed-precision search with ``--target`` (the
tensors lifted to 16 bits, the worst output's SQNR and cosine on the HTP against float, the step's
simulated HTP cycles), the overrides JSON written next to ``--out``, the HTP's coverage of the
integer path (the blockers and their fix) and the cycles ratio against the float model in fp16
(same unit and SoC only). ``--json`` prints the ``QuantizeResult`` record.
"""

from __future__ import annotations

import argparse

from dashboard.cli.common import SettingsArgs
from dashboard.cli.data_args import DataArgs

SETTINGS = SettingsArgs(analysis="quantize")
DATA = DataArgs(required=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dashboard.accuracy.protocol import ACTIVATIONS, CALIBRATION, WEIGHTS

    parser.add_argument("model")
    parser.add_argument("--out", required=True, metavar="Q.onnx", help="where to write the QDQ model")
    parser.add_argument("--activations", choices=ACTIVATIONS, default="u8", help="activation type (default u8)")
    parser.add_argument("--weights", choices=WEIGHTS, default="u8", help="weight type (default u8)")
    parser.add_argument("--per-channel", action="store_true", help="per-channel weight quantization")
    parser.add_argument("--calibration", choices=CALIBRATION, default="minmax", help="calibration method")
    parser.add_argument("--target", metavar="SQNR_DB|cosine=X",
                        help="search the fewest tensors to lift to 16 bits until every output reaches this on the HTP")
    parser.add_argument("--no-cost", action="store_true", help="skip the simulated HTP cycles of each step")
    parser.add_argument("--no-coverage", action="store_true", help="skip the HTP partition of the result")
    DATA.add_to(parser)
    SETTINGS.add_to(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (the quantize record)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dashboard.accuracy.quantize import parse_target, quantize_model
    from dashboard.cli.partition import progress
    from dashboard.runtime.spawn import start_spare

    settings = SETTINGS.parse(args)
    target = parse_target(args.target) if args.target else None
    data, preprocess, limit = DATA.parse(args, args.model)
    start_spare()
    result = quantize_model(args.model, data, args.out, settings, activations=args.activations, weights=args.weights,
                            per_channel=args.per_channel, calibration=args.calibration, target=target,
                            cost=not args.no_cost, coverage=not args.no_coverage, preprocess=preprocess, limit=limit,
                            on_event=None if args.json else progress)
    if args.json:
        from dashboard.cli.common import print_json

        print_json(result.to_json())
    else:
        print("\n".join(render_text(result)))
    return 0


def render_text(result) -> list[str]:
    o = result.options
    lines = [f"{result.model} -> {result.out}: {o['activations']} activations, {o['weights']} weights"
             + (", per channel" if o["per_channel"] else "") + f", {o['calibration']} calibration on "
             + result.data.label]
    lines += [f"note: {n}" for n in result.notes]
    if result.left_float:
        shown = ", ".join(f"{name} [{op}]" for name, op in result.left_float[:8])
        lines.append(f"left in float by ORT: {len(result.left_float)} node(s): {shown}")
    else:
        lines.append("left in float by ORT: nothing (every compute node sits between Quantize/Dequantize pairs)")
    if result.steps:
        lines.append("")
        lines.append("steps (worst output against float on the HTP; cost: one run's simulated cycles):")
        for s in result.steps:
            cost = f"{s.cycles:,.0f} {s.cost_unit}" if s.cycles is not None else "-"
            mark = "" if s.meets is None else (" meets" if s.meets else " misses")
            sq = "-" if s.sqnr_db is None else f"{s.sqnr_db:.1f} dB"
            cos = "-" if s.cosine is None else f"{s.cosine:.5f}"
            lines.append(f"  {s.label:>14}: {len(s.lifted):3d} lifted, SQNR {sq}, cosine {cos}, cost {cost}{mark}"
                         + (f" ({s.note})" if s.note else ""))
    if result.target is not None:
        if result.reached:
            lines.append(f"target {result.target.text}: reached with {len(result.lifted)} tensor(s) lifted to u16"
                         + (f"; overrides written to {result.overrides}" if result.overrides else ""))
        else:
            lines.append(f"target {result.target.text}: NOT reached")
    if result.float_cycles is not None:
        ratio = f"; the QDQ model costs {result.cycles_ratio:.2f}x the float model's cycles" if result.cycles_ratio else ""
        lines.append(f"float model in fp16 on the same SoC: {result.float_cycles:,.0f} cycles{ratio}")
    c = result.coverage
    from dashboard.runtime.knobs import CLI, words

    if c is not None:
        lines.append("")
        if c.error:
            lines.append(f"HTP coverage of the QDQ model (integer path): FAILED: {c.error}")
        else:
            lines.append(f"HTP coverage of the QDQ model (integer path): {c.claimed} node(s) claimed, {c.refused} refused, "
                         f"{c.subgraphs} subgraph(s)" + (f"; the input's quantize and the output's dequantize ({c.ends} node(s)) "
                                                 "run on the CPU EP by the EP's design" if c.ends else ""))
            for b in c.blockers[:8]:
                lines.append(f"  blocker: {b['count']} x {b['op_type']}: {b['reason']} -> fix: {words(b['fix'], CLI)}")
    return lines
