"""The user's samples: read, checked against the model's inputs, and handed to the worker.

Accepted: a folder of images (PNG/JPEG, Pillow; through a ``Preprocess``), a ``.npy`` (one input:
one sample per leading index, or one sample of exactly the input's shape), a ``.npz`` (one array per
input name, one sample per leading index), a folder of ``.npy``/``.npz`` files (one sample each), and
a browser upload (an ``.npz`` or a ``.zip`` of images, in memory). Every check fails as one
``UserError`` line naming the file and what was expected: an empty folder, a corrupt image, a wrong
shape or dtype, a missing input, NaN or infinity, and sizes past the caps *before* anything large is
read (an ``.npz``'s members are measured from their headers, a zip's from its directory).
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dashboard.accuracy.preprocess import Preprocess
from dashboard.errors import UserError

MAX_ARRAY_BYTES = 1 << 30  # an .npz or .npy whose arrays would take more is refused from its headers
MAX_UPLOAD_BYTES = 256 << 20  # a zip upload's members, uncompressed, in all
MAX_MEMBERS = 512
MAX_PIXELS = 40_000_000  # one image's pixels (Pillow's own bomb guard is at 89 M)
DEFAULT_LIMIT = 256
IMAGES = (".png", ".jpg", ".jpeg")
SAFE_CASTS = {("float64", "float32"), ("float16", "float32"), ("float32", "float16"), ("int32", "int64"),
              ("int64", "int32"), ("uint8", "int64"), ("int8", "int64"), ("bool", "int64"), ("uint8", "float32")}


@dataclass
class InputSpec:
    """One input as the model expects it: every dimension fixed."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def input_specs(graph, dims: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> list[InputSpec]:
    """The model's inputs with every dimension fixed (the user's dims and whole shapes, else 1)."""
    from onnx import helper

    out = []
    for spec in graph.inputs:
        if spec.name in shapes:
            shape = tuple(shapes[spec.name])
        else:
            shape = tuple(d if isinstance(d, int) and d > 0 else dims.get(d, 1) if isinstance(d, str) else 1
                          for d in (spec.shape or ()))
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(spec.elem_type)).name
        except (KeyError, TypeError, ValueError):
            dtype = "float32"
        out.append(InputSpec(spec.name, shape, dtype))
    return out


@dataclass
class Dataset:
    """Samples ready for the sessions: per sample, input name -> array of the input's shape and dtype."""

    source: str
    names: list[str]
    samples: list[dict[str, np.ndarray]]
    preprocess: Preprocess | None = None
    licence: str | None = None
    random: bool = False
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.samples)

    def describe(self) -> str:
        if self.random:
            return f"{len(self)} random input sample(s) (no data given)"
        kind = f"images, {self.preprocess.words}; {self.preprocess.source}" if self.preprocess else "arrays as given"
        more = f"; the first {len(self)} kept, {self.dropped} more left out" if self.dropped else ""
        return f"{len(self)} sample(s) from {self.source} ({kind}){more}"

    def save(self, path) -> None:
        """One ``.npz``: each input stacked on a new leading axis, and the sample names."""
        if not self.samples:
            raise UserError(f"{self.source}: no samples")
        keys = list(self.samples[0])
        np.savez(path, **{f"input:{k}": np.stack([s[k] for s in self.samples]) for k in keys},
                 **{"meta:names": np.array(self.names, dtype=str), "meta:random": np.array(self.random),
                    "meta:source": np.array(self.source)})


def load_saved(path) -> Dataset:
    """What ``save`` wrote (the worker's side: checked as any file crossing processes)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            inputs = {k[len("input:"):]: z[k] for k in z.files if k.startswith("input:")}
            names = [str(n) for n in z["meta:names"]] if "meta:names" in z.files else []
            random = bool(z["meta:random"]) if "meta:random" in z.files else False
            source = str(z["meta:source"]) if "meta:source" in z.files else Path(path).name
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{path}: not a saved data set ({exc})") from None
    counts = {len(v) for v in inputs.values()}
    if len(counts) != 1:
        raise UserError(f"{path}: the inputs hold different numbers of samples")
    count = counts.pop()
    samples = [{k: v[i] for k, v in inputs.items()} for i in range(count)]
    return Dataset(source, names or [str(i) for i in range(count)], samples, random=random)


def random_dataset(specs: list[InputSpec], count: int = 8, seed: int = 0) -> Dataset:
    """Generated inputs (floats standard normal, integers small and non-negative, as
    ``runtime.qnn.random_inputs``): every figure on them says *random inputs*."""
    rng = np.random.default_rng(seed)
    total = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs) * count
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


# -- checks ---------------------------------------------------------------------------------------------
def _fit(where: str, spec: InputSpec, array: np.ndarray) -> np.ndarray:
    """One sample of ``spec``: the exact shape (a missing leading batch of 1 is added) and the dtype
    (safe casts only), finite."""
    if array.shape != spec.shape and (1, *array.shape) == spec.shape:
        array = array[None]
    if array.shape != spec.shape:
        raise UserError(f"{where}: input {spec.name!r} expects shape {list(spec.shape)} per sample, got "
                        f"{list(array.shape)}")
    have = array.dtype.name
    if have != spec.dtype:
        if (have, spec.dtype) not in SAFE_CASTS:
            raise UserError(f"{where}: input {spec.name!r} expects {spec.dtype}, got {have} (not a safe cast)")
        array = array.astype(spec.dtype)
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise UserError(f"{where}: input {spec.name!r} holds NaN or infinity")
    return array


def _header_bytes(where: str, handle) -> tuple[tuple[int, ...], np.dtype]:
    """An .npy member's shape and dtype from its header alone."""
    try:
        version = np.lib.format.read_magic(handle)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = reader(handle)
    except (ValueError, OSError, EOFError) as exc:
        raise UserError(f"{where}: not a readable .npy array ({exc})") from None
    if dtype.hasobject:
        raise UserError(f"{where}: holds Python objects, which are never loaded; save plain numeric arrays")
    return shape, dtype


