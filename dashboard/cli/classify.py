"""``python -m dashboard classify``: both classifiers on one model, as JSON or a table."""

from __future__ import annotations

import argparse
import gc
import sys

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import explain_disagreement
from dashboard.intake.reader import load_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--optimized", action="store_true",
                        help="also apply the EP rules to the graph as ONNX Runtime hands it to the EP "
                             "(after its level-1 optimizations, e.g. BatchNorm folded into Conv)")
    parser.set_defaults(run=run)


def report(model_path: str, optimized: bool = False) -> dict:
    """The ``classify --json`` object for the model at ``model_path``. With ``optimized``, the
    EP rules also run on the graph as ONNX Runtime hands it to the EP (``ep_optimized``)."""
    model = load_model(model_path)
    ep, refined = classify_ep(model), classify_refined(model)
    result = {
        "model": model_path,
        "nodes": len(model.nodes),
        "warnings": model.warnings,
        "ep": ep.to_json(),
        "refined": refined.to_json(),
        "disagreement": explain_disagreement(ep, refined),
    }
    if optimized:
        from dashboard.classify.optimized import classify_after_ort_optimizations
        from dashboard.runtime.client import optimized_copy

        classification, nodes = classify_after_ort_optimizations(model_path, optimized_copy)
        result["ep_optimized"] = {**classification.to_json(), "nodes": nodes}
    return result


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _table(title: str, result: dict) -> list[str]:
    lines = [f"{title}: {result['verdict']} -> backend {result['backend']}"
             f"  (GenAI {result['genai_score']:g}, NonGenAI {result['non_genai_score']:g})"]
    if result.get("early_exit"):
        lines.append(f"  early exit: {result['early_exit']}")
    if result.get("margin") is not None:
        lines.append(f"  why: {result['explanation']}")
    lines.append(f"  {'signal':<28} {'side':<10} {'weight':>6} {'fired':<5} {'score':>5}  value / threshold")
    for sig in result["signals"]:
        mark = "yes" if sig["fired"] else "no"
        if not sig["reached"]:
            mark += "*"
        lines.append(f"  {sig['name']:<28} {sig['side']:<10} {sig['weight']:>6g} {mark:<5} {sig['score']:>5g}"
                     f"  {_fmt(sig['value'])} / {_fmt(sig['threshold'])}")
        for item in sig["evidence"][:3]:
            lines.append(f"      {item}")
    return lines


def run(args: argparse.Namespace) -> int:
    # One short process around one graph that never becomes garbage (tens of thousands of nodes):
    # the cyclic collector would only walk it again and again, and once more at exit, which costs
    # as much as classifying it. So it does not run for this command, and at the end everything is
    # frozen out of the collection the interpreter makes at exit (reference counting still frees
    # it; an in-process caller gets its collector back).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    result = report(args.model, optimized=args.optimized)
    if args.json:
        from dashboard.cli.common import print_json

        print_json(result)
        return 0
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    lines = [f"{result['model']}: {result['nodes']} nodes", ""]
    lines += _table("EP rules (backend_type=auto)", result["ep"])
    if "ep_optimized" in result:
        lines.append("")
        lines += _table(f"EP rules on ORT's optimized graph ({result['ep_optimized']['nodes']} nodes)",
                        result["ep_optimized"])
    lines.append("")
    lines += _table("Refined", result["refined"])
    if any(not s["reached"] for s in result["ep"]["signals"]):
        lines.append("\n* not evaluated by the EP (after its early exit); shown for context")
    lines.append("")
    lines.append(f"Disagreement: {result['disagreement']}" if result["disagreement"]
                 else f"Both agree: {result['ep']['verdict']} -> backend {result['ep']['backend']}.")
    print("\n".join(lines))
    return 0
