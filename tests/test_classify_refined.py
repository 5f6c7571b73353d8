"""Refined classifier: every zoo model's verdict and the evidence that must back it, agreement with
the EP rules where they are right, the EP's documented misroutes (both verdicts asserted), the
disagreement explanations, and the structural rules on small hand-built graphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import GENAI, NON_GENAI, UNKNOWN, explain_disagreement
from dashboard.intake.graph import SMALL_TENSOR_BYTES
from dashboard.intake.reader import load_model
from dashboard.intake.samples import build_decoder
from tests.zoo import TORCH_MODELS, ZOO, data_path, save

F, I64 = TensorProto.FLOAT, TensorProto.INT64

# (signal, substring of one of its evidence items) that a correct answer must show.
EVIDENCE: dict[str, list[tuple[str, str]]] = {
    "gpt2_kv_trilu": [("kv_cache_pairs", "'past_key_values.0.key'"), ("kv_cache_pairs", "'present.0.key'"),
                      ("causal_mask", "Trilu"), ("vocab_logits", "vocab 256"), ("token_ids_input", "'input_ids'")],
    "gpt2_kv_where_flat": [("kv_cache_pairs", "'past_key_0'"), ("kv_cache_pairs", "'present_key_0'"),
                           ("causal_mask", "mask buffer 'causal_bias'")],
    "gpt2_kv_qai_names": [("kv_cache_pairs", "'past_key_0_in'"), ("kv_cache_pairs", "'past_key_0_out'")],
    "gpt2_kv_cache_names": [("kv_cache_pairs", "'cache_in_0_k'"), ("kv_cache_pairs", "'cache_out_0_k'"),
                            ("token_ids_input", "'tokens'")],
    "gpt2_no_kv": [("causal_mask", "Trilu"), ("vocab_logits", "'logits'")],
    "gpt2_no_kv_tokens_only": [("causal_mask", "causal_bias"), ("vocab_logits", "vocab 256")],
    "gpt2_kv_int4": [("int4_weight_only", "MatMulNBits"), ("kv_cache_pairs", "Concat")],
    "qdq_decoder": [("kv_cache_pairs", "'past_key_0'"), ("qdq_quantization", "QuantizeLinear")],
    "llm_gqa_int4": [("kv_cache_pairs", "GroupQueryAttention"), ("causal_mask", "causal by construction"),
                     ("int4_weight_only", "MatMulNBits"), ("vocab_logits", "vocab 512")],
    "mha_decoder_kv": [("kv_cache_pairs", "MultiHeadAttention"), ("causal_mask", "attends over a KV cache")],
    "mha_decoder_no_kv": [("causal_mask", "unidirectional=1"), ("vocab_logits", "'logits'")],
    "attention_decoder_kv": [("kv_cache_pairs", "'past_0'"), ("kv_cache_pairs", "Attention")],
    "whisper_decoder": [("kv_cache_pairs", "'past_key_values.0.decoder.key'"),
                        ("kv_cache_pairs", "'present.0.decoder.key'"), ("causal_mask", "Trilu")],
    "bert_encoder": [("text_encoder", "no KV-cache pairs and no causal mask"),
                     ("text_encoder", "segment ids 'token_type_ids'")],
    "minilm_encoder": [("text_encoder", "'input_ids'")],
    "distilbert_encoder": [("text_encoder", "'input_ids'")],
    "bert_encoder_contrib": [("text_encoder", "EmbedLayerNormalization"), ("attention_ops", "Attention")],
    "sentence_embedder": [("text_encoder", "'input_ids'")],
    "vit": [("image_input", "patch embedding"), ("image_input", "kernel 16x16")],
    "cnn_bn_224": [("image_input", "conv stem"), ("cnn_structure", "BatchNormalization")],
    "cnn_no_bn_224": [("image_input", "conv stem")],
    "cnn_symbolic_hw": [("image_input", "[batch, 3, height, width]")],
    "efficientnet_symbolic": [("image_input", "[batch, 3, height, width]")],
    "resnet_bn_224": [("image_input", "conv stem"), ("cnn_structure", "conv layers")],
    "resnet_no_bn_symbolic": [("image_input", "conv stem")],
    "mobilenet_224": [("image_input", "conv stem")],
    "mobilenet_symbolic": [("image_input", "conv stem")],
    "yolo_detector": [("image_input", "'images'")],
    "qdq_cnn": [("image_input", "conv stem"), ("qdq_quantization", "QuantizeLinear")],
    "audio_encoder": [("audio_input", "80 mel bins")],
    "mlp_tabular": [("dense_feature_input", "'features'")],
    "vad_gru": [("recurrent_cells", "GRU"), ("recurrent_cells", "initial state")],
    "vad_lstm": [("recurrent_cells", "LSTM"), ("recurrent_cells", "'c0'")],
    "vad_rnn": [("recurrent_cells", "RNN")],
    "control_flow": [("dense_feature_input", "'features'"), ("control_flow", "Loop")],
    "generation_loop": [("causal_mask", "Trilu"), ("token_ids_input", "'input_ids'"),
                        ("control_flow", "subgraph node(s) analysed")],
    "first_input_not_tensor": [("image_input", "3 image channel")],
    "torch_gpt2_kv.onnx": [("kv_cache_pairs", "Concat"), ("causal_mask", "lower-triangular")],
    "torch_gpt2_kv_dynamo.onnx": [("kv_cache_pairs", "'present.0.key'")],
    "torch_bert_encoder.onnx": [("text_encoder", "'input_ids'")],
    "torch_cnn.onnx": [("image_input", "conv stem")],
}

# EP verdict -> refined verdict where the EP rules misroute (refined is the zoo's expected answer).
MISROUTES = {
    "bert_encoder": (GENAI, NON_GENAI),
    "minilm_encoder": (GENAI, NON_GENAI),
    "distilbert_encoder": (GENAI, NON_GENAI),
    "bert_encoder_contrib": (GENAI, NON_GENAI),
    "sentence_embedder": (GENAI, NON_GENAI),
    "torch_bert_encoder.onnx": (GENAI, NON_GENAI),
    "vit": (GENAI, NON_GENAI),
    "audio_encoder": (GENAI, NON_GENAI),
    "mlp_tabular": (UNKNOWN, NON_GENAI),
    "vad_gru": (UNKNOWN, NON_GENAI),
    "vad_lstm": (UNKNOWN, NON_GENAI),
    "vad_rnn": (UNKNOWN, NON_GENAI),
    "yolo_detector": (UNKNOWN, NON_GENAI),
    "control_flow": (UNKNOWN, NON_GENAI),
    "generation_loop": (UNKNOWN, GENAI),
}
# Models the EP rules already get right: the refined classifier must agree.
AGREEMENTS = [
    "gpt2_kv_trilu", "gpt2_kv_where_flat", "gpt2_kv_qai_names", "gpt2_kv_cache_names", "gpt2_no_kv",
    "gpt2_no_kv_tokens_only", "gpt2_kv_int4", "qdq_decoder", "llm_gqa_int4", "mha_decoder_kv", "mha_decoder_no_kv",
    "attention_decoder_kv", "whisper_decoder", "cnn_bn_224", "cnn_no_bn_224", "cnn_symbolic_hw", "resnet_bn_224",
    "resnet_no_bn_symbolic", "mobilenet_224", "mobilenet_symbolic", "efficientnet_symbolic", "qdq_cnn",
    "first_input_not_tensor", "empty_graph", "torch_gpt2_kv.onnx", "torch_gpt2_kv_dynamo.onnx", "torch_cnn.onnx",
]
EXPECTED = {name: zoo.expected for name, zoo in ZOO.items()} | TORCH_MODELS


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Every zoo model saved and loaded once, plus the committed torch exports."""
    directory = tmp_path_factory.mktemp("zoo")
    cache = {}

    def get(name: str):
        if name not in cache:
            path = data_path(name) if name in TORCH_MODELS else save(ZOO[name].build(), directory)
            cache[name] = load_model(path)
        return cache[name]

    return get


