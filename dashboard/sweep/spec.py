"""The sweep spec: which models, SoCs, setting sets and analyses, read from TOML and checked
before anything runs.

Why checked up front: a sweep of a hundred models takes hours; a typo in the last SoC or a
provider option the EP would ignore must be one error line (exit 2) at the start, not a failed
row at the end. So every model path must exist, every SoC must be one ``runtime.socs`` knows, and
every setting set is built into a ``runtime.knobs.Settings`` for every SoC (the record's own
checks: an fp16 set needs a SoC with a published ``soc_model``), its provider options checked as
the terminal's (``qnn_options.check(origin=TERMINAL)``: the spec is a file the person at the
terminal wrote, so a library path is allowed and checked on this machine). A model that exists
but does not read is a failed cell, not a spec error: one broken export must not stop a zoo.

The file::

    models = ["samples/*.onnx", "zoo/detector.onnx"]   # paths and globs, relative to the spec
    socs = ["sm8650", "sc8380xp"]                      # keys, soc_model numbers or part names
    analyses = ["classify", "partition", "profile"]    # default: classify and partition; also
                                                       # accuracy and quantize (``sweep.accuracy``)

    [profile]                                          # profile cells only; optional
    runs = 3                                           # timed runs per cell (default 3), after warmup
    warmup = 1                                         # untimed runs first (default 1)

    [option_sets.default]                              # none at all: one set, "default", the defaults

    [option_sets.fp16]
    fp16 = true
    dims = { batch = 1, sequence = 128 }
    shapes = { input = [1, 576] }
    provider_options = { htp_graph_finalization_optimization_mode = "3" }
    optimization_level = "basic"                       # also: backends, timeout

The SoC is the sweep's own axis, so a setting set may not name one. Accuracy and quantize cells
read the ``[data]``, ``[accuracy]`` and ``[quantize]`` tables (``sweep.accuracy`` documents them):
the data paths must exist and their preprocessing check as ``--data``'s flags do, up front.
"""

from __future__ import annotations

import glob
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from dashboard.errors import UserError

ANALYSES = ("classify", "partition", "profile", "accuracy", "quantize")  # what a cell can run today
DATA_ANALYSES = ("accuracy", "quantize")  # the cells that read the spec's [data]
LATER = {"timeline": "the timeline"}  # named in the issue, not sweepable yet
DEFAULT_ANALYSES = ("classify", "partition")  # a profile costs runs: asked for by name
DEFAULT_SET = "default"
TOP_KEYS = ("models", "socs", "analyses", "option_sets", "profile", "data", "accuracy", "quantize")
# A profile cell's runs: few by default (each timed run on the HTP simulator takes seconds on a
# real model, and a sweep has many cells); ``[profile] runs = N`` for more stable medians.
PROFILE_KEYS = ("runs", "warmup")
DEFAULT_PROFILE_RUNS, DEFAULT_PROFILE_WARMUP = 3, 1
# The knobs a setting set may give: every ``Settings`` knob but the SoC (the sweep's axis).
SET_KEYS = ("backends", "fp16", "optimization_level", "dims", "shapes", "provider_options", "timeout")
GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class ModelRef:
    """One model of the spec: ``name`` is how cells, the store and ``sweep diff`` name it (the path
    relative to the spec's folder, with ``/``; absolute when it lies outside), ``path`` the file."""

    name: str
    path: Path


