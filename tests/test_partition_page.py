"""The Partitions page under streamlit.testing.v1.AppTest, with the real worker and HTP simulator."""

from __future__ import annotations

import json

import partition_models as pm
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.intake.reader import file_digest
from dashboard.intake.samples import sample_path

TIMEOUT = 300

SCRIPT = """
import sys
from dashboard.views import state
if state.current_model() is None:
    state.select({path!r}, "test model", "path")
from dashboard.views.partitions import render
render()
"""


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def page(path) -> AppTest:
    return AppTest.from_string(SCRIPT.format(path=str(path)), default_timeout=TIMEOUT)


def test_which_nodes_keep_the_model_off_the_npu_and_why(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = page(path).run()
    assert not at.exception and not at.error
    assert any(s.value == "2 node(s) keep the model off the NPU" for s in at.subheader)
    off_npu = at.dataframe[0].value
    assert list(off_npu["node"]) == ["erf0", "mod0"]
    assert "Operators of type `Erf` are not supported" in off_npu["HTP reason"][0]
    assert "fmod == 0" in off_npu["HTP reason"][1]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["both (GPU ∩ HTP) (predicted)"] == "4"
    assert metrics["neither (CPU) (predicted)"] == "2"
    assert any("predicted-badge" in m.value or ":orange-badge[predicted]" in m.value for m in at.markdown)
    assert "Relu#1" in at.selectbox(key="pt_node_pick").options  # the unnamed node under its stable name


def test_changing_a_knob_reruns_and_shows_the_difference():
    """Measuring the file's graph as it is (optimizations disabled) brings back the shape
    subgraph ORT folds away by default; the HTP refuses some of those nodes."""
    encoder = sample_path("text_encoder.onnx")
    digest = file_digest(encoder)
    at = page(encoder).run()
    assert not at.exception
    assert at.number_input(key=f"pt_dim_{digest}_batch_size").value == 1  # pre-filled defaults
    assert at.number_input(key=f"pt_dim_{digest}_sequence_length").value == 128
    removed_before = int({m.label: m.value for m in at.metric}["removed by ONNX Runtime"])
    assert removed_before > 0
    at.selectbox(key=f"pt_level_{digest}").set_value("disabled").run()
    assert not at.exception
    compared = [m.value for m in at.markdown if m.value.startswith("**Compared with the previous run**")]
    assert compared and "all → disabled" in compared[0]
    diff = {m.label: m for m in at.metric}["removed by ORT"]  # the comparison's metric (labels by class)
    assert int(diff.value) < removed_before and int(diff.delta) == int(diff.value) - removed_before
    moved = at.dataframe[0].value  # the nodes whose class changed
    rows = {row["node"]: (row["before"], row["after"]) for _, row in moved.iterrows()}
    assert rows["/embeddings/Range"] == ("removed by ORT", "neither (CPU)")  # HTP: dynamic Range inputs


def test_failed_backend_shows_the_runtime_message_and_a_suggestion():
    vit = sample_path("vit_classifier.onnx")
    at = page(vit).run()
    digest = file_digest(vit)
    at.toggle(key=f"pt_fp16_{digest}").set_value(False)
    at.multiselect(key=f"pt_backends_{digest}").set_value(["htp"]).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("QNN\\_COMMON\\_ERROR\\_MEM\\_ALLOC" in e for e in errors), errors
    assert any("fp16" in i.value for i in at.info)
    assert any("classes need both backends" in w.value for w in at.warning)


def test_node_details_and_device_report_upload(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    digest = file_digest(path)
    at = page(path).run()
    assert at.selectbox(key="pt_node_pick").value == "erf0"  # first node the HTP refuses
    details = next(df.value for df in at.dataframe if "verdict" in df.value.columns)
    assert list(details["backend"]) == ["HTP", "GPU"]
    assert list(details["verdict"]) == ["refused", "refused"]
    assert list(details["figure"]) == ["measured", "predicted"]
    assert "Operators of type `Erf`" in details["reason"][0]
    # a device report that measured the GPU claiming the Erf
    from dashboard.partition.analysis import PartitionOptions, analyze

    data = analyze(path, PartitionOptions(fp16=True)).to_json()
    data["backends"]["gpu"]["status"] = "measured"
    data["backends"]["gpu"]["nodes"]["erf0"].update(supported=True, reason=None)
    at.file_uploader(key=f"pt_device_{digest}").upload("device.json", json.dumps(data).encode()).run()
    assert not at.exception
    assert any(":green-badge[measured]" in m.value and "GPU" in m.value for m in at.markdown)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GPU only"] == "1"
