"""Degenerate shapes are caught before anything runs, for families of models (not one file): an
OCR recogniser at [1, 3, 1, 1], a decoder whose encoder length is 1, a detector analysed at
another size than its name or metadata says; and the defaults start from what the model says.

Real exports where the test data has them (PP-OCR v4 recogniser and detector, ddddocr, Whisper,
TrOCR and Marian decoders, a YOLO-style detector), and small models built here for the rest
(a detector whose name or metadata says 320, an NHWC recogniser)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from dashboard.intake import shape_hints
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import default_dims, resolve_dims

DATA = Path(__file__).resolve().parent / "data"
OCR_RECOGNISERS = [DATA / "real/rapidocr_ppocrv4_rec.onnx", DATA / "real/ddddocr_common.onnx",
                   DATA / "exports/torch_crnn_ctc.onnx"]
ENCODER_DECODERS = [DATA / "exports/hf_whisper_decoder_with_past.onnx", DATA / "exports/hf_whisper_decoder.onnx",
                    DATA / "exports/hf_trocr_decoder_with_past.onnx", DATA / "exports/hf_marian_decoder_with_past.onnx"]


def _conv_model(path: Path, shape: list, metadata: dict[str, str] | None = None, nhwc: bool = False) -> Path:
    """An image model (Conv, ReLU) with input ``shape`` (names for symbolic sides)."""
    channels = shape[3] if nhwc else shape[1]
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, channels, 3, 3], [0.1] * (4 * channels * 9))
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2])] if nhwc else []
    nodes += [helper.make_node("Conv", ["xt" if nhwc else "x", "w"], ["c"], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, path)
    return path


def _at_one(graph) -> dict[str, int]:
    return {name: 1 for name in default_dims(graph)}


@pytest.mark.parametrize("path", OCR_RECOGNISERS, ids=lambda p: p.name)
def test_an_ocr_recogniser_collapsed_to_one_pixel_is_warned_and_defaults_to_a_text_line(path):
    graph = load_model(str(path))
    assert shape_hints.family(graph) == "ocr_recognizer"
    [hint] = [h for h in shape_hints.hints(graph, _at_one(graph)) if h.input == graph.inputs[0].name]
    assert "is 1" in hint.message or "are 1" in hint.message
    fixed = graph.inputs[0].shape[2] if isinstance(graph.inputs[0].shape[2], int) else None
    line = f"OCR text line {fixed}×" if fixed else "OCR text line 48×320"  # its own height, when fixed
    assert line in hint.message  # the preset to try
    dims = resolve_dims(graph, {})
    image, shapes = graph.inputs[0], {}
    if image.shape[2] is None:  # an unnamed height (?): not "1", and the fix is the whole shape of a text line
        [unset] = shape_hints.hints(graph, dims)
        assert "height has no size" in unset.message and "is 1" not in unset.message
        assert unset.shapes[image.name][2:] == (48, 320)
        shapes = unset.shapes
    assert not shape_hints.hints(graph, dims, shapes)  # the defaults (with that shape) are not degenerate
    height, width = shape_hints.effective_shape(image, dims, shapes)[2:]
    prefilled = shape_hints.default_shapes(graph, dims)  # what the form's whole-shape field starts from
    if image.name in shapes:  # the field starts from the warning's own fix
        assert prefilled[image.name] == shapes[image.name]
    assert not shape_hints.hints(graph, dims, prefilled)
    assert width > height > 1  # a text line: wider than high
    assert any(p.title.startswith(line) for p in shape_hints.presets(graph))


@pytest.mark.parametrize("path", ENCODER_DECODERS, ids=lambda p: p.name)
def test_a_decoder_never_defaults_to_an_encoder_length_of_one(path):
    """With a KV cache the decoder's own sequence is one step; the encoder's length never is."""
    graph = load_model(str(path))
    dims = resolve_dims(graph, {})
    whisper = "whisper" in path.name
    assert dims["encoder_sequence_length"] == (1500 if whisper else 128)
    assert not shape_hints.hints(graph, dims)
    hints = shape_hints.hints(graph, {**dims, "encoder_sequence_length": 1})
    assert len(hints) == 1 and "encoder length encoder_sequence_length is 1" in hints[0].message
    assert hints[0].dims == {"encoder_sequence_length": 1500 if whisper else 128}
    if whisper:
        assert [p.text() for p in shape_hints.presets(graph)] == [
            "Whisper, 30 s of audio: encoder_sequence_length=1500"]


@pytest.mark.parametrize("how", ["name", "metadata"])
def test_a_detector_analysed_at_another_size_than_it_says_is_warned(tmp_path, how):
    name = "yolov8n_320.onnx" if how == "name" else "yolov8n.onnx"
    metadata = {"imgsz": "[320, 320]", "task": "detect"} if how == "metadata" else None
    graph = load_model(str(_conv_model(tmp_path / name, [1, 3, "height", "width"], metadata)))
    assert shape_hints.family(graph) == "detector" and shape_hints.declared_size(graph) == (320, 320)
    assert resolve_dims(graph, {}) == {"height": 320, "width": 320}  # prefilled from what it says
    assert not shape_hints.hints(graph, {"height": 320, "width": 320})
    [hint] = shape_hints.hints(graph, {"height": 224, "width": 224})
    assert "224×224" in hint.message and f"model's {how} says 320×320" in hint.message
    assert hint.dims == {"height": 320, "width": 320}
    assert shape_hints.presets(graph)[0].title == "detector 320×320 (the model's own size)"


def test_real_detectors_start_at_a_detector_size_not_one_pixel():
    """PP-OCR's text detector names none of its dimensions (rule-less names defaulted to 1): it
    starts at 640×640 like the YOLO export."""
    for path in (DATA / "real/rapidocr_ppocrv4_det.onnx", DATA / "exports/torch_yolo_dynamic_hw.onnx"):
        graph = load_model(str(path))
        assert shape_hints.family(graph) == "detector", path.name
        dims = resolve_dims(graph, {})
        image = graph.inputs[0]
        assert [dims[image.shape[a]] for a in (2, 3)] == [640, 640], (path.name, dims)
        assert not shape_hints.hints(graph, dims)


def test_an_nhwc_recogniser_is_read_on_its_own_axes(tmp_path):
    graph = load_model(str(_conv_model(tmp_path / "text_rec_nhwc.onnx", [1, 48, "width", 3], nhwc=True)))
    assert shape_hints.family(graph) == "ocr_recognizer"
    assert resolve_dims(graph, {}) == {"width": 320}
    [hint] = shape_hints.hints(graph, {"width": 1})
    assert "[1, 48, 1, 3]" in hint.message and "width is 1" in hint.message


def test_models_of_no_family_keep_their_defaults_and_get_no_warning():
    """A classifier at 224, an LLM decoding one token (a sequence of 1 is one decode step there)."""
    for name in ("torch_resnet18_symbolic.onnx",):
        graph = load_model(str(DATA / "exports" / name))
        assert resolve_dims(graph, {}) == {"batch": 1, "height": 224, "width": 224}
        assert not shape_hints.hints(graph, resolve_dims(graph, {})) and not shape_hints.presets(graph)
    from dashboard.intake.samples import sample_path

    llm = load_model(str(sample_path("llm_decoder_kv.onnx")))
    assert resolve_dims(llm, {})["sequence_length"] == 1 and not shape_hints.hints(llm, resolve_dims(llm, {}))


def test_a_whole_input_shape_is_what_the_warning_reads(tmp_path):
    graph = load_model(str(_conv_model(tmp_path / "crnn_rec.onnx", [1, 3, None, None])))
    [hint] = shape_hints.hints(graph, {}, {"x": (1, 3, 1, 1)})
    assert "[1, 3, 1, 1]" in hint.message and hint.shapes == {"x": (1, 3, 48, 320)}
    assert not shape_hints.hints(graph, {}, {"x": (1, 3, 48, 320)})


def test_the_timeline_page_warns_of_a_degenerate_shape_before_the_run():
    """The Timeline page with a Whisper decoder: no warning at its defaults; an encoder length of 1
    set in its dimensions is warned, with the value to set and the Whisper preset."""
    from streamlit.testing.v1 import AppTest

    from dashboard.intake.digest import file_digest
    from dashboard.views.state import SelectedModel

    path = DATA / "exports/hf_whisper_decoder_with_past.onnx"
    digest = file_digest(path)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.switch_page("pages/timeline.py")
    at.session_state["selected_model"] = SelectedModel(str(path), path.name, digest, "path")
    at.session_state["intake_started"] = True
    at.run()
    assert not at.exception and not [w for w in at.warning if "degenerate" in w.value]
    at.number_input(key=f"tl_dim_{digest}_encoder_sequence_length").set_value(1).run()
    [warning] = [w.value.replace("\\", "") for w in at.warning if "degenerate" in w.value]
    assert "encoder length encoder_sequence_length is 1" in warning and "encoder_sequence_length = 1500" in warning
    assert any("Whisper, 30 s of audio" in c.value.replace("\\", "") for c in at.caption)


@pytest.mark.parametrize("sample, dim", [("text_encoder.onnx", "sequence_length"), ("audio_encoder.onnx", "frames")])
def test_a_sequence_or_frames_length_collapsed_to_one_is_warned_once_on_any_axis(sample, dim):
    """The rule is the dimension's name, on any axis of any rank (a text encoder's [batch, seq]
    ids, mask and types; an audio encoder's [batch, 80, frames]), said once per dimension."""
    from dashboard.intake.samples import SAMPLES_DIR

    graph = load_model(str(SAMPLES_DIR / sample))
    assert not shape_hints.hints(graph, resolve_dims(graph, {}))  # the defaults are a real length
    found = shape_hints.hints(graph, {**resolve_dims(graph, {}), dim: 1})
    assert len(found) == 1 and f"({dim}) is 1" in found[0].message
    assert found[0].dims[dim] > 1  # the length to set