@dataclass
class Spec:
    """A checked spec. ``option_sets`` maps each set's name to its knobs as given (no SoC);
    ``settings(name, soc)`` is the ``Settings`` a cell runs with."""

    path: Path
    models: list[ModelRef]
    socs: list[str]
    option_sets: dict[str, dict[str, Any]]
    analyses: list[str]
    notes: list[str] = field(default_factory=list)  # from the provider-option checks (paths not checked ...)
    profile_runs: int = DEFAULT_PROFILE_RUNS
    profile_warmup: int = DEFAULT_PROFILE_WARMUP
    data: Any = None  # sweep.accuracy.DataPlan: accuracy and quantize cells' samples (None: random inputs)
    layers: list[str] = field(default_factory=list)  # accuracy cells: the layer modes also run
    recipe: Any = None  # sweep.accuracy.Recipe: quantize cells' flags

    @property
    def cell_count(self) -> int:
        return len(self.models) * len(self.socs) * len(self.option_sets) * len(self.analyses)

    def settings(self, option_set: str, soc: str):
        from dashboard.runtime.knobs import Settings

        return Settings(**self.option_sets[option_set], soc=soc)

    def cells(self) -> Iterator:
        """Every cell, model by model (each model hashed once, when its first cell is made), so a
        sweep of thousands of cells holds one model's cells at a time."""
        from dashboard.intake.digest import file_digest
        from dashboard.sweep.cells import Cell

        settings = {(name, soc): self.settings(name, soc) for name in self.option_sets for soc in self.socs}
        for model in self.models:
            try:
                digest = file_digest(model.path)
            except OSError:  # unreadable now (permissions, removed since the spec was read): its cells
                digest = ""  # fail with the reader's own words, and run again once it reads
            for soc in self.socs:
                for name in self.option_sets:
                    for analysis in self.analyses:
                        yield Cell(model=model.name, path=str(model.path), digest=digest, soc=soc,
                                   option_set=name, analysis=analysis, settings=settings[name, soc],
                                   **self._extras(model, analysis))

    def _extras(self, model: ModelRef, analysis: str) -> dict[str, Any]:
        """What a cell of ``analysis`` carries besides the common fields: a profile's run counts, an
        accuracy or quantize cell's data (and layer modes, recipe)."""
        from dashboard.sweep.accuracy import CellData, Recipe

        if analysis == "profile":
            return {"runs": self.profile_runs, "warmup": self.profile_warmup}
        if analysis not in DATA_ANALYSES:
            return {}
        data = self.data.for_model(model.name) if self.data is not None else CellData()
        if analysis == "accuracy":
            return {"data": data, "layers": list(self.layers)}
        return {"data": data, "recipe": self.recipe or Recipe()}


def load_spec(path: str | os.PathLike) -> Spec:
    """The spec at ``path``, checked; every problem is one ``UserError`` naming the file and what
    is wrong (the model, the SoC, the set and its setting)."""
    where = Path(path).expanduser()
    try:
        text = where.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the sweep spec ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a sweep spec (not UTF-8 text; a spec is TOML)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    return parse_spec(data, where.resolve().parent, str(path), spec_path=where.resolve())


def parse_spec(data: dict, base: Path, label: str = "the spec", spec_path: Path | None = None) -> Spec:
    """A spec from parsed TOML ``data`` whose relative model paths start at ``base``."""
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise UserError(f"{label}: unknown key {unknown[0]!r}; a sweep spec has {', '.join(TOP_KEYS)}")
    models = _models(data.get("models"), base, label)
    socs = _socs(data.get("socs"), label)
    analyses = _analyses(data.get("analyses", list(DEFAULT_ANALYSES)), label)
    sets = data.get("option_sets", {DEFAULT_SET: {}})
    if not isinstance(sets, dict) or not sets:
        raise UserError(f"{label}: option_sets must be tables, [option_sets.NAME], at least one (or none at all "
                        "for the defaults)")
    notes: list[str] = []
    option_sets = {str(name): _option_set(str(name), knobs, socs, label, notes) for name, knobs in sets.items()}
    runs, warmup = _profile(data.get("profile", {}), label)
    return Spec(spec_path or base / "spec.toml", models, socs, option_sets, analyses, notes, runs, warmup,
                **_data_tables(data, base, label))


def _data_tables(data: dict, base: Path, label: str) -> dict[str, Any]:
    """``[data]``, ``[accuracy]`` and ``[quantize]``, checked whether or not a cell reads them (a
    typo in a table nothing reads yet is still a typo)."""
    from dashboard.sweep.accuracy import parse_accuracy, parse_data, parse_recipe

    return {"data": parse_data(data["data"], base, label) if "data" in data else None,
            "layers": parse_accuracy(data.get("accuracy", {}), label),
            "recipe": parse_recipe(data.get("quantize", {}), label)}


def _profile(table, label: str) -> tuple[int, int]:
    """``[profile] runs = N, warmup = M``: checked as the ``profile`` command checks its counts."""
    from dashboard.profile.protocol import check_runs

    if not isinstance(table, dict):
        raise UserError(f"{label}: profile must be a table ([profile] runs = 3), got {table!r}")
    unknown = [k for k in table if k not in PROFILE_KEYS]
    if unknown:
        raise UserError(f"{label}: [profile] has no setting {unknown[0]!r}; it may give {', '.join(PROFILE_KEYS)}")
    runs, warmup = table.get("runs", DEFAULT_PROFILE_RUNS), table.get("warmup", DEFAULT_PROFILE_WARMUP)
    try:
        check_runs(runs, warmup)
    except UserError as exc:
        raise UserError(f"{label}: [profile] {exc}") from None
    return runs, warmup


