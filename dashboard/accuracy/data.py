"""The user's samples: read, checked against the model's inputs, and handed to the worker.

Accepted: a folder of images (PNG/JPEG, Pillow; through a ``Preprocess``), a ``.npy`` (one input:
one sample per leading index, or one sample of exactly the input's shape), a ``.npz`` (one array per
input name, one sample per leading index), a folder of ``.npy``/``.npz`` files (a sample or a stack
of them per file), a WAV file or folder for a waveform input (mono, PCM or float), a ``.zip`` of
images, and a browser upload (an ``.npz`` or a ``.zip`` of images, in memory).

Why so strict: an accuracy figure on the wrong tensor looks like any other figure. So every check
fails as one ``UserError`` line naming the file and what was expected: an empty folder, a corrupt
image, a wrong shape or dtype, a missing input, NaN or infinity, and sizes past the caps *before*
anything large is read (an ``.npy``'s size from its header, an ``.npz``'s from its members' headers,
a zip's from its directory, an image's pixels from its header).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import struct
import wave
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dashboard.accuracy.preprocess import PRESETS, Preprocess, for_shape
from dashboard.errors import UserError
from dashboard.serde import Record, SchemaError

MAX_ARRAY_BYTES = 1 << 30  # a data set whose arrays would take more is refused from the headers
MAX_UPLOAD_BYTES = 256 << 20  # a browser upload, and a zip's members uncompressed in all
MAX_MEMBERS = 512  # files in a zip of images
MAX_NPZ_MEMBERS = 4096
MAX_PIXELS = 40_000_000  # one image's pixels (Pillow's own bomb guard is at 89 M)
DEFAULT_LIMIT = 256
IMAGES = (".png", ".jpg", ".jpeg")
ARRAYS = (".npy", ".npz")
AUDIO = (".wav",)
ARCHIVES = (".zip", ".npz", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
CHUNK = 1 << 20
META_KEY = "__dataset__"  # ``save``'s record of the set; input arrays keep their own names
BUNDLED = {"cnn_classifier": "images", "vit_classifier": "images", "text_encoder": "text_encoder",
           "audio_encoder": "audio_encoder"}  # the LLM decoder's inputs are a KV cache: no real data to ship


@dataclass
class InputSpec:
    """One input as the model expects it: every dimension fixed."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def text(self) -> str:
        return f"{self.name!r} {list(self.shape)} {self.dtype}"