def test_a_kv_decoders_one_token_step_is_no_warning():
    from dashboard.intake.samples import SAMPLES_DIR

    graph = load_model(str(SAMPLES_DIR / "llm_decoder_kv.onnx"))
    ones = {name: 1 for name in resolve_dims(graph, {})}
    assert not [h for h in shape_hints.hints(graph, ones) if "sequence dimension" in h.message]


# -- issue 27, item 6: a recogniser is known by its structure, not only its name ----------------------
def _line_model(path: Path, height: int, output: list, channels: int = 1) -> Path:
    """An image of fixed ``height`` and open width, pooled to ``output`` (a sequence when it has an
    open length, class scores when not)."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, channels, 3, 3], [0.1] * (4 * channels * 9))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("ReduceMean", ["c"], ["y"], axes=[1, 2], keepdims=0)]
    graph = helper.make_graph(nodes, "torch-jit-export", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, channels, height, "image_width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("source, height", [("ddddocr", 64), ("gray32", 32), ("rgb48", 48)])
def test_a_text_recogniser_named_like_anything_gets_a_text_line_and_its_presets(tmp_path, source, height):
    """ddddocr ships its recogniser as ``common.onnx`` (no OCR word, no metadata): it got a 64-pixel
    width (the "square image" rule) and no OCR preset. A fixed text-line height, an open width and
    an output of open length make it a recogniser whatever its name."""
    if source == "ddddocr":
        path = tmp_path / "common.onnx"
        path.write_bytes((DATA / "real/ddddocr_common.onnx").read_bytes())
    else:
        path = _line_model(tmp_path / "common.onnx", height, [1, "seqlen", 4] if source == "rgb48" else [1, "seqlen"],
                           channels=3 if source == "rgb48" else 1)
    graph = load_model(path)
    assert shape_hints.family(graph) == "ocr_recognizer"
    [(width, why)] = shape_hints.prefill(graph).values()
    assert width > 2 * height and "text line" in why  # a line, not a square
    titles = [p.title for p in shape_hints.presets(graph)]
    assert titles and all(t.startswith(f"OCR text line {height}×") for t in titles)
    assert resolve_dims(graph, {})["image_width"] == width


def test_an_image_of_fixed_height_read_into_class_scores_is_no_recogniser(tmp_path):
    graph = load_model(_line_model(tmp_path / "common.onnx", 64, [1, 4]))
    assert shape_hints.family(graph) is None and not shape_hints.presets(graph)
