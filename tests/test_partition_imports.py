"""A first ``partition`` run imports neither onnx nor ml_dtypes, in the CLI process or in its
worker, and the CLI process no numpy either (its worker, which starts first, needs it; the CLI only
reads and reports): ``import onnx`` costs about a second of CPU (ml_dtypes' extension), which each process
would pay while the bare session script the bench compares with pays nothing. Checked on real
processes running the real command: the CLI's ``main`` with its real worker, whose only stand-in
is the QNN session itself (``session.measured``, which the head start and the handler both call:
no simulator compile in this tier; every node is reported on the CPU EP). Everything that reads or rewrites the model runs for real: the
reader, the renamed-node and input-shape rewrite, ONNX Runtime's pre-partition graph and shape
inference, the verdicts and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from dashboard.intake.samples import build_cnn_classifier
from tests.fake_workers import patched_worker

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ["onnx", "ml_dtypes"]
CLI_HEAVY = HEAVY + ["numpy"]  # the CLI reads and reports; only its worker, which runs sessions, needs numpy

# The worker's ``partition`` handler: the real one, with the QNN session left out; it writes which
# of HEAVY its process imported to $IMPORTS_OUT.
HANDLER = f"""
import json, os, sys
from dashboard.partition import measure, session
session.measured = lambda session_input, session_config, config, workdir: (None, None)
def handler(args, emit):
    result = measure.run(args, emit)
    with open(os.environ["IMPORTS_OUT"], "w") as out:
        json.dump([m for m in {HEAVY!r} if m in sys.modules], out)
    return result
