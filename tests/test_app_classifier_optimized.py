"""The Classifier page's optimized-graph view: ONNX Runtime's BatchNorm folding, run in a worker."""

from __future__ import annotations

from tests.test_ort_view import conv_bn_model


def test_button_classifies_the_graph_onnx_runtime_hands_the_ep(app, tmp_path):
    path = conv_bn_model(tmp_path / "convbn.onnx")
    at = app("--model", str(path)).run()
    at.switch_page("pages/classifier.py").run()
    assert not at.exception, at.exception
    assert not [m for m in at.metric if m.label == "EP rules on the optimized graph"]  # only on demand
    at.toggle(key="classify_optimized").set_value(True).run()
    assert not at.exception, at.exception
    metric = next(m for m in at.metric if m.label == "EP rules on the optimized graph")
    assert metric.value == "NonGenAI"
    assert "7 nodes (file: 10)" in metric.delta and "changes from Unknown" in metric.delta
    assert len([d for d in at.dataframe if "measured vs threshold" in d.value.columns]) == 3
