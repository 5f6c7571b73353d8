"""The accuracy data's way in (``accuracy.data``, ``accuracy.preprocess``): every loader on real
files made here, every bad input as one error line naming the file, the caps enforced from headers
before anything large is allocated, the preprocessing against an independent numpy computation,
the prefill from what a model states, and the bundled data sets against the sample models."""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
import wave
import zipfile
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from PIL import Image

from dashboard.accuracy import data as D
from dashboard.accuracy.data import (InputSpec, bundled, input_specs, load_data, load_saved, load_upload,
                                     random_dataset)
from dashboard.accuracy.preprocess import PRESETS, Preprocess, preprocess_for
from dashboard.errors import UserError
from dashboard.intake.reader import load_model
from dashboard.intake.shapes import resolve_dims

ROOT = Path(__file__).resolve().parents[1]
IMG = InputSpec("image", (1, 3, 4, 6), "float32")
ARR = InputSpec("x", (1, 5), "float32")


def error(call, *args, **kwargs) -> str:
    """The one line a bad input gives (no traceback text, no second line)."""
    with pytest.raises(UserError) as info:
        call(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def pixels(h=4, w=6, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def write_png(path: Path, rgb: np.ndarray) -> Path:
    Image.fromarray(rgb).save(path)
    return path


def model(tmp_path, name="m.onnx", shape=(1, 3, 224, 224), elem=TensorProto.FLOAT, metadata=None) -> object:
    x = helper.make_tensor_value_info("image", elem, list(shape))
    y = helper.make_tensor_value_info("out", elem, list(shape))
    graph = helper.make_graph([helper.make_node("Identity", ["image"], ["out"])], "g", [x], [y])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    for k, v in (metadata or {}).items():
        proto.metadata_props.add(key=k, value=v)
    path = tmp_path / name
    onnx.save(proto, path)
    return load_model(path)


# -- input specs ------------------------------------------------------------------------------------------
def test_input_specs_fix_every_dimension(tmp_path):
    graph = model(tmp_path, shape=("batch", 3, "height", "width"))
    specs = input_specs(graph, {"height": 64}, {})
    assert specs == [InputSpec("image", (1, 3, 64, 224), "float32")]  # batch 1 and width 224 are the defaults
    assert input_specs(graph, {}, {"image": (1, 3, 8, 8)})[0].shape == (1, 3, 8, 8)
    open_dim = model(tmp_path, "open.onnx", shape=(1, 3, None, 10))
    assert "open dimension" in error(input_specs, open_dim, {}, {})


# -- arrays -------------------------------------------------------------------------------------------------
def test_npz_stacked_per_input_and_a_single_sample(tmp_path):
    specs = [InputSpec("ids", (1, 4), "int64"), InputSpec("mask", (1, 4), "int64")]
    ids = np.arange(12, dtype=np.int64).reshape(3, 1, 4)
    np.savez(tmp_path / "t.npz", ids=ids, mask=np.ones((3, 1, 4), np.int32))  # int32 -> int64 is safe
    data = load_data(tmp_path / "t.npz", specs)
    assert len(data) == 3 and data.names == ["t.npz[0]", "t.npz[1]", "t.npz[2]"]
    assert np.array_equal(data.samples[2]["ids"], ids[2]) and data.samples[0]["mask"].dtype == np.int64
    assert data.preprocess is None and data.describe() == "3 sample(s) from t.npz (arrays as given)"
    np.savez(tmp_path / "one.npz", ids=ids[0], mask=ids[0])  # exactly the input's shape: one sample
    assert len(load_data(tmp_path / "one.npz", specs)) == 1
    np.savez(tmp_path / "batch.npz", ids=ids[:, 0], mask=ids[:, 0])  # a batch-1 input stacked on its batch axis
    assert load_data(tmp_path / "batch.npz", specs).samples[1]["ids"].shape == (1, 4)


def test_npz_missing_input_and_uneven_counts_name_the_file(tmp_path):
    specs = [InputSpec("ids", (1, 4), "int64"), InputSpec("mask", (1, 4), "int64")]
    np.savez(tmp_path / "miss.npz", ids=np.zeros((2, 1, 4), np.int64))
    msg = error(load_data, tmp_path / "miss.npz", specs)
    assert "miss.npz" in msg and "'mask'" in msg
    np.savez(tmp_path / "uneven.npz", ids=np.zeros((2, 1, 4), np.int64), mask=np.zeros((3, 1, 4), np.int64))
    assert "uneven.npz" in error(load_data, tmp_path / "uneven.npz", specs)


def test_wrong_shape_says_expected_and_got(tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((2, 7), np.float32))
    msg = error(load_data, tmp_path / "bad.npy", [ARR])
    assert "bad.npy" in msg and "[1, 5]" in msg and "[2, 7]" in msg


def test_dtype_safe_casts_only(tmp_path):
    np.save(tmp_path / "f64.npy", np.ones((2, 1, 5)))
    assert load_data(tmp_path / "f64.npy", [ARR]).samples[0]["x"].dtype == np.float32
    ints = InputSpec("ids", (1, 3), "int64")
    np.save(tmp_path / "float.npy", np.ones((1, 3), np.float32))
    msg = error(load_data, tmp_path / "float.npy", [ints])
    assert "float.npy" in msg and "int64" in msg and "float32" in msg
    narrow = InputSpec("ids", (1, 3), "int32")
    np.save(tmp_path / "big.npy", np.array([[1, 2, 2**40]], np.int64))
    assert "big.npy" in error(load_data, tmp_path / "big.npy", [narrow])
    np.save(tmp_path / "small.npy", np.array([[1, 2, 3]], np.int64))
    assert load_data(tmp_path / "small.npy", [narrow]).samples[0]["ids"].dtype == np.int32


def test_nan_and_infinity_are_refused(tmp_path):
    values = np.zeros((3, 1, 5), np.float32)
    values[2, 0, 1] = np.nan
    np.save(tmp_path / "nan.npy", values)
    msg = error(load_data, tmp_path / "nan.npy", [ARR])
    assert "nan.npy[2]" in msg and "NaN" in msg
    np.savez(tmp_path / "inf.npz", x=np.full((1, 5), np.inf, np.float32))
    assert "inf.npz" in error(load_data, tmp_path / "inf.npz", [ARR])


def test_limit_keeps_the_first_and_says_so(tmp_path):
    np.save(tmp_path / "many.npy", np.arange(50, dtype=np.float32).reshape(10, 1, 5))
    data = load_data(tmp_path / "many.npy", [ARR], limit=4)
    assert len(data) == 4 and data.dropped == 6
    assert np.array_equal(data.samples[3]["x"], np.arange(15, 20, dtype=np.float32).reshape(1, 5))
    assert "the first 4 kept, 6 more left out" in data.describe()
    assert "limit" in error(load_data, tmp_path / "many.npy", [ARR], limit=0)


def test_npy_for_a_model_of_several_inputs_is_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((1, 5), np.float32))
    msg = error(load_data, tmp_path / "a.npy", [ARR, InputSpec("y", (1, 5), "float32")])
    assert "a.npy" in msg and ".npz" in msg


def test_size_caps_come_from_the_headers_without_allocating(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (100_000, 100_000, 100)})  # 4 TB declared
    npy = tmp_path / "huge.npy"
    npy.write_bytes(header.getvalue())  # the header alone: no data follows
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:
        z.writestr("x.npy", npy.read_bytes())
    tracemalloc.start()
    try:
        for path in (npy, tmp_path / "huge.npz"):
            msg = error(load_data, path, [ARR])
            assert path.name in msg and "GB" in msg
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20  # refused from the header: nothing near the declared size was allocated