"""

CLI = """
import json, sys
from dashboard.runtime import client
client.local_worker_argv = lambda: {worker!r}
from dashboard.cli.main import main
code = main({argv!r})
print(json.dumps({{"code": code, "imported": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def partition_imports(model: Path, tmp_path: Path, *extra: str) -> tuple[dict, list[str], str]:
    """(what the CLI process says, what its worker imported, the CLI's stdout) for a first
    partition run of ``model`` on an empty cache."""
    out = tmp_path / "worker-imports.json"
    env = {**os.environ, "QNN_LAB_CACHE": str(tmp_path / "cache"), "QNN_LAB_MODEL_STORE": str(tmp_path / "models"),
           "IMPORTS_OUT": str(out)}
    argv = ["partition", str(model), "--backends", "htp", "--json", *extra]
    script = CLI.format(worker=patched_worker(HANDLER), argv=argv, heavy=CLI_HEAVY)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    cli = json.loads(done.stdout.strip().splitlines()[-1])
    assert cli["code"] == 0, done.stderr[-3000:]
    return cli, json.loads(out.read_text()), done.stdout


def test_a_first_partition_run_imports_onnx_in_neither_process(tmp_path):
    model = tmp_path / "cnn.onnx"
    onnx.save(build_cnn_classifier(size=32), model)
    cli, worker, stdout = partition_imports(model, tmp_path)
    assert cli["imported"] == [] and worker == []
    assert '"cached": false' in stdout and '"onnxruntime shape inference"' in stdout


def unnamed_dynamic_model(path: Path) -> Path:
    """Unnamed nodes (the sessions get a renamed copy) and an input dimension without a name
    (fixed by a whole ``--shape``): both rewrite the model before ONNX Runtime reads it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def test_the_rewritten_copy_for_the_sessions_is_written_without_onnx(tmp_path):
    model = unnamed_dynamic_model(tmp_path / "unnamed.onnx")
    cli, worker, stdout = partition_imports(model, tmp_path, "--shape", "x=1,16")
    assert cli["imported"] == [] and worker == []
    report = json.loads(stdout.rstrip().rpartition("\n")[0])  # the last line is the CLI script's own
    assert report["node_order"] == ["Relu#0", "Relu#1"]
    assert report["shapes"]["r"]["shape"] == [1, 16]  # inferred on the rewritten copy


@pytest.mark.parametrize("sample", [p.name for p in sorted((ROOT / "samples").glob("*.onnx"))])
def test_onnxruntimes_inference_settles_what_onnxs_settles(sample, monkeypatch):
    """On every bundled sample, ORT's own inference gives every tensor a static shape, each graph
    output the one it declares once the inputs' dimensions are fixed (its own derived ones
    inferred), and every shape onnx's inference settles the same one. (Where onnx's leaves a rank open, ORT's symbolic inference runs after
    it, and on the KV-cache decoder says 127 for ``present``, past's length, not past + 1 = 128.)
    Past ``RUNTIME_INFERENCE_NODES`` onnx's inference goes first."""
    from dashboard.intake import shapes
    from dashboard.intake.reader import load_model, load_structure

    path = ROOT / "samples" / sample
    graph = load_model(path)
    dims = shapes.resolve_dims(graph, {})
    ours, source = shapes.infer_tensor_shapes(load_structure(path), dims)
    monkeypatch.setattr(shapes, "RUNTIME_INFERENCE_NODES", 0)
    theirs, their_source = shapes.infer_tensor_shapes(load_structure(path), dims)
    assert source.startswith("onnxruntime shape inference") and not their_source.startswith(source)
    assert ours.keys() == theirs.keys() and all(shape.is_static for shape in ours.values())
    for output in graph.outputs:  # what it declares: its fixed sizes, and the input dimensions it names
        inferred = ours[output.name].shape
        assert len(inferred) == len(output.shape), output.name
        assert all(got == (dims[d] if isinstance(d, str) else d) for got, d in zip(inferred, output.shape)
                   if isinstance(d, int) or d in dims), (output.name, inferred, output.shape)
    if their_source == "onnx shape inference":
        settled = {k for k, v in theirs.items() if v.is_static}
        assert {k: theirs[k] for k in settled} == {k: ours[k] for k in settled}


READERS = ["dashboard.intake.reader", "dashboard.intake.shapes", "dashboard.intake.samples", "dashboard.runtime.qnn",
           "dashboard.partition.measure", "dashboard.runtime.worker"]


def test_the_modules_that_read_models_import_and_read_with_onnx_refused():
    """Importing onnx is refused outright: a module that needs it fails here, not just later.
    (``intake.samples`` builds models with onnx's helpers; it is imported, not run, here.)"""
    script = (f"import sys\nclass Refuse:\n    def find_spec(self, name, path=None, target=None):\n"
              f"        if name.split('.')[0] in {HEAVY!r}:\n            raise ImportError(name)\n"
              f"sys.meta_path.insert(0, Refuse())\nimport importlib\n"
              f"for module in {[m for m in READERS if not m.endswith('samples')]!r}:\n"
              "    importlib.import_module(module)\n"
              "from dashboard.intake.reader import load_model, load_structure\n"
              "from dashboard.intake.shapes import infer_tensor_shapes\n"
              f"path = {str(ROOT / 'samples' / 'cnn_classifier.onnx')!r}\n"
              "shapes, source = infer_tensor_shapes(load_structure(path), {})\n"
              "print(len(load_model(path).nodes), len(shapes), source)")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    nodes, shapes, source = done.stdout.split(maxsplit=2)
    assert int(nodes) > 0 and int(shapes) > int(nodes) and source.strip() == "onnxruntime shape inference"


def test_classify_runs_with_onnx_refused():
    """``classify`` (both classifiers, the reader, the explanation) needs neither onnx nor
    ml_dtypes: the bench's bare ``onnx.load`` process pays about a second for them, the command nothing."""
    script = (f"import sys\nclass Refuse:\n    def find_spec(self, name, path=None, target=None):\n"
              f"        if name.split('.')[0] in {HEAVY!r}:\n            raise ImportError(name)\n"
              f"sys.meta_path.insert(0, Refuse())\nfrom dashboard.cli.main import main\n"
              f"sys.exit(main(['classify', {str(ROOT / 'samples' / 'llm_decoder_kv.onnx')!r}, '--json']))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "GenAI" in done.stdout
