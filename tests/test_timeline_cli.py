"""``python -m dashboard timeline`` as a user runs it: a real subprocess, real worker, real HTP."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys

import onnx
import pytest

from dashboard.intake.samples import build_cnn_classifier
from dashboard.runtime.client import PROJECT_ROOT
from dashboard.timeline.model import EVENT_KINDS

METRIC_KEYS = {"first_response_s", "swap_at_s", "p50_before_s", "p50_after_s", "p99_s", "throughput_rps", "failed"}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("cli") / "cnn32.onnx"
    onnx.save(build_cnn_classifier(size=32), path)
    return str(path)


@pytest.fixture()
def env(tmp_path) -> dict[str, str]:
    return {**os.environ, "QNN_LAB_MODEL_STORE": str(tmp_path / "models"),
            "QNN_LAB_CONTEXT_STORE": str(tmp_path / "contexts")}


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", "timeline", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_json_has_the_documented_shape(model, env):
    done = cli(model, "--strategies", "fast,migrate", "--requests", "60", "--rate", "30", "--fp16",
               "--soc", "sc8380xp", "--json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # stdout is the JSON object and nothing else
    assert data["device"]["label"] == "local (this machine)"
    assert list(data["strategies"]) == ["fast", "migrate"]
    for name, strategy in data["strategies"].items():
        assert METRIC_KEYS <= set(strategy["metrics"]) and isinstance(strategy["metrics"]["failed"], int)
        assert strategy["metrics"]["failed"] == 0
        assert len(strategy["requests"]) == 60
        for request in strategy["requests"]:
            assert {"id", "start", "end", "backend", "ok"} <= set(request)
        for event in strategy["events"]:
            assert set(event) == {"t", "kind", "backend", "detail"} and isinstance(event["t"], float)
            assert event["kind"] in EVENT_KINDS
        times = [e["t"] for e in strategy["events"]]
        assert times == sorted(times)
    migrate = data["strategies"]["migrate"]
    seen = {e["kind"] for e in migrate["events"]}
    assert {"session_create_start", "session_create_end", "warmup_start", "warmup_end", "swap", "drain_end"} <= seen
    assert migrate["metrics"]["swap_at_s"] == next(e["t"] for e in migrate["events"] if e["kind"] == "swap")
    assert data["fast"]["backend"] == "cpu" or data["fast"]["backend"] == "gpu"
    assert "[" in done.stderr  # progress went to stderr
    if platform.machine() == "x86_64":  # decided by the worker: the HTP figures come from its simulator
        assert data["device"]["runtime"]["hardware"] == data["runtime"]["hardware"] == "simulator"


def test_readable_report(model, env):
    done = cli(model, "--strategies", "fast,target", "--requests", "5", "--rate", "50", env=env)
    assert done.returncode == 0, done.stderr
    assert "fast only" in done.stdout and "target only (cold compile)" in done.stdout
    assert "outputs htp vs cpu reference agree" in done.stdout
    per_output = [line for line in done.stdout.splitlines() if line.startswith("  ") and ": agrees, max |diff|" in line]
    assert per_output and all("relative error" in line and "cosine" in line for line in per_output)  # each output
    if platform.machine() == "x86_64":
        assert "target: QNN HTP on the HTP simulator (x86_64)" in done.stdout
        assert "say nothing about NPU speed" in done.stdout


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("args, message", [
    (["{tmp}/missing.onnx"], "no such file"),
    (["{model}", "--strategies", "fast,teleport"], "unknown strategy teleport"),
    (["{model}", "--dim", "batch"], "is not NAME=VALUE"),
    (["{model}", "--dim", "batch=one"], "must be an integer"),
    (["{model}", "--soc", "sm9999"], "unknown SoC"),
    (["{model}", "--rate", "-1"], "the rate must be a positive number"),
    (["{model}", "--device", "ftp://board"], "must be 'local' or ssh://"),
    (["{model}", "--device", "ssh://nobody@127.0.0.1:{port}", "--strategies", "fast"], "cannot reach"),
    (["{model}", "--timeout", "inf"], "between 0 and"),
])
def test_bad_input_is_one_error_line(model, env, tmp_path, args, message):
    filled = [a.format(tmp=tmp_path, model=model, port=_closed_port()) for a in args]
    done = cli(*filled, env=env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_cli_process_never_loads_streamlit_or_the_runtime():
    probe = ("import sys, dashboard.cli.main, dashboard.cli.timeline, dashboard.runtime.devices, dashboard.timeline.model, "
             "dashboard.render.timeline_figures; "
             "bad = [m for m in ('streamlit', 'onnxruntime_qnn', 'onnxruntime') if m in sys.modules]; "
             "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("shape, dims, words", [
    ([1, 2**31], [], "input 'x' [1, 2147483648]: 8.0 GB"),
    (["n", 4096], ["--dim", "n=1000000"], "input 'x' [1000000, 4096]: 15.3 GB"),
])
def test_inputs_too_large_to_generate_are_refused_before_allocating(env, tmp_path, shape, dims, words):
    """The model's shapes (or the user's --dim) would make the generated inputs many GB: one
    error line, and the worker never allocated them (it would swap or meet the OOM killer)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"], name="relu")], "huge", [x], [y])
    path = tmp_path / "huge_input.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    done = cli(str(path), "--strategies", "fast", "--requests", "3", *dims, env=env)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: generated inputs would take") and words in last, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
