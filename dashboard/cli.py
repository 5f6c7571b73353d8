"""``python -m dashboard``: the command line for pipelines and scripts.

It never imports Streamlit, and each subcommand imports only what it needs, so a classification
costs little more than reading the model. Bad input is one ``error: ...`` line on stderr and exit
code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one ``error:`` line with exit code 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """The knobs that decide what QNN claims (shared by partition and timeline)."""
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                        help="fix a symbolic dimension (repeatable); batch=1 and sequence "
                             "lengths are pre-filled")
    parser.add_argument("--fp16", action="store_true", help="run float models in HTP fp16 precision")
    from .socs import SOCS

    parser.add_argument("--soc", metavar="NAME",
                        help="Snapdragon SoC to compile for: " + ", ".join(s.key for s in SOCS)
                             + " (or a QNN soc_model number)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra QNN provider option passed through (repeatable)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="give up on the runtime worker after this long")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dashboard", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    classify = sub.add_parser("classify", help="classify a model as GenAI / NonGenAI / Unknown")
    classify.add_argument("model")
    classify.add_argument("--json", action="store_true", help="print one JSON object")
    classify.add_argument("--optimized", action="store_true",
                          help="also apply the EP rules to the graph as ONNX Runtime hands it to the EP "
                               "(after its level-1 optimizations, e.g. BatchNorm folded into Conv)")
    classify.set_defaults(handler="dashboard.classify_cli:run")

    partition = sub.add_parser("partition", help="which nodes GPU and HTP claim, and migration plans")
    partition.add_argument("model")
    partition.add_argument("--backends", default="htp,gpu", help="comma list of htp, gpu")
    _add_runtime_options(partition)
    partition.add_argument("--optimization-level", choices=("disabled", "basic", "extended", "all"),
                           default="all", help="ONNX Runtime graph optimizations before partitioning "
                                               "(default all, as a session gets by default)")
    partition.add_argument("--device-report", action="append", default=[], metavar="FILE",
                           help="support report written by `partition --out` on a device; replaces "
                                "the predicted GPU figures with measured ones")
    partition.add_argument("--json", action="store_true", help="print one JSON object")
    partition.add_argument("--out", metavar="FILE", help="also write the JSON report to FILE")
    partition.set_defaults(handler="dashboard.partition_cli:run")

    timeline = sub.add_parser("timeline", help="serve on a fast backend and hot-migrate to HTP")
    timeline.add_argument("model")
    timeline.add_argument("--device", default="local", help="local or ssh://user@host[:port]")
    timeline.add_argument("--fast", choices=("cpu", "gpu"), default=None,
                          help="backend that serves first (default: gpu where it works, else cpu)")
    timeline.add_argument("--target", choices=("htp",), default="htp")
    timeline.add_argument("--requests", type=int, default=40)
    timeline.add_argument("--rate", type=float, default=20.0, help="requests per second")
    timeline.add_argument("--strategies", default="fast,target,cached,migrate,auto")
    timeline.add_argument("--shared-memory", action="store_true",
                          help="bind HTP inputs/outputs in shared memory (seed 001)")
    _add_runtime_options(timeline)
    timeline.add_argument("--json", action="store_true", help="print one JSON object")
    timeline.set_defaults(handler="dashboard.timeline_cli:run")

    bench = sub.add_parser("bench", help="benchmarks: classification vs onnx.load, same run")
    bench.add_argument("--nodes", type=int, default=20000)
    bench.add_argument("--repeat", type=int, default=5)
    bench.set_defaults(handler="dashboard.bench:run")
    return parser


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module_name, func_name = args.handler.split(":")
    from .errors import UserError

    try:
        handler = getattr(importlib.import_module(module_name), func_name)
        return int(handler(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
