"""``python -m dashboard bench``: is classification cheap next to reading the model?

Generates two decoder-style graphs (GPT-2 blocks with decomposed attention, a Trilu causal mask and
a KV cache, real float weights) in a temporary folder: a node-heavy one of about ``--nodes`` nodes
with small weights, and a weight-heavy one of a few hundred nodes with ``--weights-mb`` of weights.
Then prints, measured in the same run so machine speed cancels out:

* in-process medians on the node-heavy graph of ``onnx.load``, ``load_model`` and ``classify_ep`` +
  ``classify_refined``, with the ratios classify / onnx.load (target <= 1.0) and (load_model +
  classify) / onnx.load; each classification runs on a freshly loaded graph, so the attributes it
  decodes (``Node.attributes`` is lazy and cached) are paid every time, and decoding every node's
  attributes is timed alongside (what an eager load would add);
* for each graph, a ``python -m dashboard classify FILE --json`` process against a bare
  ``python -c "import onnx; onnx.load(FILE)"`` process: wall time, and CPU time (less disturbed by
  other work on a shared machine), medians of runs that alternate the two. On the node-heavy graph
  of ``FLOOR_NODES`` (the default) the wall-time ratio has a floor, ``PROCESS_FLOOR`` (1.5x): over
  it, the command says so and exits 1 (``make bench`` fails).
  Both run with Python's bytecode cache on (in the temporary folder), after one untimed run each:
  site-packages such as onnx were compiled at install, and with ``PYTHONDONTWRITEBYTECODE`` set
  the dashboard's own sources would otherwise be compiled again in every timed run, which is not
  what a user's process does. When it is set, the node-heavy pair is also timed as it runs here.

Numbers and floors, not unit-test assertions: unit tests never time anything; this is where speed
is watched, as same-run ratios, so machine speed cancels out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import onnx

from dashboard import platform
from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.reader import load_model
from dashboard.intake.samples import BASE_NODES, NODES_PER_LAYER, build_decoder

PROCESS_FLOOR = 1.5  # classify process / bare onnx.load process, node-heavy graph, wall time
FLOOR_NODES = 20000  # the floor's graph: other sizes are reported without one
NODE_HEAVY_HIDDEN = 4  # ~4 MB for 20,000 nodes: the graph, not its weights, is what gets read
WEIGHT_HEAVY_NODES = 200
LAYER_BYTES_PER_HIDDEN2 = 48  # build_decoder: about 48 * hidden**2 bytes of weights per layer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=FLOOR_NODES,
                        help=f"nodes of the node-heavy graph (the floor holds at {FLOOR_NODES:,})")
    parser.add_argument("--weights-mb", type=int, default=300, help="weights of the weight-heavy graph, in MB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.set_defaults(run=run)


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fresh_graph_seconds(path: Path, steps: dict[str, Callable[[ModelGraph], object]],
                         repeat: int) -> dict[str, float]:
    """Median seconds of each step, run in order on a graph loaded afresh (untimed) each repetition,
    so nothing a step decodes and caches carries over to the next repetition."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeat):
        graph = load_model(path)
        for name, step in steps.items():
            start = time.perf_counter()
            step(graph)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _all_attributes(graph: ModelGraph) -> int:
    return sum(len(node.attributes) for node in graph.nodes)


def process_seconds(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of it and the children it waited for; NaN where the
    platform does not tell) of one process, which must succeed."""
    before, start = platform.children_cpu_seconds(), time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall, after = time.perf_counter() - start, platform.children_cpu_seconds()
    if done.returncode != 0:
        raise UserError(f"benchmark process failed ({' '.join(argv[:4])} ...): {done.stderr.strip()[-300:]}")
    return wall, float("nan") if before is None or after is None else after - before


def alternating(bare: Callable[[], list[str]], ours: Callable[[], list[str]], env: Callable[[], dict[str, str]],
                runs: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of the ``bare`` and ``ours`` processes, after one untimed run of
    each, over ``runs`` runs that alternate the two (so a change in the machine's load hits both).
    Each argument is called before every run (a fresh cache folder per run, say)."""
    process_seconds(bare(), env())
    process_seconds(ours(), env())
    times: dict[str, list[tuple[float, float]]] = {"bare": [], "ours": []}
    for _ in range(runs):
        times["bare"].append(process_seconds(bare(), env()))
        times["ours"].append(process_seconds(ours(), env()))
    return {name: (statistics.median(t[0] for t in values), statistics.median(t[1] for t in values))
            for name, values in times.items()}


def floor_line(what: str, ratio: float, floor: float | None) -> str:
    """How ``ratio`` stands against its ``floor`` (None: reported, no floor)."""
    if floor is None:
        return f"{ratio:5.2f}x  (no floor)"
    return f"{ratio:5.2f}x  (floor {floor}: {'met' if ratio <= floor else 'FAILED: ' + what + ' over its floor'})"


