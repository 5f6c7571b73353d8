"""``timeline --snippet`` and the Timeline page's script: the run's hot migration as Python to
paste, with the exact sessions, provider options and workload; on the HTP simulator the script
itself serves on the CPU, swaps to the HTP and serves there."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dashboard.intake.samples import build_cnn_classifier, sample_path
from dashboard.timeline.model import TimelineOptions
from dashboard.timeline.snippet import model_timeline_snippet


def _literals(source: str) -> dict:
    """The script's top-level constants, read as Python reads them."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets = node.targets[0]
            names = [t.id for t in targets.elts] if isinstance(targets, ast.Tuple) else [targets.id]
            try:
                values = ast.literal_eval(node.value)
            except ValueError:
                continue
            out.update(zip(names, values) if len(names) > 1 else [(names[0], values)])
    return out


def test_the_script_carries_the_run_s_sessions_and_workload():
    options = TimelineOptions(fp16=True, soc="sm8650", requests=30, rate=4.0, after_swap=3, warmup_runs=2,
                              dims={"batch_size": 1, "sequence_length": 64},
                              provider_options={"htp_performance_mode": "burst"})
    source = model_timeline_snippet(str(sample_path("text_encoder.onnx")), options)
    constants = _literals(source)
    assert constants["TARGET_PROVIDER_OPTIONS"] == {"backend_type": "htp", "soc_model": "57", "htp_arch": "75",
                                                    "enable_htp_fp16_precision": "1",
                                                    "htp_performance_mode": "burst"}
    assert constants["FAST_PROVIDER_OPTIONS"] is None and constants["FAST_BACKEND"] == "cpu"
    assert constants["FREE_DIMENSIONS"] == {"batch_size": 1, "sequence_length": 64}
    assert (constants["REQUESTS"], constants["RATE"], constants["AFTER_SWAP"], constants["WARMUP_RUNS"]) == \
        (30, 4.0, 3, 2)
    assert Path(constants["MODEL"]).is_absolute()


def test_a_gpu_fast_backend_and_input_shapes_reach_the_script(tmp_path):
    path = tmp_path / "it's a \"model\".onnx"  # the path enters as a literal, never as code
    onnx.save(build_cnn_classifier(size=32), path)
    from dashboard.intake.reader import load_model

    name = load_model(str(path)).inputs[0].name
    options = TimelineOptions(fast="gpu", shapes={name: (1, 3, 32, 32)})
    constants = _literals(model_timeline_snippet(str(path), options))
    assert constants["MODEL"] == str(path.resolve())
    assert constants["FAST_PROVIDER_OPTIONS"] == {"backend_type": "gpu"}
    assert constants["INPUT_SHAPES"] == {name: [1, 3, 32, 32]}


def test_the_cli_prints_the_script_and_runs_nothing(capsys):
    from dashboard.cli.main import main

    assert main(["timeline", str(sample_path("cnn_classifier.onnx")), "--snippet", "--requests", "9"]) == 0
    out = capsys.readouterr().out
    assert _literals(out)["REQUESTS"] == 9 and "threading.Thread(target=migrate" in out


def test_the_script_migrates_on_the_htp_simulator(tmp_path):
    path = tmp_path / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), path)
    options = TimelineOptions(requests=400, rate=20.0, after_swap=3, warmup_runs=1)
    script = tmp_path / "migrate.py"
    script.write_text(model_timeline_snippet(str(path), options))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("request ", "swap "))]  # not QNN's own
    swap = next(i for i, line in enumerate(lines) if line.startswith("swap to htp"))
    assert [line.split()[2] for line in lines[swap + 1:]] == ["htp"] * 3  # served after the swap, on the HTP
    assert all(" cpu " in line for line in lines[:swap])
