"""What a page remembers, under AppTest of the real app: one set of settings per model shared by
every page, the address bar that reopens the model, its settings and the run shown (and refuses
what a hostile link asks for), the sidebar's source and upload across pages, and the Partitions
page's node picker that agrees with the details it shows."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import onnx
import partition_models as pm
import pytest
from onnx import TensorProto, helper, numpy_helper
from page_jobs import node_picker, settle

from dashboard.intake.digest import file_digest
from dashboard.intake.reader import load_model
from dashboard.intake.samples import SAMPLES, sample_path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300
SELECTED = "selected_model"


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QNN_LAB_UPLOAD_DIR", str(tmp_path / "uploads"))


def app(*, page: str | None = None, query: dict[str, str] | None = None, argv: tuple[str, ...] = ()):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    st.cache_data.clear()
    sys.argv = [str(ROOT / "app.py"), *argv]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    if page:
        at.switch_page(f"pages/{page}.py")
    for name, value in (query or {}).items():
        at.query_params[name] = value
    return at


def plain(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def image_model(directory: Path, dims=("batch", 3, "height", "width"), name: str = "img") -> Path:
    """Conv -> Relu on an image input whose dimensions are ``dims`` (names or sizes)."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu0")]
    w = numpy_helper.from_array(rng.random((4, 3, 3, 3), dtype=np.float32), "w")
    graph = helper.make_graph(nodes, "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    path = directory / f"{name}.onnx"
    onnx.save(model, path)
    return path


# -- item 11: one set of settings per model, shared by every page ----------------------------------------
def test_dimensions_applied_on_partitions_are_the_timelines_and_compares(tmp_path):
    path = image_model(tmp_path)
    digest = file_digest(path)
    at = app(page="partitions", argv=("--model", str(path)))
    settle(at)
    assert not at.exception
    assert at.number_input(key=f"pt_dim_{digest}_height").value == 224
    at.number_input(key=f"pt_dim_{digest}_height").set_value(320)
    at.toggle(key=f"pt_fp16_{digest}").set_value(False)
    at.button(key="pt_apply").click()
    settle(at)
    report = list(at.session_state["partition_reports"].values())[-1]
    assert not at.exception
    at.switch_page("pages/timeline.py").run()
    assert not at.exception
    assert at.number_input(key=f"tl_dim_{digest}_height").value == 320  # not back to 224
    assert at.number_input(key=f"tl_dim_{digest}_width").value == 224
    assert at.toggle(key=f"tl_fp16_{digest}").value is False
    assert at.query_params["dim.height"] == "320" and at.query_params["fp16"] == "off"
    # and back on the Partitions page the analysis shown is the one made with 320: nothing reruns
    at.switch_page("pages/partitions.py").run()
    assert at.number_input(key=f"pt_dim_{digest}_height").value == 320
    assert at.session_state["partition_job"].done and report.options.dims["height"] == 320
    # Compare's side A starts from them (B is the other precision)
    at.switch_page("pages/compare.py").run()
    assert not at.exception
    assert at.toggle(key="cmp_fp16_A").value is False


def test_settings_shared_by_the_timeline_page_follow_the_model(tmp_path):
    """Each model has its own: changing the model shows that model's settings, and coming back shows
    the first one's again."""
    first, second = image_model(tmp_path, name="first"), image_model(tmp_path, name="second",
                                                                    dims=("batch", 3, "height", "height"))
    at = app(page="timeline", argv=("--model", str(first))).run()
    d1 = file_digest(first)
    at.number_input(key=f"tl_dim_{d1}_width").set_value(96).run()
    at.switch_page("pages/devices.py").run()
    at.switch_page("pages/timeline.py").run()
    assert at.number_input(key=f"tl_dim_{d1}_width").value == 96
    # another file with other contents has its own settings
    at.sidebar.segmented_control(key="intake_mode").set_value("Path").run()
    at.sidebar.text_input(key="intake_path").input(str(second))
    next(b for b in at.sidebar.button if b.label == "Open").click().run()
    d2 = file_digest(second)
    assert d2 != d1 and at.number_input(key=f"tl_dim_{d2}_height").value == 224


# -- item 11: the address bar -------------------------------------------------------------------------------
def test_a_link_reopens_the_model_and_its_settings(tmp_path):
    path = image_model(tmp_path)
    digest = file_digest(path)
    at = app(page="timeline", query={"model": str(path)}).run()
    assert not at.exception and not at.sidebar.error
    assert at.session_state[SELECTED].path == str(path) and at.session_state[SELECTED].source == "path"
    assert at.sidebar.segmented_control(key="intake_mode").value == "Path"
    at.number_input(key=f"tl_dim_{digest}_height").set_value(48).run()
    at.selectbox(key=f"tl_level_{digest}").set_value("basic").run()
    at.text_area(key=f"tl_opts_{digest}").input("htp_graph_finalization_optimization_mode=3").run()
    link = dict(at.query_params)
    assert link["model"] == str(path) and link["dim.height"] == "48" and link["level"] == "basic"
    assert link["opt.htp_graph_finalization_optimization_mode"] == "3"
    # the same link in a new session (another tab, a colleague)
    again = app(page="timeline", query=link).run()
    assert not again.exception and not again.sidebar.error
    assert again.session_state[SELECTED].digest == digest
    assert again.number_input(key=f"tl_dim_{digest}_height").value == 48
    assert again.selectbox(key=f"tl_level_{digest}").value == "basic"
    assert again.text_area(key=f"tl_opts_{digest}").value == "htp_graph_finalization_optimization_mode=3"
    # a sample is named by its file, not by where the server keeps it
    sample = SAMPLES[1]
    at = app(page="timeline", query={"model": f"sample:{sample.file_name}", "fp16": "off"}).run()
    assert at.session_state[SELECTED].path == str(sample_path(sample.file_name).resolve())
    assert at.query_params["model"] == f"sample:{sample.file_name}"


def test_a_link_names_the_run_shown_and_says_when_the_session_does_not_have_it():
    at = app(page="timeline", query={"model": f"sample:{SAMPLES[0].file_name}", "run": "3"}).run()
    assert not at.exception
    assert any("timeline run #3, which is not in this browser session" in i.value for i in at.sidebar.info)


HOSTILE = {
    "opt.backend_path": "/tmp/qbl-link-evil.so",  # loads a library: a page may not
    "opt.profiling_file_path": "/tmp/qbl-link-written.csv",  # writes a file
    "dim.batch": "-1",
    "shape.x": "1,?,3",
    "timeout": "nan",
    "level": "<script>alert(1)</script>",
    "run": "../../etc",
    "fp16": "maybe",
}


def test_a_hostile_link_is_named_and_ignored_and_nothing_is_loaded_or_written():
    at = app(page="timeline", query={"model": f"sample:{SAMPLES[0].file_name}", **HOSTILE}).run()
    assert not at.exception
    errors = [plain(e.value) for e in at.sidebar.error]
    for name in HOSTILE:
        assert any(f"Link: {name}=" in e for e in errors), (name, errors)
    assert at.session_state[SELECTED].name == SAMPLES[0].title  # the model the link named opened
    values = at.session_state["settings_by_model"][at.session_state[SELECTED].digest] \
        if "settings_by_model" in at.session_state else {}
    assert not values.get("provider_options") and values.get("timeout") is None
    assert not Path("/tmp/qbl-link-evil.so").exists() and not Path("/tmp/qbl-link-written.csv").exists()
    assert "opt.backend_path" not in at.query_params  # the address bar says what is in use


@pytest.mark.parametrize("model, says", [
    ("sample:../../etc/passwd", "no bundled sample of that name"),
    ("/nonexistent/model.onnx", "/nonexistent/model.onnx"),
    ("upload:resnet.onnx", "a link cannot reopen an upload"),
])
def test_a_link_to_a_model_that_cannot_be_opened_says_why_and_opens_the_default(model, says):
    at = app(page="timeline", query={"model": model, "fp16": "off"}).run()
    assert not at.exception
    assert any(says in plain(e.value) for e in at.sidebar.error), [e.value for e in at.sidebar.error]
    assert at.session_state[SELECTED].name == SAMPLES[0].title


def test_too_many_link_parameters_are_refused_as_a_whole():
    query = {f"dim.d{i}": "2" for i in range(80)}
    at = app(page="timeline", query={"model": f"sample:{SAMPLES[0].file_name}", **query}).run()
    assert not at.exception
    assert any("more than 64" in plain(e.value) for e in at.sidebar.error)


# -- item 11: the sidebar's source and the upload across pages ------------------------------------------
def test_the_sidebar_source_and_the_upload_chip_survive_page_changes(tmp_path):
    path = image_model(tmp_path)
    at = app(page="overview").run()
    at.sidebar.segmented_control(key="intake_mode").set_value("Path").run()
    at.sidebar.text_input(key="intake_path").input(str(path))
    next(b for b in at.sidebar.button if b.label == "Open").click().run()
    at.switch_page("pages/devices.py").run()
    assert at.sidebar.segmented_control(key="intake_mode").value == "Path"
    assert at.sidebar.text_input(key="intake_path").value == str(path)
    # an upload: the uploader forgets its file on another page; the chip says which model is shown
    at.sidebar.segmented_control(key="intake_mode").set_value("Upload").run()
    at.sidebar.file_uploader(key="intake_upload").upload("my_recogniser.onnx", path.read_bytes()).run()
    assert at.session_state[SELECTED].name == "my_recogniser.onnx"
    at.switch_page("pages/overview.py").run()
    assert at.sidebar.segmented_control(key="intake_mode").value == "Upload"
    assert any("Uploaded: **my\\_recogniser\\.onnx**" in m.value for m in at.sidebar.markdown)
    assert at.query_params["model"] == "upload:my_recogniser.onnx"  # which a link cannot reopen (see below)


# -- smaller: an upload's downloads and report say its own name ----------------------------------------
def test_an_uploads_downloads_and_report_use_its_own_file_name(tmp_path, monkeypatch):
    from dashboard.views import report, state

    path = image_model(tmp_path)
    at = app(page="classifier").run()
    at.sidebar.segmented_control(key="intake_mode").set_value("Upload").run()
    at.sidebar.file_uploader(key="intake_upload").upload("pp_ocr_rec.onnx", path.read_bytes()).run()
    assert not at.exception
    selected = at.session_state[SELECTED]
    assert Path(selected.path).parent.parent == tmp_path / "uploads"  # its copy, named by its digest
    # the sidebar's report as the page makes it, with this session's selection
    monkeypatch.setattr(state, "current_model", lambda: selected)
    file_name, build = report.report_file(selected, load_model(selected.path), list, list)
    assert file_name.startswith("pp_ocr_rec-report-")
    html = build()
    assert "pp_ocr_rec.onnx (uploaded)" in html and selected.path not in html
    from dashboard.views.safe import download_name

    assert download_name(selected.path, "classification", "json").startswith("pp_ocr_rec-classification-")


# -- item 10's remainder: placeholder dimension names ---------------------------------------------------
def test_dimensions_named_question_mark_or_1_are_whole_shape_fields_not_named_fields(tmp_path):
    path = image_model(tmp_path, dims=("1", 3, "?", "width"), name="paddle")
    spec = load_model(str(path)).inputs[0]
    assert spec.shape == (None, 3, None, "width")
    at = app(page="timeline", argv=("--model", str(path))).run()
    assert not at.exception
    digest = file_digest(path)
    labels = [n.label for n in at.number_input if n.key and n.key.startswith(f"tl_dim_{digest}")]
    assert labels == ["width"]  # no field named ? or 1
    shape = at.text_input(key=f"tl_shape_{digest}_x")
    assert shape.value == "?, 3, ?, 224"
    shape.input("1, 3, 48, 224").run()  # width is its own field (224): the whole shape agrees with it
    assert not at.exception and not at.error
    assert at.session_state["settings_by_model"][digest]["shapes"] == {"x": (1, 3, 48, 224)}


# -- item 5: the node picker and the details agree ------------------------------------------------------
LONG = "/model/encoder/layers.11/self_attention/multi_head/projection/output_dense/activation_block/"


def long_names_model(directory: Path) -> Path:
    """Three nodes whose names share an 88-character scope: cut to a table's 80 characters they are
    one label."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name=LONG + "Relu_first"),
             helper.make_node("Sigmoid", ["a"], ["b"], name=LONG + "Sigmoid_second"),
             helper.make_node("Erf", ["b"], ["y"], name=LONG + "Erf_third")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return pm.save(model, directory, "long_names")


def details_node(at) -> str:
    """The node the details panel shows (its heading: **name** · op ...)."""
    heading = next(m.value for m in at.markdown if " · op **" in m.value)
    return plain(heading.split("** · op", 1)[0].lstrip("*"))


def test_the_node_picker_and_the_details_agree_before_and_after_a_new_analysis(tmp_path):
    path = long_names_model(tmp_path)
    digest = file_digest(path)
    at = app(page="partitions", argv=("--model", str(path)))
    settle(at)
    picker = node_picker(at)
    # the browser shows a choice by its label and sends the label back: each node needs its own
    assert len(set(picker.proto.options)) == 3
    picker.set_value(LONG + "Sigmoid_second").run()
    assert details_node(at) == LONG + "Sigmoid_second" == node_picker(at).value
    first_key = node_picker(at).key
    # a new analysis (other options): a new picker, which starts on the same node, and agrees
    at.selectbox(key=f"pt_level_{digest}").set_value("disabled")
    at.button(key="pt_apply").click()
    settle(at)
    picker = node_picker(at)
    assert picker.key != first_key and picker.key.startswith("pt_node_pick_")
    assert details_node(at) == picker.value == LONG + "Sigmoid_second"
    picker.set_value(LONG + "Erf_third").run()
    assert details_node(at) == node_picker(at).value == LONG + "Erf_third"


# -- smaller: Streamlit's file watcher, doctor marks --------------------------------------------------------
def test_streamlit_watches_no_files():
    """On a checkout where tests and caches write files, the watcher's inotify queue overflowed and
    flooded the log; the dashboard is restarted for code changes instead."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"].get("runOnSave", False) is False
    from streamlit import config as st_config

    option = st_config._config_options_template["server.fileWatcherType"]  # the values Streamlit takes
    assert "none" in (option.description or "")


def test_doctor_marks_are_plain_words_on_the_devices_page():
    from dashboard.runtime.protocol import DoctorCheck, DoctorReport

    checks = [DoctorCheck(name=status, title=f"check {status}", status=status, detail="found", fix="", backends=["htp"])
              for status in ("pass", "fail", "warn", "skip", "info")]
    at = app(page="devices")
    at.session_state["device_doctor"] = {"local": DoctorReport("simulator", "Linux x86_64", "HTP: simulator", checks)}
    at.run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "check" in d.value.columns)
    assert list(table.iloc[:, 0]) == ["PASS", "FAIL", "WARN", "SKIP", "INFO"]
    assert all(cell.isascii() for cell in table.iloc[:, 0])