def _check_npz_size(where: str, archive: zipfile.ZipFile) -> None:
    total = 0
    for info in archive.infolist():
        with archive.open(info) as handle:
            shape, dtype = _header_bytes(f"{where}[{info.filename}]", handle)
        total += math.prod(shape) * dtype.itemsize
        if total > MAX_ARRAY_BYTES:
            raise UserError(f"{where}: its arrays would take {total / 2**30:.1f} GB or more; at most "
                            f"{MAX_ARRAY_BYTES >> 30} GB: pass fewer samples")


def _read_npz(where: str, source, specs: list[InputSpec], limit: int) -> tuple[list[str], list[dict], int]:
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{where}: not an .npz archive ({exc})") from None
    with archive:
        _check_npz_size(where, archive)
    try:
        z = np.load(source, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise UserError(f"{where}: cannot read ({exc})") from None
    with z:
        missing = [s.name for s in specs if s.name not in z.files]
        if len(specs) == 1 and missing and len(z.files) == 1:
            arrays = {specs[0].name: z[z.files[0]]}
        elif missing:
            raise UserError(f"{where}: no array named {missing[0]!r} (the model's inputs: "
                            f"{', '.join(s.name for s in specs)}; it has {', '.join(z.files) or 'none'})")
        else:
            arrays = {s.name: z[s.name] for s in specs}
    return _split(where, arrays, specs, limit)


def _split(where: str, arrays: dict[str, np.ndarray], specs: list[InputSpec], limit: int):
    """One sample per leading index (or one sample when an array is exactly the input's shape)."""
    per = {}
    for s in specs:
        a = arrays[s.name]
        per[s.name] = a[None] if a.shape == s.shape else a
    counts = {len(v) for v in per.values()}
    if len(counts) != 1:
        raise UserError(f"{where}: the inputs hold different numbers of samples ({sorted(counts)})")
    count = counts.pop()
    if not count:
        raise UserError(f"{where}: holds no sample")
    kept = min(count, limit)
    samples = [{s.name: _fit(f"{where}[{i}]", s, np.asarray(per[s.name][i])) for s in specs} for i in range(kept)]
    return [f"{Path(where).name}[{i}]" for i in range(kept)], samples, count - kept


def _image(where: str, data: bytes | Path, spec: InputSpec, preprocess: Preprocess) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data) if isinstance(data, bytes) else data) as image:
            if image.width * image.height > MAX_PIXELS:
                raise UserError(f"{where}: {image.width}x{image.height} pixels; at most {MAX_PIXELS:,}")
            height, width = preprocess.resize or _spatial(spec, preprocess)
            rgb = np.asarray(image.convert("RGB").resize((width, height), Image.Resampling.BILINEAR))
    except UserError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise UserError(f"{where}: not a readable image ({exc.__class__.__name__})") from None
    return _fit(where, spec, preprocess.apply(rgb, height, width))


def _spatial(spec: InputSpec, preprocess: Preprocess) -> tuple[int, int]:
    if len(spec.shape) != 4:
        raise UserError(f"input {spec.name!r} has shape {list(spec.shape)}: images need a 4-D image input")
    return (spec.shape[2], spec.shape[3]) if preprocess.layout == "NCHW" else (spec.shape[1], spec.shape[2])


def _image_spec(where: str, specs: list[InputSpec]) -> InputSpec:
    if len(specs) != 1:
        raise UserError(f"{where}: images feed a model with one input; this one has {len(specs)} "
                        f"({', '.join(s.name for s in specs)}): give an .npz with one array per input")
    return specs[0]


