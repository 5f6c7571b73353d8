"""Shapes that look wrong for the model, before anything runs: warnings, better defaults, presets.

Why: QNN compiles the graph at the shape it is given, and a degenerate one compiles too. A text
recogniser analysed at ``[1, 3, 1, 1]``, a Whisper decoder whose encoder length is 1, a 320-pixel
detector at 224: each came back "HTP claims every node", a verdict about a graph nobody serves.
Three things help, for families of models rather than one file:

- **warnings** (``hints``): an input whose spatial or sequence dimension would be 1 (every
  convolution and attention then sees one pixel or one step), an encoder length of 1 in a decoder,
  a detector analysed at another size than its name or metadata says;
- **prefill** (``prefill``): better values where the model itself says them: an image size in
  the metadata (Ultralytics' ``imgsz``) or the file name (``_320``, ``640x640``), a fixed height of
  an OCR recogniser's input with the width it implies, a square input's other side;
- **presets** (``presets``): typical settings of the family (Whisper's 1500 encoder frames, a
  PP-OCR recogniser's 48×320 line, a detector's 320 / 640), to pick from.

``shapes.default_dims`` takes the prefill, so every page and the CLI start from it. Library code:
no Streamlit, no runtime; the pages render the hints (``views.shape_hints``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.intake.graph import ModelGraph, TensorSpec
from dashboard.intake.shapes import DEFAULT_FRAMES, DEFAULT_SEQUENCE, dim_kind, has_kv_cache

WHISPER_ENCODER_FRAMES = 1500  # 30 s of audio: 3000 mel frames, halved by the encoder's strided conv
OCR_LINE = (48, 320)  # PP-OCR v3/v4 recognisers' text line (height, width)
OCR_WIDTH_PER_HEIGHT = OCR_LINE[1] / OCR_LINE[0]
OCR_HEIGHTS = (16, 128)  # a text line's fixed height in a recogniser's input (ddddocr: 64, CRNN: 32)
DETECTOR_SIZES = (320, 416, 512, 640, 1024)  # sides a detector's name or metadata usually says
DETECTOR_DEFAULT = 640  # Ultralytics' and PP-OCR's detectors' usual side, when the model says none
IMAGE_DEFAULT = 224  # as ``shapes.DEFAULT_IMAGE``: the usual classifier input

OCR_WORDS = re.compile(r"ocr|crnn|captcha|recogni[sz]er|(^|[^a-z])rec([^a-z]|$)", re.I)
DETECTOR_WORDS = re.compile(r"yolo|detr|ssd|retina|det(ect(or|ion)?)?([^a-z]|$)|rtmdet|nanodet|efficientdet", re.I)
WHISPER_WORDS = re.compile(r"whisper", re.I)
SIZE_IN_NAME = re.compile(r"(?<![0-9])(\d{3,4})(?:x(\d{3,4}))?(?![0-9])")


@dataclass(frozen=True)
class ShapeHint:
    """One warning: the input (or None for the whole model), what is wrong, and the dimension
    values that would fix it (empty when the fix is a whole input shape, in ``shapes``)."""

    input: str | None
    message: str
    dims: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    """Typical settings of a model family: dimension values and whole input shapes."""

    title: str
    dims: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def text(self) -> str:
        parts = [f"{k}={v}" for k, v in self.dims.items()] + \
            [f"{k}={','.join(map(str, v))}" for k, v in self.shapes.items()]
        return f"{self.title}: {', '.join(parts)}"


# -- what the model says about itself -------------------------------------------------------------------
def _stem(graph: ModelGraph) -> str:
    """The model's file name without its extension: the name the user knows it by (an upload's
    name as uploaded, not its stored copy's ``model.onnx``)."""
    return Path(getattr(graph, "file_name", "") or Path(graph.path).name).stem


def _names(graph: ModelGraph) -> str:
    metadata = getattr(graph, "metadata", {}) or {}
    return " ".join([_stem(graph), graph.graph_name or "", metadata.get("task", ""),
                     metadata.get("description", "")])


def family(graph: ModelGraph) -> str | None:
    """``"ocr_recognizer"``, ``"detector"``, ``"speech_decoder"`` or None, from the model's name,
    metadata and inputs (an image input for the first two, encoder states for the last)."""
    names, metadata = _names(graph), getattr(graph, "metadata", {}) or {}
    image = _image_input(graph)
    if _encoder_dims(graph) and WHISPER_WORDS.search(names):
        return "speech_decoder"
    if image is not None and ("character" in metadata or OCR_WORDS.search(names)) and \
            not re.search(r"(^|[^a-z])det", names, re.I):
        return "ocr_recognizer"
    if image is not None and (DETECTOR_WORDS.search(names) or metadata.get("task") == "detect"):
        return "detector"
    if image is not None and _reads_a_text_line(graph, image):
        return "ocr_recognizer"
    return None


