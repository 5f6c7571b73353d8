"""Shape presets and a warning's values to set are buttons (issue 17, item 9), under AppTest of the
real app: a click fills the model's dimension fields through its shared settings, runs nothing,
and once the page's settings are applied the warning is gone, on the Partitions, Timeline and
Compare pages. And Compare says truly what each side is analysed at besides its three knobs: the
model's settings shared with the other pages (item 2 of the review)."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from page_jobs import settle
from streamlit.testing.v1 import AppTest

from dashboard.intake.digest import file_digest
from dashboard.views.state import SelectedModel

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SHARED = "settings_by_model"


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def recogniser(directory: Path) -> Path:
    """A text recogniser (Conv, ReLU) with named height and width: its family's preset is 48×320."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.1] * 108)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu0")]
    graph = helper.make_graph(nodes, "text_rec", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              [1, 3, "height", "width"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    path = directory / "text_rec.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def page(name: str, path: Path) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).switch_page(f"pages/{name}.py")
    at.session_state["selected_model"] = SelectedModel(str(path), path.name, file_digest(path), "path")
    at.session_state["intake_started"] = True
    return at


def plain(elements) -> list[str]:
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def degenerate(at: AppTest) -> list[str]:
    return [w for w in plain(at.warning) if "degenerate" in w]


def button(at: AppTest, label: str):
    found = [b for b in at.button if b.label == label]
    assert found, [b.label for b in at.button]
    return found[0]


def test_a_preset_on_the_partitions_page_fills_the_form_and_applies_with_it(tmp_path):
    path = recogniser(tmp_path)
    digest = file_digest(path)
    at = settle(page("partitions", path))
    assert not at.exception and not degenerate(at)  # the defaults (48×320) are not degenerate
    at.number_input(key=f"pt_dim_{digest}_height").set_value(1)
    at.button(key="pt_apply").click()
    settle(at)
    [warning] = degenerate(at)
    assert "height is 1" in warning
    analysed = at.session_state["partition_job"]
    button(at, "Use OCR text line 32×320 (CRNN, PP-OCR v2)").click()
    settle(at)
    assert not at.exception
    assert at.number_input(key=f"pt_dim_{digest}_height").value == 32  # the field is filled …
    assert at.number_input(key=f"pt_dim_{digest}_width").value == 320
    assert at.session_state["partition_job"] is analysed  # … and nothing ran
    assert at.session_state[SHARED][digest]["dims"]["height"] == 1
    assert degenerate(at) and any("Filled in the settings" in i for i in plain(at.info))
    at.button(key="pt_apply").click()
    settle(at)
    assert not at.exception and not degenerate(at)
    job = at.session_state["partition_job"]
    assert job is not analysed and job.result.options.dims == {"height": 32, "width": 320}
    assert at.session_state[SHARED][digest]["dims"] == {"height": 32, "width": 320}
    assert at.query_params["dim.height"] == "32"  # the link follows
    assert not any("Filled in the settings" in i for i in plain(at.info))


def test_a_warnings_values_to_set_on_the_timeline_page_fill_the_field():
    """The Timeline page has no Apply: the field takes the value, the warning goes, nothing runs
    until Run timeline."""
    path = DATA / "exports/hf_whisper_decoder_with_past.onnx"
    digest = file_digest(path)
    at = page("timeline", path).run()
    at.number_input(key=f"tl_dim_{digest}_encoder_sequence_length").set_value(1).run()
    assert degenerate(at)
    button(at, "Set encoder_sequence_length = 1500").click().run()
    assert not at.exception
    assert at.number_input(key=f"tl_dim_{digest}_encoder_sequence_length").value == 1500
    assert not degenerate(at) and "timeline_job" not in at.session_state
    assert at.session_state[SHARED][digest]["dims"]["encoder_sequence_length"] == 1500


def test_a_preset_on_the_compare_page_is_the_models_once_compare_is_pressed(tmp_path):
    path = recogniser(tmp_path)
    digest = file_digest(path)
    at = page("compare", path)
    at.session_state[SHARED] = {digest: {"dims": {"height": 1, "width": 320}}}  # as Partitions stored them
    settle(at, "compare_job")
    assert not at.exception
    assert [w[:2] for w in degenerate(at)] == ["A:", "B:"]  # one model under two option sets: both sides
    [first, *_] = [b for b in at.button if b.label == "Use OCR text line 48×320 (PP-OCR v3/v4)"]
    first.click()
    settle(at, "compare_job")
    assert "compare_job" not in at.session_state  # nothing ran
    assert len(degenerate(at)) == 2 and any("Filled in the settings" in i for i in plain(at.info))
    at.button(key="cmp_apply").click()
    settle(at, "compare_job")
    assert not at.exception and not degenerate(at)
    assert at.session_state[SHARED][digest]["dims"] == {"height": 48, "width": 320}
    reports = at.session_state["partition_reports"].values()
    assert [r.options.dims for r in reports] == [{"height": 48, "width": 320}] * 2


def test_compare_says_each_side_is_at_its_models_shared_settings(tmp_path):
    """Side A and side B (the same model under another option set, or another model) are analysed
    at the dimensions set for their model on the other pages, and the page says which."""
    path = recogniser(tmp_path)
    digest = file_digest(path)
    at = page("compare", path)
    at.session_state[SHARED] = {digest: {"dims": {"height": 32, "width": 256}}}
    at.run()
    assert not at.exception
    [said] = [c for c in plain(at.caption) if c.startswith("Each side's model is analysed at")]
    assert "A at height=32, width=256 — its settings shared with the Partitions and Timeline pages" in said
    assert "B at height=32, width=256 — its settings shared" in said
    assert "take their defaults" not in " ".join(plain(at.caption))
    # B on a sample nobody set: its defaults, and said so
    at.selectbox(key="cmp_model_B").set_value("cnn_classifier.onnx")
    at.button(key="cmp_apply").click()
    settle(at, "compare_job")
    [said] = [c for c in plain(at.caption) if c.startswith("Each side's model is analysed at")]
    assert "B at " in said and "its defaults (no page set this model's dimensions yet)" in said


def test_a_whole_shape_preset_fills_the_shape_field_of_an_input_with_an_unnamed_side():
    """PP-OCR v4's recogniser has an unnamed height (?): its shape field starts at a text line
    (the family's 48x320, not a ? to guess), and when a height of 1 is typed, the warning's fix is
    the whole shape of a text line, which the button types back into that field."""
    path = DATA / "real/rapidocr_ppocrv4_rec.onnx"
    digest = file_digest(path)
    at = page("timeline", path).run()
    assert not at.exception
    field = f"tl_shape_{digest}_x"
    assert at.text_input(key=field).value == "1, 3, 48, 320" and not degenerate(at)
    at.text_input(key=field).input("1, 3, 1, 320").run()
    [warning] = degenerate(at)
    assert "height is 1" in warning
    button(at, "Set x = 1,3,48,320").click().run()
    assert not at.exception
    assert at.text_input(key=field).value == "1, 3, 48, 320"
    assert not degenerate(at) and "timeline_job" not in at.session_state
    assert at.session_state[SHARED][digest]["shapes"] == {"x": (1, 3, 48, 320)}


# -- issue 27, item 1: an upload keeps the hints its file name gives ----------------------------------
def detector(directory: Path, name: str) -> Path:
    """A detector whose only statement of its size is its file name (``yolov8n_320``)."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.1] * 108)
    nodes = [helper.make_node("Conv", ["images", "w"], ["c"], name="conv0", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info(
        "images", TensorProto.FLOAT, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)], [weight])
    path = directory / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def dims_shown(at: AppTest, digest: str, names) -> dict[str, int]:
    return {name: at.number_input(key=f"tl_dim_{digest}_{name}").value for name in names}


@pytest.mark.parametrize("model", ["whisper", "detector"])
def test_an_uploaded_model_gets_the_defaults_and_presets_its_file_name_gives(tmp_path, monkeypatch, model):
    """Uploads are stored as ``<digest>/model.onnx``; the hints must read the name the file was
    uploaded as, so an upload starts where the same file opened by its path does (a Whisper decoder
    at 1500 encoder frames with the Whisper preset, a ``_320`` detector at 320), not at the
    defaults of a model of no family (128, 224)."""
    monkeypatch.setenv("QNN_LAB_UPLOAD_DIR", str(tmp_path / "uploads"))
    if model == "whisper":
        path, names = DATA / "exports/hf_whisper_decoder_with_past.onnx", ["encoder_sequence_length"]
    else:
        path, names = detector(tmp_path, "yolov8n_320.onnx"), ["height", "width"]
    digest = file_digest(path)
    by_path = page("timeline", path).run()
    expected, presets = dims_shown(by_path, digest, names), [b.label for b in by_path.button if "Use " in b.label]
    assert presets  # the family's presets, offered for the file opened by path
    anonymous = detector(tmp_path, "model.onnx") if model == "detector" else None
    if anonymous is not None:  # the name is what says 320: without it the default differs
        at = page("timeline", anonymous).run()
        assert dims_shown(at, file_digest(anonymous), names) != expected

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).switch_page("pages/timeline.py").run()
    at.sidebar.segmented_control(key="intake_mode").set_value("Upload").run()
    at.sidebar.file_uploader(key="intake_upload").upload(path.name, path.read_bytes()).run()
    assert not at.exception
    selected = at.session_state["selected_model"]
    assert (selected.source, selected.name, Path(selected.path).name) == ("upload", path.name, "model.onnx")
    assert dims_shown(at, digest, names) == expected
    assert [b.label for b in at.button if "Use " in b.label] == presets


# -- issue 27, item 6: a preset button leaves no Streamlit warning --------------------------------------
@pytest.mark.parametrize("name", ["partitions", "timeline", "compare"])
def test_a_preset_button_fills_the_fields_without_a_session_state_warning(tmp_path, monkeypatch, name):
    """The fields a preset fills were also given a default: Streamlit logged "created with a
    default value but also had its value set via the Session State API" on every preset click."""
    import logging

    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies, "_shown_default_value_warning", False)  # Streamlit says it once a process
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger(policies.__name__)
    logger.addHandler(handler)
    try:
        path = recogniser(tmp_path)
        digest = file_digest(path)
        at = page(name, path)
        at = settle(at) if name == "partitions" else at.run()
        field = f"{dict(partitions='pt', timeline='tl', compare='pt')[name]}_dim_{digest}_height"
        button(at, "Use OCR text line 32×320 (CRNN, PP-OCR v2)").click()
        at = settle(at) if name == "partitions" else at.run()
        assert not at.exception
        if name != "compare":  # Compare's side A draws no dimension fields: its model's shared settings
            assert at.number_input(key=field).value == 32
        else:
            assert at.session_state["settings_fills"][digest]["dims"]["height"] == 32
    finally:
        logger.removeHandler(handler)
    assert not [m for m in said if "Session State API" in m], said
