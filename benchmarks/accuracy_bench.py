"""Benchmark ``accuracy`` against a bare ONNX Runtime + QNN script, in the same run.

    .venv/bin/python benchmarks/accuracy_bench.py [--model PATH] [--samples 32] [--repeats 5]

Floor: ``python -m dashboard accuracy MODEL --data D.npz --fp16 --soc 60 --json`` (the data read and
checked, a worker process, the CPU fp32 and HTP fp16 sessions, every metric per output and sample)
against ``tests/accuracy_bare.py MODEL D.npz 60``: one process creating the same two sessions and
running the same samples through both. Median wall times of alternating runs
(``cli.bench.alternating``). Over ``FLOOR`` (1.3x) the script says so and exits 1 (``make bench``
fails).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOR = 1.3
SOC_MODEL = "60"
BARE = ROOT / "tests" / "accuracy_bare.py"


def main() -> int:
    import onnx

    from dashboard.cli.bench import alternating, floor_line
    from dashboard.intake.samples import sample_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(sample_path("cnn_classifier.onnx")))
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    model = onnx.load(args.model, load_external_data=False)
    (spec,) = model.graph.input[:1]
    shape = [d.dim_value or 1 for d in spec.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="accuracy-bench-") as folder:
        data = str(Path(folder, "data.npz"))
        np.savez(data, **{spec.name: rng.uniform(0, 1, (args.samples, *shape)).astype(np.float32)})
        env = {**os.environ, "QNN_LAB_CACHE": str(Path(folder, "cache")), "PYTHONPATH": str(ROOT)}
        bare = [sys.executable, str(BARE), args.model, data, SOC_MODEL]
        ours = [sys.executable, "-m", "dashboard", "accuracy", args.model, "--data", data, "--fp16", "--soc", SOC_MODEL,
                "--json"]
        medians = alternating(lambda: bare, lambda: ours, lambda: env, args.repeats)
    (bare_wall, bare_cpu), (cli_wall, cli_cpu) = medians["bare"], medians["ours"]
    ratio = cli_wall / bare_wall
    print(f"accuracy: {Path(args.model).name}, {args.samples} samples, CPU fp32 against HTP simulator fp16 "
          f"(soc_model {SOC_MODEL}); median of {args.repeats} alternating runs")
    print(f"  bare script (two sessions, {args.samples} samples each): {bare_wall:6.2f} s wall, {bare_cpu:6.2f} s CPU")
    print(f"  accuracy CLI (data, worker, metrics, --json):   {cli_wall:6.2f} s wall, {cli_cpu:6.2f} s CPU")
    print(f"  ratio {floor_line('accuracy', ratio, FLOOR)}   (CPU {cli_cpu / bare_cpu:.2f}x, no floor)")
    return 0 if ratio <= FLOOR else 1


if __name__ == "__main__":
    sys.exit(main())