def signal(result, name):
    return next(s for s in result.signals if s.name == name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_refined_verdict_and_evidence(models, name):
    result = classify_refined(models(name))
    assert result.verdict == EXPECTED[name], result.summary
    for signal_name, text in EVIDENCE.get(name, []):
        found = signal(result, signal_name)
        assert found.fired and any(text in item for item in found.evidence), (signal_name, found.evidence)


def test_every_zoo_model_has_evidence_expectations():
    assert set(EXPECTED) - {"empty_graph"} <= set(EVIDENCE), "add the evidence a new zoo model must show"
    assert set(MISROUTES) | set(AGREEMENTS) == set(EXPECTED)


@pytest.mark.parametrize("name", AGREEMENTS)
def test_agrees_with_the_ep_rules_where_they_are_right(models, name):
    model = models(name)
    ep, refined = classify_ep(model), classify_refined(model)
    assert ep.verdict == refined.verdict == EXPECTED[name]
    assert explain_disagreement(ep, refined) is None


@pytest.mark.parametrize("name", sorted(MISROUTES))
def test_documented_misroutes(models, name):
    model = models(name)
    ep, refined = classify_ep(model), classify_refined(model)
    assert (ep.verdict, refined.verdict) == MISROUTES[name]
    sentence = explain_disagreement(ep, refined)
    assert sentence.startswith(f"EP rules say {ep.verdict} (backend {ep.backend}) because ")
    assert f"; refined says {refined.verdict} (backend {refined.backend}) because " in sentence
    assert sentence.count(". ") == 0 and sentence.endswith(".")  # one sentence


@pytest.mark.parametrize("name, ep_reason, refined_reason", [
    ("bert_encoder", "input 'input_ids', input 'attention_mask'", "text_encoder +10"),
    ("vit", "layernorm_density +10 (", "patch embedding Conv"),
    ("audio_encoder", "layernorm_density", "audio_input +10 (spectrogram input 'input_features'"),
    ("mlp_tabular", "no signal fired", "dense_feature_input +10"),
    ("vad_lstm", "no signal fired", "recurrent_cells +10 (LSTM"),
    ("generation_loop", "neither side wins", "causal_mask +8 (Trilu"),
    ("bert_encoder_contrib", "kv-cache input names", "no KV-cache pairs and no causal mask"),
])
def test_disagreement_names_the_decisive_evidence_on_each_side(models, name, ep_reason, refined_reason):
    model = models(name)
    sentence = explain_disagreement(classify_ep(model), classify_refined(model))
    ep_part, refined_part = sentence.split("; refined says ")
    assert ep_reason in ep_part
    assert refined_reason in refined_part


def test_symbolic_image_dims_count_for_refined_but_never_for_the_ep(models):
    model = models("cnn_symbolic_hw")
    assert not signal(classify_ep(model), "image_input_4d").fired
    assert signal(classify_refined(model), "image_input").score == 10.0


def test_empty_graph_is_unknown_with_no_signals(models):
    result = classify_refined(models("empty_graph"))
    assert (result.verdict, result.signals, result.genai_score, result.non_genai_score) == (UNKNOWN, [], 0.0, 0.0)


# structural rules on small hand-built graphs ------------------------------------------------------

def _save(tmp_path, nodes, inputs, outputs, initializers=(), name="m", opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _conv_stem(x="image"):
    weight = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "stem.weight")
    return helper.make_node("Conv", [x, "stem.weight"], ["features"], name="stem"), weight


def test_same_shaped_image_input_and_output_are_not_a_kv_cache(tmp_path):
    # A denoiser: input 'input' and output 'output' with the same shape must not pair up.
    stem, weight = _conv_stem("input")
    back = numpy_helper.from_array(np.zeros((3, 8, 3, 3), np.float32), "head.weight")
    nodes = [stem, helper.make_node("Conv", ["features", "head.weight"], ["output"], name="head")]
    path = _save(tmp_path, nodes, [helper.make_tensor_value_info("input", F, [1, 3, "h", "w"])],
                 [helper.make_tensor_value_info("output", F, [1, 3, "h", "w"])], [weight, back])
    result = classify_refined(load_model(path))
    assert not signal(result, "kv_cache_pairs").fired
    assert result.verdict == NON_GENAI


def test_kv_pair_by_name_needs_compatible_shapes(tmp_path):
    # 'past_key_0' -> (Split, Concat) -> 'present_key_0': no direct structural link, so the pair
    # rests on the names and the shapes (equal except the sequence axis).
    def graph(present_shape, name):
        nodes = [helper.make_node("Identity", ["past_key_0"], ["p"], name="copy"),
                 helper.make_node("Concat", ["p", "new"], ["joined"], axis=2, name="cat"),
                 helper.make_node("Relu", ["joined"], ["present_key_0"], name="act")]
        inputs = [helper.make_tensor_value_info("past_key_0", F, ["b", 4, "past", 16]),
                  helper.make_tensor_value_info("new", F, ["b", 4, "seq", 16])]
        outputs = [helper.make_tensor_value_info("present_key_0", F, present_shape)]
        return classify_refined(load_model(_save(tmp_path, nodes, inputs, outputs, name=name)))

    paired = signal(graph(["b", 4, "total", 16], "ok"), "kv_cache_pairs")
    assert paired.fired and "shapes differ only on the sequence axis" in paired.evidence[0]
    assert not signal(graph(["b", 8, "total", 32], "bad"), "kv_cache_pairs").fired


def test_contradictory_structure_is_unknown(tmp_path):
    # An image conv stem (+10 NonGenAI) next to token ids (+2) under a Trilu causal mask (+8 GenAI):
    # neither side wins.
    stem, weight = _conv_stem()
    table = numpy_helper.from_array(np.zeros((300, 8), np.float32), "wte")
    ones = numpy_helper.from_array(np.ones((4, 4), np.float32), "ones")
    nodes = [stem, helper.make_node("Gather", ["wte", "input_ids"], ["embedded"], name="embed"),
             helper.make_node("Trilu", ["ones"], ["tril"], name="causal", upper=0),
             helper.make_node("Add", ["embedded", "tril"], ["scores"], name="mask")]
    inputs = [helper.make_tensor_value_info("image", F, [1, 3, 32, 32]),
              helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 4])]
    outputs = [helper.make_tensor_value_info(n, F, None) for n in ("features", "scores")]
    result = classify_refined(load_model(_save(tmp_path, nodes, inputs, outputs, [weight, table, ones])))
    assert (result.genai_score, result.non_genai_score, result.verdict) == (10.0, 10.0, UNKNOWN)
    assert result.summary.startswith("Unknown: contradictory structure")


