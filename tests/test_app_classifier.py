"""The Classifier page under AppTest: both verdicts with their backends, every signal with its
measurement, disagreements explained, hostile names escaped; and the page's formatting helpers."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from dashboard.classify.verdicts import Signal
from dashboard.intake.samples import sample_path
from dashboard.views.classifier import measured, signal_label

LN_OPS = ("LayerNormalization", "SimplifiedLayerNormalization")


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def classifier_page(app, path):
    at = app("--model", str(path)).run()
    at.switch_page("pages/classifier.py").run()
    assert not at.exception, at.exception
    return at


def signal_tables(at):
    tables = [d.value for d in at.dataframe if "measured vs threshold" in d.value.columns]
    assert len(tables) == 2
    return tables


def verdict_lines(at) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("### ")]


def test_text_encoder_disagreement_is_shown_with_both_backends(app):
    """The issue's example: a BERT/MiniLM encoder has input_ids/attention_mask, so the EP rules
    send it to GPU as GenAI; the refined classifier keeps it on HTP."""
    at = classifier_page(app, sample_path("text_encoder.onnx"))
    ep_line, refined_line = verdict_lines(at)
    assert "GenAI" in ep_line and "GPU" in ep_line
    assert "NonGenAI" in refined_line and "HTP" in refined_line
    banner = next(w.value for w in at.warning if "refined" in w.value)
    assert "GPU" in banner and "HTP" in banner
    assert at.header[0].value.startswith("Where they disagree")
    why = unescape(next(m.value for m in at.markdown if "alt_route" in m.value))
    assert "EP rules say GenAI" in why and "refined says NonGenAI" in why
    assert "input_ids" in why  # the decisive evidence is named
    early = [i.value for i in at.info if "Early exit" in i.value]
    assert len(early) == 1  # only the EP rules stop early (on the input names)


def test_agreeing_sample_says_so(app):
    at = classifier_page(app, sample_path("cnn_classifier.onnx"))
    assert any("Both classifiers say **NonGenAI**" in s.value for s in at.success)
    assert not [w for w in at.warning if "refined" in w.value]
    assert any(m.value.startswith("Not on the verdict: both say **NonGenAI**") for m in at.markdown)


def test_every_signal_has_a_row_and_unreached_ones_are_marked(app):
    path = sample_path("text_encoder.onnx")
    at = classifier_page(app, path)
    ep, refined = signal_tables(at)
    names = list(ep["signal"])
    assert len(names) == len(set(names)) >= 8 and len(refined) >= 1
    # The EP returns on the input names before reading any node: node-based checks are unreached.
    node_checks = ep[ep["signal"].isin(["LayerNorm density", "Conv density", "BatchNorm density"])]
    assert len(node_checks) == 3
    assert set(node_checks["status"]) == {"↷ not reached"} and set(node_checks["score"]) == {"0"}
    kv = ep[ep["signal"] == "KV cache input names"].iloc[0]
    assert kv["status"] == "✓ fired" and kv["score"].startswith("+")
    assert "input_ids" in kv["evidence"]


def test_density_is_measured_against_its_threshold(app):
    path = sample_path("vit_classifier.onnx")
    proto = onnx.load(path, load_external_data=False)
    ln = sum(n.op_type in LN_OPS for n in proto.graph.node)
    density = np.float32(ln) / np.float32(len(proto.graph.node))
    at = classifier_page(app, path)
    ep, _ = signal_tables(at)
    row = ep[ep["signal"] == "LayerNorm density"].iloc[0]
    sign = ">" if density > np.float32(0.05) else "<"
    assert row["measured vs threshold"] == f"{float(density) * 100:.3g}% {sign} 5%"
    assert row["status"] == ("✓ fired" if sign == ">" else "– not fired")


def test_full_evidence_is_in_the_expander(app):
    at = classifier_page(app, sample_path("text_encoder.onnx"))
    codes = "\n".join(c.value for c in at.code)
    assert "input 'input_ids'" in codes and "input 'attention_mask'" in codes


def test_hostile_names_are_escaped_and_long_ones_shortened(app, hostile_layernorm_model, assert_markdown_escaped):
    at = classifier_page(app, hostile_layernorm_model)
    assert_markdown_escaped([*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error])
    ep, _ = signal_tables(at)
    evidence = ep[ep["signal"] == "LayerNorm density"].iloc[0]["evidence"]
    assert "<script>alert('x')</script>" in evidence  # shown as text by the dataframe
    assert max(len(cell) for cell in ep["evidence"]) < 1000  # the 10k-character name is cut
    codes = "\n".join(c.value for c in at.code)
    assert "x" * 10_000 in codes  # ... and available in full
    assert "注意力/层归一化 — ñandú 🚀" in codes
    assert "a\\nb\\tc" in codes  # control characters made visible, not laid out


def test_a_page_url_opened_first_still_runs_the_app_entry(app):
    """After a server start, a first request for /classifier makes Streamlit run the page file
    alone (pages/ directory mode); the page must still get the sidebar and a model."""
    at = app()
    at.switch_page("pages/classifier.py").run()
    assert not at.exception
    assert at.title[0].value == "Backend classifier"
    assert at.sidebar.segmented_control(key="intake_mode").value == "Sample"


@pytest.mark.parametrize("value, threshold, expected", [
    (0.0714, 0.05, "7.14% > 5%"),
    (0.02, 0.05, "2% < 5%"),
    (np.float32(0.3), np.float32(0.3), "30% = 30%"),
    (2, 1, "2 > 1"),
    (1, 1, "1 ≥ 1"),
    (0, 1, "0 < 1"),
    (112, 224, "112 < 224"),
    ("3 MatMul, 0 Softmax", "MatMul and Softmax both present", "3 MatMul, 0 Softmax (rule: MatMul and Softmax both present)"),
    (4, None, "4"),
])
def test_measured_formats_value_against_threshold(value, threshold, expected):
    value = float(value) if isinstance(value, np.floating) else value
    threshold = float(threshold) if isinstance(threshold, np.floating) else threshold
    assert measured(Signal("s", "genai", 1.0, True, value, threshold)) == expected


def test_measured_without_a_value():
    assert measured(Signal("s", "genai", 1.0, False, None, 224)) == "not measured"
    assert measured(Signal("s", "genai", 1.0, False, None, 224, reached=False)) == "—"


@pytest.mark.parametrize("name, label", [
    ("layernorm_density", "LayerNorm density"),
    ("kv_cache_input_names", "KV cache input names"),
    ("image_input_4d", "Image input 4-D"),
    ("matmul_nbits", "MatMul NBits"),
    ("token_ids_input", "Token IDs input"),
])
def test_signal_label(name, label):
    assert signal_label(name) == label


def test_refined_card_shows_the_margin_and_the_decisive_evidence(app):
    at = classifier_page(app, sample_path("text_encoder.onnx"))
    margin = next(m for m in at.metric if m.label == "Margin")
    # text encoder 10 and its pooled output 10 against token ids 2
    assert (margin.value, margin.delta) == ("18", "confident")
    assert len([m for m in at.metric if m.label == "Margin"]) == 1  # the EP rules have no margin
    why = unescape(next(m.value for m in at.markdown if "lightbulb" in m.value))
    assert "NonGenAI (confident, margin 18)" in why and "a text encoder" in why
    assert not [w for w in at.warning if "Uncertain" in w.value]


def test_a_thin_lead_is_flagged_uncertain(app, tmp_path):
    """Two convs over a 16-channel input and nothing else: NonGenAI by 4, below the bar."""
    from onnx import TensorProto, helper, numpy_helper

    weights = [numpy_helper.from_array(np.zeros(shape, np.float32), name)
               for name, shape in (("w1", (8, 16, 3, 3)), ("w2", (8, 8, 3, 3)))]
    nodes = [helper.make_node("Conv", ["feat", "w1"], ["a"], name="c1"),
             helper.make_node("Conv", ["a", "w2"], ["y"], name="c2")]
    graph = helper.make_graph(nodes, "two_conv", [helper.make_tensor_value_info("feat", TensorProto.FLOAT,
                                                                                  [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    path = tmp_path / "two_conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    at = classifier_page(app, path)
    warning = unescape(next(w.value for w in at.warning if "Uncertain" in w.value))
    assert "NonGenAI leads by only 4" in warning and "lead of 8" in warning
    assert next(m for m in at.metric if m.label == "Margin").delta == "uncertain"
