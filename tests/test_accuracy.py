"""Accuracy and quantization on the HTP simulator (issue 25): QDQ models from ONNX Runtime's own
quantizer, the layer debugger naming the layer u8 breaks, the figures checked against numpy on
outputs the test computes itself, the metadata work-around, the mixed-precision search, a blocker
on the integer path, and the CLI's one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from accuracy_models import SPIKE, erf_model, outlier_model, samples, save, save_samples
from dashboard.accuracy import probes
from dashboard.accuracy.metrics import Accumulator, compare
from dashboard.errors import UserError
from dashboard.runtime.knobs import Settings

pytestmark = pytest.mark.simulator


def quantized(model_path, folder, **options):
    """The QDQ model ORT's QNN recipe makes, calibrated on the test's samples (the project's worker)."""
    from dashboard.accuracy.quantize import quantize_model

    out = folder / (model_path.stem + ".qdq.onnx")
    result = quantize_model(model_path, save_samples(folder), out, cost=False, coverage=False, **options)
    return out, result


def sqnr(got, want) -> float:
    """qdq_loss_debug's definition, written out again."""
    eps = np.finfo("float").eps
    a, b = np.concatenate([g.ravel() for g in got]), np.concatenate([w.ravel() for w in want])
    return 20 * np.log10(max(np.linalg.norm(b), eps) / max(np.linalg.norm(a - b), eps))


# -- the figures ----------------------------------------------------------------------------------------
def test_metrics_equal_numpy_and_ort_own_sqnr():
    from onnxruntime.quantization.qdq_loss_debug import compute_signal_to_quantization_noice_ratio as ort_sqnr

    rng = np.random.default_rng(0)
    want = [rng.normal(0, 3, (2, 50)).astype(np.float32) for _ in range(3)]
    got = [w + rng.normal(0, 0.1, w.shape).astype(np.float32) for w in want]
    acc = Accumulator()
    for g, w in zip(got, want):
        acc.add(g, w)
    m = acc.metrics()
    a, b = np.concatenate([g.ravel() for g in got]).astype(np.float64), np.concatenate([w.ravel() for w in want])
    assert m.sqnr_db == pytest.approx(ort_sqnr(want, got), abs=1e-3)
    assert m.sqnr_db == pytest.approx(sqnr(got, want), abs=1e-3)
    assert m.max_abs == pytest.approx(np.max(np.abs(a - b)))
    assert m.cosine == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert m.rel_error == pytest.approx(np.linalg.norm(a - b) / np.linalg.norm(b))
    assert m.top1 == pytest.approx(np.mean([np.argmax(g[i]) == np.argmax(w[i]) for g, w in zip(got, want)
                                            for i in range(2)]))


def test_a_shape_mismatch_is_said_not_compared():
    m = compare(np.zeros((2, 3)), np.zeros((3, 2)))
    assert m.sqnr_db is None and "shape" in m.note


# -- probes ---------------------------------------------------------------------------------------------
def test_layerwise_copy_feeds_each_probe_from_the_reference(tmp_path):
    model = outlier_model()
    reference, tensors = probes.reference_model(model)
    found = probes.probes_of(model, tensors)
    assert [p.tensor for p in found] == ["c1", "r1", "c2", "spike", "c3", "pooled", "flat", "logits"]
    cut = probes.layerwise_model(model, found, {t: (1, 8, 16, 16) for t in tensors})
    fed = {i.name for i in cut.graph.input}
    assert {"spike__ref", "c2__ref"} <= fed
    conv3 = next(n for n in cut.graph.node if n.name == "conv3")
    assert conv3.input[0] == "spike__ref"  # conv3 reads the reference, not add_spike's own output


# -- the HTP against the CPU EP, and the layers ---------------------------------------------------------
@pytest.fixture(scope="module")
def outlier(tmp_path_factory):
    folder = tmp_path_factory.mktemp("outlier")
    path = save(outlier_model(), folder, "outlier.onnx")
    q, result = quantized(path, folder)
    return folder, path, q, result


def test_layerwise_names_the_layer_u8_breaks_first(outlier):
    from dashboard.accuracy.run import accuracy_model

    folder, path, q, _ = outlier
    report = accuracy_model(path, save_samples(folder), Settings(), quantized=q, layers=["cumulative", "layerwise"])
    layers = report.layers
    assert layers.ok, layers.reason
    assert layers.first_jump == "spike"
    row = layers.row("spike")
    assert row.node == "add_spike" and row.op_type == "Add"
    assert row.quant is not None and row.quant.high >= SPIKE * 0.99  # the range stretched over the outlier
    assert "outlier" in row.why
    before = [r for r in layers.rows if r.order < row.order]
    assert all(r.layerwise > row.layerwise + 6 for r in before)  # every layer before it is far better on its own
    assert any("first jumps at add_spike" in v for v in report.verdicts)
    assert not report.data.random


def test_reported_figures_equal_numpy_on_outputs_the_test_computes(outlier):
    import onnxruntime as ort

    from dashboard.accuracy.run import accuracy_model
    from dashboard.runtime.config import SessionConfig
    from dashboard.runtime.qnn import create_session

    folder, path, q, _ = outlier
    settings = Settings(fp16=True)
    report = accuracy_model(path, save_samples(folder), settings, quantized=q)
    feeds = [{"image": s} for s in samples()]
    cpu = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    qcpu = ort.InferenceSession(str(q), providers=["CPUExecutionProvider"])
    htp = create_session(str(q), SessionConfig.of(settings, "htp").replace(fp16=False), require_qnn=True).session
    want = [cpu.run(None, f)[0] for f in feeds]
    for key, session in (("qdq_cpu_vs_float", qcpu), ("qdq_htp_vs_float", htp)):
        got = [session.run(None, f)[0] for f in feeds]
        (output,) = report.comparison(key).outputs
        assert output.overall.sqnr_db == pytest.approx(sqnr(got, want), abs=1e-3)
        per_sample = [sqnr([g], [w]) for g, w in zip(got, want)]
        assert [m.sqnr_db for m in output.samples] == pytest.approx(per_sample, abs=1e-3)
        assert output.worst[0] == int(np.argmin(per_sample))
        top1 = np.mean([np.argmax(g) == np.argmax(w) for g, w in zip(got, want)])
        assert output.overall.top1 == pytest.approx(top1)
    assert any("as accurate as the CPU EP" in v or "the HTP deviates" in v for v in report.verdicts)


def test_no_data_is_random_inputs_on_every_figure(outlier):
    from dashboard.accuracy.run import accuracy_model
    from dashboard.cli.accuracy import render_text

    _, path, _, _ = outlier
    report = accuracy_model(path, None, Settings(), limit=2)
    assert report.data.random and report.data.label == "random inputs"
    assert report.notes and "fp16" in report.notes[0]  # the float model on the HTP: fp16, said
    text = "\n".join(render_text(report))
    assert "RANDOM INPUTS" in text and "random inputs" in text.split("\n", 3)[-1]


# -- quantization -----------------------------------------------------------------------------------------
def test_ort_preprocess_raises_on_metadata_and_ours_keeps_it(tmp_path):
    from onnxruntime.quantization.execution_providers.qnn import qnn_preprocess_model

    from dashboard.accuracy.build import preprocess

    model = outlier_model()
    onnx.helper.set_model_props(model, {"imgsz": "[16, 16]", "task": "classify"})
    path = save(model, tmp_path, "meta.onnx")
    with pytest.raises(TypeError):
        qnn_preprocess_model(str(path), str(tmp_path / "ort.onnx"))  # ORT's call as it is
    out, notes = preprocess(str(path), str(tmp_path / "ours.onnx"))
    kept = {p.key: p.value for p in onnx.load(out).metadata_props}
    assert kept["imgsz"] == "[16, 16]" and kept["task"] == "classify"
    assert any("metadata" in n for n in notes)


def test_left_in_float_is_every_compute_node_of_a_float_model_and_none_of_a_whole_qdq_one(outlier, tmp_path):
    from dashboard.accuracy.build import left_in_float

    _, path, q, result = outlier
    assert result.left_float == [] == left_in_float(str(q))
    float_nodes = {n.name for n in onnx.load(path).graph.node}
    assert {name for name, _ in left_in_float(str(path))} == float_nodes


def test_a_node_the_htp_refuses_is_the_blocker_of_the_integer_path(tmp_path):
    from dashboard.accuracy.quantize import coverage_of

    path = save(erf_model(), tmp_path, "erf.onnx")
    q, _ = quantized(path, tmp_path)
    coverage = coverage_of(q, Settings())
    assert coverage.error is None
    assert coverage.refused >= 1
    assert any(b["op_type"] == "Erf" for b in coverage.blockers)
    assert coverage.claimed >= 2  # the convolutions around it stay on the HTP


def test_search_reaches_the_target_with_fewer_lifts_than_all_16_bit(outlier, tmp_path):
    from dashboard.accuracy.quantize import Target, quantize_model

    folder, path, _, u8 = outlier
    u8_sqnr = u8.steps[0].sqnr_db
    _, u16 = quantized(path, tmp_path, activations="u16")
    u16_sqnr = u16.steps[0].sqnr_db
    assert u16_sqnr > u8_sqnr + 6  # 16-bit fixes what u8 breaks
    target = Target("sqnr", (u8_sqnr + u16_sqnr) / 2)
    result = quantize_model(path, save_samples(tmp_path), tmp_path / "mixed.onnx", target=target, coverage=False)
    assert result.reached
    probed = len(result.steps[1].lifted)  # the "all u16" step lifts every ranked tensor
    assert 0 < len(result.lifted) < probed
    kept = next(s for s in result.steps if s.lifted == result.lifted)
    assert kept.meets and kept.sqnr_db >= target.value
    assert all(s.cycles is not None and s.cost_unit == "cycles" for s in result.steps)
    overrides = json.loads((tmp_path / "mixed.overrides.json").read_text())
    assert set(overrides) == set(result.lifted)
    assert "spike" in result.lifted  # the outlier's tensor is among the ones lifted
    lifted_model = onnx.load(tmp_path / "mixed.onnx")
    types = {n.input[0]: n for n in lifted_model.graph.node if n.op_type == "QuantizeLinear"}
    zero = {i.name: i for i in lifted_model.graph.initializer}
    assert zero[types["spike"].input[2]].data_type == onnx.TensorProto.UINT16


# -- the command line -----------------------------------------------------------------------------------------
def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "dashboard", *args], capture_output=True, text=True, timeout=timeout)


