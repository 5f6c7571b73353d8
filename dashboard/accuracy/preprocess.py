"""How raw images become an input tensor: explicit, recorded, never guessed silently.

A ``Preprocess`` is prefilled from what the model states (``preprocess_for``: its metadata such as
``imgsz``, a size in its name, the input's fixed height and width and its layout, read by the shape
hints' own rules in ``intake.shape_hints``) and from a preset (ImageNet, YOLO's 0-1, PP-OCR's text
line); its ``source`` says where each value came from, and every figure's data line carries it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from dashboard.errors import UserError
from dashboard.serde import Record

LAYOUTS = ("NCHW", "NHWC")
CHANNELS = ("RGB", "BGR", "GRAY")
DTYPES = ("float32", "float16", "uint8", "int8")


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
        if self.resize is not None:
            if len(self.resize) != 2 or not all(isinstance(v, int) and 0 < v <= 8192 for v in self.resize):
                raise UserError(f"resize is (height, width) between 1 and 8192, got {self.resize!r}")
            self.resize = (int(self.resize[0]), int(self.resize[1]))
        for name, value, choices in (("layout", self.layout, LAYOUTS), ("channels", self.channels, CHANNELS),
                                     ("dtype", self.dtype, DTYPES)):
            if value not in choices:
                raise UserError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if not isinstance(self.scale, (int, float)) or not np.isfinite(self.scale) or self.scale == 0:
            raise UserError(f"scale must be a finite, non-zero number, got {self.scale!r}")
        self.mean, self.std = tuple(float(v) for v in self.mean), tuple(float(v) for v in self.std)
        if not 1 <= len(self.mean) <= 4 or not 1 <= len(self.std) <= 4:
            raise UserError("mean and std take one to four numbers (one per channel)")
        if any(not np.isfinite(v) for v in self.mean + self.std) or any(v == 0 for v in self.std):
            raise UserError(f"mean and std must be finite and std non-zero, got {self.mean}, {self.std}")

    @property
    def words(self) -> str:
        size = f"{self.resize[0]}x{self.resize[1]}" if self.resize else "the input's size"
        return (f"{size} {self.layout} {self.channels} {self.dtype}, x*{self.scale:.5g}"
                + ("" if set(self.mean) == {0.0} and set(self.std) == {1.0} else f", mean {self.mean} std {self.std}")
                + (f" (preset {self.preset})" if self.preset else ""))

    def apply(self, rgb: np.ndarray, height: int, width: int) -> np.ndarray:
        """An image (H, W, 3 uint8 RGB, already resized to ``height`` x ``width``) as one sample of
        shape (1, C, H, W) or (1, H, W, C)."""
        x = rgb.astype(np.float32)
        if self.channels == "BGR":
            x = x[..., ::-1]
        elif self.channels == "GRAY":
            x = (x @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]
        channels = x.shape[-1]
        mean = np.array(_per_channel(self.mean, channels), np.float32)
        std = np.array(_per_channel(self.std, channels), np.float32)
        x = (x * np.float32(self.scale) - mean) / std
        if self.layout == "NCHW":
            x = np.transpose(x, (2, 0, 1))
        return x[None].astype(self.dtype)


def _per_channel(values: tuple[float, ...], channels: int) -> tuple[float, ...]:
    if len(values) == 1:
        return values * channels
    if len(values) != channels:
        raise UserError(f"{len(values)} mean/std values for {channels} channel(s)")
    return values


PRESETS: dict[str, Preprocess] = {
    "imagenet": Preprocess(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), preset="imagenet",
                           source="preset imagenet (torchvision's mean/std, RGB, 0-1)"),
    "yolo": Preprocess(preset="yolo", source="preset yolo (RGB 0-1, no mean/std, as Ultralytics exports)"),
    "ocr": Preprocess(resize=(48, 320), mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), channels="BGR", preset="ocr",
                      source="preset ocr (PP-OCR's text line 48x320, BGR, (x/255-0.5)/0.5)"),
    "raw": Preprocess(scale=1.0, preset="raw", source="preset raw (pixels 0-255 as they are)"),
}


def preprocess_for(graph, input_name: str | None = None, preset: str | None = None) -> Preprocess:
    """Prefilled from the model: the preset asked for, else the family's (a detector: yolo, an OCR
    recogniser: ocr, else imagenet, said as a default); the size from the metadata or name, else the
    image input's fixed height and width; the layout from where its channels are."""
    from dashboard.intake.shape_hints import _image_input, _spatial_axes, declared_size, family

    if preset is not None and preset not in PRESETS:
        raise UserError(f"preset must be one of {', '.join(sorted(PRESETS))}, got {preset!r}")
    kind = family(graph)
    chosen = preset or {"detector": "yolo", "ocr_recognizer": "ocr"}.get(kind, "imagenet")
    base = PRESETS[chosen]
    words = [base.source if preset else f"{base.source}, the default for a {kind or 'classifier'}: set a preset"]
    spec = next((s for s in graph.inputs if s.name == input_name), None) if input_name else _image_input(graph)
    changes: dict = {}
    if spec is not None and spec.shape and len(spec.shape) == 4:
        h_axis, w_axis = _spatial_axes(spec)
        changes["layout"] = "NHWC" if (h_axis, w_axis) == (1, 2) else "NCHW"
        size = declared_size(graph)
        if size is not None:
            changes["resize"], why = size, "size from the model's metadata or name"
        elif all(isinstance(spec.shape[a], int) and spec.shape[a] > 0 for a in (h_axis, w_axis)):
            changes["resize"] = (spec.shape[h_axis], spec.shape[w_axis])
            why = f"size from the input shape {'x'.join(str(d) for d in spec.shape)}"
        else:
            why = None
        if why and base.resize is None:
            words.append(why)
        elif base.resize is not None:
            changes.pop("resize", None)
        words.append(f"layout {changes['layout']} from where the input's channels are")
    return dataclasses.replace(base, **changes, source="; ".join(words))