def test_object_arrays_are_never_unpickled(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "Python objects" in error(load_data, tmp_path / "obj.npy", [ARR])


def test_folder_of_arrays_one_sample_per_file(tmp_path):
    folder = tmp_path / "arrays"
    folder.mkdir()
    for i in range(3):
        np.save(folder / f"s{i}.npy", np.full((1, 5), i, np.float32))
    (folder / "README.md").write_text("notes")
    data = load_data(folder, [ARR])
    assert data.names == ["s0.npy", "s1.npy", "s2.npy"] and data.samples[2]["x"][0, 0] == 2
    assert data.licence == "notes"
    assert len(load_data(folder, [ARR], limit=2)) == 2 and load_data(folder, [ARR], limit=2).dropped == 1


def test_the_source_is_the_path_as_given_never_a_hosts_folder(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "sub" / "a.npy", np.zeros((1, 5), np.float32))
    monkeypatch.chdir(tmp_path)
    assert load_data("sub/a.npy", [ARR]).source == "sub/a.npy"
    assert load_data(tmp_path / "sub", [ARR]).source == "sub"  # inside the working folder: relative
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    assert load_data(tmp_path / "sub", [ARR]).source == "sub"  # outside it: the name alone
    assert str(tmp_path) not in load_data(tmp_path / "sub" / "a.npy", [ARR]).describe()


def test_empty_and_mixed_folders(tmp_path):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    msg = error(load_data, empty, [IMG])
    assert "empty" in msg and "subfolders" in msg
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    write_png(mixed / "a.png", pixels())
    np.save(mixed / "b.npy", np.zeros((1, 3, 4, 6), np.float32))
    assert "mixes" in error(load_data, mixed, [IMG])
    assert "nowhere" in error(load_data, tmp_path / "nowhere", [IMG])
    (tmp_path / "notes.txt").write_text("x")
    assert "notes.txt" in error(load_data, tmp_path / "notes.txt", [IMG])


# -- images and preprocessing -------------------------------------------------------------------------------
def test_imagenet_preprocessing_equals_an_independent_computation(tmp_path):
    rgb = pixels()
    write_png(tmp_path / "a.png", rgb)
    data = load_data(tmp_path / "a.png", [IMG], PRESETS["imagenet"])
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    expected = ((rgb / 255.0 - mean) / std).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(data.samples[0]["image"], expected, atol=1e-5)
    assert data.preprocess.resize == (4, 6) and "size 4x6 from the input shape" in data.preprocess.source
    assert data.describe() == ("1 sample(s) from a.png (images, 4x6 NCHW RGB float32, x*0.0039216, mean "
                               "(0.485, 0.456, 0.406) std (0.229, 0.224, 0.225) (preset imagenet); preset imagenet "
                               "(torchvision's mean/std, RGB, 0-1); size 4x6 from the input shape)")


def test_bgr_nhwc_and_gray_preprocessing(tmp_path):
    rgb = pixels(seed=1)
    write_png(tmp_path / "b.png", rgb)
    nhwc = InputSpec("image", (1, 4, 6, 3), "float32")
    pre = Preprocess(layout="NHWC", channels="BGR", scale=1 / 127.5, mean=(1.0,), std=(1.0,))
    got = load_data(tmp_path / "b.png", [nhwc], pre).samples[0]["image"]
    np.testing.assert_allclose(got, (rgb[..., ::-1] / 127.5 - 1.0)[None], atol=1e-5)
    gray = InputSpec("image", (1, 1, 4, 6), "float32")
    got = load_data(tmp_path / "b.png", [gray], Preprocess(channels="GRAY")).samples[0]["image"]
    luma = rgb @ np.array([0.299, 0.587, 0.114]) / 255
    np.testing.assert_allclose(got, luma[None, None], atol=1e-5)


def test_images_are_resized_to_the_input(tmp_path):
    write_png(tmp_path / "big.png", pixels(40, 30))
    got = load_data(tmp_path / "big.png", [IMG]).samples[0]["image"]
    assert got.shape == (1, 3, 4, 6) and got.dtype == np.float32


def test_image_errors_name_the_file(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    write_png(folder / "a.png", pixels())
    (folder / "b.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    msg = error(load_data, folder, [IMG])
    assert "b.jpg" in msg and "not a readable" in msg
    msg = error(load_data, folder / "a.png", [IMG], Preprocess(resize=(8, 8)))
    assert "a.png" in msg and "8x8" in msg and "4x6" in msg
    msg = error(load_data, folder / "a.png", [InputSpec("image", (1, 1, 4, 6), "float32")], Preprocess())
    assert "channel" in msg and "a.png" in msg
    assert "not one" in error(load_data, folder / "a.png", [ARR])
    two = [IMG, InputSpec("other", (1, 3), "float32")]
    assert "one input" in error(load_data, folder / "a.png", two)


def test_preprocess_fields_are_validated():
    for bad in (dict(layout="CHW"), dict(channels="RGBA"), dict(std=(1.0, 0.0, 1.0)), dict(resize=(0, 4)),
                dict(scale=float("nan")), dict(mean=(0.1, 0.2, 0.3), channels="GRAY"),
                dict(dtype="uint8"), dict(mean=(0.1, 0.2))):
        assert "preprocessing" in error(Preprocess, **bad)
    pre = Preprocess(resize=(48, 320), mean=(0.5,), std=(0.5,), channels="GRAY", preset=None, source="x")
    assert Preprocess.from_json(json.loads(json.dumps(pre.to_json()))) == pre


def test_presets():
    imagenet, yolo, ocr = PRESETS["imagenet"], PRESETS["yolo"], PRESETS["ocr"]
    assert imagenet.mean == (0.485, 0.456, 0.406) and imagenet.std == (0.229, 0.224, 0.225)
    assert imagenet.channels == "RGB" and imagenet.scale == pytest.approx(1 / 255)
    assert yolo.mean == (0.0, 0.0, 0.0) and yolo.std == (1.0, 1.0, 1.0) and yolo.channels == "RGB"
    assert ocr.resize == (48, 320) and ocr.channels == "BGR"
    x = ocr.apply(np.full((48, 320, 3), 255, np.uint8), 48, 320)
    assert x.shape == (1, 3, 48, 320) and np.allclose(x, 1.0)  # (255/255 - 0.5) / 0.5


def test_prefill_from_the_input_shape(tmp_path):
    pre = preprocess_for(model(tmp_path, shape=(1, 3, 256, 192)))
    assert pre.resize == (256, 192) and pre.layout == "NCHW" and pre.preset == "imagenet"
    assert "size 256x192 from the input shape" in pre.source and "default" in pre.source
    nhwc = preprocess_for(model(tmp_path, "nhwc.onnx", shape=(1, 320, 320, 3)), preset="yolo")
    assert nhwc.layout == "NHWC" and nhwc.resize == (320, 320) and "default" not in nhwc.source
    gray = preprocess_for(model(tmp_path, "gray.onnx", shape=(1, 1, 28, 28)))
    assert gray.channels == "GRAY" and gray.mean == (pytest.approx(0.449),)
    raw = preprocess_for(model(tmp_path, "u8.onnx", shape=(1, 3, 8, 8), elem=TensorProto.UINT8))
    assert raw.dtype == "uint8" and raw.scale == 1.0 and "integer input" in raw.source


def test_prefill_from_metadata_and_name(tmp_path):
    meta = preprocess_for(model(tmp_path, "yolov8n.onnx", shape=(1, 3, "h", "w"),
                                metadata={"imgsz": "[320, 320]", "task": "detect"}))
    assert meta.resize == (320, 320) and meta.preset == "yolo" and "metadata or name" in meta.source
    named = preprocess_for(model(tmp_path, "net_416.onnx", shape=(1, 3, "h", "w")))
    assert named.resize == (416, 416)
    ocr = preprocess_for(model(tmp_path, "ppocr_rec.onnx", shape=(1, 3, 48, "w")))
    assert ocr.preset == "ocr" and ocr.resize == (48, 320) and ocr.channels == "BGR"
    graph = model(tmp_path, "ch_rec.onnx", shape=(1, 3, 32, 100))
    assert preprocess_for(graph).resize == (32, 100)  # the input's fixed size wins over the preset's 48x320
    assert "an OCR recogniser" in preprocess_for(graph).source
    assert "preset" in error(preprocess_for, graph, preset="nope")
    assert "no input" in error(preprocess_for, graph, input_name="nope")


# -- audio ------------------------------------------------------------------------------------------------
def write_wav(path: Path, values: np.ndarray, rate=16000, channels=1) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(values.astype("<i2").tobytes())
    return path


def float_wav(path: Path, values: np.ndarray, rate=16000) -> Path:
    body = values.astype("<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    path.write_bytes(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(body)) + b"WAVE" + b"fmt " +
                     struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(body)) + body)
    return path


def test_wav_pcm_and_float_into_a_waveform_input(tmp_path):
    spec = InputSpec("audio", (1, 8), "float32")
    pcm = write_wav(tmp_path / "a.wav", np.array([0, 16384, -32768, 32767, 8192]))
    got = load_data(pcm, [spec])
    np.testing.assert_allclose(got.samples[0]["audio"], [[0, 0.5, -1, 32767 / 32768, 0.25, 0, 0, 0]])
    assert "16-bit PCM WAV at 16000 Hz" in got.describe() and "padded" in got.describe()
    values = np.linspace(-1, 1, 12, dtype=np.float32)
    got = load_data(float_wav(tmp_path / "f.wav", values), [spec]).samples[0]["audio"]
    np.testing.assert_allclose(got, values[None, :8])  # cut to the input's 8 samples
    folder = tmp_path / "wavs"
    folder.mkdir()
    write_wav(folder / "1.wav", np.zeros(3))
    float_wav(folder / "2.wav", values)
    assert load_data(folder, [spec]).names == ["1.wav", "2.wav"]


def test_wav_errors(tmp_path):
    features = InputSpec("input_features", (1, 80, 3000), "float32")
    msg = error(load_data, write_wav(tmp_path / "speech.wav", np.zeros(10)), [features])
    assert "speech.wav" in msg and "takes features" in msg and ".npy/.npz" in msg
    stereo = write_wav(tmp_path / "stereo.wav", np.zeros(10), channels=2)
    assert "mono" in error(load_data, stereo, [InputSpec("audio", (1, 8), "float32")])
    (tmp_path / "junk.wav").write_bytes(b"RIFF....WAVEjunk")
    assert "junk.wav" in error(load_data, tmp_path / "junk.wav", [InputSpec("audio", (1, 8), "float32")])
    nan = float_wav(tmp_path / "nan.wav", np.array([0, np.nan], np.float32))
    assert "NaN" in error(load_data, nan, [InputSpec("audio", (1, 8), "float32")])


# -- uploads -------------------------------------------------------------------------------------------------
def zip_bytes(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return out.getvalue()


def png_bytes(rgb: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG")
    return out.getvalue()


def test_upload_npz_and_zip_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ones((3, 1, 5), np.float32))
    data = load_upload("C:\\Users\\me\\x.npz", buffer.getvalue(), [ARR])
    assert data.source == "x.npz" and len(data) == 3
    zipped = zip_bytes({"cats/b.png": png_bytes(pixels(seed=2)), "a.png": png_bytes(pixels(seed=3)),
                        "__MACOSX/._a.png": b"resource fork", "readme.txt": b"x"})
    data = load_upload("../../imgs.zip", zipped, [IMG], PRESETS["yolo"])
    assert data.source == "imgs.zip" and data.names == ["a.png", "cats/b.png"]
    np.testing.assert_allclose(data.samples[0]["image"], (pixels(seed=3) / 255).transpose(2, 0, 1)[None], atol=1e-6)
    assert data.describe().startswith("2 sample(s) from imgs.zip (images, 4x6 NCHW RGB float32, x*0.0039216 "
                                      "(preset yolo)")
    assert list(tmp_path.iterdir()) == []  # nothing from the browser was written


def test_upload_refusals(tmp_path):
    assert "x.tar" in error(load_upload, "x.tar", b"abc", [IMG])
    assert "MB" in error(load_upload, "x.zip", b"\0" * (D.MAX_UPLOAD_BYTES + 1), [IMG])
    assert "not a readable zip" in error(load_upload, "x.zip", b"PK garbage", [IMG])
    assert "another archive" in error(load_upload, "n.zip", zip_bytes({"inner.zip": b"PK"}), [IMG])
    many = zip_bytes({f"{i}.png": b"" for i in range(D.MAX_MEMBERS + 1)})
    assert "files; at most" in error(load_upload, "many.zip", many, [IMG])
    assert "no PNG or JPEG" in error(load_upload, "t.zip", zip_bytes({"a.txt": b"x"}), [IMG])


def _patch_sizes(archive: bytes, size: int) -> bytes:
    """The zip with its (only) member's uncompressed size rewritten in both headers."""
    out = bytearray(archive)
    local, central = out.find(b"PK\x03\x04"), out.find(b"PK\x01\x02")
    struct.pack_into("<I", out, local + 22, size)
    struct.pack_into("<I", out, central + 24, size)
    return bytes(out)


def test_zip_bombs_are_refused(tmp_path):
    small = zip_bytes({"a.png": png_bytes(pixels())})
    claims_big = _patch_sizes(small, D.MAX_UPLOAD_BYTES + 1)
    assert "uncompressed" in error(load_upload, "bomb.zip", claims_big, [IMG])
    inflates = zip_bytes({"a.png": png_bytes(pixels()) + b"\0" * 2_000_000})  # 2 MB of zeros after the image
    lies = _patch_sizes(inflates, 100)
    tracemalloc.start()
    try:
        msg = error(load_upload, "liar.zip", lies, [IMG])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "liar.zip:a.png" in msg and peak < 4 << 20


def _png_claiming(width: int, height: int) -> bytes:
    """A valid small PNG whose header claims ``width`` x ``height`` (its IHDR CRC recomputed)."""
    data = bytearray(png_bytes(pixels()))
    start = data.find(b"IHDR")
    struct.pack_into(">II", data, start + 4, width, height)
    struct.pack_into(">I", data, start + 17, zlib.crc32(bytes(data[start:start + 17])))
    return bytes(data)


@pytest.mark.parametrize("side", [8_000, 20_000])  # past our cap; past Pillow's own
def test_an_image_bomb_is_refused_from_its_header(tmp_path, side):
    bomb = zip_bytes({"huge.png": _png_claiming(side, side)})
    tracemalloc.start()
    try:
        msg = error(load_upload, "px.zip", bomb, [IMG])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "px.zip:huge.png" in msg and f"{D.MAX_PIXELS:,}" in msg and peak < 10 << 20
    (tmp_path / "huge.png").write_bytes(_png_claiming(side, side))
    assert "huge.png" in error(load_data, tmp_path / "huge.png", [IMG])


def test_a_zip_file_on_disk_reads_like_an_upload(tmp_path):
    (tmp_path / "imgs.zip").write_bytes(zip_bytes({"a.png": png_bytes(pixels())}))
    assert len(load_data(tmp_path / "imgs.zip", [IMG])) == 1


# -- saved sets and random inputs ---------------------------------------------------------------------------
def test_save_and_load_saved_round_trip(tmp_path):
    write_png(tmp_path / "a.png", pixels())
    data = load_data(tmp_path / "a.png", [IMG])
    data.licence = "CC0"
    data.save(tmp_path / "saved.npz")
    back = load_saved(tmp_path / "saved.npz")
    assert back.names == data.names and back.preprocess == data.preprocess and back.licence == "CC0"
    assert np.array_equal(back.samples[0]["image"], data.samples[0]["image"]) and back.describe() == data.describe()
    again = load_data(tmp_path / "saved.npz", [IMG])  # the saved file is ordinary data too
    assert np.array_equal(again.samples[0]["image"], data.samples[0]["image"])


def test_load_saved_checks_what_it_reads(tmp_path):
    np.savez(tmp_path / "plain.npz", image=np.zeros((1, 1, 3, 4, 6), np.float32))
    assert "not a saved data set" in error(load_saved, tmp_path / "plain.npz")
    meta = {"source": "s", "names": ["a", "b"], "inputs": ["image"]}
    np.savez(tmp_path / "count.npz", image=np.zeros((1, 1, 3, 4, 6), np.float32),
             __dataset__=np.array(json.dumps(meta)))
    assert "count.npz" in error(load_saved, tmp_path / "count.npz")
    meta = {"source": "s", "names": ["a"], "inputs": ["image"], "random": "yes"}
    np.savez(tmp_path / "forged.npz", image=np.zeros((1, 1, 3, 4, 6), np.float32),
             __dataset__=np.array(json.dumps(meta)))
    assert "random" in error(load_saved, tmp_path / "forged.npz")


def test_random_dataset(tmp_path):
    specs = [InputSpec("ids", (1, 16), "int64"), InputSpec("x", (1, 4), "float32")]
    data = random_dataset(specs, count=3, seed=1)
    assert data.random and len(data) == 3 and data.describe() == "3 random input sample(s) (no data given)"
    assert set(np.unique(data.samples[0]["ids"])) <= {0, 1} and data.samples[2]["x"].dtype == np.float32
    assert not np.array_equal(data.samples[0]["x"], data.samples[1]["x"])
    data.save(tmp_path / "r.npz")
    assert load_saved(tmp_path / "r.npz").random
    assert "GB" in error(random_dataset, [InputSpec("x", (1 << 20, 1 << 10), "float32")], count=8)


# -- bundled data ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, count", [("cnn_classifier.onnx", 12), ("vit_classifier.onnx", 12),
                                         ("text_encoder.onnx", 8), ("audio_encoder.onnx", 3)])
def test_bundled_data_loads_against_the_sample_models(name, count):
    folder = bundled(name)
    assert folder is not None and folder.parent == ROOT / "samples" / "data"
    graph = load_model(ROOT / "samples" / name)
    specs = input_specs(graph, resolve_dims(graph, {}), {})
    pre = preprocess_for(graph) if "classifier" in name else None
    data = load_data(folder, specs, pre)
    assert len(data) == count and not data.random and data.dropped == 0
    licence = (folder / "LICENCE.txt").read_text()
    assert data.licence == licence[:2000]
    assert "public domain" in licence.lower() or "generated by this project" in licence
    for sample in data.samples:
        assert {k: (v.shape, v.dtype.name) for k, v in sample.items()} == {s.name: (s.shape, s.dtype) for s in specs}
    if name == "text_encoder.onnx":
        ids = np.stack([s["input_ids"] for s in data.samples])
        assert ids.max() < 1000 and (ids[:, 0, 0] == 2).all()  # in the sample's vocabulary, each starts [CLS]
    assert sum(p.stat().st_size for p in folder.iterdir()) < 400_000


def test_bundled_is_none_without_data():
    assert bundled("llm_decoder_kv.onnx") is None and bundled("mine.onnx") is None
    assert bundled("cnn_classifier") == bundled("vit_classifier.onnx") == ROOT / "samples" / "data" / "images"
