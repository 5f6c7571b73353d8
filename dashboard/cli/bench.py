"""``python -m dashboard bench``: is classification cheap next to reading the model?

Generates a decoder-style graph of about ``--nodes`` nodes (GPT-2 blocks with decomposed attention,
a Trilu causal mask and a KV cache, real float weights), saves it to a temporary folder and prints,
measured in the same run so machine speed cancels out:

* in-process medians of ``onnx.load``, ``load_model`` and ``classify_ep`` + ``classify_refined``, with
  the ratios classify / onnx.load (target <= 1.0) and (load_model + classify) / onnx.load; each
  classification runs on a freshly loaded graph, so the attributes it decodes (``Node.attributes`` is
  lazy and cached) are paid every time, and decoding every node's attributes is timed alongside
  (what an eager load would add);
* the wall time of a ``python -m dashboard classify FILE --json`` process against a bare
  ``python -c "import onnx; onnx.load(FILE)"`` process (target < 2x), median of a few runs.

Numbers, not assertions: unit tests never time anything; this is where speed is watched.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import onnx

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.reader import load_model
from dashboard.intake.samples import build_decoder

PROCESS_RUNS = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=20000)
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


def _process_seconds(argv: list[str], repeat: int) -> float:
    def once() -> None:
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise UserError(f"benchmark process failed ({' '.join(argv[:4])} ...): {done.stderr.strip()[-300:]}")

    return _median_seconds(once, repeat)


def _step(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.nodes < 50 or args.repeat < 1:
        raise UserError("bench needs --nodes >= 50 and --repeat >= 1")
    with tempfile.TemporaryDirectory(prefix="qnn-lab-bench-") as tmp:
        path = Path(tmp) / "bench_decoder.onnx"
        _step(f"[1/5] generating a decoder-style graph of ~{args.nodes:,} nodes ...")
        onnx.save(build_decoder(args.nodes), path)
        model = load_model(path)
        _step(f"      {len(model.nodes):,} nodes, {len(model.initializers):,} initializers, "
              f"{path.stat().st_size / 1e6:.1f} MB at {path}")

        _step(f"[2/5] onnx.load, median of {args.repeat} ...")
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
        verdicts = f"EP {classify_ep(model).verdict}, refined {classify_refined(model).verdict}"
        _step(f"      classify_ep                    {t_ep * 1000:8.1f} ms")
        _step(f"      classify_refined               {t_refined * 1000:8.1f} ms   ({verdicts})")
        _step(f"      every node's attributes        {t_attributes * 1000:8.1f} ms   (decoded lazily: what an "
              "eager load_model would add; not in classify)")
        ratio = t_classify / t_onnx
        _step(f"      classify / onnx.load               {ratio:6.2f}   (target <= 1.0: "
              f"{'met' if ratio <= 1.0 else 'MISSED'})")
        _step(f"      (load_model + classify) / onnx.load {(t_load + t_classify) / t_onnx:6.2f}")

        runs = min(args.repeat, PROCESS_RUNS)
        _step(f"[5/5] processes, median of {runs}: classify CLI vs bare onnx.load ...")
        t_bare = _process_seconds([sys.executable, "-c", f"import onnx; onnx.load({str(path)!r})"], runs)
        t_cli = _process_seconds([sys.executable, "-m", "dashboard", "classify", str(path), "--json"], runs)
        cli_ratio = t_cli / t_bare
        _step(f"      python -c 'onnx.load(...)'     {t_bare * 1000:8.1f} ms")
        _step(f"      python -m dashboard classify   {t_cli * 1000:8.1f} ms")
        _step(f"      classify process / onnx.load process {cli_ratio:6.2f}   (target < 2.0: "
              f"{'met' if cli_ratio < 2.0 else 'MISSED'})")
    return 0