def _process_ratio(label: str, path: Path, runs: int, cached: bool = True, floor: float | None = None) -> bool:
    """The classify CLI against a bare onnx.load process on ``path`` (``alternating``; the untimed
    runs fill the bytecode cache when ``cached``, otherwise the processes run in this environment
    as it is). False when the wall-time ratio is over ``floor``."""
    env = dict(os.environ)
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(path.parent / "pycache")
    bare_argv = [sys.executable, "-c", f"import onnx; onnx.load({str(path)!r})"]
    cli_argv = [sys.executable, "-m", "dashboard", "classify", str(path), "--json"]
    medians = alternating(lambda: bare_argv, lambda: cli_argv, lambda: env, runs)
    met = True
    for kind, index in (("wall", 0), ("CPU", 1)):
        t_bare, t_cli = medians["bare"][index], medians["ours"][index]
        ratio = t_cli / t_bare
        gate = floor if kind == "wall" else None
        met = met and (gate is None or ratio <= gate)
        _step(f"      {label:<13} {kind:<4} onnx.load process {t_bare * 1000:7.1f} ms, classify process "
              f"{t_cli * 1000:7.1f} ms: {floor_line(f'classify ({label})', ratio, gate)}")
    return met


def _step(text: str) -> None:
    print(text, flush=True)


def _describe(path: Path) -> str:
    model = load_model(path)
    return (f"{len(model.nodes):,} nodes, {len(model.initializers):,} initializers, "
            f"{path.stat().st_size / 1e6:.1f} MB")


def run(args: argparse.Namespace) -> int:
    if args.nodes < 50 or args.repeat < 1 or args.weights_mb < 1:
        raise UserError("bench needs --nodes >= 50, --weights-mb >= 1 and --repeat >= 1")
    layers = max(1, round((WEIGHT_HEAVY_NODES - BASE_NODES) / NODES_PER_LAYER))
    hidden = 4 * max(1, round((args.weights_mb * 1e6 / layers / LAYER_BYTES_PER_HIDDEN2) ** 0.5 / 4))
    with tempfile.TemporaryDirectory(prefix="qnn-lab-bench-") as tmp:
        path = Path(tmp) / "node_heavy.onnx"
        heavy = Path(tmp) / "weight_heavy.onnx"
        _step(f"[1/5] generating a node-heavy decoder of ~{args.nodes:,} nodes and a weight-heavy one of "
              f"~{args.weights_mb} MB ...")
        onnx.save(build_decoder(args.nodes, hidden=NODE_HEAVY_HIDDEN), path)
        onnx.save(build_decoder(WEIGHT_HEAVY_NODES, hidden=hidden), heavy)
        _step(f"      node-heavy:   {_describe(path)}")
        _step(f"      weight-heavy: {_describe(heavy)}")

        _step(f"[2/5] node-heavy, in process: onnx.load, median of {args.repeat} ...")
        t_onnx = _median_seconds(lambda: onnx.load(path), args.repeat)
        _step(f"      onnx.load                      {t_onnx * 1000:8.1f} ms")
        _step(f"[3/5] load_model (structure only), median of {args.repeat} ...")
        t_load = _median_seconds(lambda: load_model(path), args.repeat)
        _step(f"      load_model                     {t_load * 1000:8.1f} ms")
        _step(f"[4/5] classify_ep + classify_refined on a freshly loaded graph, median of {args.repeat} ...")
        timed = _fresh_graph_seconds(path, {"ep": classify_ep, "refined": classify_refined,
                                            "attributes": _all_attributes}, args.repeat)
        t_ep, t_refined, t_attributes = timed["ep"], timed["refined"], timed["attributes"]
        t_classify = t_ep + t_refined
        model = load_model(path)
        verdicts = f"EP {classify_ep(model).verdict}, refined {classify_refined(model).verdict}"
        _step(f"      classify_ep                    {t_ep * 1000:8.1f} ms")
        _step(f"      classify_refined               {t_refined * 1000:8.1f} ms   ({verdicts})")
        _step(f"      every node's attributes        {t_attributes * 1000:8.1f} ms   (decoded lazily: what an "
              "eager load_model would add; not in classify)")
        ratio = t_classify / t_onnx
        _step(f"      classify / onnx.load               {ratio:6.2f}   (target <= 1.0: "
              f"{'met' if ratio <= 1.0 else 'MISSED'})")
        _step(f"      (load_model + classify) / onnx.load {(t_load + t_classify) / t_onnx:6.2f}")

        runs = max(args.repeat, 3)
        _step(f"[5/5] processes, median of {runs} alternating runs: classify CLI vs bare onnx.load (floor on "
              "the node-heavy wall time) ...")
        met = _process_ratio("node-heavy", path, runs, floor=PROCESS_FLOOR if args.nodes == FLOOR_NODES else None)
        _process_ratio("weight-heavy", heavy, runs)
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            _step("      and as this environment runs them (PYTHONDONTWRITEBYTECODE: the dashboard's sources are "
                  "compiled in every run, onnx's come precompiled):")
            _process_ratio("node-heavy", path, runs, cached=False)
    if args.nodes != FLOOR_NODES:
        _step(f"no floor at {args.nodes:,} nodes (it holds at {FLOOR_NODES:,})")
        return 0
    if not met:
        _step(f"FLOOR FAILED: classify on the {args.nodes:,}-node graph took over {PROCESS_FLOOR}x a bare onnx.load "
              "process (wall time, medians above)")
        return 1
    _step(f"floor met: classify on the {args.nodes:,}-node graph <= {PROCESS_FLOOR}x a bare onnx.load process")
    return 0
