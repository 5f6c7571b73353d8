"""EP-rule classifier: every signal's score against values computed by hand from the C++ source
(``qnn_model_classifier.cc`` at a2442e0), on tiny graphs whose counts are known.

The graphs are chains ``x -> op -> op -> ...`` (the classifier reads op types, domains and graph
inputs only, so the ops need not be runnable), except where ONNX Runtime itself is asked what graph
the EP is handed: there they are real models and the node count is checked against the runtime's.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dashboard.classify.ep_rules import classify_ep, ep_view
from dashboard.classify.verdicts import GENAI, NON_GENAI, UNKNOWN
from dashboard.intake.reader import load_model

F = TensorProto.FLOAT
MS = "com.microsoft"


def chain(tmp_path, ops, *, inputs=(("x", F, [1, 4]),), listed_initializers=(), unlisted_initializers=(),
          ir_version=8, name="m"):
    """Save a model whose nodes form a chain from the first input, one per entry of ``ops``
    (``"Op"`` or ``"domain::Op"``), and load it back as the app does."""
    nodes, prev = [], inputs[0][0] if inputs else None
    for i, op in enumerate(ops):
        domain, _, op_type = op.rpartition("::")
        nodes.append(helper.make_node(op_type, [prev] if prev else [], [f"t{i}"], name=f"n{i}_{op_type}",
                                      domain=domain))
        prev = f"t{i}"
    graph_inputs = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    inits = []
    for init_name in (*listed_initializers, *unlisted_initializers):
        inits.append(numpy_helper.from_array(np.zeros(2, np.float32), init_name))
    graph_inputs += [helper.make_tensor_value_info(n, F, [2]) for n in listed_initializers]
    outputs = [helper.make_tensor_value_info(prev or inputs[0][0], F, None)]
    graph = helper.make_graph(nodes, "g", graph_inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                              ir_version=ir_version)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return load_model(path)


def signal(result, name):
    return next(s for s in result.signals if s.name == name)


def scores(result):
    return {s.name: s.score for s in result.signals}


# densities: strict '>' against float32 thresholds ------------------------------------------------

def test_conv_density_exactly_30_percent_does_not_fire(tmp_path):
    result = classify_ep(chain(tmp_path, ["Conv"] * 3 + ["Relu"] * 7))  # 3/10 == 0.30f, not > 0.30f
    conv = signal(result, "conv_density")
    assert (conv.fired, conv.score) == (False, 0.0)
    assert conv.value == pytest.approx(0.3) and conv.threshold == pytest.approx(0.3)
    assert (result.verdict, result.non_genai_score) == (UNKNOWN, 0.0)


def test_conv_density_4_of_13_fires_and_decides(tmp_path):
    result = classify_ep(chain(tmp_path, ["Conv"] * 3 + ["ConvTranspose"] + ["Relu"] * 9))  # 4/13 = 0.3077
    conv = signal(result, "conv_density")
    assert conv.fired and conv.score == 10.0 and conv.value == pytest.approx(4 / 13, rel=1e-6)
    assert (result.verdict, result.genai_score, result.non_genai_score) == (NON_GENAI, 0.0, 10.0)


def test_conv_integer_counts_and_qlinear_conv_does_not(tmp_path):
    counted = classify_ep(chain(tmp_path, ["ConvInteger"] * 4 + ["Relu"] * 6, name="a"))
    not_counted = classify_ep(chain(tmp_path, ["QLinearConv"] * 4 + ["Relu"] * 6, name="b"))
    assert signal(counted, "conv_density").score == 10.0
    assert signal(not_counted, "conv_density").value == 0.0


def test_batchnorm_density_boundary(tmp_path):
    at = classify_ep(chain(tmp_path, ["BatchNormalization"] + ["Relu"] * 9, name="a"))  # 1/10 = 0.10f
    above = classify_ep(chain(tmp_path, ["BatchNormalization"] * 2 + ["Relu"] * 17, name="b"))  # 2/19
    assert signal(at, "batchnorm_density").score == 0.0
    assert signal(above, "batchnorm_density").score == 5.0
    assert above.verdict == UNKNOWN  # 5 < 10: not enough for a verdict


def test_layernorm_density_counts_both_domains_and_simplified(tmp_path):
    at = classify_ep(chain(tmp_path, ["LayerNormalization"] + ["Relu"] * 19, name="a"))  # 1/20 == 0.05f
    assert signal(at, "layernorm_density").score == 0.0
    ms = classify_ep(chain(tmp_path, [f"{MS}::LayerNormalization"] + ["Relu"] * 18, name="b"))  # 1/19
    assert signal(ms, "layernorm_density").score == 10.0
    assert (ms.verdict, ms.genai_score) == (GENAI, 10.0)
    simplified = classify_ep(chain(tmp_path, ["SimplifiedLayerNormalization", f"{MS}::SimplifiedLayerNormalization"]
                                   + ["Relu"] * 38, name="c"))  # 2/40 == 0.05f: not above
    assert signal(simplified, "layernorm_density").value == pytest.approx(0.05)
    assert signal(simplified, "layernorm_density").score == 0.0


def test_layernorm_in_a_custom_domain_still_counts(tmp_path):
    # The C++ only separates com.microsoft from everything else; any other domain takes the ONNX branch.
    result = classify_ep(chain(tmp_path, ["com.example::LayerNormalization"] + ["Relu"] * 9))
    assert signal(result, "layernorm_density").score == 10.0


# light and heavy ops --------------------------------------------------------------------------

def test_light_ops_score_3_each_only_in_com_microsoft(tmp_path):
    result = classify_ep(chain(tmp_path, [f"{MS}::FastGelu", f"{MS}::BiasGelu", f"{MS}::RotaryEmbedding",
                                          "RotaryEmbedding", "com.example::FastGelu", "Relu"]))
    light = signal(result, "light_attention_ops")
    assert (light.value, light.score) == (3, 9.0)
    assert (result.verdict, result.genai_score) == (UNKNOWN, 9.0)  # 9 < 10


def test_skip_layernorm_is_light_not_layernorm(tmp_path):
    result = classify_ep(chain(tmp_path, [f"{MS}::SkipLayerNormalization"] * 4))
    assert signal(result, "light_attention_ops").score == 12.0
    assert signal(result, "layernorm_density").value == 0.0
    assert (result.verdict, result.genai_score) == (GENAI, 12.0)


@pytest.mark.parametrize("op", ["MatMulNBits", "GroupQueryAttention", "MultiHeadAttention", "Attention"])
def test_decisive_op_returns_genai_at_once(tmp_path, op):
    result = classify_ep(chain(tmp_path, ["Conv"] * 8 + [f"{MS}::{op}", "Relu"]))  # conv density 0.8
    assert result.verdict == GENAI
    assert result.early_exit == f"decisive op {op} (node 'n8_{op}')"
    # scores stay as after the input pre-scan: the loop never reached the density signals
    assert (result.genai_score, result.non_genai_score) == (0.0, 0.0)
    assert not signal(result, "conv_density").reached and signal(result, "conv_density").fired


def test_heavy_ops_outside_com_microsoft_are_not_decisive(tmp_path):
    result = classify_ep(chain(tmp_path, ["Attention", "com.example::MatMulNBits"] + ["Conv"] * 4 + ["Relu"] * 4))
    assert result.early_exit is None
    assert result.verdict == NON_GENAI and result.non_genai_score == 10.0


def test_first_decisive_node_is_named(tmp_path):
    result = classify_ep(chain(tmp_path, ["Relu", f"{MS}::MatMulNBits", f"{MS}::GroupQueryAttention"]))
    assert result.early_exit == "decisive op MatMulNBits (node 'n1_MatMulNBits')"
    assert signal(result, "heavy_attention_ops").value == 1  # still listed as evidence


# co-occurrence signals -------------------------------------------------------------------------

def test_decomposed_attention_needs_matmul_and_softmax(tmp_path):
    both = classify_ep(chain(tmp_path, ["MatMul", "LogSoftmax"], name="a"))
    assert signal(both, "decomposed_attention").score == 5.0
    ms_softmax = classify_ep(chain(tmp_path, ["MatMul", f"{MS}::Softmax"], name="b"))
    assert signal(ms_softmax, "decomposed_attention").score == 0.0
    only_matmul = classify_ep(chain(tmp_path, ["MatMul", "Relu"], name="c"))
    assert not signal(only_matmul, "decomposed_attention").fired


def test_classification_head_needs_global_avg_pool_and_softmax_or_gemm(tmp_path):
    gemm = classify_ep(chain(tmp_path, ["GlobalAveragePool", "Gemm"], name="a"))
    assert signal(gemm, "classification_head").score == 5.0
    alone = classify_ep(chain(tmp_path, ["GlobalAveragePool", "Flatten"], name="b"))
    assert signal(alone, "classification_head").score == 0.0


def test_hand_computed_totals(tmp_path):
    # 20 nodes: 2 FastGelu (+3 each), 2 LayerNorm (2/20 = 0.1 > 0.05: +10), MatMul + Softmax (+5),
    # 7 Conv (7/20 = 0.35 > 0.30: +10), 3 BatchNorm (0.15 > 0.10: +5), GAP + Gemm (+5).
    ops = ([f"{MS}::FastGelu"] * 2 + ["LayerNormalization"] * 2 + ["MatMul", "Softmax"] + ["Conv"] * 7
           + ["BatchNormalization"] * 3 + ["GlobalAveragePool", "Gemm", "Relu", "Relu"])
    result = classify_ep(chain(tmp_path, ops))
    assert len(ops) == 20
    assert scores(result) == {
        "kv_cache_input_names": 0.0, "image_input_4d": 0.0, "matmul_nbits": 0.0, "heavy_attention_ops": 0.0,
        "light_attention_ops": 6.0, "layernorm_density": 10.0, "decomposed_attention": 5.0,
        "conv_density": 10.0, "batchnorm_density": 5.0, "classification_head": 5.0}
    assert (result.genai_score, result.non_genai_score, result.verdict) == (21.0, 20.0, GENAI)


def test_tie_is_unknown(tmp_path):
    # LayerNorm 1/10 (+10 GenAI) against Conv 4/10 (+10 NonGenAI): neither strictly greater.
    result = classify_ep(chain(tmp_path, ["LayerNormalization"] + ["Conv"] * 4 + ["Relu"] * 5))
    assert (result.genai_score, result.non_genai_score, result.verdict) == (10.0, 10.0, UNKNOWN)


def test_empty_graph_is_unknown(tmp_path):
    result = classify_ep(chain(tmp_path, []))
    assert (result.verdict, result.early_exit, result.signals) == (UNKNOWN, "empty graph (0 nodes)", [])


# the input pre-scan ------------------------------------------------------------------------------

def test_kv_hints_are_substrings(tmp_path):
    inputs = [("x", F, [1, 4]), ("input_ids", F, [1]), ("my_past_state", F, [1]), ("presentation", F, [1]),
              ("pastry", F, [1]), ("position_ids_2", F, [1])]
    result = classify_ep(chain(tmp_path, ["Relu"], inputs=inputs))
    kv = signal(result, "kv_cache_input_names")
    assert kv.value == 4 and kv.score == 20.0  # input_ids, past_, present, position_ids; not "pastry"
    assert "input 'pastry'" not in kv.evidence
    assert result.early_exit.startswith("kv-cache input names (score 20")


def test_initializers_listed_as_graph_inputs_count(tmp_path):
    listed = classify_ep(chain(tmp_path, ["Relu"], listed_initializers=["past_bias"], name="a"))
    unlisted = classify_ep(chain(tmp_path, ["Relu"], unlisted_initializers=["past_bias"], name="b"))
    assert signal(listed, "kv_cache_input_names").score == 5.0
    assert signal(unlisted, "kv_cache_input_names").score == 0.0


def test_two_hints_exit_early_before_any_node(tmp_path):
    inputs = [("input_ids", F, [1, 4]), ("attention_mask", F, [1, 4])]
    result = classify_ep(chain(tmp_path, ["Conv"] * 9 + ["BatchNormalization"], inputs=inputs))
    assert result.verdict == GENAI and result.early_exit.startswith("kv-cache input names (score 10")
    conv = signal(result, "conv_density")
    assert conv.fired and not conv.reached and conv.score == 0.0
    assert not signal(result, "matmul_nbits").reached
    assert (result.genai_score, result.non_genai_score) == (10.0, 0.0)


def test_early_exit_needs_strictly_more_than_the_image_score(tmp_path):
    # One hint (+5) equals the image score (+5): no early exit, no verdict.
    inputs = [("pixel_values", F, [1, 3, 224, 224]), ("attention_mask", F, [1, 4])]
    result = classify_ep(chain(tmp_path, ["Relu"], inputs=inputs))
    assert result.early_exit is None
    assert (result.genai_score, result.non_genai_score, result.verdict) == (5.0, 5.0, UNKNOWN)


@pytest.mark.parametrize("shape, fired", [
    ([1, 3, 224, 224], True), ([1, 3, 224, 512], True), ([1, 3, 224, 223], False),
    (["batch", 3, "height", "width"], False), ([1, 3, 224], False), ([1, 224, 224, 3], False)])
def test_image_signal_on_first_input(tmp_path, shape, fired):
    result = classify_ep(chain(tmp_path, ["Relu"], inputs=[("image", F, shape)]))
    image = signal(result, "image_input_4d")
    assert (image.fired, image.score) == (fired, 5.0 if fired else 0.0)


def test_image_signal_ignores_later_inputs(tmp_path):
    inputs = [("scale", F, [1]), ("image", F, [1, 3, 224, 224])]
    result = classify_ep(chain(tmp_path, ["Relu"], inputs=inputs))
    assert signal(result, "image_input_4d").score == 0.0


# the graph ONNX Runtime hands the EP -----------------------------------------------------------

def _ort_node_count(path) -> int:
    """Nodes in the main graph as partitioned by ONNX Runtime with optimizations disabled (what the
    EP's GetCapability is given): the CPU EP's assignment lists every one of them."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return sum(len(sub.get_nodes()) for sub in session.get_provider_graph_assignment_info())


def _save(tmp_path, graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


def test_constant_nodes_are_lifted_before_classification(tmp_path):
    # 10 nodes in the file, 1 of them a Constant: the EP sees 9, so 3 Conv are 3/9 > 30%.
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(1, np.float32)))]
    prev = "x"
    for i in range(3):
        nodes.append(helper.make_node("Conv", [prev, "w"], [f"conv{i}"]))
        prev = f"conv{i}"
    for i in range(6):
        nodes.append(helper.make_node("Add" if i == 0 else "Relu", [prev, "c"] if i == 0 else [prev], [f"r{i}"]))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info(prev, F, None)], [w])
    path = _save(tmp_path, graph, "constant")
    model = load_model(path)
    assert len(model.nodes) == 10
    view = ep_view(model)
    assert (view.num_nodes, view.lifted_constants) == (9, 1) == (_ort_node_count(path), 1)
    result = classify_ep(model)
    assert signal(result, "conv_density").value == pytest.approx(3 / 9, rel=1e-6)
    assert (result.verdict, result.non_genai_score) == (NON_GENAI, 10.0)
    assert "1 Constant node(s) lifted" in signal(result, "conv_density").evidence[0]


