"""Bundled samples (``dashboard.intake.samples``): deterministic, shipped up to date, valid ONNX that
onnxruntime runs, and really the kinds of model their titles claim (a working KV-cache decoder,
a classifier whose probabilities sum to 1, an encoder whose padding is masked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from dashboard.errors import UserError
from dashboard.intake import samples
from dashboard.intake.reader import load_model
from tests import zoo

ROOT = Path(__file__).resolve().parent.parent
BY_NAME = {s.file_name: s for s in samples.SAMPLES}
REQUIRED = ["llm_decoder_kv.onnx", "cnn_classifier.onnx", "text_encoder.onnx", "vit_classifier.onnx",
            "audio_encoder.onnx"]


@pytest.fixture(scope="module")
def built() -> dict[str, bytes]:
    return {s.file_name: samples.sample_bytes(s) for s in samples.SAMPLES}


@pytest.fixture(scope="module")
def sessions(built) -> dict[str, ort.InferenceSession]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return {name: ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
            for name, data in built.items()}


def test_registry_lists_every_required_sample():
    assert set(REQUIRED) <= set(BY_NAME)
    assert len(BY_NAME) == len(samples.SAMPLES)
    for sample in samples.SAMPLES:
        assert sample.file_name.endswith(".onnx")
        assert sample.title and sample.description and "\n" not in sample.title + sample.description
        assert sample.kind in {"genai-decoder", "vision", "text-encoder", "audio"}


def test_generator_is_deterministic_across_processes(built, tmp_path):
    """Same bytes from a second build in this process and from ``python -m dashboard.intake.samples``."""
    assert {s.file_name: samples.sample_bytes(s) for s in samples.SAMPLES} == built
    proc = subprocess.run([sys.executable, "-m", "dashboard.intake.samples", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    written = list((tmp_path / "out").iterdir())
    assert {p.name: p.read_bytes() for p in written} == built
    assert all(p.stat().st_mode & 0o444 == 0o444 for p in written)  # readable by the app's user


@pytest.mark.parametrize("file_name", sorted(BY_NAME))
def test_shipped_sample_is_what_the_generator_makes(built, file_name):
    shipped = samples.SAMPLES_DIR / file_name
    assert shipped.is_file(), f"{shipped} missing: run `make samples`"
    assert shipped.read_bytes() == built[file_name], f"{shipped} is stale: run `make samples`"


@pytest.mark.parametrize("file_name", sorted(BY_NAME))
def test_sample_is_valid_small_and_loads(built, tmp_path, file_name):
    data = built[file_name]
    assert len(data) < 3 * 1024 * 1024
    model = onnx.load_from_string(data)
    zoo.check(model)
    path = tmp_path / file_name
    path.write_bytes(data)
    graph = load_model(path)
    assert graph.warnings == []
    assert len(graph.nodes) == len(model.graph.node) > 0


def _feeds(session: ort.InferenceSession, dims: dict[str, int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else dims[d] for d in arg.shape]
        if arg.type == "tensor(int64)":
            feeds[arg.name] = (np.ones(shape, np.int64) if "mask" in arg.name else
                               np.zeros(shape, np.int64) if "type" in arg.name else rng.integers(1, 100, shape))
        else:
            feeds[arg.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


DIMS = {"batch_size": 2, "sequence_length": 5, "total_sequence_length": 5, "past_sequence_length": 0,
        "frames": 40}


@pytest.mark.parametrize("file_name", sorted(BY_NAME))
def test_sample_runs_on_cpu_ep(sessions, file_name):
    session = sessions[file_name]
    outputs = session.run(None, _feeds(session, DIMS))
    for arg, value in zip(session.get_outputs(), outputs):
        assert np.isfinite(value).all(), arg.name
        assert value.size > 0 and value.std() > 0, arg.name  # not a constant graph
        for expected, actual in zip(arg.shape, value.shape):
            if isinstance(expected, int):
                assert expected == actual, arg.name


def test_sample_path_finds_and_rebuilds(built, monkeypatch, tmp_path):
    path = samples.sample_path("cnn_classifier.onnx")
    assert path == samples.SAMPLES_DIR / "cnn_classifier.onnx" and path.is_file()
    monkeypatch.setattr(samples, "SAMPLES_DIR", tmp_path / "fresh")
    rebuilt = samples.sample_path("text_encoder.onnx")  # a checkout without generated files
    assert rebuilt.read_bytes() == built["text_encoder.onnx"]
    with pytest.raises(UserError, match="unknown sample"):
        samples.sample_path("nope.onnx")


# each sample is what it claims to be ---------------------------------------------------------------

def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_llm_decoder_has_the_genai_layout(built):
    model = onnx.load_from_string(built["llm_decoder_kv.onnx"])
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    inputs = {v.name: v for v in graph.input}
    outputs = [v.name for v in graph.output]
    ops = {(n.domain, n.op_type) for n in graph.node}
    assert {("com.microsoft", op) for op in ("GroupQueryAttention", "MatMulNBits", "RotaryEmbedding",
                                             "SkipSimplifiedLayerNormalization")} <= ops
    assert ("", "SimplifiedLayerNormalization") in ops  # where onnxruntime-genai puts it
    assert {o.domain: o.version for o in model.opset_import}["com.microsoft"] == 1

    def dims(value_info):
        return [d.dim_value or d.dim_param for d in value_info.type.tensor_type.shape.dim]

    assert dims(inputs["input_ids"]) == ["batch_size", "sequence_length"]
    assert inputs["input_ids"].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert dims(inputs["attention_mask"]) == ["batch_size", "total_sequence_length"]
    layers = sum(1 for n in inputs if n.startswith("past_key_values.") and n.endswith(".key"))
    assert layers == 2
    gqa = [n for n in graph.node if n.op_type == "GroupQueryAttention"]
    assert len(gqa) == layers
    kv_heads, heads = _attrs(gqa[0])["kv_num_heads"], _attrs(gqa[0])["num_heads"]
    for i in range(layers):
        for kind in ("key", "value"):
            past = dims(inputs[f"past_key_values.{i}.{kind}"])
            assert past[:3] == ["batch_size", kv_heads, "past_sequence_length"]
            assert f"present.{i}.{kind}" in outputs
    head_dim = dims(inputs["past_key_values.0.key"])[3]
    assert outputs[0] == "logits"
    vocab = dims(graph.output[0])[2]

    embedding = next(n for n in graph.node if n.op_type == "Gather" and "input_ids" in n.input)
    assert list(inits[embedding.input[0]].dims) == [vocab, heads * head_dim]

    for node in (n for n in graph.node if n.op_type == "MatMulNBits"):
        a = _attrs(node)
        assert a["bits"] == 4 and a["block_size"] >= 16 and a["block_size"] & (a["block_size"] - 1) == 0
        blocks = a["K"] // a["block_size"]
        assert list(inits[node.input[1]].dims) == [a["N"], blocks, a["block_size"] * 4 // 8]
        assert inits[node.input[1]].data_type == onnx.TensorProto.UINT8
        assert numpy_helper.to_array(inits[node.input[2]]).size == a["N"] * blocks
    q_proj = next(n for n in graph.node if n.op_type == "MatMulNBits")
    assert _attrs(q_proj)["N"] == heads * head_dim
    lm_head = next(n for n in graph.node if n.output[0] == "logits")
    assert lm_head.op_type == "MatMulNBits" and _attrs(lm_head)["N"] == vocab


def test_llm_decoder_kv_cache_really_works(sessions):
    """Prefill of 4 tokens == prefill of 3 then one decode step fed the returned present KV; and
    the first 3 positions are unaffected by the 4th token (causal)."""
    session = sessions["llm_decoder_kv.onnx"]
    names = [o.name for o in session.get_outputs()]
    past_inputs = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    ids = np.array([[3, 141, 59, 26], [5, 35, 89, 79]], np.int64)

    def step(tokens, past):
        feeds = {"input_ids": tokens,
                 "attention_mask": np.ones((2, tokens.shape[1] + next(iter(past.values())).shape[2]), np.int64)}
        out = dict(zip(names, session.run(None, feeds | past)))
        presents = {i.name: out[i.name.replace("past_key_values", "present")] for i in past_inputs}
        return out["logits"], presents

    empty = {i.name: np.zeros((2, i.shape[1], 0, i.shape[3]), np.float32) for i in past_inputs}
    full, _ = step(ids, empty)
    prefix, presents = step(ids[:, :3], empty)
    last, _ = step(ids[:, 3:], presents)
    np.testing.assert_allclose(prefix, full[:, :3], atol=1e-5)
    np.testing.assert_allclose(last[:, 0], full[:, 3], atol=1e-5)
    assert not np.allclose(full[0, 3], full[1, 3], atol=1e-4)  # logits depend on the tokens


def test_cnn_classifier_is_static_and_sums_to_one(built, sessions):
    graph = onnx.load_from_string(built["cnn_classifier.onnx"]).graph
    shape = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert shape == [1, 3, 224, 224]
    ops = [n.op_type for n in graph.node]
    assert {"Conv", "BatchNormalization", "Relu", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"} <= set(ops)
    assert ops.count("Conv") == ops.count("BatchNormalization") >= 3
    widths = [numpy_helper.to_array(t).shape[0] for t in graph.initializer if t.name.endswith("weight") and
              len(t.dims) == 4]
    assert max(widths) <= 64  # small enough for the HTP simulator
    (probs,) = sessions["cnn_classifier.onnx"].run(None, _feeds(sessions["cnn_classifier.onnx"], {}))
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-5)


def test_text_encoder_masks_padding(sessions):
    """BERT semantics: a padded token (mask 0) does not change the other positions' output."""
    session = sessions["text_encoder.onnx"]
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
    ids = np.array([[101, 7, 8, 9, 0]], np.int64)
    mask = np.array([[1, 1, 1, 1, 0]], np.int64)
    types = np.zeros_like(ids)
    hidden_a, pooled_a = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    ids_b = ids.copy()
    ids_b[0, 4] = 555
    hidden_b, pooled_b = session.run(None, {"input_ids": ids_b, "attention_mask": mask, "token_type_ids": types})
    np.testing.assert_allclose(hidden_a[:, :4], hidden_b[:, :4], atol=1e-5)
    np.testing.assert_allclose(pooled_a, pooled_b, atol=1e-5)
    ids_c = ids.copy()
    ids_c[0, 2] = 555  # an attended token does change everything (bidirectional)
    hidden_c, _ = session.run(None, {"input_ids": ids_c, "attention_mask": mask, "token_type_ids": types})
    assert not np.allclose(hidden_a[:, 0], hidden_c[:, 0], atol=1e-5)


