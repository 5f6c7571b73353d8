"""``python -m dashboard sweep``: a model zoo × SoCs × setting sets × analyses into a results
folder, and ``sweep diff`` between two folders, the CI gate.

    python -m dashboard sweep SPEC.toml --out DIR [--jobs N | --ray ADDRESS | --devices URL,...] [--force] [--json]
    python -m dashboard sweep diff OLD NEW [--fail-on coverage-drop=PCT,new-fallback,verdict-change,cycles-rise=PCT,
        accuracy-drop=DB] [--json]

The spec is checked whole before any cell runs (a missing model, an unknown SoC, a bad setting:
one ``error:`` line, exit 2, nothing written). Progress goes to stderr, a line per cell run with
the cells done of the total, the time elapsed and the time left; ``--json`` prints one object on
stdout whose ``cells`` list is streamed from the folder (``CellResult.brief``). A sweep whose
cells failed still exits 0: a failed cell is a row, and the gate is ``sweep diff``'s (exit 1 when
a gate trips).
"""

from __future__ import annotations

import argparse
import json
import sys

from dashboard.errors import UserError

DIFF = "diff"


USAGE = ("python -m dashboard sweep SPEC.toml --out DIR [--jobs N | --ray ADDRESS | --devices URL,...] [--force] "
         "[--json]\n       python -m dashboard sweep diff OLD NEW [--fail-on coverage-drop=PCT,new-fallback,"
         "verdict-change,cycles-rise=PCT,accuracy-drop=DB] [--json]")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = USAGE
    parser.add_argument("spec", metavar="SPEC.toml", help="the sweep spec (TOML); or the word diff, then OLD NEW")
    parser.add_argument("folders", nargs="*", default=[], metavar="OLD NEW", help="sweep diff: the two results folders")
    parser.add_argument("--out", metavar="DIR", help="the results folder (created; its cells are not run again)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=_jobs, metavar="N", help="cells at a time on this machine, each in its own "
                                                               "runtime worker (default: this machine's cores)")
    where.add_argument("--ray", metavar="ADDRESS", help="run the cells as tasks on a Ray cluster: HOST:PORT of its "
                       "head, or auto (RAY_ADDRESS, else the address ray start recorded, in a file only you may write)")
    where.add_argument("--devices", metavar="URL,...", help="spread the cells over attached devices, each taking "
                                                            "the cells of its own SoC")
    parser.add_argument("--force", action="store_true", help="run every cell again, also those already in DIR")
    parser.add_argument("--fail-on", metavar="GATES", help="sweep diff: exit 1 when one of these trips: "
                        "coverage-drop=PCT (HTP coverage fell by more than PCT points), new-fallback (a node newly "
                        "left to the CPU), verdict-change (a classifier's verdict changed), cycles-rise=PCT (a profile "
                        "cell's HTP total rose by more than PCT percent; same unit and hardware only), accuracy-drop=DB "
                        "(an accuracy or quantize cell's worst output SQNR fell by more than DB dB)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.set_defaults(run=run)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of cells, got {text!r}") from None
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1024, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    if args.spec == DIFF:
        return run_diff(args)
    if args.folders:
        raise UserError(f"sweep takes one spec; unexpected {' '.join(args.folders)!r} (to compare two results "
                        "folders: sweep diff OLD NEW)")
    if args.fail_on:
        raise UserError("--fail-on belongs to sweep diff OLD NEW")
    if not args.out:
        raise UserError("sweep needs --out DIR, the results folder")
    from dashboard.sweep import executors
    from dashboard.sweep.spec import load_spec
    from dashboard.sweep.store import Store, run_sweep

    spec = load_spec(args.spec)
    executor = None
    if args.ray:
        executor = executors.ray_executor(args.ray)
    elif args.devices:
        executor = executors.devices_executor([u.strip() for u in args.devices.split(",") if u.strip()])
    for note in spec.notes:
        print(f"note: {note}", file=sys.stderr, flush=True)
    store = Store(args.out, create=True)
    jobs = args.jobs or (None if executor else executors.default_jobs())
    where = f"{jobs} at a time" if jobs else ("on the Ray cluster" if args.ray else "on the devices")
    print(f"sweep: {spec.cell_count} cells ({len(spec.models)} models × {len(spec.socs)} SoCs × "
          f"{len(spec.option_sets)} setting sets × {len(spec.analyses)} analyses), {where}, into {args.out}",
          file=sys.stderr, flush=True)
    progress = run_sweep(spec, store, executor=executor, jobs=jobs, force=args.force, on_progress=_print_progress)
    print(f"sweep: {progress.done}/{progress.total} cells in {_duration(progress.elapsed)}: {progress.ran} ran, "
          f"{progress.reused} already in {args.out}, {progress.failed} failed", file=sys.stderr, flush=True)
    for note in store.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        _print_cells(store, {"spec": args.spec, "out": args.out, "total": progress.total, "ran": progress.ran,
                             "reused": progress.reused, "failed": progress.failed})
    return 0