def test_shared_dequantize_linear_is_duplicated_per_consumer(tmp_path):
    # One activation DQ feeds two Convs and one weight DQ feeds both too: ONNX Runtime gives each
    # consumer its own copy (+1 node each), 8 nodes in the file -> 10 for the EP.
    inits = [numpy_helper.from_array(np.ones((2, 3, 3, 3), np.int8), "w"),
             numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.uint8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "s"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["a"]),
             helper.make_node("Conv", ["xd", "wd"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]),
             helper.make_node("Relu", ["c"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", F, None)], inits)
    path = _save(tmp_path, graph, "qdq")
    model = load_model(path)
    view = ep_view(model)
    assert (len(model.nodes), view.duplicated_dq, view.num_nodes) == (8, 2, 10)
    assert view.num_nodes == _ort_node_count(path)
    # 2 Conv of 10: 0.2, not a conv-dense graph for the EP (2/8 would have been 0.25 either way)
    assert signal(classify_ep(model), "conv_density").value == pytest.approx(0.2)


def test_dequantize_linear_that_is_also_a_graph_output_is_copied_for_every_consumer(tmp_path):
    inits = [numpy_helper.from_array(np.ones((4,), np.int8), "w"),
             numpy_helper.from_array(np.array(0.1, np.float32), "s")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wd"]),
             helper.make_node("Add", ["x", "wd"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info("y", F, None),
                               helper.make_tensor_value_info("wd", F, None)], inits)
    path = _save(tmp_path, graph, "dq_output")
    view = ep_view(load_model(path))
    assert (view.duplicated_dq, view.num_nodes) == (1, 3) == (1, _ort_node_count(path))


@pytest.mark.parametrize("name", ["llm_gqa_int4", "qdq_decoder", "qdq_cnn", "bert_encoder", "cnn_bn_224"])
def test_ep_view_matches_onnxruntime_on_zoo_models(tmp_path, name):
    from tests.zoo import ZOO, save

    path = save(ZOO[name].build(), tmp_path)
    assert ep_view(load_model(path)).num_nodes == _ort_node_count(path)


def test_ep_view_matches_onnxruntime_on_a_torch_export():
    from tests.zoo import data_path

    path = data_path("torch_gpt2_kv.onnx")
    model = load_model(path)
    view = ep_view(model)
    assert view.lifted_constants > 0 and view.num_nodes == len(model.nodes) - view.lifted_constants
    assert view.num_nodes == _ort_node_count(path)


def test_old_ir_versions_list_lifted_constants_as_inputs(tmp_path):
    # For IR < 4 ONNX Runtime appends each lifted Constant to graph.input, so its name is checked
    # against the hints too.
    nodes = [helper.make_node("Constant", [], ["past_const"], value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Add", ["x", "past_const"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1])],
                              [helper.make_tensor_value_info("y", F, None)])
    for ir_version, expected in ((3, 5.0), (8, 0.0)):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=ir_version)
        path = tmp_path / f"ir{ir_version}.onnx"
        onnx.save(model, path)
        assert signal(classify_ep(load_model(path)), "kv_cache_input_names").score == expected