# -- entry points ----------------------------------------------------------------------------------------
def load_data(path: str | os.PathLike, specs: list[InputSpec], preprocess: Preprocess | None = None, *,
              limit: int = DEFAULT_LIMIT) -> Dataset:
    """Samples from a file or folder (the kinds in the module's docstring)."""
    path = Path(path).expanduser()
    where = str(path)
    if not path.exists():
        raise UserError(f"{where}: no such file or folder")
    if path.is_dir():
        return _folder(path, specs, preprocess, limit)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        names, samples, dropped = _read_npz(where, str(path), specs, limit)
        return Dataset(path.name, names, samples, dropped=dropped)
    if suffix == ".npy":
        names, samples, dropped = _read_npy(where, path, specs, limit)
        return Dataset(path.name, names, samples, dropped=dropped)
    if suffix in IMAGES:
        spec = _image_spec(where, specs)
        preprocess = preprocess or _default_preprocess(spec)
        return Dataset(path.name, [path.name], [{spec.name: _image(where, path, spec, preprocess)}], preprocess)
    if suffix == ".wav":
        raise UserError(f"{where}: the model's inputs ({', '.join(f'{s.name} {list(s.shape)}' for s in specs)}) "
                        "take features, not a waveform: give the features as .npy/.npz")
    raise UserError(f"{where}: not a data file (give a folder of images, .npy, .npz)")


def _read_npy(where: str, path: Path, specs: list[InputSpec], limit: int):
    if len(specs) != 1:
        raise UserError(f"{where}: a .npy holds one input; the model has {len(specs)}: give an .npz named by input")
    with open(path, "rb") as handle:
        shape, dtype = _header_bytes(where, handle)
    if math.prod(shape) * dtype.itemsize > MAX_ARRAY_BYTES:
        raise UserError(f"{where}: {list(shape)} {dtype} would take more than {MAX_ARRAY_BYTES >> 30} GB")
    return _split(where, {specs[0].name: np.load(path, allow_pickle=False)}, specs, limit)


def _default_preprocess(spec: InputSpec) -> Preprocess:
    from dashboard.accuracy.preprocess import PRESETS

    return PRESETS["imagenet"]


def _folder(folder: Path, specs, preprocess, limit: int) -> Dataset:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in (*IMAGES, ".npy", ".npz"))
    if not files:
        raise UserError(f"{folder}: no image (PNG/JPEG), .npy or .npz file in the folder")
    kinds = {"image" if p.suffix.lower() in IMAGES else "array" for p in files}
    if len(kinds) > 1:
        raise UserError(f"{folder}: mixes images and arrays; keep one kind per folder")
    kept, dropped = files[:limit], max(0, len(files) - limit)
    licence = _licence(folder)
    if kinds == {"image"}:
        spec = _image_spec(str(folder), specs)
        preprocess = preprocess or _default_preprocess(spec)
        samples = [{spec.name: _image(str(p), p, spec, preprocess)} for p in kept]
        return Dataset(folder.name, [p.name for p in kept], samples, preprocess, licence=licence, dropped=dropped)
    names, samples = [], []
    for p in kept:
        one = load_data(p, specs, limit=1)
        names.append(p.name)
        samples.append(one.samples[0])
    return Dataset(folder.name, names, samples, licence=licence, dropped=dropped)


def _licence(folder: Path) -> str | None:
    for name in ("LICENCE.txt", "LICENSE.txt", "LICENCE", "LICENSE", "README.md"):
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8", errors="replace")[:2000]
    return None


def load_upload(name: str, data: bytes, specs: list[InputSpec], preprocess: Preprocess | None = None, *,
                limit: int = DEFAULT_LIMIT) -> Dataset:
    """A browser upload, in memory: an ``.npz``, or a ``.zip`` of images (member names are labels
    only; no path is written or read; caps on members, sizes and pixels; nested archives refused)."""
    label = Path(str(name)).name or "upload"
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserError(f"{label}: {len(data) / 2**20:.0f} MB; at most {MAX_UPLOAD_BYTES >> 20} MB")
    if label.lower().endswith(".npz"):
        names, samples, dropped = _read_npz(label, io.BytesIO(data), specs, limit)
        return Dataset(label, names, samples, dropped=dropped)
    if not label.lower().endswith(".zip"):
        raise UserError(f"{label}: upload an .npz or a .zip of images")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UserError(f"{label}: not a readable zip archive") from None
    with archive:
        members = [i for i in archive.infolist() if not i.is_dir()]
        if len(members) > MAX_MEMBERS:
            raise UserError(f"{label}: {len(members)} files; at most {MAX_MEMBERS}")
        if sum(i.file_size for i in members) > MAX_UPLOAD_BYTES:
            raise UserError(f"{label}: more than {MAX_UPLOAD_BYTES >> 20} MB uncompressed")
        images = sorted((i for i in members if Path(i.filename).suffix.lower() in IMAGES), key=lambda i: i.filename)
        if not images:
            raise UserError(f"{label}: no PNG or JPEG image in the archive")
        spec = _image_spec(label, specs)
        preprocess = preprocess or _default_preprocess(spec)
        kept = images[:limit]
        samples = [{spec.name: _image(f"{label}:{i.filename}", archive.read(i), spec, preprocess)} for i in kept]
    return Dataset(label, [Path(i.filename).name for i in kept], samples, preprocess, dropped=len(images) - len(kept))


def bundled(sample_model_name: str) -> Path | None:
    """The bundled data set of a sample model (``samples/data/<stem>``), or None."""
    from dashboard.intake.samples import sample_path

    try:
        folder = Path(sample_path(sample_model_name)).parent / "data" / Path(sample_model_name).stem
    except UserError:
        return None
    return folder if folder.is_dir() else None
