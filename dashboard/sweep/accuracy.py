"""Accuracy and quantize cells: the spec's ``[data]``, ``[accuracy]`` and ``[quantize]`` tables, the
records a cell carries, and the rows it comes back with.

Why a sweep measures accuracy at all: the backend choice is also an accuracy choice (the GPU runs
float, the HTP fp16 or a QDQ model), and a zoo edited or re-exported by someone else loses dBs
silently. A cell runs the ``accuracy`` or ``quantize`` command's own work (``accuracy.run.
accuracy_model``, ``accuracy.quantize.quantize_model``) on the cell's SoC and setting set, on the
data the spec names for its model, and keeps the figures a diff can gate on: each comparison's worst
output SQNR (``sweep diff --fail-on accuracy-drop=DB``), cosine and top-1 agreement, the first layer
where the error jumps, and for quantize the tensors the search lifted, its HTP coverage on the
integer path and the cycles ratio against float.

The data decides the figures, so it is part of the cell's key: its content digest (the file, or
every file the data reader would read in the folder), the preset, the preprocessing values given and
the sample limit. A model with no data named runs on random inputs, and its rows say so.

The spec's tables::

    [data]                                   # accuracy and quantize cells; none: random inputs
    path = "data/images"                     # every model's samples (relative to the spec) ...
    preset = "imagenet"                      # ... and how images become tensors (resize = [224, 224],
    limit = 32                               #     layout, scale, mean, std, channels: as --data's flags)
    [data.models]                            # ... or per model, by its name in the spec or a glob
    "zoo/text_encoder.onnx" = "data/sentences.npz"

    [accuracy]
    layers = ["cumulative"]                  # also layer by layer (cumulative, layerwise): the first jump

    [quantize]                               # the quantize command's flags
    activations = "u8"                       # u8 | u16
    weights = "u8"                           # u8 | s8 | u16 | int4
    per_channel = false
    calibration = "minmax"                   # minmax | entropy | percentile
    target = "30"                            # optional: the mixed-precision search (SQNR dB or cosine=X)

A quantize cell keeps the recipe and its figures, not the QDQ model: ``quantize MODEL --data D
--out Q.onnx`` with the same flags rebuilds it (the lifted tensors are in the record).
"""

from __future__ import annotations

import fnmatch
import hashlib
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.errors import UserError
from dashboard.serde import Record

if TYPE_CHECKING:
    from dashboard.accuracy.model import AccuracyReport
    from dashboard.accuracy.quantize import QuantizeResult
    from dashboard.sweep.cells import Cell, CellResult

DATA_KEYS = ("path", "models", "preset", "limit", "resize", "layout", "scale", "mean", "std", "channels")
GIVEN_KEYS = ("resize", "layout", "scale", "mean", "std", "channels")
ACCURACY_KEYS = ("layers",)
QUANTIZE_KEYS = ("activations", "weights", "per_channel", "calibration", "target")
MAX_DATA_FILES = 20_000  # a data folder is read flat; one with more files than this is not a data set


@dataclass(frozen=True)
class CellData(Record):
    """The samples a cell runs on: ``path`` (None: random inputs), the content ``digest`` of what the
    data reader reads there, the ``preset`` and preprocessing values ``given``, and the ``limit``."""

    path: str | None = None
    digest: str = ""
    preset: str | None = None
    given: dict = field(default_factory=dict)
    limit: int | None = None

    @property
    def label(self) -> str:
        return "random inputs" if self.path is None else Path(self.path).name


@dataclass(frozen=True)
class Recipe(Record):
    """A quantize cell's flags (``quantize``'s, checked as it checks them)."""

    activations: str = "u8"
    weights: str = "u8"
    per_channel: bool = False
    calibration: str = "minmax"
    target: str | None = None


@dataclass
class AccuracyFigure(Record):
    """One comparison of an accuracy or quantize cell: ``sqnr_db`` the worst output's SQNR (dB),
    ``cosine`` the lowest output cosine, ``top1`` the lowest top-1 agreement (class scores only),
    ``worst_output`` the output with that SQNR, measured on ``hardware``."""

    comparison: str
    target: str
    reference: str
    hardware: str
    status: str = "ok"
    reason: str | None = None
    sqnr_db: float | None = None
    cosine: float | None = None
    top1: float | None = None
    worst_output: str | None = None