def test_a_cache_next_to_an_image_with_nothing_fed_back_is_a_streaming_state(tmp_path):
    """Past -> present next to an image stem, with no token ids or frames fed back: a streaming
    encoder's state between chunks. The pair is shown, but not counted as a decoder's cache."""
    stem, weight = _conv_stem()
    nodes = [stem, helper.make_node("Concat", ["past_key_0", "features"], ["present_key_0"], axis=2, name="cat")]
    inputs = [helper.make_tensor_value_info("image", F, [1, 3, 32, 32]),
              helper.make_tensor_value_info("past_key_0", F, [1, 8, "past", 30])]
    outputs = [helper.make_tensor_value_info("present_key_0", F, [1, 8, "total", 30])]
    result = classify_refined(load_model(_save(tmp_path, nodes, inputs, outputs, [weight])))
    kv = next(s for s in result.signals if s.name == "kv_cache_pairs")
    assert kv.fired and kv.score == 0.0 and kv.evidence[0].startswith("not counted: nothing is fed back")
    assert result.verdict == NON_GENAI


def test_no_evidence_is_unknown(tmp_path):
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    inputs = [helper.make_tensor_value_info(n, F, [4]) for n in "ab"]
    result = classify_refined(load_model(_save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("y", F, [4])])))
    assert result.verdict == UNKNOWN and result.summary.startswith("Unknown: no structural evidence")
    assert result.margin == 0.0 and result.confidence == "uncertain"


