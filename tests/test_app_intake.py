"""The sidebar model picker under AppTest: default sample, --model, samples, server paths,
uploads, and bad input that must leave the previous model selected."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest

from dashboard.intake import uploads
from dashboard.intake.digest import file_digest
from dashboard.intake.samples import SAMPLES, sample_path
from dashboard.views import intake

SELECTED = "selected_model"


def selected(at):
    return at.session_state[SELECTED] if SELECTED in at.session_state else None


def errors(at) -> list[str]:
    """Error texts with the markdown escaping undone."""
    return [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]


def open_path(at, path) -> None:
    at.sidebar.segmented_control(key="intake_mode").set_value(intake.PATH).run()
    at.sidebar.text_input(key="intake_path").input(str(path))
    next(b for b in at.sidebar.button if b.label == "Open").click().run()


def upload(at, name: str, data: bytes) -> None:
    at.sidebar.segmented_control(key="intake_mode").set_value(intake.UPLOAD).run()
    at.sidebar.file_uploader(key="intake_upload").upload(name, data).run()


@pytest.fixture(autouse=True)
def upload_root(tmp_path, monkeypatch) -> Path:
    """Uploads land in the test's folder, not in the machine's temp directory."""
    monkeypatch.setenv(uploads.ENV_DIR, str(tmp_path / "uploads"))
    return tmp_path / "uploads"


def test_first_sample_is_selected_without_arguments(app):
    at = app().run()
    assert not at.exception and not errors(at)
    first = SAMPLES[0]
    model = selected(at)
    assert (model.name, model.source) == (first.title, "sample")
    assert Path(model.path) == sample_path(first.file_name).resolve()
    assert model.digest == file_digest(model.path)
    assert first.title in at.sidebar.markdown[0].value.replace("\\", "")


def test_model_argument_preselects_a_sample_by_its_title(app):
    sample = SAMPLES[1]
    at = app("--model", str(sample_path(sample.file_name))).run()
    assert not at.exception and not errors(at)
    assert (selected(at).name, selected(at).source) == (sample.title, "sample")
    assert at.sidebar.selectbox(key="intake_sample").value == sample.file_name


def test_model_argument_with_a_server_path(app, tmp_path):
    path = tmp_path / "my model.onnx"
    path.write_bytes(sample_path(SAMPLES[2].file_name).read_bytes())
    at = app("--model", str(path)).run()
    assert not at.exception and not errors(at)
    assert (selected(at).path, selected(at).source, selected(at).name) == (str(path), "path", "my model.onnx")
    assert at.sidebar.segmented_control(key="intake_mode").value == intake.PATH
    assert at.sidebar.text_input(key="intake_path").value == str(path)


def test_bad_model_argument_reports_and_falls_back_to_first_sample(app, tmp_path):
    missing = tmp_path / "nope.onnx"
    at = app("--model", str(missing)).run()
    assert not at.exception
    assert len(errors(at)) == 1 and "no such file" in errors(at)[0]
    assert selected(at).name == SAMPLES[0].title


def test_choosing_another_sample(app):
    at = app().run()
    target = SAMPLES[-1]
    at.sidebar.selectbox(key="intake_sample").set_value(target.file_name).run()
    assert not at.exception and not errors(at)
    assert (selected(at).name, Path(selected(at).path)) == (target.title, sample_path(target.file_name).resolve())
    assert target.description in [c.value for c in at.sidebar.caption]


@pytest.mark.parametrize("how", ["path", "upload"])
def test_the_sample_picker_shows_a_sample_only_while_that_sample_is_loaded(app, tmp_path, how):
    """Issue 27, item 4: after a model opened by path (or uploaded), the Sample source showed the
    sample chosen before while the other model stayed loaded, and picking that sample again did
    nothing (no change). The picker now shows what is loaded: no sample, and picking one opens it."""
    first = SAMPLES[0]
    at = app().run()
    assert at.sidebar.selectbox(key="intake_sample").value == first.file_name  # the sample loaded
    other = tmp_path / "encoder.onnx"
    other.write_bytes(sample_path("text_encoder.onnx").read_bytes())
    if how == "path":
        open_path(at, other)
    else:
        upload(at, "encoder.onnx", other.read_bytes())
    assert selected(at).source == how
    at.sidebar.segmented_control(key="intake_mode").set_value(intake.SAMPLE).run()
    assert not at.exception and not errors(at)
    assert selected(at).source == how  # switching the source loads nothing …
    assert at.sidebar.selectbox(key="intake_sample").value is None  # … and the picker says no sample is
    assert "encoder.onnx" in at.sidebar.markdown[0].value.replace("\\", "")
    at.sidebar.selectbox(key="intake_sample").set_value(first.file_name).run()
    assert (selected(at).name, selected(at).source) == (first.title, "sample")  # picking it opens it
    assert at.sidebar.selectbox(key="intake_sample").value == first.file_name
    at.switch_page("pages/devices.py").run()  # and another page shows the same
    assert at.sidebar.selectbox(key="intake_sample").value == first.file_name


def test_open_a_server_path(app, tmp_path):
    path = tmp_path / "encoder.onnx"
    path.write_bytes(sample_path("text_encoder.onnx").read_bytes())
    at = app().run()
    open_path(at, path)
    assert not at.exception and not errors(at)
    assert (selected(at).path, selected(at).source) == (str(path), "path")
    assert selected(at).digest == file_digest(path)


def test_server_path_resolves_external_data_next_to_the_model(app, tmp_path):
    model = onnx.load(sample_path("cnn_classifier.onnx"))
    path = tmp_path / "ext" / "cnn.onnx"
    path.parent.mkdir()
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="cnn.data",
              size_threshold=0)
    at = app().run()
    open_path(at, path)
    assert not at.exception and not errors(at)
    assert selected(at).path == str(path)
    assert not [w for w in at.warning if "not found next to the model" in w.value]


@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "garbage", "zip", "escaping external data"])
def test_bad_path_shows_one_error_and_keeps_the_previous_model(app, tmp_path, kind):
    if kind == "missing":
        path = tmp_path / "missing.onnx"
    elif kind == "directory":
        path = tmp_path
    elif kind == "empty":
        path = tmp_path / "empty.onnx"
        path.write_bytes(b"")
    elif kind == "garbage":
        path = tmp_path / "random.onnx"
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "zip":
        path = tmp_path / "model.onnx"
        path.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    else:  # an initializer whose external data lives outside the model's folder
        model = onnx.load(sample_path("cnn_classifier.onnx"))
        weight = model.graph.initializer[0]
        weight.ClearField("raw_data")
        weight.data_location = onnx.TensorProto.EXTERNAL
        weight.external_data.add(key="location", value="../outside.data")
        path = tmp_path / "inner" / "evil.onnx"
        path.parent.mkdir()
        path.write_bytes(model.SerializeToString())
    at = app().run()
    before = selected(at)
    open_path(at, path)
    assert not at.exception
    assert len(errors(at)) == 1, errors(at)
    assert "\n" not in errors(at)[0]
    assert selected(at) == before
    # The app keeps working: the previous model's page is still drawn, the next action works.
    assert at.title[0].value == "Model overview"
    at.sidebar.segmented_control(key="intake_mode").set_value(intake.SAMPLE).run()
    at.sidebar.selectbox(key="intake_sample").set_value(SAMPLES[1].file_name).run()
    assert not errors(at) and selected(at).name == SAMPLES[1].title


def test_a_model_over_the_readers_memory_limit_is_one_error_and_keeps_the_previous_model(app, tmp_path,
                                                                                          monkeypatch):
    """The child that reads a path from the browser first runs under QNN_LAB_READ_MEMORY_MB; a model
    needing more (a 300,000-node chain, about 350 MB) never reaches the server's own reader, and
    an ordinary one still opens under the same limit."""
    import hostile_models

    big = hostile_models.relu_chain(tmp_path / "chain.onnx", 300_000)
    small = tmp_path / "encoder.onnx"
    small.write_bytes(sample_path("text_encoder.onnx").read_bytes())
    monkeypatch.setenv("QNN_LAB_READ_MEMORY_MB", "200")
    at = app().run()
    before = selected(at)
    open_path(at, big)
    assert not at.exception
    assert errors(at) == [f"{big}: needs more than 200 MB to read; refusing it to protect the server "
                          "(limit QNN_LAB_READ_MEMORY_MB=200)"]
    assert selected(at) == before
    open_path(at, small)
    assert not errors(at) and selected(at).path == str(small)


def test_an_upload_over_the_readers_memory_limit_is_one_error_by_its_name(app, tmp_path, monkeypatch):
    import hostile_models

    data = hostile_models.relu_chain(tmp_path / "chain.onnx", 300_000).read_bytes()
    monkeypatch.setenv("QNN_LAB_READ_MEMORY_MB", "200")
    at = app().run()
    before = selected(at)
    upload(at, "chain.onnx", data)
    assert not at.exception
    assert errors(at) == ["chain.onnx: needs more than 200 MB to read; refusing it to protect the server "
                          "(limit QNN_LAB_READ_MEMORY_MB=200)"]
    assert selected(at) == before


def test_empty_path_is_an_error(app):
    at = app().run()
    before = selected(at)
    open_path(at, "  ")
    assert errors(at) and selected(at) == before


def test_upload_is_stored_under_its_digest_and_shown_by_its_name(app, upload_root):
    data = sample_path("cnn_classifier.onnx").read_bytes()
    at = app().run()
    upload(at, "resnet-ish.onnx", data)
    assert not at.exception and not errors(at)
    model = selected(at)
    assert (model.name, model.source) == ("resnet-ish.onnx", "upload")
    path = Path(model.path)
    assert path.read_bytes() == data
    assert path.parent.name == model.digest == file_digest(path)
    assert path.parent.parent == upload_root
    assert "resnet-ish.onnx" in at.sidebar.markdown[0].value.replace("\\", "")


def test_bad_upload_keeps_the_previous_model(app):
    at = app().run()
    before = selected(at)
    upload(at, "broken.onnx", sample_path("cnn_classifier.onnx").read_bytes()[:500])
    assert not at.exception
    assert len(errors(at)) == 1 and errors(at)[0].startswith("broken.onnx: ")
    assert selected(at) == before


def test_hostile_upload_name_stays_inside_the_upload_folder(app, upload_root):
    data = sample_path("cnn_classifier.onnx").read_bytes()
    at = app().run()
    upload(at, "../../../etc/<script>x</script>" + "n" * 400 + ".onnx", data)
    assert not at.exception and not errors(at)
    path = Path(selected(at).path)
    assert path.parent.parent == upload_root
    name = selected(at).name
    assert name.endswith(".onnx") and "/" not in name and len(name.encode()) <= intake.MAX_NAME_BYTES
    assert "<script>" not in at.sidebar.markdown[0].value


def test_no_sample_and_no_model_explains_where_to_pick_one(app, monkeypatch):
    monkeypatch.setattr(intake, "SAMPLES", [])
    at = app().run()
    assert not at.exception
    assert selected(at) is None
    assert any("No model selected" in i.value for i in at.info)


@pytest.mark.parametrize("name, expected", [
    ("model.onnx", "model.onnx"),
    ("C:\\Users\\me\\model.onnx", "model.onnx"),
    ("../..", "upload.onnx"),
    ("", "upload.onnx"),
    ("a\0b.onnx", "ab.onnx"),
])
def test_upload_file_name(name, expected):
    assert intake.upload_file_name(name) == expected


def test_long_upload_name_keeps_extension_and_utf8():
    name = intake.upload_file_name("模" * 300 + ".onnx")
    assert name.endswith(".onnx") and len(name.encode()) <= intake.MAX_NAME_BYTES
    name.encode("utf-8")


def test_model_argument_parsing():
    assert intake.model_argument(["--model", "x.onnx", "--other"]) == "x.onnx"
    assert intake.model_argument(["-q", "tests/test_x.py"]) is None
    assert intake.model_argument(["--mod", "x.onnx"]) is None  # no abbreviations of --model


def test_hashing_a_large_model_shows_a_sidebar_progress_bar_that_goes_away():
    """``_hash_progress`` is what ``state.select`` reports to while it hashes a model picked by
    path: a bar in the sidebar, with how far it is, gone once the file is read."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from dashboard.views import intake

        report = intake._hash_progress("big <model>.onnx")
        report(1 << 20, 2 << 20)  # below the size that earns a bar: nothing
        total = 3 << 30
        report(total // 4, total)
        if st.session_state.get("finish"):
            report(total, total)

    at = AppTest.from_function(script).run()
    bars = at.sidebar.get("progress")
    assert len(bars) == 1 and bars[0].proto.value == 25
    assert bars[0].proto.text == "Hashing big \\<model\\>\\.onnx: 768 MiB of 3.0 GiB"  # escaped: the name is text
    at.session_state["finish"] = True
    at.run()
    assert not at.sidebar.get("progress")