def _string_list(value, key: str, label: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError(f"{label}: {key} must be a non-empty list of strings, got {value!r}")
    return [v.strip() for v in value]


def _models(value, base: Path, label: str) -> list[ModelRef]:
    if value is None:
        raise UserError(f"{label}: names no models (models = [\"path/model.onnx\", \"zoo/*.onnx\"])")
    found: dict[Path, ModelRef] = {}
    for entry in _string_list(value, "models", label):
        pattern = Path(entry).expanduser()
        pattern = pattern if pattern.is_absolute() else base / pattern
        if GLOB_CHARS & set(entry):
            files = [Path(p) for p in sorted(glob.glob(str(pattern), recursive=True)) if Path(p).is_file()]
            if not files:
                raise UserError(f"{label}: models glob {entry!r} matches no file (looked in {pattern.parent})")
        elif not pattern.is_file():
            what = "is not a file" if pattern.exists() else "does not exist"
            raise UserError(f"{label}: model {entry!r} {what} (looked for {pattern})")
        else:
            files = [pattern]
        for file in files:
            resolved = file.resolve()
            found.setdefault(resolved, ModelRef(_name(file, base), resolved))
    return list(found.values())


def _name(file: Path, base: Path) -> str:
    """The model's name in cells: relative to the spec's folder when inside it (so two checkouts
    of the same zoo name their models alike, and ``sweep diff`` matches them), else absolute."""
    absolute = Path(os.path.abspath(file))
    try:
        return absolute.relative_to(Path(os.path.abspath(base))).as_posix()
    except ValueError:
        return absolute.as_posix()


def _socs(value, label: str) -> list[str]:
    from dashboard.runtime.socs import resolve_soc

    if value is None:
        raise UserError(f"{label}: names no socs (socs = [\"sm8650\", \"sc8380xp\"])")
    keys: list[str] = []
    for name in _string_list(value, "socs", label):
        try:
            key = resolve_soc(name).key
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
        if key not in keys:
            keys.append(key)
    return keys


def _analyses(value, label: str) -> list[str]:
    out: list[str] = []
    for name in _string_list(value, "analyses", label):
        if name in LATER:
            raise UserError(f"{label}: analysis {name!r} ({LATER[name]}) cannot be swept yet; sweepable: "
                            f"{', '.join(ANALYSES)}")
        if name not in ANALYSES:
            raise UserError(f"{label}: unknown analysis {name!r}; one of {', '.join(ANALYSES)}")
        if name not in out:
            out.append(name)
    return out


def _option_set(name: str, knobs, socs: list[str], label: str, notes: list[str]) -> dict[str, Any]:
    """The set's knobs as ``Settings`` fields, checked by building the record for every SoC."""
    from dashboard.access import TERMINAL
    from dashboard.runtime import qnn_options
    from dashboard.runtime.knobs import KEYS, Settings, worded_error

    where = f"{label}: option set {name!r}"
    if not isinstance(knobs, dict):
        raise UserError(f"{where} must be a table ([option_sets.{name}]), got {knobs!r}")
    if "soc" in knobs:
        raise UserError(f"{where}: a setting set does not name a SoC; the sweep's SoCs are its socs list")
    unknown = [k for k in knobs if k not in SET_KEYS]
    if unknown:
        raise UserError(f"{where}: unknown setting {unknown[0]!r}; a set may give {', '.join(SET_KEYS)}")
    values = dict(knobs)
    if "backends" in values:
        values["backends"] = tuple(_string_list(values["backends"], "backends", where))
    for key in ("dims", "shapes", "provider_options"):
        if key in values and not isinstance(values[key], dict):
            raise UserError(f"{where}: {key} must be a table (NAME = VALUE), got {values[key]!r}")
    if "provider_options" in values:
        values["provider_options"] = _provider_options(values["provider_options"], where)
    if "timeout" in values and isinstance(values["timeout"], int) and not isinstance(values["timeout"], bool):
        values["timeout"] = float(values["timeout"])
    for soc in socs:
        try:
            settings = Settings(**values, soc=soc)
            for note in qnn_options.check(settings.provider_options, origin=TERMINAL):
                if note not in notes:
                    notes.append(note)
        except UserError as exc:
            raise UserError(f"{where} on {soc}: {worded_error(exc, KEYS)}") from None
        except TypeError as exc:  # a value of the wrong kind where a table of values was expected
            raise UserError(f"{where}: a setting has the wrong type ({exc})") from None
    return values


def _provider_options(options: dict, where: str) -> dict[str, str]:
    """TOML values as the EP's strings: ``3`` and ``"3"`` alike; ``true`` is refused (the EP spells
    its flags ``"1"``/``"0"``, and Python's ``"True"`` it would not take)."""
    out = {}
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise UserError(f"{where}: provider option {key} must be a string (e.g. \"1\"), got {value!r}")
        out[str(key)] = str(value)
    return out