def test_range_comparison_mask_counts_as_causal(tmp_path):
    # transformers' sdpa mask: key positions <= query positions, both from Range.
    const = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("zero", 0), ("one", 1), ("n", 8))]
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["q"], name="q_positions"),
             helper.make_node("Range", ["zero", "n", "one"], ["k"], name="k_positions"),
             helper.make_node("Unsqueeze", ["q", "axes"], ["q2"], name="unsq"),
             helper.make_node("LessOrEqual", ["k", "q2"], ["allowed"], name="causal"),
             helper.make_node("Where", ["allowed", "scores", "neg"], ["masked"], name="where")]
    inputs = [helper.make_tensor_value_info("scores", F, [8, 8]), helper.make_tensor_value_info("neg", F, [])]
    path = _save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("masked", F, [8, 8])], const + [axes])
    causal = signal(classify_refined(load_model(path)), "causal_mask")
    assert causal.fired and "LessOrEqual 'causal' compares positions from Range" in causal.evidence[0]


def _constant_mask_signal(tmp_path, values, name):
    """causal_mask of a graph where Constant ``values`` selects scores in a Where."""
    side = values.shape[-1]
    nodes = [helper.make_node("Constant", [], ["mask"], value=numpy_helper.from_array(values), name="mask_const"),
             helper.make_node("Where", ["mask", "scores", "neg"], ["masked"], name="where")]
    inputs = [helper.make_tensor_value_info("scores", F, [side, side]), helper.make_tensor_value_info("neg", F, [])]
    path = _save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("masked", F, [side, side])], name=name)
    return signal(classify_refined(load_model(path)), "causal_mask")