def _reads_a_text_line(graph: ModelGraph, image: TensorSpec) -> bool:
    """A text recogniser by its structure, whatever its file is called (ddddocr ships
    ``common.onnx``): an image of fixed height (a text line's: 16 to 128 pixels) and open width
    (the line grows with its text), read into a sequence of open length (an output with an open
    dimension other than the batch's: one step per slice of the width)."""
    h_axis, w_axis = _spatial_axes(image)
    height, width = image.shape[h_axis], image.shape[w_axis]
    if not (isinstance(height, int) and OCR_HEIGHTS[0] <= height <= OCR_HEIGHTS[1]) or isinstance(width, int):
        return False
    batch = image.shape[0]
    return any(not isinstance(d, int) and (d is None or d != batch)
               for out in graph.outputs for d in (out.shape or ())[1:])


def declared_size(graph: ModelGraph) -> tuple[int, int] | None:
    """The image size (height, width) the model's metadata (``imgsz``) or name says, if any."""
    metadata = getattr(graph, "metadata", {}) or {}
    found = re.findall(r"\d{2,4}", metadata.get("imgsz", ""))
    if found:
        return (int(found[0]), int(found[-1]))
    for match in SIZE_IN_NAME.finditer(_stem(graph).replace("-", "_")):
        h, w = int(match.group(1)), int(match.group(2) or match.group(1))
        if h in DETECTOR_SIZES or w in DETECTOR_SIZES:
            return (h, w)
    return None


def _image_input(graph: ModelGraph) -> TensorSpec | None:
    """The first rank-4 input with 1 or 3 channels first (NCHW) or last (NHWC)."""
    for spec in graph.inputs:
        shape = spec.shape or ()
        if len(shape) == 4 and (shape[1] in (1, 3) or shape[3] in (1, 3)):
            return spec
    return None


def _spatial_axes(spec: TensorSpec) -> tuple[int, int]:
    shape = spec.shape or ()
    return (1, 2) if len(shape) == 4 and shape[3] in (1, 3) and shape[1] not in (1, 3) else (2, 3)


def _encoder_dims(graph: ModelGraph) -> list[str]:
    """Symbolic dimensions named for an encoder's length (a decoder's cross-attention input)."""
    out: dict[str, None] = {}
    for spec in graph.inputs:
        for dim in spec.shape or ():
            if isinstance(dim, str) and "encoder" in dim.lower() and re.search(r"seq|len|frames", dim.lower()):
                out.setdefault(dim, None)
    return list(out)


# -- prefill and presets ------------------------------------------------------------------------------------
def prefill(graph: ModelGraph) -> dict[str, tuple[int, str]]:
    """Better values for symbolic dimensions, where the model says them: name -> (value, why)."""
    out: dict[str, tuple[int, str]] = {}
    whisper = family(graph) == "speech_decoder"
    for name in _encoder_dims(graph):
        out[name] = (WHISPER_ENCODER_FRAMES, "Whisper's encoder output: 1500 frames for 30 s of audio") if whisper \
            else (128, "encoder length (the encoder's output a decoder attends to, never one decode step)")
    image = _image_input(graph)
    if image is None:
        return out
    h_axis, w_axis = _spatial_axes(image)
    h, w = image.shape[h_axis], image.shape[w_axis]
    kind, size = family(graph), declared_size(graph)
    if size is not None:
        for dim, value in ((h, size[0]), (w, size[1])):
            if isinstance(dim, str):
                out[dim] = (value, f"the image size the model's {'metadata' if _meta_size(graph) else 'name'} says")
    elif kind == "ocr_recognizer":
        height = h if isinstance(h, int) and h > 1 else OCR_LINE[0]
        if isinstance(h, str):
            out[h] = (OCR_LINE[0], "a text line's height (PP-OCR recognisers: 48)")
        if isinstance(w, str):
            width = int(round(height * OCR_WIDTH_PER_HEIGHT / 8)) * 8
            out[w] = (width, f"a text line's width for height {height} (PP-OCR: 48×320)")
    elif isinstance(h, int) and h > 1 and isinstance(w, str):
        out[w] = (h, "the input's fixed side (a square image)")
    elif isinstance(w, int) and w > 1 and isinstance(h, str):
        out[h] = (w, "the input's fixed side (a square image)")
    elif isinstance(h, str) and isinstance(w, str):  # both open: the family's size, never a guessed 1
        side, why = (DETECTOR_DEFAULT, "a detector's usual input side") if kind == "detector" else \
            (IMAGE_DEFAULT, "the usual vision input side")
        for dim in (h, w):
            out.setdefault(dim, (side, why))
    return out