def input_specs(graph, dims: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> list[InputSpec]:
    """The model's inputs with every dimension fixed: a whole shape given (``shapes``) wins, named
    dimensions take ``dims`` over the defaults (``shapes.resolve_dims``); an unnamed or unknown
    dimension without a whole shape is an error, never a silent 1."""
    from dashboard.intake.shapes import resolve_dims

    resolved = resolve_dims(graph, dims)
    return [_spec(t, resolved, shapes) for t in graph.inputs]


def _spec(tensor, dims: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> InputSpec:
    try:
        dtype = np.dtype(tensor.dtype).name
    except TypeError:
        raise UserError(f"input {tensor.name!r} has type {tensor.dtype}, which data cannot be given for") from None
    if tensor.name in shapes:
        shape = tuple(int(d) for d in shapes[tensor.name])
    elif tensor.shape is None:
        raise UserError(f"input {tensor.name!r} has no declared shape: give its whole shape ({tensor.name}=1,...)")
    else:
        shape = tuple(d if isinstance(d, int) and d >= 0 else dims.get(d) if isinstance(d, str) else None
                      for d in tensor.shape)
        if any(d is None for d in shape):
            raise UserError(f"input {tensor.name!r} {tensor.shape_text()} has an open dimension: give its whole "
                            f"shape ({tensor.name}=1,...) or the dimension's value")
    if any(d <= 0 for d in shape):
        raise UserError(f"input {tensor.name!r}: every dimension must be at least 1, got {list(shape)}")
    return InputSpec(tensor.name, shape, dtype)


# -- the data set ---------------------------------------------------------------------------------------
@dataclass
class SavedMeta(Record):
    """What ``Dataset.save`` records beside the arrays (read back as any file crossing processes)."""

    source: str
    names: list[str]
    inputs: list[str]
    preprocess: Preprocess | None = None
    licence: str | None = None
    random: bool = False
    dropped: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Dataset:
    """Samples ready for the sessions: per sample, input name -> array of the input's shape and dtype."""

    source: str
    names: list[str]
    samples: list[dict[str, np.ndarray]]
    preprocess: Preprocess | None = None
    licence: str | None = None
    random: bool = False
    dropped: int = 0  # samples past ``limit``, left out
    notes: list[str] = field(default_factory=list)  # what else was done to the data (audio padded ...)

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self) -> str:
        """One line for every figure: how many samples, from where, in which form (the
        preprocessing's every value and where each came from)."""
        if self.random:
            return f"{len(self)} random input sample(s) (no data given)"
        kind = f"images, {self.preprocess.words}; {self.preprocess.source}" if self.preprocess else "arrays as given"
        extra = "".join(f"; {n}" for n in self.notes)
        more = f"; the first {len(self)} kept, {self.dropped} more left out" if self.dropped else ""
        return f"{len(self)} sample(s) from {self.source} ({kind}{extra}){more}"

    def save(self, path) -> None:
        """One ``.npz``: each input stacked on a new leading axis under its own name (so
        ``load_data`` reads it too), and the set's record as JSON under ``__dataset__``."""
        if not self.samples:
            raise UserError(f"{self.source}: no samples to save")
        keys = list(self.samples[0])
        if META_KEY in keys:
            raise UserError(f"an input is named {META_KEY!r}, which the saved data set reserves")
        meta = SavedMeta(self.source, list(self.names), keys, self.preprocess, self.licence, self.random, self.dropped,
                     list(self.notes))
        np.savez(path, **{k: np.stack([s[k] for s in self.samples]) for k in keys},
                 **{META_KEY: np.array(json.dumps(meta.to_json()))})


def load_saved(path) -> Dataset:
    """What ``save`` wrote (the worker's side: sizes from the headers first, no pickles, the record
    checked field by field, every input holding one array per sample name)."""
    where = str(path)
    _check_archive(where, path, MAX_ARRAY_BYTES)
    try:
        with np.load(path, allow_pickle=False) as z:
            if META_KEY not in z.files:
                raise UserError(f"{where}: not a saved data set (no {META_KEY} record)")
            meta = SavedMeta.from_json(json.loads(str(z[META_KEY][()])))
            missing = [k for k in meta.inputs if k not in z.files]
            if missing:
                raise UserError(f"{where}: the saved data set lacks input {missing[0]!r}")
            arrays = {k: z[k] for k in meta.inputs}
    except (SchemaError, json.JSONDecodeError) as exc:
        raise UserError(f"{where}: a damaged saved data set ({exc})") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UserError(f"{where}: not a readable saved data set ({exc})") from None
    for k, a in arrays.items():
        if a.ndim == 0 or len(a) != len(meta.names):
            raise UserError(f"{where}: input {k!r} holds {len(a) if a.ndim else 0} samples for {len(meta.names)} names")
        if a.dtype.kind not in "biuf":
            raise UserError(f"{where}: input {k!r} holds {a.dtype} data, not numbers")
        _finite(f"{where}[{k}]", k, a)
    samples = [{k: a[i] for k, a in arrays.items()} for i in range(len(meta.names))]
    return Dataset(meta.source, meta.names, samples, meta.preprocess, meta.licence, meta.random, meta.dropped,
                   meta.notes)


def random_dataset(specs: list[InputSpec], count: int = 8, seed: int = 0) -> Dataset:
    """Generated inputs (floats standard normal, integers small and non-negative, as
    ``runtime.qnn.random_inputs``): every figure on them says *random inputs*."""
    rng = np.random.default_rng(seed)
    total = sum(s.nbytes for s in specs) * count
    if total > MAX_ARRAY_BYTES:
        raise UserError(f"{count} random samples would take {total / 2**30:.1f} GB: fix the inputs' dimensions smaller")
    samples = []
    for _ in range(count):
        sample = {}
        for s in specs:
            if np.issubdtype(np.dtype(s.dtype), np.floating):
                sample[s.name] = rng.standard_normal(s.shape).astype(s.dtype)
            elif s.dtype == "bool":
                sample[s.name] = np.ones(s.shape, bool)
            else:
                sample[s.name] = rng.integers(0, 2, size=s.shape).astype(s.dtype)
        samples.append(sample)
    return Dataset("random inputs", [f"random #{i}" for i in range(count)], samples, random=True)


# -- arrays: shape, dtype, finite ----------------------------------------------------------------------
def _fit(where: str, spec: InputSpec, array: np.ndarray) -> np.ndarray:
    """One sample of ``spec``: the exact shape (a missing leading batch of 1 is added), the dtype
    (casts that keep the values only), finite."""
    if array.shape != spec.shape and (1, *array.shape) == spec.shape:
        array = array[None]
    if array.shape != spec.shape:
        raise UserError(f"{where}: input {spec.name!r} expects shape {list(spec.shape)} per sample, got "
                        f"{list(array.shape)}")
    array = _cast(where, spec, np.asarray(array))
    _finite(where, spec.name, array)
    return array


def _cast(where: str, spec: InputSpec, array: np.ndarray) -> np.ndarray:
    """Safe casts: float to any float whose range holds the values (float64 -> float32), integers or
    bools to floats, integers to integers that hold the values (int32 -> int64); never float to int."""
    have, want = array.dtype, np.dtype(spec.dtype)
    if have == want:
        return array
    refuse = f"{where}: input {spec.name!r} expects {want.name}, got {have.name}"
    if want.kind == "b" or have.kind not in "biuf":
        raise UserError(f"{refuse} (not a safe cast)")
    if want.kind in "iu":
        if have.kind == "f":
            raise UserError(f"{refuse}: float data for an integer input (ids and masks are whole numbers)")
        info = np.iinfo(want)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise UserError(f"{refuse} with values {array.min()}..{array.max()}, outside {want.name}")
        return array.astype(want)
    if have.kind == "f" and array.size and np.nanmax(np.abs(array)) > np.finfo(want).max:
        raise UserError(f"{refuse} with values beyond {want.name}'s range")
    return array.astype(want)


def _finite(where: str, name: str, array: np.ndarray) -> None:
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise UserError(f"{where}: input {name!r} holds NaN or infinity")


def _count(where: str, spec: InputSpec, shape: tuple[int, ...]) -> tuple[int, str]:
    """How an array of ``shape`` holds samples of ``spec``: (count, how), how being ``one`` (exactly
    the input, or it without its batch of 1), ``stack`` (samples on a new leading axis) or ``batch``
    (a batch-1 input's samples stacked on its batch axis)."""
    s = spec.shape
    if shape == s or (s[:1] == (1,) and shape == s[1:]):
        return 1, "one"
    if len(shape) == len(s) + 1 and shape[1:] == s:
        return shape[0], "stack"
    if s[:1] == (1,) and len(shape) == len(s) and shape[1:] == s[1:]:
        return shape[0], "batch"
    raise UserError(f"{where}: input {spec.name!r} expects shape {list(s)} per sample (or such samples stacked "
                    f"on a leading axis), got {list(shape)}")


def _sample(array, how: str, i: int) -> np.ndarray:
    if how == "one":
        return np.asarray(array)
    return np.asarray(array[i:i + 1] if how == "batch" else array[i])


# -- .npy / .npz -----------------------------------------------------------------------------------------
def _header(where: str, handle) -> tuple[tuple[int, ...], np.dtype]:
    """An .npy array's shape and dtype from its header alone."""
    try:
        version = np.lib.format.read_magic(handle)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = reader(handle)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UserError(f"{where}: not a readable .npy array ({exc})") from None
    if dtype.hasobject:
        raise UserError(f"{where}: holds Python objects, which are never loaded; save plain numeric arrays")
    return tuple(shape), dtype


def _check_archive(where: str, source, cap: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each .npz member's shape and dtype from its header, their total refused past ``cap``
    before any array is read."""
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UserError(f"{where}: not an .npz archive ({exc})") from None
    out, total = {}, 0
    with archive:
        members = archive.infolist()
        if len(members) > MAX_NPZ_MEMBERS:
            raise UserError(f"{where}: {len(members)} arrays; at most {MAX_NPZ_MEMBERS}")
        for info in members:
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            try:
                with archive.open(info) as handle:
                    out[name] = _header(f"{where}[{name}]", handle)
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
                raise UserError(f"{where}[{name}]: unreadable ({exc})") from None
            total += math.prod(out[name][0]) * out[name][1].itemsize
            if total > cap:
                raise UserError(f"{where}: its arrays would take {total / 2**30:.2f} GB or more uncompressed; "
                                f"at most {cap / 2**30:.2g} GB: pass fewer samples")
    return out


def _npz(where: str, source, specs: list[InputSpec], cap: int = MAX_ARRAY_BYTES):
    """(count, name -> (array, how)) of an .npz: one array per input name (a one-input model takes
    the only array whatever its name)."""
    headers = {k: v for k, v in _check_archive(where, source, cap).items() if k != META_KEY}
    missing = [s.name for s in specs if s.name not in headers]
    rename = {}
    if missing and len(specs) == 1 and len(headers) == 1:
        rename = {specs[0].name: next(iter(headers))}
    elif missing:
        raise UserError(f"{where}: no array named {missing[0]!r} (the model's inputs: "
                        f"{', '.join(s.name for s in specs)}; the file has {', '.join(headers) or 'none'})")
    layouts = {s.name: _count(f"{where}[{rename.get(s.name, s.name)}]", s, headers[rename.get(s.name, s.name)][0])
               for s in specs}
    counts = {c for c, _ in layouts.values()}
    if len(counts) != 1:
        raise UserError(f"{where}: the inputs hold different numbers of samples "
                        f"({', '.join(f'{k}: {c}' for k, (c, _) in layouts.items())})")
    if hasattr(source, "seek"):
        source.seek(0)  # np.load reads from where the file is
    try:
        with np.load(source, allow_pickle=False) as z:
            arrays = {s.name: (z[rename.get(s.name, s.name)], layouts[s.name][1]) for s in specs}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UserError(f"{where}: cannot read its arrays ({exc})") from None
    return counts.pop(), arrays


def _npy(where: str, path: Path, specs: list[InputSpec], cap: int = MAX_ARRAY_BYTES):
    if len(specs) != 1:
        raise UserError(f"{where}: a .npy holds one input; the model has {len(specs)} "
                        f"({', '.join(s.name for s in specs)}): give an .npz with one array per input name")
    with open(path, "rb") as handle:
        shape, dtype = _header(where, handle)
    if math.prod(shape) * dtype.itemsize > cap:
        raise UserError(f"{where}: {list(shape)} {dtype} would take {math.prod(shape) * dtype.itemsize / 2**30:.2f} "
                        f"GB; at most {cap / 2**30:.2g} GB")
    count, how = _count(where, specs[0], shape)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)  # rows past ``limit`` are never read
    except (OSError, ValueError) as exc:
        raise UserError(f"{where}: cannot read the array, truncated? ({exc})") from None
    return count, {specs[0].name: (array, how)}


def _take(where: str, count: int, arrays: dict, specs: list[InputSpec], limit: int):
    """The first ``limit`` samples as (names, samples), each checked."""
    kept = min(count, limit)
    label = Path(where).name
    names = [label] if count == 1 else [f"{label}[{i}]" for i in range(kept)]
    samples = [{s.name: _fit(names[i], s, _sample(*arrays[s.name], i)) for s in specs} for i in range(kept)]
    return names, samples


def _arrays_file(where: str, path: Path, specs: list[InputSpec], limit: int, cap: int):
    count, arrays = (_npz if path.suffix.lower() == ".npz" else _npy)(where, path, specs, cap)
    if not count:
        raise UserError(f"{where}: holds no sample")
    names, samples = _take(where, count, arrays, specs, limit)
    return names, samples, count - len(samples)


# -- images -----------------------------------------------------------------------------------------------
def fitted_preprocess(where: str, spec: InputSpec, preprocess: Preprocess | None) -> Preprocess:
    """The preprocessing an image input gets: the one given (or ImageNet's, said as a default),
    with the size, channels and dtype checked against the input, the size filled in when unset."""
    if len(spec.shape) != 4:
        raise UserError(f"{where}: images need an image input (rank 4); input {spec.text()} is not one: "
                        "give its data as .npy/.npz")
    if preprocess is None:
        preprocess = for_shape(PRESETS["imagenet"], spec.shape, spec.dtype,
                               ["preset imagenet, the default (no preprocessing given): set a preset"])
    c_axis, hw = (1, spec.shape[2:4]) if preprocess.layout == "NCHW" else (3, spec.shape[1:3])
    if spec.shape[0] != 1:
        raise UserError(f"{where}: one image is one sample of batch 1; input {spec.text()} has batch {spec.shape[0]}: "
                        "set the batch dimension to 1")
    if spec.shape[c_axis] != preprocess.channel_count:
        raise UserError(f"{where}: input {spec.text()} takes {spec.shape[c_axis]} channel(s) in {preprocess.layout}; "
                        f"the preprocessing gives {preprocess.channel_count} ({preprocess.channels}): "
                        "set the channels or the layout")
    if preprocess.dtype != spec.dtype:
        raise UserError(f"{where}: input {spec.text()} is {spec.dtype}; the preprocessing gives {preprocess.dtype}")
    if preprocess.resize is None:
        return dataclasses.replace(preprocess, resize=tuple(hw),
                                   source=f"{preprocess.source}; size {hw[0]}x{hw[1]} from the input shape")
    if tuple(preprocess.resize) != tuple(hw):
        raise UserError(f"{where}: images resized to {preprocess.resize[0]}x{preprocess.resize[1]}, but input "
                        f"{spec.text()} takes {hw[0]}x{hw[1]}: set resize to {hw[0]}x{hw[1]} or leave it unset")
    return preprocess


def _image(where: str, data: bytes | Path, spec: InputSpec, preprocess: Preprocess) -> np.ndarray:
    """One image file as one sample: the pixel count checked from the header before decoding."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    height, width = preprocess.resize
    try:
        with Image.open(io.BytesIO(data) if isinstance(data, bytes) else data) as image:
            if image.width * image.height > MAX_PIXELS:
                raise UserError(f"{where}: {image.width}x{image.height} pixels; at most {MAX_PIXELS:,} per image")
            image = ImageOps.exif_transpose(image).convert("RGB")
            if image.size != (width, height):
                image = image.resize((width, height), Image.Resampling.BILINEAR)
            rgb = np.asarray(image)
    except UserError:
        raise
    except Image.DecompressionBombError:  # Pillow's own guard, past twice its 89 M pixels
        raise UserError(f"{where}: more than {MAX_PIXELS:,} pixels; at most that per image") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise UserError(f"{where}: not a readable PNG/JPEG image ({exc.__class__.__name__}: {exc})"[:300]) from None
    return _fit(where, spec, preprocess.apply(rgb, height, width))


def _one_input(where: str, specs: list[InputSpec], kind: str) -> InputSpec:
    if len(specs) != 1:
        raise UserError(f"{where}: {kind} feed a model with one input; this one has {len(specs)} "
                        f"({', '.join(s.name for s in specs)}): give an .npz with one array per input name")
    return specs[0]


# -- audio ------------------------------------------------------------------------------------------------
def waveform_length(spec: InputSpec) -> int | None:
    """The samples a waveform input takes (a float input whose only dimension above 1 is the last,
    e.g. [1, 16000]), or None: [1, 80, 3000] is features (a log-mel spectrogram), not a waveform."""
    if np.dtype(spec.dtype).kind != "f" or not spec.shape or any(d != 1 for d in spec.shape[:-1]):
        return None
    return spec.shape[-1]


def _wav(where: str, data: bytes | Path, spec: InputSpec) -> tuple[np.ndarray, str]:
    """A mono WAV (16- or 32-bit PCM via ``wave``, 32/64-bit float via its RIFF chunks, which
    ``wave`` refuses) as floats in -1..1, padded with silence or cut to the input's length."""
    length = waveform_length(spec)
    if length is None:
        raise UserError(f"{where}: the model takes features (input {spec.text()}), not a waveform: "
                        "give the features as .npy/.npz")
    raw = data if isinstance(data, bytes) else _read_capped(where, data, MAX_ARRAY_BYTES)
    try:
        with wave.open(io.BytesIO(raw)) as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            frames = w.readframes(w.getnframes())
        kind = "PCM"
    except (wave.Error, EOFError) as exc:
        if "unknown format" not in str(exc):
            raise UserError(f"{where}: not a readable WAV file ({exc})") from None
        kind, channels, width, rate, frames = _riff_wav(where, raw)
    if channels != 1:
        raise UserError(f"{where}: {channels} channels; the input takes mono audio (mix it down first)")
    wave_ = _samples(where, frames, kind, width)
    note = f"{8 * width}-bit {kind} WAV at {rate} Hz"
    out = np.zeros(length, np.float32)
    out[:min(length, len(wave_))] = wave_[:length]
    return _fit(where, spec, out.reshape(spec.shape).astype(spec.dtype)), note


def _samples(where: str, frames: bytes, kind: str, width: int) -> np.ndarray:
    types = {("PCM", 2): ("<i2", 32768.0), ("PCM", 4): ("<i4", 2.0 ** 31), ("float", 4): ("<f4", 1.0),
             ("float", 8): ("<f8", 1.0)}
    if (kind, width) not in types:
        raise UserError(f"{where}: {8 * width}-bit {kind} audio; give 16-bit PCM or 32-bit float WAV")
    dtype, scale = types[(kind, width)]
    usable = len(frames) // width * width
    return (np.frombuffer(frames[:usable], dtype).astype(np.float64) / scale).astype(np.float32)


def _riff_wav(where: str, raw: bytes) -> tuple[str, int, int, int, bytes]:
    """(kind, channels, bytes per sample, rate, data) of a WAV ``wave`` refuses (IEEE float, or
    the extensible header), from its ``fmt `` and ``data`` chunks."""
    if raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        raise UserError(f"{where}: not a WAV file")
    pos, fmt, data = 12, None, None
    while pos + 8 <= len(raw) and (fmt is None or data is None):
        tag, size = raw[pos:pos + 4], struct.unpack("<I", raw[pos + 4:pos + 8])[0]
        body = raw[pos + 8:pos + 8 + size]
        if tag == b"fmt " and len(body) >= 16:
            fmt = struct.unpack("<HHIIHH", body[:16])
            code = struct.unpack("<H", body[24:26])[0] if fmt[0] == 0xFFFE and len(body) >= 26 else fmt[0]
        elif tag == b"data":
            data = body
        pos += 8 + size + (size & 1)
    if fmt is None or data is None:
        raise UserError(f"{where}: a WAV file without its format or data chunk")
    kinds = {1: "PCM", 3: "float"}
    if code not in kinds:
        raise UserError(f"{where}: WAV format {code}; give 16-bit PCM or 32-bit float")
    return kinds[code], fmt[1], fmt[5] // 8, fmt[2], data


def _read_capped(where: str, path: Path, cap: int) -> bytes:
    size = path.stat().st_size
    if size > cap:
        raise UserError(f"{where}: {size / 2**20:.0f} MB; at most {cap >> 20} MB")
    return path.read_bytes()


# -- entry points ----------------------------------------------------------------------------------------
def load_data(path: str | os.PathLike, specs: list[InputSpec], preprocess: Preprocess | None = None, *,
              limit: int = DEFAULT_LIMIT) -> Dataset:
    """Samples from a file or folder (the kinds in the module's docstring), the first ``limit`` kept."""
    path = Path(path).expanduser()
    where = str(path)
    _check_limit(limit)
    if not path.exists():
        raise UserError(f"{where}: no such file or folder")
    if path.is_dir():
        return _folder(path, specs, preprocess, limit)
    suffix = path.suffix.lower()
    if suffix in ARRAYS:
        names, samples, dropped = _arrays_file(where, path, specs, limit, MAX_ARRAY_BYTES)
        return Dataset(_label(path), names, samples, dropped=dropped)
    if suffix in IMAGES:
        spec = _one_input(where, specs, "images")
        chosen = fitted_preprocess(where, spec, preprocess)
        return Dataset(_label(path), [path.name], [{spec.name: _image(where, path, spec, chosen)}], chosen)
    if suffix in AUDIO:
        spec = _one_input(where, specs, "WAV files")
        sample, note = _wav(where, path, spec)
        return Dataset(_label(path), [path.name], [{spec.name: sample}], notes=[_audio_note({note}, spec)])
    if suffix == ".zip":
        return _zip(_label(path), _read_capped(where, path, MAX_UPLOAD_BYTES), specs, preprocess, limit)
    raise UserError(f"{where}: not a data file (give a folder of PNG/JPEG images, a .npy, a .npz, a WAV, "
                    "a .zip of images, or a folder of them)")


def _label(path: Path) -> str:
    """The data's name in every figure: the path as given when relative, relative to the working
    folder when inside it (``samples/data/images``), else its name alone (no host's folder
    layout in a figure or a shared report)."""
    if not path.is_absolute():
        return str(path)
    try:
        inside = path.relative_to(Path.cwd())
    except ValueError:
        return path.name
    return str(inside) if inside.parts else path.name


def _check_limit(limit) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise UserError(f"the sample limit must be a whole number of at least 1, got {limit!r}")


def _audio_note(kinds: set[str], spec: InputSpec) -> str:
    return (f"audio: {', '.join(sorted(kinds))}, padded with silence or cut to the input's "
            f"{waveform_length(spec)} samples, not resampled")


def _kind(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return "images" if suffix in IMAGES else "arrays" if suffix in ARRAYS else "audio" if suffix in AUDIO else None


def _folder(folder: Path, specs, preprocess, limit: int) -> Dataset:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and _kind(p))
    if not files:
        sub = any(p.is_dir() for p in folder.iterdir())
        raise UserError(f"{folder}: no PNG/JPEG image, .npy, .npz or WAV file in the folder"
                        + (" (subfolders are not read: give one of them)" if sub else ""))
    kinds = {_kind(p) for p in files}
    if len(kinds) > 1:
        raise UserError(f"{folder}: mixes {' and '.join(sorted(kinds))}; keep one kind per folder")
    licence = _licence(folder)
    kind = kinds.pop()
    if kind == "arrays":
        return _array_folder(folder, files, specs, limit, licence)
    kept, dropped = files[:limit], max(0, len(files) - limit)
    if kind == "audio":
        spec = _one_input(str(folder), specs, "WAV files")
        read = [_wav(str(p), p, spec) for p in kept]
        return Dataset(_label(folder), [p.name for p in kept], [{spec.name: a} for a, _ in read], licence=licence,
                       dropped=dropped, notes=[_audio_note({n for _, n in read}, spec)])
    spec = _one_input(str(folder), specs, "images")
    chosen = fitted_preprocess(str(kept[0]), spec, preprocess)  # said of the first image it would misfit
    samples = [{spec.name: _image(str(p), p, spec, chosen)} for p in kept]
    return Dataset(_label(folder), [p.name for p in kept], samples, chosen, licence=licence, dropped=dropped)


def _array_folder(folder: Path, files: list[Path], specs, limit: int, licence) -> Dataset:
    """A sample (or a stack) per file, up to ``limit`` in all and ``MAX_ARRAY_BYTES`` read in all."""
    names, samples, dropped, budget = [], [], 0, MAX_ARRAY_BYTES
    for p in files:
        if len(samples) >= limit:
            dropped += 1  # a file not opened: at least one sample
            continue
        got, some, rest = _arrays_file(str(p), p, specs, limit - len(samples), budget)
        names += got
        samples += some
        dropped += rest
        budget -= sum(a.nbytes for s in some for a in s.values())
        if budget <= 0:
            raise UserError(f"{folder}: its arrays would take more than {MAX_ARRAY_BYTES >> 30} GB; pass fewer samples")
    return Dataset(_label(folder), names, samples, licence=licence, dropped=dropped)


def _licence(folder: Path) -> str | None:
    """The licence text beside a data set (the bundled ones carry one), cut to 2,000 characters."""
    for name in ("LICENCE.txt", "LICENSE.txt", "LICENCE", "LICENSE", "README.md"):
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8", errors="replace")[:2000]
    return None


def load_upload(name: str, data: bytes, specs: list[InputSpec], preprocess: Preprocess | None = None, *,
                limit: int = DEFAULT_LIMIT) -> Dataset:
    """A browser upload, in memory: an ``.npz``, or a ``.zip`` of images (member names are labels
    only; no path is written or read; caps on members, sizes and pixels; nested archives refused)."""
    label = Path(str(name).replace("\\", "/")).name or "upload"
    _check_limit(limit)
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserError(f"{label}: {len(data) / 2**20:.1f} MB; at most {MAX_UPLOAD_BYTES >> 20} MB")
    if label.lower().endswith(".npz"):
        count, arrays = _npz(label, io.BytesIO(data), specs, MAX_UPLOAD_BYTES)
        if not count:
            raise UserError(f"{label}: holds no sample")
        names, samples = _take(label, count, arrays, specs, limit)
        return Dataset(label, names, samples, dropped=count - len(samples))
    if not label.lower().endswith(".zip"):
        raise UserError(f"{label}: upload an .npz or a .zip of PNG/JPEG images")
    return _zip(label, data, specs, preprocess, limit)


def _zip(label: str, data: bytes, specs, preprocess, limit: int) -> Dataset:
    """A zip of images, in memory: the directory checked (count, declared sizes, no nested
    archive) before any member is inflated, and each member inflated in chunks up to its size."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        raise UserError(f"{label}: not a readable zip archive") from None
    with archive:
        images = _zip_images(label, archive)
        spec = _one_input(label, specs, "images")
        chosen = fitted_preprocess(f"{label}:{images[0].filename}", spec, preprocess)
        kept = images[:limit]
        samples = [{spec.name: _image(f"{label}:{i.filename}", _member(label, archive, i), spec, chosen)}
                   for i in kept]
    return Dataset(label, [i.filename for i in kept], samples, chosen, dropped=len(images) - len(kept))


def _zip_images(label: str, archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    members = [i for i in archive.infolist() if not i.is_dir() and not _junk(i.filename)]
    if len(members) > MAX_MEMBERS:
        raise UserError(f"{label}: {len(members)} files; at most {MAX_MEMBERS}")
    nested = next((i.filename for i in members if i.filename.lower().endswith(ARCHIVES)), None)
    if nested:
        raise UserError(f"{label}: holds another archive ({nested}); archives inside archives are not read")
    total = sum(i.file_size for i in members)
    if total > MAX_UPLOAD_BYTES:
        raise UserError(f"{label}: {total / 2**20:.1f} MB uncompressed; at most {MAX_UPLOAD_BYTES >> 20} MB")
    images = sorted((i for i in members if Path(i.filename).suffix.lower() in IMAGES), key=lambda i: i.filename)
    if not images:
        raise UserError(f"{label}: no PNG or JPEG image in the archive")
    return images


def _junk(name: str) -> bool:
    """What archivers add: macOS resource forks (``__MACOSX/``, ``._x.png``) and hidden files."""
    return name.startswith("__MACOSX/") or any(part.startswith(".") for part in name.split("/"))


def _member(label: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, inflated a chunk at a time and never past its declared size (a member
    whose deflate stream lies about its size is cut there, and fails its CRC)."""
    out = bytearray()
    try:
        with archive.open(info) as handle:
            while len(out) <= info.file_size:
                chunk = handle.read(CHUNK)
                if not chunk:
                    break
                out += chunk
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
        raise UserError(f"{label}:{info.filename}: cannot be unpacked ({exc})") from None
    if len(out) > info.file_size:
        raise UserError(f"{label}:{info.filename}: larger than its directory entry says")
    return bytes(out)


def bundled(sample_model_name: str) -> Path | None:
    """The bundled data set of a sample model (``samples/data/<folder>``: the CNN and the ViT share
    one set of images), or None (the LLM decoder's inputs are a KV cache: none is bundled)."""
    from dashboard.intake.samples import SAMPLES_DIR

    folder = BUNDLED.get(Path(str(sample_model_name)).stem)
    if folder is None:
        return None
    path = SAMPLES_DIR / "data" / folder
    return path if path.is_dir() else None


def array_shapes(path: str | os.PathLike) -> dict[str, tuple[int, ...]]:
    """An .npz's (or .npy's, under the name ``""``) array shapes from the headers alone; {} for any
    other kind of data (images and audio take the model's shapes)."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if not path.is_file() or suffix not in ARRAYS:
        return {}
    if suffix == ".npz":
        return {k: shape for k, (shape, _) in _check_archive(str(path), path, MAX_ARRAY_BYTES).items() if k != META_KEY}
    with open(path, "rb") as handle:
        return {"": _header(str(path), handle)[0]}


def sample_shape(where: str, tensor, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """One sample's shape of ``tensor`` (an input with open dimensions) in an array of ``shape``:
    the array itself when it has the input's rank (its open leading axis taken as a batch of 1:
    samples stacked on it), the array without its leading axis when it has one more; the input's
    fixed dimensions must match. None when the rank fits neither."""
    declared = tuple(tensor.shape or ())
    if len(shape) == len(declared) + 1:
        sample = tuple(shape[1:])
    elif len(shape) == len(declared):
        open_batch = declared and not (isinstance(declared[0], int) and declared[0] >= 0)
        sample = ((1,) + tuple(shape[1:])) if open_batch else tuple(shape)
    else:
        return None
    for axis, (want, got) in enumerate(zip(declared, sample)):
        if isinstance(want, int) and want >= 0 and want != got:
            raise UserError(f"{where}: input {tensor.name!r} {tensor.shape_text()} has {want} on axis {axis}; "
                            f"the data has {got}")
    return sample