@dataclass
class QuantizeFigure(Record):
    """What a quantize cell built: the recipe's types, the tensors the search ``lifted`` to 16 bits
    (``reached``: the target held; None: no target), the kept model's worst output SQNR and cosine on
    the HTP against float, its simulated cycles and their ratio to the float model in fp16 (same unit
    and hardware only), and the HTP's coverage of the integer path with its blockers' op types."""

    activations: str
    weights: str
    steps: int = 0
    lifted: list[str] = field(default_factory=list)
    reached: bool | None = None
    sqnr_db: float | None = None
    cosine: float | None = None
    cycles: float | None = None
    float_cycles: float | None = None
    cycles_ratio: float | None = None
    cost_hardware: str | None = None
    htp_claimed: int | None = None
    htp_refused: int | None = None
    blockers: list[str] = field(default_factory=list)
    left_float: int = 0


# -- the spec's tables ----------------------------------------------------------------------------------
@dataclass
class DataPlan:
    """The spec's ``[data]`` table, checked: the default path, the per-model paths (patterns in
    order) and what every model's data shares (preset, given values, limit)."""

    default: Path | None = None
    models: list[tuple[str, Path]] = field(default_factory=list)
    preset: str | None = None
    given: dict = field(default_factory=dict)
    limit: int | None = None
    _digests: dict = field(default_factory=dict)

    def for_model(self, name: str) -> CellData:
        """The data of the model named ``name`` in the spec (its digest computed once per path)."""
        path = next((p for pattern, p in self.models if fnmatch.fnmatchcase(name, pattern)), self.default)
        if path is None:
            return CellData(limit=self.limit)
        if path not in self._digests:
            self._digests[path] = data_digest(path)
        return CellData(str(path), self._digests[path], self.preset, dict(self.given), self.limit)


def parse_data(table, base: Path, label: str) -> DataPlan:
    """``[data]``: every path must exist and every value check as ``--data``'s flags do."""
    from dashboard.accuracy.preprocess import PRESETS, Preprocess

    table = _table(table, "data", DATA_KEYS, label)
    plan = DataPlan()
    if "path" in table:
        plan.default = _data_path(table["path"], base, f"{label}: [data] path")
    models = table.get("models", {})
    if not isinstance(models, dict):
        raise UserError(f"{label}: [data.models] maps a model's name (or a glob) to its data, got {models!r}")
    for pattern, value in models.items():
        plan.models.append((str(pattern), _data_path(value, base, f"{label}: [data.models] {pattern!r}")))
    preset = table.get("preset")
    if preset is not None and preset not in PRESETS:
        raise UserError(f"{label}: [data] preset must be one of {', '.join(sorted(PRESETS))}, got {preset!r}")
    plan.preset = preset
    plan.given = {k: table[k] for k in GIVEN_KEYS if k in table}
    try:
        Preprocess(**plan.given)  # the record's own checks: a bad mean or layout is one line now
    except (UserError, TypeError) as exc:
        raise UserError(f"{label}: [data] {exc}") from None
    if "limit" in table:
        limit = table["limit"]
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 4096:
            raise UserError(f"{label}: [data] limit must be a whole number from 1 to 4096, got {limit!r}")
        plan.limit = limit
    return plan


def parse_accuracy(table, label: str) -> list[str]:
    """``[accuracy] layers = [...]``: the layer modes each accuracy cell also runs."""
    from dashboard.accuracy.model import LAYER_MODES

    table = _table(table, "accuracy", ACCURACY_KEYS, label)
    layers = table.get("layers", [])
    if isinstance(layers, str):
        layers = [layers]
    if not isinstance(layers, list) or any(m not in LAYER_MODES for m in layers):
        raise UserError(f"{label}: [accuracy] layers is a list of {', '.join(LAYER_MODES)}, got {layers!r}")
    return list(dict.fromkeys(layers))