def _meta_size(graph: ModelGraph) -> bool:
    return bool(re.findall(r"\d{2,4}", (getattr(graph, "metadata", {}) or {}).get("imgsz", "")))


def presets(graph: ModelGraph) -> list[Preset]:
    """The family's typical settings (nothing for a model of no known family)."""
    kind, image = family(graph), _image_input(graph)
    encoder = _encoder_dims(graph)
    out: list[Preset] = []
    if encoder and kind == "speech_decoder":
        out.append(Preset("Whisper, 30 s of audio", {d: WHISPER_ENCODER_FRAMES for d in encoder}))
    if image is None:
        return out
    h_axis, w_axis = _spatial_axes(image)
    height = image.shape[h_axis]
    if kind == "ocr_recognizer" and isinstance(height, int) and height > 1:  # its own height: widths for it
        line = int(round(height * OCR_WIDTH_PER_HEIGHT / 8)) * 8
        out.append(_image_preset(image, h_axis, w_axis, (height, line),
                                 f"OCR text line {height}×{line} (the model's height, PP-OCR's proportions)"))
        if line != OCR_LINE[1]:
            out.append(_image_preset(image, h_axis, w_axis, (height, OCR_LINE[1]), f"OCR text line {height}×320"))
    elif kind == "ocr_recognizer":
        out.append(_image_preset(image, h_axis, w_axis, OCR_LINE, "OCR text line 48×320 (PP-OCR v3/v4)"))
        out.append(_image_preset(image, h_axis, w_axis, (32, 320), "OCR text line 32×320 (CRNN, PP-OCR v2)"))
    elif kind == "detector":
        size = declared_size(graph)
        sides = [size] if size else []
        sides += [(s, s) for s in (320, 640) if (s, s) != size]
        out += [_image_preset(image, h_axis, w_axis, hw, f"detector {hw[0]}×{hw[1]}"
                              + (" (the model's own size)" if hw == size else "")) for hw in sides]
    return [p for p in out if p.dims or p.shapes]


def _image_preset(image: TensorSpec, h_axis: int, w_axis: int, hw: tuple[int, int], title: str) -> Preset:
    """A preset for an image input: by dimension name where its sides are named, else its whole
    shape (the batch 1, channels as declared)."""
    shape = list(image.shape)
    dims: dict[str, int] = {}
    for axis, value in ((h_axis, hw[0]), (w_axis, hw[1])):
        if isinstance(shape[axis], str):
            dims[shape[axis]] = value
        elif shape[axis] is None:
            return Preset(title, shapes={image.name: tuple(
                (1 if i == 0 else hw[0] if i == h_axis else hw[1] if i == w_axis else (d if isinstance(d, int) else 1))
                for i, d in enumerate(shape))})
    return Preset(title, dims)


def default_shapes(graph: ModelGraph, dims: dict[str, int]) -> dict[str, tuple[int | None, ...]]:
    """A proposed whole shape for each input with an unnamed (``?``) dimension: its fixed sizes,
    its named dimensions as resolved (``dims``), and, for the image input of a known family, the
    family's first preset (an OCR recogniser exported with a ``?`` height gets 48, not a field the
    user must guess). None where nothing is known: the user decides. Why here: the form's prefill
    and the warnings then judge the same shape."""
    first = next((p for p in presets(graph) if p.shapes), None)
    out: dict[str, tuple[int | None, ...]] = {}
    for spec in graph.inputs:
        shape = spec.shape or ()
        if not any(d is None for d in shape):
            continue
        if first is not None and spec.name in first.shapes:
            out[spec.name] = tuple(first.shapes[spec.name])
            continue
        out[spec.name] = tuple(d if isinstance(d, int) and d >= 0 else dims.get(d) if isinstance(d, str) else None
                               for d in shape)
    return out