def test_triangular_constant_is_checked_by_value(tmp_path):
    lower = _constant_mask_signal(tmp_path, np.tril(np.ones((4, 4), bool)), "lower")
    assert lower.fired and "is lower-triangular" in lower.evidence[0]
    assert not _constant_mask_signal(tmp_path, np.ones((4, 4), bool), "full").fired  # square, not triangular


def test_constant_too_large_to_read_counts_like_a_mask_buffer(tmp_path):
    # Values of tensors over SMALL_TENSOR_BYTES are never materialized, so a large boolean Constant
    # selecting scores is judged by shape, exactly like a square bool mask initializer.
    side = 512
    assert side * side > SMALL_TENSOR_BYTES
    large = _constant_mask_signal(tmp_path, np.tril(np.ones((1, 1, side, side), bool)), "large")
    assert large.fired and large.evidence == [
        f"square bool mask buffer 'mask' [1, 1, {side}, {side}] selects scores in Where 'where' (values not read)"]
    assert not _constant_mask_signal(tmp_path, np.zeros((side, side), np.float32), "large_float").fired


def test_recurrent_state_pairs_are_not_kv_pairs(models):
    result = classify_refined(models("vad_gru"))
    assert not signal(result, "kv_cache_pairs").fired
    assert any("'h0' is the initial state of GRU" in item for item in signal(result, "recurrent_cells").evidence)


def test_int4_dequantize_counts_only_without_activation_quantization(tmp_path):
    def graph(quantize_activations: bool, name: str):
        w = helper.make_tensor("w", TensorProto.INT4, [4, 4], np.zeros(16, np.int8).tolist())
        scale = numpy_helper.from_array(np.array(0.1, np.float32), "s")
        zero = numpy_helper.from_array(np.array(0, np.uint8), "z")
        nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wd"], name="dq_w", opset=21)]
        x = "x"
        if quantize_activations:
            nodes += [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
                      helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_x")]
            x = "xd"
        nodes.append(helper.make_node("MatMul", [x, "wd"], ["y"], name="mm"))
        path = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F, [1, 4])],
                     [helper.make_tensor_value_info("y", F, [1, 4])], [w, scale, zero], name=name, opset=21)
        return classify_refined(load_model(path))

    weight_only = graph(False, "w4a32")
    assert signal(weight_only, "int4_weight_only").evidence == ["DequantizeLinear 'dq_w' of int4 weight 'w'"]
    qdq = graph(True, "w4a8")
    assert not signal(qdq, "int4_weight_only").fired and signal(qdq, "qdq_quantization").fired


def test_attribute_evidence_survives_the_file_being_deleted(tmp_path):
    # Attributes come from the loaded graph, never from a second read of the file.
    path = save(ZOO["mha_decoder_no_kv"].build(), tmp_path)
    model = load_model(path)
    path.unlink()
    causal = signal(classify_refined(model), "causal_mask")
    assert causal.fired and any("unidirectional=1" in item for item in causal.evidence)


def test_20000_node_decoder_keeps_its_verdicts(tmp_path):
    """Correctness at scale (speed is the benchmark's job): every KV pair of the bench decoder."""
    path = tmp_path / "big.onnx"
    onnx.save(build_decoder(20000), path)
    model = load_model(path)
    refined = classify_refined(model)
    assert len(model.nodes) > 19000
    assert refined.verdict == GENAI and classify_ep(model).verdict == GENAI
    assert signal(refined, "kv_cache_pairs").value == sum(1 for spec in model.inputs if "past" in spec.name)
