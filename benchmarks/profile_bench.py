"""Benchmark the profile against a bare ONNX Runtime + QNN profiling script, in the same run.

    .venv/bin/python benchmarks/profile_bench.py [--model PATH] [--runs 10] [--repeats 5]

Floor: ``python -m dashboard profile MODEL --runs N --backends htp --fp16 --soc 60 --json`` (a
worker process, the pre-partition graph, QNN's profile and ORT's trace read and mapped onto every
node) against ``tests/profile_bare.py MODEL OUT N --fp16 60``: one process that registers the EP,
creates the same HTP session with QNN's detailed profiling, the framework op trace and ONNX
Runtime's profiler on, warms it up once and runs it N times, reading nothing. Median wall times of
alternating runs (``cli.bench.alternating``: a change in the machine's load hits both). Over
``FLOOR`` (1.3x) the script says so and exits 1 (``make bench`` fails).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOR = 1.3
SOC_MODEL = "60"
BARE = ROOT / "tests" / "profile_bare.py"


def main() -> int:
    from dashboard.cli.bench import alternating, floor_line
    from dashboard.intake.samples import sample_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(sample_path("cnn_classifier.onnx")))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="profile-bench-") as folder:
        env = {**os.environ, "QNN_LAB_CACHE": str(Path(folder, "cache")), "PYTHONPATH": str(ROOT)}
        bare = [sys.executable, str(BARE), args.model, str(Path(folder, "bare")), str(args.runs), "--fp16", SOC_MODEL]
        ours = [sys.executable, "-m", "dashboard", "profile", args.model, "--runs", str(args.runs), "--backends", "htp",
                "--fp16", "--soc", SOC_MODEL, "--json"]
        medians = alternating(lambda: bare, lambda: ours, lambda: env, args.repeats)
    (bare_wall, bare_cpu), (cli_wall, cli_cpu) = medians["bare"], medians["ours"]
    ratio = cli_wall / bare_wall
    print(f"profile: {Path(args.model).name}, {args.runs} timed runs after one warm-up, HTP simulator fp16 "
          f"(soc_model {SOC_MODEL}); median of {args.repeats} alternating runs")
    print(f"  bare script (session + {args.runs} profiled runs):  {bare_wall:6.2f} s wall, {bare_cpu:6.2f} s CPU")
    print(f"  profile CLI (worker, mapping, --json):      {cli_wall:6.2f} s wall, {cli_cpu:6.2f} s CPU")
    print(f"  ratio {floor_line('the profile', ratio, FLOOR)}   (CPU {cli_cpu / bare_cpu:.2f}x, no floor)")
    return 0 if ratio <= FLOOR else 1


if __name__ == "__main__":
    sys.exit(main())
