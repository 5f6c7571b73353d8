"""How raw images become an input tensor: explicit, recorded, never guessed silently.

Why explicit: the same photo normalised with ImageNet's mean/std or with YOLO's plain 0-1 gives two
different tensors, and an accuracy figure measured on the wrong one says nothing about the model.
So a ``Preprocess`` is prefilled from what the model states (``preprocess_for``: the input's fixed
height and width and where its channels are, else its metadata such as ``imgsz`` or a size in its
name, read by the shape hints' own rules in ``intake.shape_hints``; its channel count and dtype) and
from a preset (ImageNet, YOLO's 0-1, PP-OCR's text line); its ``source`` says where each value came
from, and every figure's data line carries it.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from dashboard.errors import UserError
from dashboard.serde import Record

LAYOUTS = ("NCHW", "NHWC")
CHANNELS = ("RGB", "BGR", "GRAY")
DTYPES = ("float32", "float16", "uint8", "int8")
MAX_SIDE = 8192
GRAY_WEIGHTS = (0.299, 0.587, 0.114)  # ITU-R 601 luma, as Pillow's convert("L")


@dataclass
class Preprocess(Record):
    """``resize`` (height, width; None: the input's own); pixels 0-255 times ``scale``, then
    ``(x - mean) / std`` per channel, in ``channels`` order, laid out as ``layout``, cast to ``dtype``."""

    resize: tuple[int, int] | None = None
    layout: str = "NCHW"
    scale: float = 1 / 255
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    channels: str = "RGB"
    dtype: str = "float32"
    preset: str | None = None
    source: str = "default"

    def __post_init__(self) -> None:
        self.resize = _size(self.resize)
        for name, value, choices in (("layout", self.layout, LAYOUTS), ("channels", self.channels, CHANNELS),
                                     ("dtype", self.dtype, DTYPES)):
            if value not in choices:
                raise UserError(f"preprocessing: {name} must be one of {', '.join(choices)}, got {value!r}")
        if not _number(self.scale) or not np.isfinite(self.scale) or self.scale == 0:
            raise UserError(f"preprocessing: scale must be a finite, non-zero number, got {self.scale!r}")
        self.scale = float(self.scale)
        self.mean, self.std = _floats("mean", self.mean), _floats("std", self.std)
        if any(v == 0 for v in self.std):
            raise UserError(f"preprocessing: std must be non-zero, got {self.std}")
        for name, values in (("mean", self.mean), ("std", self.std)):
            _per_channel(name, values, self.channel_count)
        if np.dtype(self.dtype).kind in "iu" and (self.scale != 1 or set(self.std) != {1.0}):
            raise UserError(f"preprocessing: an integer ({self.dtype}) input takes whole pixel values: scale 1 and "
                            f"std 1 (a mean is allowed), got scale {self.scale:g}, std {self.std}")

    @property
    def channel_count(self) -> int:
        return 1 if self.channels == "GRAY" else 3

    @property
    def words(self) -> str:
        """Every value in one phrase (what the captions and the report show)."""
        size = f"{self.resize[0]}x{self.resize[1]}" if self.resize else "the input's size"
        return (f"{size} {self.layout} {self.channels} {self.dtype}, x*{self.scale:.5g}"
                + ("" if set(self.mean) == {0.0} and set(self.std) == {1.0} else f", mean {self.mean} std {self.std}")
                + (f" (preset {self.preset})" if self.preset else ""))

    def apply(self, rgb: np.ndarray, height: int, width: int) -> np.ndarray:
        """An image (H, W, 3 uint8 RGB, already resized to ``height`` x ``width``) as one sample of
        shape (1, C, H, W) or (1, H, W, C)."""
        if rgb.shape != (height, width, 3):
            raise UserError(f"preprocessing: an image of {rgb.shape} pixels, expected ({height}, {width}, 3)")
        x = rgb.astype(np.float32)
        if self.channels == "BGR":
            x = x[..., ::-1]
        elif self.channels == "GRAY":
            x = (x @ np.array(GRAY_WEIGHTS, np.float32))[..., None]
        mean = np.array(_per_channel("mean", self.mean, x.shape[-1]), np.float32)
        std = np.array(_per_channel("std", self.std, x.shape[-1]), np.float32)
        x = (x * np.float32(self.scale) - mean) / std
        if self.layout == "NCHW":
            x = np.transpose(x, (2, 0, 1))
        return _cast(x[None], self.dtype)


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` as ``dtype``; an integer input's values must fit it (uint8 pixels minus a mean of 128
    do not fit uint8: a wrong mean, said rather than wrapped round)."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        if x.min() < info.min or x.max() > info.max:
            raise UserError(f"preprocessing: values {x.min():g}..{x.max():g} do not fit {dtype} "
                            f"({info.min}..{info.max}): change the mean")
        return np.round(x).astype(kind)
    return x.astype(kind)


def _size(value) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 < v <= MAX_SIDE for v in value):
        raise UserError(f"preprocessing: resize is (height, width), each 1 to {MAX_SIDE}, got {value!r}")
    return (int(value[0]), int(value[1]))


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _floats(name: str, values) -> tuple[float, ...]:
    if _number(values):
        values = (values,)
    if not isinstance(values, (tuple, list)) or not 1 <= len(values) <= 3 or not all(_number(v) for v in values):
        raise UserError(f"preprocessing: {name} takes one to three numbers (one per channel), got {values!r}")
    out = tuple(float(v) for v in values)
    if not all(np.isfinite(out)):
        raise UserError(f"preprocessing: {name} must be finite, got {out}")
    return out


def _per_channel(name: str, values: tuple[float, ...], channels: int) -> tuple[float, ...]:
    """One value per channel: a single value serves all; a GRAY image takes three equal ones."""
    if len(values) == 1:
        return values * channels
    if len(values) == channels:
        return values
    if channels == 1 and len(set(values)) == 1:
        return values[:1]
    raise UserError(f"preprocessing: {len(values)} {name} values for {channels} channel(s)"
                    + (" (GRAY takes one value: set mean and std)" if channels == 1 else ""))


PRESETS: dict[str, Preprocess] = {
    "imagenet": Preprocess(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), preset="imagenet",
                           source="preset imagenet (torchvision's mean/std, RGB, 0-1)"),
    "yolo": Preprocess(preset="yolo", source="preset yolo (RGB 0-1, no mean/std, as Ultralytics exports)"),
    "ocr": Preprocess(resize=(48, 320), mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), channels="BGR", preset="ocr",
                      source="preset ocr (PP-OCR's text line 48x320, BGR, (x/255-0.5)/0.5)"),
    "raw": Preprocess(scale=1.0, preset="raw", source="preset raw (pixels 0-255 as they are)"),
}
FAMILY_PRESETS = {"detector": "yolo", "ocr_recognizer": "ocr"}
FAMILY_WORDS = {"detector": "a detector", "ocr_recognizer": "an OCR recogniser", "speech_decoder": "a speech decoder"}


def preprocess_for(graph, input_name: str | None = None, preset: str | None = None) -> Preprocess:
    """Prefilled from the model: the preset asked for, else the family's (a detector: yolo, an OCR
    recogniser: ocr, else imagenet, said as a default); the size from the image input's fixed height
    and width, else the model's metadata or name, else the preset's; the layout from where its
    channels are; GRAY for one channel; an integer input takes raw pixels."""
    from dashboard.intake.shape_hints import _image_input, declared_size, family

    if preset is not None and preset not in PRESETS:
        raise UserError(f"preset must be one of {', '.join(sorted(PRESETS))}, got {preset!r}")
    kind = family(graph)
    chosen = preset or FAMILY_PRESETS.get(kind, "imagenet")
    base = PRESETS[chosen]
    words = [base.source if preset else f"{base.source}, the default for {FAMILY_WORDS.get(kind, 'a classifier')}: "
             "set a preset"]
    if input_name is not None:
        spec = next((s for s in graph.inputs if s.name == input_name), None)
        if spec is None:
            known = ", ".join(s.name for s in graph.inputs)
            raise UserError(f"the model has no input {input_name!r} (inputs: {known})")
    else:
        spec = _image_input(graph)
    if spec is None or not spec.shape or len(spec.shape) != 4:
        return dataclasses.replace(base, source="; ".join(words + ["no image input to take a size from"]))
    return for_shape(base, spec.shape, spec.dtype, words, declared_size(graph))


def for_shape(base: Preprocess, shape, dtype: str, words: list[str], declared=None) -> Preprocess:
    """``base`` fitted to a rank-4 image input of ``shape`` (ints, or names for open dimensions) and
    ``dtype``; ``words`` (where the base came from) grow by what was taken from the input."""
    from dashboard.intake.shape_hints import _spatial_axes

    h_axis, w_axis = _spatial_axes(SimpleNamespace(shape=tuple(shape)))  # it reads only the shape
    text = "x".join(str(d) if d is not None else "?" for d in shape)
    changes: dict = {"layout": "NHWC" if (h_axis, w_axis) == (1, 2) else "NCHW"}
    words = [*words, f"layout {changes['layout']} from the input shape {text}"]
    h, w = shape[h_axis], shape[w_axis]
    if all(isinstance(d, int) and d > 0 for d in (h, w)):
        changes["resize"] = (h, w)
        words.append(f"size {h}x{w} from the input shape")
    elif declared is not None:
        changes["resize"] = tuple(declared)
        words.append(f"size {declared[0]}x{declared[1]} from the model's metadata or name")
    elif base.resize is not None:
        words.append(f"size {base.resize[0]}x{base.resize[1]} from the preset")
    else:
        words.append("size: the input's, as the analysis fixes it")
    channel_axis = 3 if changes["layout"] == "NHWC" else 1
    if shape[channel_axis] == 1:
        changes["channels"] = "GRAY"
        changes["mean"] = (float(np.mean(base.mean)),)
        changes["std"] = (float(np.mean(base.std)),)
        words.append("GRAY from the input's one channel (the preset's mean/std averaged over its channels)")
    if dtype in DTYPES and dtype != base.dtype:
        changes["dtype"] = dtype
        words.append(f"dtype {dtype} from the input")
        if np.dtype(dtype).kind in "iu":
            changes.update(scale=1.0, mean=(0.0,), std=(1.0,))
            words.append("raw 0-255 pixels for an integer input")
    return dataclasses.replace(base, **changes, source="; ".join(words))


def preprocess_given(model_path, preset: str | None = None, given: dict | None = None) -> Preprocess:
    """The preprocessing of ``model_path``'s data: prefilled from the model and ``preset``
    (``preprocess_for``), then the values ``given`` (``--resize`` and the others, a sweep's
    ``[data]`` table) override it, and the record's ``source`` says which were given."""
    from dashboard.intake.reader import load_model

    base = preprocess_for(load_model(model_path), preset=preset)
    if not given:
        return base
    words = ", ".join(f"--{k}" for k in given)
    return dataclasses.replace(base, **given, source=f"{base.source}; {words} given")