def test_vit_and_audio_encoder_shapes(built):
    vit = onnx.load_from_string(built["vit_classifier.onnx"]).graph
    assert [d.dim_value or d.dim_param for d in vit.input[0].type.tensor_type.shape.dim][1:] == [3, 224, 224]
    patch = next(n for n in vit.node if n.op_type == "Conv")
    assert _attrs(patch)["strides"] == _attrs(patch)["kernel_shape"]
    vit_ops = [n.op_type for n in vit.node]
    assert vit_ops.count("LayerNormalization") / len(vit_ops) > 0.05  # the EP rules' GenAI trigger

    audio = onnx.load_from_string(built["audio_encoder.onnx"]).graph
    spec = audio.input[0].type.tensor_type
    assert spec.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value or d.dim_param for d in spec.shape.dim] == ["batch_size", 80, "frames"]
    convs = [n for n in audio.node if n.op_type == "Conv"]
    assert len(convs) == 2 and all(len(_attrs(c)["kernel_shape"]) == 1 for c in convs)
    assert any(n.op_type == "Softmax" for n in audio.node)


# the test zoo is built from the same blocks --------------------------------------------------------

@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_zoo_model_is_valid_deterministic_and_runnable(name):
    """The zoo the classifier tests rely on: each model passes the checker, builds the same bytes
    twice, and onnxruntime accepts it (so it is a real graph, not just a bag of ops)."""
    entry = zoo.ZOO[name]
    model = entry.build()
    assert model.graph.name == name and entry.doc
    assert entry.expected in (zoo.GENAI, zoo.NON_GENAI, zoo.UNKNOWN)
    zoo.check(model)
    data = model.SerializeToString()
    assert entry.build().SerializeToString() == data
    assert len(data) < 2 * 1024 * 1024
    options = ort.SessionOptions()
    options.log_severity_level = 3
    ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("file_name", sorted(zoo.TORCH_MODELS))
def test_torch_exports_are_present_and_valid(file_name):
    path = zoo.data_path(file_name)
    assert path.stat().st_size < 2 * 1024 * 1024
    zoo.check(onnx.load(str(path)))