def parse_recipe(table, label: str) -> Recipe:
    """``[quantize]``: the quantize command's flags, checked by its own records."""
    from dashboard.accuracy.protocol import QuantizeArgs
    from dashboard.accuracy.quantize import parse_target

    table = _table(table, "quantize", QUANTIZE_KEYS, label)
    if "per_channel" in table and not isinstance(table["per_channel"], bool):
        raise UserError(f"{label}: [quantize] per_channel is true or false, got {table['per_channel']!r}")
    target = table.get("target")
    if isinstance(target, numbers.Real) and not isinstance(target, bool):
        target = f"{target:g}"
    try:
        if target is not None:
            parse_target(str(target))
        recipe = Recipe(**{**table, "target": None if target is None else str(target)})
        QuantizeArgs(path="", data="", out="", activations=recipe.activations, weights=recipe.weights,
                     calibration=recipe.calibration)
    except (UserError, TypeError) as exc:
        raise UserError(f"{label}: [quantize] {exc}") from None
    return recipe


def _table(value, name: str, keys: tuple[str, ...], label: str) -> dict:
    if not isinstance(value, dict):
        raise UserError(f"{label}: {name} must be a table ([{name}] ...), got {value!r}")
    unknown = [k for k in value if k not in keys]
    if unknown:
        raise UserError(f"{label}: [{name}] has no setting {unknown[0]!r}; it may give {', '.join(keys)}")
    return value


def _data_path(value, base: Path, where: str) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where} must be a path (a folder of images, an .npz/.npy, WAV), got {value!r}")
    path = Path(value).expanduser()
    path = (path if path.is_absolute() else base / path).resolve()
    if not path.exists():
        raise UserError(f"{where}: {value!r} does not exist (looked for {path})")
    return path


def data_digest(path: Path) -> str:
    """The content digest of what the data reader reads at ``path``: the file, or every visible file
    directly in the folder (names and contents; subfolders are not read, so not hashed)."""
    from dashboard.intake.digest import file_digest

    try:
        if path.is_file():
            return file_digest(path)
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if len(files) > MAX_DATA_FILES:
            raise UserError(f"{path}: {len(files)} files; a data folder holds at most {MAX_DATA_FILES}")
        digest = hashlib.blake2b(digest_size=16)
        for file in files:
            digest.update(f"{file.name}\0{file_digest(file)}\n".encode())
        return digest.hexdigest()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the data ({exc.strerror or exc})") from None


# -- running a cell --------------------------------------------------------------------------------------
def _inputs(cell: Cell):
    """(data path or None, Preprocess or None, limit) for the cell, as ``--data`` gives them."""
    from dashboard.accuracy.preprocess import preprocess_given

    data = cell.data or CellData()
    if data.path is None:
        return None, None, data.limit
    if data.digest and Path(data.path).exists() and data_digest(Path(data.path)) != data.digest:
        raise UserError(f"{data.path}: the data changed since the sweep started: run it again")
    return data.path, preprocess_given(cell.path, data.preset, data.given), data.limit


def run_accuracy(cell: Cell, cancel, emit, device) -> CellResult:
    """The ``accuracy`` command's work on the cell's model, settings and data."""
    from dashboard.accuracy.run import accuracy_model

    data, preprocess, limit = _inputs(cell)
    report = accuracy_model(cell.path, data, cell.settings, layers=cell.layers, preprocess=preprocess, limit=limit,
                            device=device, on_event=emit, cancel=cancel)
    return accuracy_result(cell, report)


def accuracy_result(cell: Cell, report: AccuracyReport) -> CellResult:
    """An accuracy cell's row: each comparison's figures; ``failed`` when none of them ran."""
    from dashboard.sweep.cells import FAILED, OK, CellResult

    figures = [_figure(c) for c in report.comparisons]
    layers = report.layers
    jump = None
    if layers is not None and layers.ok and layers.first_jump:
        row = layers.row(layers.first_jump)
        jump = f"{row.node} [{row.op_type}]" if row else layers.first_jump
    notes = list(report.verdicts) + list(report.notes)
    if layers is not None and not layers.ok:
        notes.append(f"layers: {layers.reason}")
    hardware = next((f.hardware for f in figures if f.status == OK), None)
    if not figures or all(f.status != OK for f in figures):
        reason = "; ".join(f"{f.target} vs {f.reference}: {f.reason}" for f in figures) or "no comparison ran"
        return CellResult(cell=cell, status=FAILED, reason=reason, accuracy=figures, data=report.data.label,
                          notes=notes, hardware=_hardware(hardware))
    return CellResult(cell=cell, status=OK, accuracy=figures, data=report.data.label, first_jump=jump, notes=notes,
                      hardware=_hardware(hardware))