# -- warnings ------------------------------------------------------------------------------------------------
def effective_shape(spec: TensorSpec, dims: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> list[int | None]:
    """The shape an analysis gives ``spec``: its whole shape if set, else its dimensions resolved."""
    if spec.name in shapes:
        return list(shapes[spec.name])
    return [d if isinstance(d, int) and d >= 0 else dims.get(d) if isinstance(d, str) else None
            for d in spec.shape or ()]


def hints(graph: ModelGraph, dims: dict[str, int], shapes: dict[str, tuple[int, ...]] | None = None) -> list[ShapeHint]:
    """What looks degenerate at these settings (``dims`` as resolved: ``shapes.resolve_dims``)."""
    shapes = shapes or {}
    out: list[ShapeHint] = []
    better = {name: value for name, (value, _) in prefill(graph).items()}
    encoder = _encoder_dims(graph)
    for name in encoder:
        if dims.get(name) == 1:
            want = better.get(name, 128)
            whose = " for Whisper" if want == WHISPER_ENCODER_FRAMES else ""
            out.append(ShapeHint(None, f"The encoder length {name} is 1: the decoder's cross-attention would attend "
                                       f"to a single encoder frame, a graph nobody serves. Set it to the encoder's "
                                       f"output length ({want}{whose}).", {name: want}))
    image = _image_input(graph)
    if image is not None:
        out += _image_hints(graph, image, dims, shapes, better)
    warned: set[str] = set()  # a named length shared by several inputs (ids, mask, types) is said once
    for spec in graph.inputs:
        if spec is not image:
            for hint in _sequence_hints(graph, spec, effective_shape(spec, dims, shapes), encoder, better):
                if not (hint.dims and set(hint.dims) <= warned):
                    out.append(hint)
                    warned |= set(hint.dims)
    return out


def _sequence_axes(graph: ModelGraph, spec: TensorSpec, encoder: list[str]) -> list[int]:
    """The axes of ``spec`` that are a sequence (tokens, frames): named so (``sequence_length``,
    ``frames``, ``num_tokens``…), or the unnamed middle axis of a rank-3 input. Not the KV cache's
    past or total lengths, not an encoder length (warned on its own), and not a KV decoder's own
    ``sequence_length``: there one token per step is how it is served."""
    decoder = has_kv_cache(graph)
    axes = []
    for axis, dim in enumerate(spec.shape or ()):
        if isinstance(dim, str):
            kind = dim_kind(dim)
            if dim in encoder or kind not in ("sequence", "frames") or (decoder and kind == "sequence"):
                continue
            axes.append(axis)
        elif dim is None and axis == 1 and len(spec.shape) == 3:
            axes.append(axis)
    return axes


def _sequence_hints(graph: ModelGraph, spec: TensorSpec, shape: list[int | None], encoder: list[str],
                    better: dict[str, int]) -> list[ShapeHint]:
    out = []
    for axis in _sequence_axes(graph, spec, encoder):
        if shape[axis] != 1:
            continue
        declared = spec.shape[axis]
        frames = isinstance(declared, str) and dim_kind(declared) == "frames"
        want = better.get(declared, DEFAULT_FRAMES if frames else DEFAULT_SEQUENCE) if isinstance(declared, str) else None
        what = "frame" if frames else "token"
        out.append(ShapeHint(spec.name, f"Input {spec.name} would be analysed at {_shape(shape)}: its "
                                        f"{'frames' if frames else 'sequence'} dimension ({declared or '?'}) is 1, "
                                        f"one {what} — attention and convolutions over one {what} are not the graph "
                                        f"that is served. Set it to a typical length"
                                        + (f" ({want})." if want else "."),
                             {declared: want} if want else {}))
    return out


def _image_hints(graph: ModelGraph, image: TensorSpec, dims: dict[str, int], shapes: dict[str, tuple[int, ...]],
                 better: dict[str, int]) -> list[ShapeHint]:
    shape = effective_shape(image, dims, shapes)
    h_axis, w_axis = _spatial_axes(image)
    out = []
    open_sides = [axis for axis in (h_axis, w_axis) if not isinstance(image.shape[axis], int)]
    ones = [axis for axis in open_sides if shape[axis] == 1]
    unset = [axis for axis in open_sides if shape[axis] is None]  # unnamed (?): only a whole shape fixes it
    collapsed = ones + unset
    if collapsed:
        fix = presets(graph)[:1]
        side = lambda axes: " and ".join("height" if a == h_axis else "width" for a in axes)  # noqa: E731
        said = []
        if ones:
            said.append(f"its {side(ones)} {'is' if len(ones) == 1 else 'are'} 1, so every convolution sees one pixel")
        if unset:
            said.append(f"its {side(unset)} {'has' if len(unset) == 1 else 'have'} no size (an unnamed dimension, ?, "
                        "that only the input's whole shape fixes; left so, the analysis leaves it dynamic)")
        suggestion = f" Try {fix[0].text()}." if fix else " Set the image size the model is served at."
        out.append(ShapeHint(image.name, f"Input {image.name} would be analysed at {_shape(shape)}: "
                                         f"{'; '.join(said)}.{suggestion}",
                             fix[0].dims if fix else {}, fix[0].shapes if fix else {}))
    size = declared_size(graph)
    if size is not None and family(graph) == "detector" and not collapsed:
        at = (shape[h_axis], shape[w_axis])
        if at != size:
            source = "metadata" if _meta_size(graph) else "name"
            out.append(ShapeHint(image.name, f"Input {image.name} would be analysed at {at[0]}×{at[1]}, but the "
                                             f"model's {source} says {size[0]}×{size[1]}: a detector's anchors and "
                                             f"strides are laid out for its own size.",
                                 {k: v for k, v in better.items()
                                  if k in (image.shape[h_axis], image.shape[w_axis])}))
    return out


def _shape(shape: list[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