def test_cli_accuracy_json_and_text(outlier, tmp_path):
    folder, path, q, _ = outlier
    data = save_samples(folder)
    done = cli("accuracy", str(path), "--data", str(data), "--quantized", str(q), "--layers", "layerwise", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["layers"]["first_jump"] == "spike" and record["data"]["count"] == 6
    text = cli("accuracy", str(path), "--data", str(data), "--csv", str(tmp_path / "out.csv"))
    assert text.returncode == 0, text.stderr
    assert "SQNR" in text.stdout and "HTP simulator" in text.stdout
    assert (tmp_path / "out.csv").read_text().startswith("comparison,")


@pytest.mark.parametrize("args, words", [
    (["accuracy", "missing.onnx"], "missing.onnx"),
    (["accuracy", "{model}", "--data", "{folder}/nothing.npz"], "nothing.npz"),
    (["accuracy", "{model}", "--layers", "sideways"], "modes"),
    (["accuracy", "{model}", "--preset", "imagenet"], "--data"),
    (["quantize", "{model}", "--data", "{data}", "--out", "{model}"], "overwrite"),
    (["quantize", "{model}", "--data", "{data}", "--out", "{folder}/q.onnx", "--target", "loud"], "--target"),
])
def test_cli_bad_input_is_one_error_line(outlier, args, words):
    folder, path, _, _ = outlier
    data = save_samples(folder)
    done = cli(*[a.format(model=path, folder=folder, data=data) for a in args], timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_qdq_model_alone_is_compared_with_the_cpu_ep_on_the_same_model(outlier):
    from dashboard.accuracy.run import accuracy_model

    folder, _, q, _ = outlier
    report = accuracy_model(q, save_samples(folder), Settings())
    assert [c.key for c in report.comparisons] == ["qdq_htp_vs_qdq_cpu"]
    assert report.comparisons[0].ok and report.comparisons[0].outputs[0].overall.sqnr_db is not None
    assert any("no float model" in n for n in report.notes)
    assert not any("fp16" in n for n in report.notes)  # a QDQ model runs on the integer path


@pytest.fixture(scope="module")
def layered(outlier):
    from dashboard.accuracy.run import accuracy_model

    folder, path, q, _ = outlier
    return accuracy_model(path, save_samples(folder), Settings(), quantized=q, layers=["cumulative", "layerwise"])


def test_the_graph_overlay_paints_each_node_its_own_error_and_the_panel_says_why(outlier, layered):
    from dashboard.intake.reader import load_model
    from dashboard.render import model_explorer as me

    _, path, _, _ = outlier
    graph = load_model(path)
    ids = {n.name: me.node_id(n) for n in graph.nodes}
    (overlay,) = me.accuracy_overlays(graph, layered).values()
    spike, conv1 = overlay.results[ids["add_spike"]], overlay.results[ids["relu1"]]  # r1: the QDQ fused conv1+relu1
    assert spike.value == pytest.approx(layered.layers.row("spike").layerwise, abs=0.05)
    red = lambda colour: int(colour[1:3], 16) - int(colour[3:5], 16)  # noqa: E731
    assert red(spike.bgColor) > red(conv1.bgColor)  # the broken layer is the redder
    attrs = {kv.key: kv.value for kv in me.accuracy_attrs(graph, layered)["add_spike"]}
    assert "uint8" in attrs["quantization"] and "outlier" in attrs["why"] and "layerwise" in attrs["error vs float"]


def test_the_notebook_gives_the_tables_and_the_layer_chart(outlier):
    from dashboard import notebook as lab

    folder, path, q, _ = outlier
    result = lab.load(path).accuracy(str(save_samples(folder)), quantized=str(q))
    table = result.to_frame()
    assert set(table["comparison"]) == {"htp_vs_float", "qdq_htp_vs_float", "qdq_cpu_vs_float", "qdq_htp_vs_qdq_cpu"}
    assert len(result.layers_frame()) == len(result.record.layers.rows) > 0
    figure = result.figure()
    assert figure.data and "spike" in str(figure.to_json())
    with pytest.raises(UserError):
        result.figure("pie")


def test_the_html_report_has_the_accuracy_section(outlier, tmp_path):
    folder, path, _, _ = outlier
    out = tmp_path / "report.html"
    done = cli("report", str(path), "--out", str(out), "--no-timeline", "--accuracy", "--data",
               str(save_samples(folder)))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "<section id='accuracy'>" in page and "HTP simulator" in page and "add_spike" in page
    assert "Random inputs" not in page
    refused = cli("report", str(path), "--out", str(out), "--no-timeline", "--data", str(save_samples(folder)))
    assert refused.returncode == 2 and "--accuracy" in refused.stderr


def test_an_output_the_debug_copy_computes_otherwise_is_said_with_both_figures():
    from dashboard.accuracy.measure import Plan
    from dashboard.accuracy.model import LayerError, Layers

    plan = Plan.__new__(Plan)
    plan.qdq_model, plan.float_model = None, outlier_model()
    plain = Accumulator()
    plain.add(np.ones(10) + 0.1, np.ones(10))  # 20 dB in the plain session
    layers = Layers(target="t", modes=["cumulative"], rows=[LayerError(0, "logits", "fc", "Gemm", cumulative=60.0)])
    (note,) = plan._output_drift(layers, {"pairs": {("htp_vs_float", "logits"): plain}})
    assert "60.0 dB" in note and "20.0 dB" in note and "logits" in note
    layers.rows[0].cumulative = 21.0  # within DRIFT_DB: nothing to say
    assert plan._output_drift(layers, {"pairs": {("htp_vs_float", "logits"): plain}}) == []


def test_mask_values_are_left_out_and_an_all_zero_reference_has_no_sqnr():
    from dashboard.accuracy.measure import _unmasked

    mask = np.array([0.0, 0.0, np.finfo(np.float32).min, 0.0], np.float32)
    acc = Accumulator()
    acc.add(np.array([0.0, 0.0, -65504.0, 0.0]), _unmasked(mask))
    m = acc.metrics()
    assert m.sqnr_db is None and "all zeros" in m.note and "1 non-finite or masked" in m.note
    assert m.max_abs == 0.0
