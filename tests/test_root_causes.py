"""Root causes of a shape-driven fallback, apart from the nodes they make fail (issue 16).

On the small Mask R-CNN-like graph of ``partition_models.dynamic_detector_model``: ``NonZero`` and a
``Range`` whose limit comes from the data are the origins; everything after them is refused only for
its unknown shape. Hand-made verdicts here (no session); the last test measures it on the HTP
simulator, through the analysis, the CLI's text and the JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import partition_models as pm
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.runtime.knobs import CLI, PAGE, words
from dashboard.intake.reader import load_model, load_structure
from dashboard.intake.shapes import infer_tensor_shapes
from dashboard.partition.report import BackendReport, NodeSupport, RootCause
from dashboard.partition.root_causes import INPUT, attach, find_root_causes, is_shape_failure, text_lines
from dashboard.runtime.client import PROJECT_ROOT

STATIC_PART = {"backbone_conv", "backbone_relu", "score_conv", "score_sigmoid", "scores_flat", "keep",
               "features_flat", "features_t", "count"}
NONZERO_DOWNSTREAM = {"picked_idx", "roi_gather", *(f"box_head{i}" for i in range(6)), "count_shape", "numbered"}
RANGE_DOWNSTREAM = {"roi_ids_float", "roi_ids_col", "numbered"}


def detector(tmp_path):
    path = pm.save(pm.dynamic_detector_model(), tmp_path, "detector")
    shapes, _ = infer_tensor_shapes(load_structure(path), {})
    return load_model(path), shapes


def measured_like(graph) -> BackendReport:
    """Verdicts as the HTP gives them: the static part claimed, the origins refused for their own
    reasons, every node after them "Cannot get shape"."""
    nodes = {}
    for node in graph.nodes:
        if node.name in STATIC_PART:
            nodes[node.name] = NodeSupport(node.op_type, True)
        else:
            reason = {"nonzero": "NonZero output shape must be static.",
                      "roi_ids": "Dynamic Range inputs are not supported by QNN EP."}.get(node.name, "Cannot get shape")
            nodes[node.name] = NodeSupport(node.op_type, False, reason, status="rejected")
    return BackendReport("htp", "measured", nodes=nodes)


def test_nonzero_and_range_are_the_root_causes_and_the_rest_is_counted_downstream(tmp_path):
    graph, shapes = detector(tmp_path)
    report = attach(measured_like(graph), graph, shapes)
    causes = {c.node: c for c in report.root_causes}
    assert set(causes) == {"nonzero", "roi_ids"}
    assert [c.node for c in report.root_causes] == ["nonzero", "roi_ids"]  # most downstream first
    assert causes["nonzero"].downstream == len(NONZERO_DOWNSTREAM) and causes["nonzero"].op_type == "NonZero"
    assert set(causes["nonzero"].examples) <= NONZERO_DOWNSTREAM and len(causes["nonzero"].examples) == 5
    assert causes["roi_ids"].downstream == len(RANGE_DOWNSTREAM)
    assert set(causes["roi_ids"].examples) == RANGE_DOWNSTREAM
    assert report.shape_failures == len(NONZERO_DOWNSTREAM | RANGE_DOWNSTREAM)  # "numbered" counted once
    assert causes["nonzero"].reason == "NonZero output shape must be static." and not causes["nonzero"].supported
    assert "static size" in causes["nonzero"].fix and "split the model" in causes["nonzero"].fix
    assert "keep" in causes["nonzero"].fix  # the tensor to split at
    assert "limit a constant" in causes["roi_ids"].fix
    lines = text_lines(report)
    assert "2 node(s) whose output size is known only at run time make 12 downstream" in lines[0]
    assert lines[1].strip().startswith("nonzero [NonZero]: 10 downstream")
    assert lines[2].strip().startswith("fix: ") and lines[4].strip().startswith("fix: ")
    assert RootCause.from_json(json.loads(json.dumps(report.root_causes[0].to_json()))) == report.root_causes[0]


def test_an_origin_the_backend_takes_is_still_named_and_no_shape_failure_names_nothing(tmp_path):
    graph, shapes = detector(tmp_path)
    report = measured_like(graph)
    report.nodes["nonzero"] = NodeSupport("NonZero", True)  # e.g. a backend with a NonZero of static maximum
    causes = {c.node: c for c in find_root_causes(graph, shapes, report.nodes)}
    assert causes["nonzero"].supported and causes["nonzero"].reason is None
    assert "taken by this backend" in "\n".join(text_lines(attach(report, graph, shapes)))
    for name, verdict in report.nodes.items():
        report.nodes[name] = NodeSupport(verdict.op_type, verdict.supported, "Operators of type `X` are not supported"
                                         if not verdict.supported else None)
    assert attach(report, graph, shapes).root_causes == [] and report.shape_failures == 0
    assert text_lines(report) == []


def test_a_graph_input_with_an_unknown_dimension_is_its_own_root_cause(tmp_path):
    path = pm.save(pm.dynamic_model(batch=None), tmp_path, "dyn")
    graph = load_model(path)
    shapes, _ = infer_tensor_shapes(load_structure(path), {})
    nodes = {n.name: NodeSupport(n.op_type, False, "Cannot get shape", status="rejected") for n in graph.nodes}
    causes = find_root_causes(graph, shapes, nodes)
    assert [(c.node, c.op_type, c.downstream) for c in causes] == [("x", INPUT, 3)]
    assert "⟨shapes⟩" in causes[0].fix and "--" not in causes[0].fix  # named by key, worded by each front end
    assert "--shape" in words(causes[0].fix, CLI) and "--" not in words(causes[0].fix, PAGE)


def test_the_page_names_the_root_causes_before_the_downstream_count(tmp_path):
    graph, shapes = detector(tmp_path)
    report = attach(measured_like(graph), graph, shapes)

    def script(data):
        from dashboard.partition.report import BackendReport
        from dashboard.views.blockers import render_blockers

        class Report:  # render_blockers reads only ``backends``
            backends = {"htp": BackendReport.from_json(data)}

        render_blockers(Report())

    at = AppTest.from_function(script, args=(report.to_json(),)).run()
    assert not at.exception
    warning = at.warning[0].value.replace("\\", "")  # markdown-escaped
    assert "HTP: 2 node(s) whose output size is known only at run time make 12 downstream node(s)" in warning
    table = at.dataframe[0].value
    assert list(table["node"]) == ["nonzero", "roi_ids"] and list(table["downstream"]) == [10, 3]
    fixes = [m.value.replace("\\", "") for m in at.markdown if "Fix to try" in m.value]
    assert len(fixes) == 1 and fixes[0].count("- **") == 2  # one line per origin
    assert "**nonzero** (NonZero): NonZero's output length" in fixes[0] and "split the model" in fixes[0]
    empty = AppTest.from_function(script, args=(BackendReport("htp", "measured").to_json(),)).run()
    assert not empty.exception and not empty.warning and not empty.dataframe


def test_the_htp_names_nonzero_and_range_as_root_causes_on_the_simulator(tmp_path):
    """The CLI measures it on the HTP simulator: the text lists the two origins apart from the 12
    nodes they make fail, and ``--json`` carries them in the backend's report."""
    path = pm.save(pm.dynamic_detector_model(), tmp_path, "detector")
    cmd = [sys.executable, "-m", "dashboard", "partition", str(path), "--fp16", "--soc", "sm8750", "--backends", "htp",
           "--out", str(tmp_path / "report.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600,
                          env={**os.environ, "QNN_LAB_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "root causes: 2 node(s) whose output size is known only at run time make 12 downstream node(s)" in text
    assert "nonzero [NonZero]: 10 downstream" in text and "roi_ids [Range]: 3 downstream" in text
    htp = json.loads((tmp_path / "report.json").read_text())["backends"]["htp"]
    assert [c["node"] for c in htp["root_causes"]] == ["nonzero", "roi_ids"] and htp["shape_failures"] == 12
    # The backend's suggestion points at the origins, not at settings that cannot fix a size born in the graph.
    assert "nonzero [NonZero]" in htp["suggestion"] and "symbolic dimension" not in htp["suggestion"]
    assert "Cannot get shape" in htp["nodes"]["box_head3"]["reason"]  # the EP's own words for the downstream
    claimed = {n for n, v in htp["nodes"].items() if v["supported"]}
    assert STATIC_PART - {"count"} <= claimed  # the backbone stays on the HTP


# -- issue 27, item 3: a removed node is never a root cause; an op-type refusal is no shape failure ------
def folded_states(tmp_path, op: str = "DynamicQuantizeLSTM"):
    """The int8 CRNN head (``partition_models.folded_state_into_refused_op_model``) and its shapes as
    the page infers them: the LSTM states' size is unknown before the run."""
    path = pm.save(pm.folded_state_into_refused_op_model(op), tmp_path, f"crnn_{op}")
    shapes, _ = infer_tensor_shapes(load_structure(path), {"image_width": 20})
    return path, load_model(path), shapes


def test_a_node_onnx_runtime_removed_is_never_a_root_cause(tmp_path):
    """The LSTM is refused for its shape, downstream of states made by a ConstantOfShape: while the
    ConstantOfShape runs it is the origin; once ONNX Runtime folded it (and the shape computation
    before it) into a constant, neither it nor anything before it is named."""
    _, graph, shapes = folded_states(tmp_path, "LSTM")
    assert not shapes["h0"].is_static  # the page cannot know the states' size
    verdicts = {n.name: NodeSupport(n.op_type, True) for n in graph.nodes}
    verdicts["LSTM_87"] = NodeSupport("LSTM", False, "Cannot get shape", status="rejected")
    assert [c.node for c in find_root_causes(graph, shapes, verdicts)] == ["ConstantOfShape_86"]  # kept: named
    for name in ("Shape_80", "Gather_82", "Abs_83", "Unsqueeze_84", "Concat_85", "ConstantOfShape_86"):
        verdicts[name] = NodeSupport(graph.node_by_name()[name].op_type, False, "folded", status="removed")
    report = attach(BackendReport("htp", "measured", nodes=verdicts), graph, shapes)
    assert report.root_causes == [] and report.shape_failures == 0


@pytest.mark.parametrize("reason, op_type, shape", [
    ("Operators of type `DynamicQuantizeLSTM` are not supported by QNN EP.DynamicQuantizeLSTM node "
     "`DynamicQuantizeLSTM_87` will not be assigned to QNN EP.", "DynamicQuantizeLSTM", False),
    ("Operators of type `DynamicQuantizeMatMul` are not supported by QNN EP.", "DynamicQuantizeMatMul", False),
    ("Operators of type `Erf` are not supported by QNN EP.Erf node `/dynamic_head/Erf` will not be assigned",
     "Erf", False),
    ("Cannot get shape", "Conv", True),
    ("Cannot get shape", "Shape", True),  # an op named like a shape word keeps the reason's words
    ("Dynamic shape is not supported yet, for input: x", "DynamicSlice", True),
    ("NonZero output shape must be static.", "NonZero", True),
])
def test_an_op_type_refusal_is_not_a_shape_failure_whatever_the_names_say(reason, op_type, shape):
    assert is_shape_failure(reason, op_type) is shape


def test_the_int8_crnn_on_the_simulator_blames_no_removed_node(tmp_path):
    """Measured on the HTP simulator: ONNX Runtime folds the states' computation (six nodes removed)
    and the EP refuses the quantized LSTM for its op type. At the shapes the page knows (the states'
    size unknown), the backend's own verdicts name no root cause and count no shape failure."""
    from dashboard.partition.analysis import analyze
    from dashboard.runtime.knobs import Settings

    path, graph, shapes = folded_states(tmp_path)
    report = analyze(str(path), Settings(backends=("htp",), dims={"image_width": 20}), use_cache=False)
    htp = report.backends["htp"]
    assert htp.status == "measured", htp.error
    assert htp.nodes["ConstantOfShape_86"].status == "removed"
    refused = htp.nodes["DynamicQuantizeLSTM_87"]
    assert not refused.supported and "DynamicQuantizeLSTM" in refused.reason
    assert attach(htp, graph, shapes).root_causes == [] and htp.shape_failures == 0
