"""The Partitions page under streamlit.testing.v1.AppTest, with the real worker and HTP simulator:
every control (the options form and Apply, the device picker, the input-shape fields, Cancel,
the device-report upload, the node panel) and the page's words."""

from __future__ import annotations

import json
import re

import partition_models as pm
import pytest
from deadlines import DEADLINE, wait_until
from page_jobs import node_picker, settle
from streamlit.proto.Metric_pb2 import Metric
from streamlit.testing.v1 import AppTest

from dashboard.intake.digest import file_digest
from dashboard.intake.samples import sample_path
from dashboard.runtime.devices import Device

TIMEOUT = 300
JOB = "partition_job"

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


def apply(at: AppTest) -> AppTest:
    at.button(key="pt_apply").click()
    return settle(at)


def texts(at: AppTest) -> list[str]:
    """Everything the page says in words (markdown, captions, alerts, subheaders)."""
    return [e.value for kind in (at.markdown, at.caption, at.info, at.error, at.warning, at.success, at.subheader)
            for e in kind]


def test_which_nodes_keep_the_model_off_the_npu_and_why(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    at = settle(page(path))
    assert not at.error
    assert any(s.value == "2 node(s) keep the model off the NPU" for s in at.subheader)
    off_npu = next(d.value for d in at.dataframe if "HTP reason" in d.value.columns)  # after the groups
    assert list(off_npu["node"]) == ["erf0", "mod0"]
    columns = list(off_npu.columns)
    assert columns.index("GPU (predicted)") < columns.index("HTP reason")  # the GPU verdict is not scrolled off
    assert list(off_npu["GPU (predicted)"]) == ["refuses", "refuses"]
    assert "Operators of type `Erf` are not supported" in off_npu["HTP reason"][0]
    assert "fmod == 0" in off_npu["HTP reason"][1]
    metrics = {m.label: m for m in at.metric}
    assert metrics["both (GPU ∩ HTP)"].value == "4" and metrics["neither (CPU)"].value == "2"
    assert all("predicted" not in label and len(label) <= 20 for label in metrics)  # no truncated titles
    shares = [m for m in at.metric if m.proto.show_border]
    assert len(shares) == 5 and all(m.proto.direction == Metric.NONE for m in shares)  # no arrow: not a change
    assert any("Classes use the **predicted** GPU verdicts" in t for t in texts(at))
    assert any(":orange-badge[predicted]" in m.value for m in at.markdown)
    assert any("measured" in m.value and "HTP simulator" in m.value for m in at.markdown)  # the hardware
    assert "Relu#1" in node_picker(at).options  # the unnamed node under its stable name


def test_options_apply_only_on_apply_and_the_difference_is_shown():
    """Measuring the file's graph as it is (optimizations disabled) brings back the shape
    subgraph ORT folds away by default; the HTP refuses some of those nodes."""
    encoder = sample_path("text_encoder.onnx")
    digest = file_digest(encoder)
    at = settle(page(encoder))
    assert at.number_input(key=f"pt_dim_{digest}_batch_size").value == 1  # pre-filled defaults
    assert at.number_input(key=f"pt_dim_{digest}_sequence_length").value == 128
    removed_before = int(next(m.value for m in at.metric if m.label == "removed by ORT"))
    assert removed_before > 0
    first = at.session_state[JOB]
    at.selectbox(key=f"pt_level_{digest}").set_value("disabled")
    settle(at)  # a change without Apply starts nothing
    assert at.session_state[JOB] is first
    assert not [m for m in at.markdown if m.value.startswith("**Compared with the previous run**")]
    at.selectbox(key=f"pt_level_{digest}").set_value("disabled")  # AppTest drops unsubmitted form values
    apply(at)
    assert at.session_state[JOB] is not first
    compared = [m.value for m in at.markdown if m.value.startswith("**Compared with the previous run**")]
    assert compared and "all → disabled" in compared[0]
    diff = next(m for m in at.metric if m.label == "removed by ORT")  # the comparison's metric comes first
    assert int(diff.value) < removed_before and int(diff.delta) == int(diff.value) - removed_before
    moved = at.dataframe[0].value  # the nodes whose class changed
    rows = {row["node"]: (row["before"], row["after"]) for _, row in moved.iterrows()}
    assert rows["/embeddings/Range"] == ("removed by ORT", "neither (CPU)")  # HTP: dynamic Range inputs


def test_node_panel_starts_on_a_node_that_runs():
    encoder = sample_path("text_encoder.onnx")
    at = settle(page(encoder))
    report = next(iter(at.session_state["partition_reports"].values()))
    first = node_picker(at).value
    htp = report.backends["htp"].nodes
    unclaimed = [n for n in report.node_order if not htp[n].supported]
    assert unclaimed[0] in report.classes.removed  # the first node the HTP does not run is one ORT folded away
    assert first not in report.classes.removed and htp[first].status != "removed"
    assert first == next((n for n in unclaimed if n not in report.classes.removed), first)


def test_a_failed_backend_is_one_message_with_the_field_to_change():
    vit = sample_path("vit_classifier.onnx")
    digest = file_digest(vit)
    at = settle(page(vit))
    at.toggle(key=f"pt_fp16_{digest}").set_value(False)
    at.multiselect(key=f"pt_backends_{digest}").set_value(["htp"])
    apply(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "turn on fp16 precision" in errors[0]
    assert "option ‘HTP fp16 precision’" in errors[0]
    assert any(w.value.startswith("no per\\-node verdicts from HTP \\(failed\\)") for w in at.warning)
    codes = [c.value for c in at.code]
    assert any("QNN_COMMON_ERROR_MEM_ALLOC" in c for c in codes)  # the runtime's message, one click away
    assert not [t for t in texts(at) if re.search(r"(?<![\w-])--[a-z]", t.replace("\\", ""))]  # no CLI flags


def test_an_soc_whose_layout_transform_fails_says_so_once():
    cnn = sample_path("cnn_classifier.onnx")
    digest = file_digest(cnn)
    at = settle(page(cnn))
    at.toggle(key=f"pt_fp16_{digest}").set_value(True)
    at.selectbox(key=f"pt_soc_{digest}").set_value("sc8280x")
    apply(at)
    errors = [e.value.replace("\\", "") for e in at.error]
    assert len(errors) == 1 and "choose another SoC (option ‘Snapdragon SoC’" in errors[0]
    assert not [t for t in texts(at) if "NHWC" in t and "layout for it" not in t.replace("\\", "")]


def test_compared_with_the_previous_run_ignores_a_failed_run(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    digest = file_digest(path)
    at = settle(page(path))
    at.selectbox(key=f"pt_soc_{digest}").set_value("sc8280x")  # the Conv's layout transform fails here
    apply(at)
    assert at.error and any("HTP (failed)" in w.value.replace("\\", "") for w in at.warning)
    assert not [m for m in at.markdown if m.value.startswith("**Compared with the previous run**")]
    at.selectbox(key=f"pt_soc_{digest}").set_value("sm8650")
    apply(at)
    compared = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Compared with the previous")]
    assert compared and "Snapdragon SoC: sc8380xp → sm8650" in compared[0]  # against the last run that had classes
    both = next(m for m in at.metric if m.label == "both (GPU ∩ HTP)")
    assert both.value == "4" and both.delta in (None, "0", "+0")  # not "every class dropped to 0" and back


def test_an_input_with_unnamed_dimensions_gets_a_shape_field(tmp_path):
    path = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    digest = file_digest(path)
    at = settle(page(path))
    field = at.text_input(key=f"pt_shape_{digest}_x")
    assert field.value == "?, 16"  # what is known, and ? where the user decides
    assert "All input shapes are static" not in " ".join(texts(at))
    assert any("0 of 3" in m.value.replace("*", "") for m in at.markdown)  # the HTP claims nothing
    hints = [i.value.replace("\\", "") for i in at.info]
    assert any("give the whole shape of each input with unnamed dimensions (option ‘Input shapes’: x)" in h
               for h in hints), hints
    field.input("2, sixteen")
    apply(at)
    assert any("input 'x': every dimension must be a positive integer" in e.value.replace("\\", "") for e in at.error)
    at.text_input(key=f"pt_shape_{digest}_x").input("2, 16")
    apply(at)
    assert not at.error
    assert any("3 of 3" in m.value.replace("*", "") for m in at.markdown)
    assert any("analysed with shape [2, 16]" in c.value.replace("\\", "") for c in at.caption)


def test_the_device_picker_starts_on_the_current_device_and_cancel_stops_the_worker(tmp_path):
    """A device whose worker reports one step and then hangs: the page shows the step and the
    time elapsed, Cancel stops the worker, and the page says so (and starts nothing by itself)."""
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    hanging = pm.worker_device(tmp_path, HANGING_WORKER)
    at = page(path)
    at.session_state["devices"] = {"local": Device.parse("local"), hanging.url: hanging}
    at.session_state["device_current"] = hanging.url  # as picked on the Devices page
    at.run()
    assert at.selectbox(key="pt_device").value == hanging.url
    job = at.session_state[JOB]
    wait_until(lambda: job.stage == "compiling", "the hanging worker reporting its compile")
    at.run()
    progress = at.get("progress")
    assert progress and "compiling" in progress[0].proto.text and "elapsed" in progress[0].proto.text
    at.button(key=f"{JOB}_cancel").click().run()
    job.wait(DEADLINE)
    assert job.done and job.cancelled
    settle(at)
    assert any("Cancelled after" in i.value for i in at.info)
    assert at.session_state[JOB] is job  # not restarted until Apply
    at.selectbox(key="pt_device").set_value("local")
    apply(at)  # back on this machine
    assert at.session_state["device_current"] == "local"
    assert any(s.value == "2 node(s) keep the model off the NPU" for s in at.subheader)


HANGING_WORKER = ("import time, dashboard.runtime.protocol as m, dashboard.partition.protocol as p, "
                  "dashboard.runtime.worker as w\n"
                  "def hang(args, emit):\n"
                  "    emit(p.Stage('compiling', 0.5))\n"
                  "    time.sleep(600)\n"
                  "m.COMMANDS['partition'] = m.COMMANDS['partition']._replace(handler='__main__:hang')\nw.serve()")


def test_node_details_and_device_report_upload(tmp_path):
    path = pm.save(pm.rejects_model(), tmp_path, "rejects")
    digest = file_digest(path)
    at = settle(page(path))
    assert node_picker(at).value == "erf0"  # first node the HTP refuses
    details = next(df.value for df in at.dataframe if "verdict" in df.value.columns)
    assert list(details["backend"]) == ["HTP", "GPU"]
    assert list(details["verdict"]) == ["refused", "refused"]
    assert details["figure"][0].startswith("measured on the ") and details["figure"][1] == "predicted"
    assert "Operators of type `Erf`" in details["reason"][0]
    # a device report that measured the GPU claiming the Erf
    from dashboard.partition.analysis import PartitionOptions, analyze

    data = analyze(path, PartitionOptions(fp16=True)).to_json()
    data["backends"]["gpu"]["status"] = "measured"
    data["backends"]["gpu"]["nodes"]["erf0"].update(supported=True, reason=None)
    at.file_uploader(key=f"pt_device_{digest}").upload("device.json", json.dumps(data).encode())
    settle(at)
    assert any(":green-badge[measured]" in m.value and "GPU" in m.value for m in at.markdown)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GPU only"] == "1"