def _figure(comparison) -> AccuracyFigure:
    figure = AccuracyFigure(comparison.key, comparison.target, comparison.reference, comparison.hardware,
                            comparison.status, comparison.reason)
    if not comparison.ok:
        return figure
    scored = [o for o in comparison.outputs if o.overall.sqnr_db is not None]
    if scored:
        worst = min(scored, key=lambda o: o.overall.sqnr_db)
        figure.sqnr_db, figure.worst_output = round(float(worst.overall.sqnr_db), 4), worst.name
    cosines = [o.overall.cosine for o in comparison.outputs if o.overall.cosine is not None]
    top1 = [o.overall.top1 for o in comparison.outputs if o.overall.top1 is not None]
    figure.cosine = round(float(min(cosines)), 8) if cosines else None
    figure.top1 = round(float(min(top1)), 6) if top1 else None
    return figure


def _hardware(words: str | None) -> str | None:
    """The cell's ``hardware`` in the sweep's short words (``simulator`` for the HTP simulator)."""
    if words is None:
        return None
    return "simulator" if "simulator" in words.lower() else words


def run_quantize(cell: Cell, cancel, emit, device) -> CellResult:
    """The ``quantize`` command's work (with its search when the recipe has a target), the QDQ model
    written to a scratch folder and dropped: the record keeps the recipe and the lifted tensors."""
    from dashboard.accuracy.quantize import quantize_model
    from dashboard.runtime import scratch

    if device is not None and not device.is_local:
        raise UserError("quantize runs on this machine only (the HTP simulator): its cells do not run on a device")
    data, preprocess, limit = _inputs(cell)
    recipe = cell.recipe or Recipe()
    with scratch.folder("qbl-sweep-quantize-") as folder:
        result = quantize_model(cell.path, data, folder / "model.qdq.onnx", cell.settings,
                                activations=recipe.activations, weights=recipe.weights,
                                per_channel=recipe.per_channel, calibration=recipe.calibration, target=recipe.target,
                                preprocess=preprocess, limit=limit, on_event=emit, cancel=cancel)
    return quantize_result(cell, result)


def quantize_result(cell: Cell, result: QuantizeResult) -> CellResult:
    """A quantize cell's row: the kept step's figures, its cost and its coverage; ``failed`` when
    the kept model did not run on the HTP at all."""
    from dashboard.sweep.cells import FAILED, OK, CellResult

    kept = next((s for s in reversed(result.steps) if s.lifted == result.lifted), result.steps[0] if result.steps
                else None)
    figure = QuantizeFigure(result.options["activations"], result.options["weights"], steps=len(result.steps),
                            lifted=list(result.lifted), reached=result.reached, float_cycles=result.float_cycles,
                            cycles_ratio=None if result.cycles_ratio is None else round(result.cycles_ratio, 6),
                            left_float=len(result.left_float))
    if kept is not None:
        figure.sqnr_db, figure.cosine, figure.cycles = kept.sqnr_db, kept.cosine, kept.cycles
        figure.cost_hardware = kept.hardware
    coverage = result.coverage
    notes = list(result.notes) + ["the QDQ model is not kept: `quantize` with this recipe rebuilds it"]
    if coverage is not None and coverage.error is None:
        figure.htp_claimed, figure.htp_refused = coverage.claimed, coverage.refused
        figure.blockers = [str(b.get("op_type")) for b in coverage.blockers]
    elif coverage is not None:
        notes.append(f"coverage: {coverage.error}")
    accuracy = [_figure(c) for c in result.accuracy.comparisons] if result.accuracy is not None else []
    data = result.data.label
    if kept is None or kept.sqnr_db is None and kept.cosine is None:
        reason = kept.note if kept is not None and kept.note else "the QDQ model gave no figures on the HTP"
        return CellResult(cell=cell, status=FAILED, reason=reason, quantized=figure, accuracy=accuracy, data=data,
                          notes=notes)
    return CellResult(cell=cell, status=OK, quantized=figure, accuracy=accuracy, data=data, notes=notes,
                      hardware=_hardware(kept.hardware))