def _print_progress(progress) -> None:
    last = progress.last
    if last is None or (progress.reused and progress.done == progress.reused and progress.done < progress.total):
        return  # cells answered from the folder: counted, not listed one by one
    eta = progress.eta
    found = _finding(last)
    print(f"  [{progress.done}/{progress.total}] elapsed {_duration(progress.elapsed)}"
          f"{'' if eta is None else f', ETA {_duration(eta)}'}  {last.cell.label}: {found}",
          file=sys.stderr, flush=True)


def _finding(result) -> str:
    if not result.ok:
        return f"failed: {result.reason}"
    if result.cell.analysis == "partition" and result.htp_coverage is not None:
        return (f"ok, HTP claims {result.htp_claimed}/{result.htp_nodes} nodes ({result.htp_coverage:.1%}) on the "
                f"HTP simulator" if result.hardware == "simulator" else
                f"ok, HTP claims {result.htp_claimed}/{result.htp_nodes} nodes ({result.htp_coverage:.1%})")
    if result.cell.analysis == "profile":
        return "ok, " + "; ".join(_cost(c) for c in result.costs if c.status == "ok" and c.total is not None)
    if result.verdicts:
        return "ok, " + ", ".join(f"{name} {verdict} -> {result.routes.get(name, '?')}"
                                  for name, verdict in result.verdicts.items())
    return "ok"


def _cost(cost) -> str:
    """``HTP 12,708,096 simulated HTP cycles``: a total always with the words of what it is."""
    return f"{cost.backend.upper()} {cost.total:,.0f} {cost.label}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _print_cells(store, head: dict) -> None:
    """One JSON object, its ``cells`` written one at a time from the folder (flat memory)."""
    out = sys.stdout
    out.write(json.dumps(head, indent=2)[:-2] + ',\n  "cells": [')
    for i, result in enumerate(store.results()):
        out.write(("," if i else "") + "\n    " + json.dumps(result.brief()))
    out.write("\n  ],\n  \"notes\": " + json.dumps(store.notes) + "\n}\n")


def run_diff(args: argparse.Namespace) -> int:
    if len(args.folders) != 2:
        raise UserError("sweep diff takes two results folders: sweep diff OLD NEW")
    extra = [flag for flag, given in (("--out", args.out), ("--jobs", args.jobs), ("--ray", args.ray),
                                      ("--devices", args.devices), ("--force", args.force)) if given]
    if extra:
        raise UserError(f"sweep diff compares two folders; {extra[0]} belongs to a sweep run")
    from dashboard.sweep.diff import diff_folders, parse_gates, render_text

    gates = parse_gates(args.fail_on or "")
    result = diff_folders(args.folders[0], args.folders[1], gates)
    if args.json:
        from dashboard.cli.common import print_json

        print_json(result.to_json())
    else:
        print("\n".join(render_text(result)))
    return 1 if result.tripped else 0
