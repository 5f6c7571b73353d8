"""The settings every analysis takes, defined once: ``Settings`` and its table of knobs.

Why one record: partition, timeline, report and compare (and the coming profile and sweep) decide
how a session is built from the same eight knobs (backends, fp16, SoC, optimisation level, symbolic
dimensions, input shapes, provider options, timeout). Each knob is one field of ``Settings``
whose metadata holds its command-line flag, its page label, its help text and its choices: the
CLI's flags (``cli.common.SettingsArgs``) and the pages' widgets (``views.settings``) are
generated from that table, the record validates every value in one place (``__post_init__``, so
JSON read back is checked the same way), and the constants the knobs choose from exist only here.

Hints name a knob by its key (``ref("fp16")`` is ``⟨fp16⟩`` in a suggestion or a note), never in a
front end's spelling: the CLI words it ``--fp16``, a page ``option ‘HTP fp16 precision’``, the
notebook ``setting fp16`` (``words``). So a report cached by one front end reads right in another.

Importing this module loads neither numpy, onnx nor the runtime (the checks import what they need
when they run): the CLI builds its parser from this table before it starts the runtime worker.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
import typing
from typing import Any, ClassVar, TypeVar

from dashboard.errors import UserError
from dashboard.runtime.socs import DEFAULT_SOC, SOCS, resolve_soc, soc_for
from dashboard.serde import Record

BACKENDS = ("htp", "gpu")  # the QNN backends an analysis measures
SESSION_BACKENDS = (*BACKENDS, "cpu")  # what a session runs on: "cpu" is ONNX Runtime's own CPU EP (reference)
OPTIMIZATION_LEVELS = ("all", "extended", "basic", "disabled")  # ONNX Runtime's, the default first
# Each analysis' own timeout (``Settings.timeout`` None): a hung QNN compile must not hang the page
# or a pipeline, and a large float graph on the x86_64 HTP simulator takes many minutes.
TIMEOUTS = {"partition": 900.0, "timeline": 1800.0, "profile": 900.0, "accuracy": 1800.0, "quantize": 3600.0}
MAX_SECONDS = 7 * 24 * 3600  # a timeout of more than a week is a typo (and ``inf`` overflowed a deadline)

# Front ends: how each words a knob named in a hint (``words``).
CLI, PAGE, KEYS = "cli", "page", "keys"
REPEATABLE = ("dims", "shapes", "options")  # kinds given as NAME=VALUE items, one per flag

T = TypeVar("T", bound="Settings")


@dataclass(frozen=True)
class Knob:
    """One row of the table: a field of ``Settings`` and how each front end offers it. ``kind``
    decides the flag's parsing and the widget (``views.settings``)."""

    key: str
    kind: str  # backends | flag | soc | choice | dims | shapes | options | seconds
    type: Any  # the field's type hint
    default: Any
    flag: str
    label: str
    help: str
    choices: tuple = ()
    metavar: str | None = None  # the flag's argument
    widget: str = ""  # the stem of the page widget's key: ``{page}_{widget}_{scope}``

    @property
    def cli_words(self) -> str:
        """How the CLI names it in a hint: the flag, with its form when it takes NAME=VALUE items."""
        return f"{self.flag} {self.metavar}" if self.kind in REPEATABLE else self.flag

    @property
    def page_words(self) -> str:
        return f"option ‘{self.label}’"


def _knob(kind: str, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, flag: str,
          label: str, help: str, choices: tuple = (), metavar: str | None = None, widget: str) -> Any:
    meta = {"knob": dict(kind=kind, flag=flag, label=label, help=help, choices=choices, metavar=metavar,
                         widget=widget)}
    return field(default=default, default_factory=factory, metadata=meta)


@dataclass
class Settings(Record):
    """What decides how an analysis builds its sessions. ``dims`` are the user's overrides (every
    other symbolic dimension gets its default, ``intake.shapes.default_dims``); ``shapes`` are whole
    input shapes, for inputs whose dimensions have no name (the sessions get a copy of the model
    declaring them); ``soc`` is resolved to its key, and fp16 without one gets the default SoC;
    ``timeout`` None is the analysis' own default."""

    KNOB_FIELDS: ClassVar[tuple[str, ...]] = ()  # filled below: the fields that are knobs

    backends: tuple[str, ...] = _knob(
        "backends", BACKENDS, flag="--backends", label="Backends", choices=BACKENDS, widget="backends",
        help="the QNN backends to measure")
    fp16: bool = _knob(
        "flag", False, flag="--fp16", label="HTP fp16 precision", widget="fp16",
        help="run float models in HTP fp16 precision: float32 graphs of any size rarely fit the HTP without it "
             "(QNN_COMMON_ERROR_MEM_ALLOC at finalize); it needs a SoC (the default one unless set)")
    soc: str | None = _knob(
        "soc", None, flag="--soc", label="Snapdragon SoC", metavar="NAME", widget="soc",
        help=f"the Snapdragon SoC to compile for, by key or QNN soc_model number; fp16 without one compiles for "
             f"{DEFAULT_SOC}")
    optimization_level: str = _knob(
        "choice", "all", flag="--optimization-level", label="ONNX Runtime optimization level",
        choices=OPTIMIZATION_LEVELS, widget="level",
        help="ONNX Runtime graph optimizations before partitioning (default all, as a session gets by default); "
             "'disabled' measures the file's graph as it is")
    dims: dict[str, int] = _knob(
        "dims", factory=dict, flag="--dim", label="Symbolic dimensions", metavar="NAME=VALUE", widget="dim",
        help="a value for a symbolic dimension (QNN needs them fixed); batch=1 and sequence lengths are "
             "pre-filled")
    shapes: dict[str, tuple[int, ...]] = _knob(
        "shapes", factory=dict, flag="--shape", label="Input shapes", metavar="NAME=D1,D2,...", widget="shape",
        help="the whole shape of an input whose dimensions have no name (shown as ?), e.g. input=1,576: the "
             "sessions get a copy of the model declaring it; the file is not changed")
    provider_options: dict[str, str] = _knob(
        "options", factory=dict, flag="--option", label="Extra QNN provider options", metavar="KEY=VALUE",
        widget="opts",
        help="extra QNN provider options, for the HTP, checked against the EP's own: an unknown key or a value it "
             "would ignore is refused with the valid values. One that loads a library or writes a file is refused "
             "on a page; on the command line its path must be absolute and pass its check on this machine (a "
             "remote device's paths are its own, not checked)")
    timeout: float | None = _knob(
        "seconds", None, flag="--timeout", label="Timeout (s)", metavar="SECONDS", widget="timeout",
        help="give up on the runtime worker after this many seconds")

    def __post_init__(self) -> None:
        # Imported here: the CLI builds its parser from this module before it starts the worker, and
        # these load onnx (shapes) and the access settings (qnn_options) it needs only afterwards.
        from dashboard.intake.shapes import check_dims
        from dashboard.runtime import qnn_options

        self.backends = check_backends(self.backends)
        if not isinstance(self.fp16, bool):
            raise UserError(f"fp16 must be true or false, got {self.fp16!r}")
        check_optimization_level(self.optimization_level)
        check_dims(self.dims)
        self.shapes = check_shapes(self.shapes)
        self.provider_options = {str(k): str(v) for k, v in self.provider_options.items()}
        qnn_options.check(self.provider_options)
        if self.soc is not None and not isinstance(self.soc, str):
            raise UserError(f"the SoC must be a name or a soc_model number as text, got {self.soc!r}")
        self.soc = soc_for(self.soc, self.fp16)
        self._check_fp16_soc_model()
        self.timeout = check_timeout(self.timeout)

    def _check_fp16_soc_model(self) -> None:
        """The runtime refuses ``enable_htp_fp16_precision`` without a ``soc_model``: a SoC none is
        published for needs the user's, before any process starts."""
        if not self.fp16 or "soc_model" in self.provider_options:
            return
        soc = resolve_soc(self.soc)
        if soc.soc_model is None:
            raise UserError(f"HTP fp16 precision needs a soc_model and none is published for {soc.name}: set the "
                            f"one your QNN SDK documents as provider option soc_model=N ({ref('provider_options')})")

    def replace(self: T, **changes) -> T:
        """A copy with ``changes`` (validated like any construction)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_settings(cls: type[T], settings: Settings, **fields) -> T:
        """``cls`` (a record built on ``Settings``, e.g. ``TimelineOptions``) with ``settings``'
        knobs and its own ``fields``."""
        return cls(**{key: getattr(settings, key) for key in Settings.KNOB_FIELDS}, **fields)

    @property
    def settings(self) -> Settings:
        """Only the knobs (of a record built on ``Settings``)."""
        return Settings.from_settings(self)

    def result_json(self) -> dict:
        """The knobs that decide a result, as JSON: all but the timeout (a run that finishes in time
        gives the same answer under any timeout), for cache keys and comparisons."""
        data = self.settings.to_json()
        data.pop("timeout")
        return data


def check_backends(backends) -> tuple[str, ...]:
    names = [backends] if isinstance(backends, str) else list(backends)
    if not all(isinstance(b, str) for b in names):
        raise UserError(f"backends must be names, got {backends!r}")
    chosen = tuple(dict.fromkeys(b.strip().lower() for b in names if b.strip()))
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise UserError(f"unknown backend {', '.join(unknown) or '(none)'}; choose from {', '.join(BACKENDS)}")
    return chosen


def check_session_backend(backend: str) -> None:
    if backend not in SESSION_BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(SESSION_BACKENDS)}")


def check_optimization_level(level: str) -> None:
    if level not in OPTIMIZATION_LEVELS:
        raise UserError(f"unknown optimization level {level!r}; one of {', '.join(OPTIMIZATION_LEVELS)}")


def check_shapes(shapes: dict) -> dict[str, tuple[int, ...]]:
    """Whole input shapes: every dimension a positive integer (``intake.shapes.check_dims``)."""
    from dashboard.intake.shapes import check_dims

    out = {}
    for name, shape in shapes.items():
        if not isinstance(shape, (list, tuple)):
            raise UserError(f"the shape of input {name!r} must be a list of dimensions, got {shape!r}")
        check_dims({f"{name}[{i}]": d for i, d in enumerate(shape)})
        out[name] = tuple(shape)
    return out


def check_timeout(timeout) -> float | None:
    """None (the analysis' default), or a positive, finite number of seconds, at most a week: ``nan``
    or ``-5`` would make every wait end at once."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) \
            or not 0 < timeout <= MAX_SECONDS:
        raise UserError(f"the timeout must be a number of seconds between 0 and {MAX_SECONDS:,} (a week), "
                        f"got {timeout!r}")
    return float(timeout)


def _table() -> tuple[Knob, ...]:
    hints = typing.get_type_hints(Settings)
    rows = []
    for f in dataclasses.fields(Settings):
        meta = f.metadata["knob"]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if meta["kind"] == "soc":
            meta = {**meta, "choices": tuple(s.key for s in SOCS)}
        rows.append(Knob(key=f.name, type=hints[f.name], default=default, **meta))
    return tuple(rows)


KNOBS: tuple[Knob, ...] = _table()
KNOB = {knob.key: knob for knob in KNOBS}
Settings.KNOB_FIELDS = tuple(KNOB)


def defaults(analysis: str | None = None) -> dict[str, Any]:
    """Each knob's default, the timeout ``analysis``' own (``TIMEOUTS``) when one is named: what a
    front end shows before the user changes anything."""
    out = {knob.key: knob.default for knob in KNOBS}
    if analysis is not None:
        out["timeout"] = TIMEOUTS[analysis]
    return out


# -- naming knobs in hints --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """Something hints name that is not a knob of ``Settings`` (where an analysis runs)."""

    key: str
    cli_words: str
    label: str

    @property
    def page_words(self) -> str:
        return f"option ‘{self.label}’"


TERMS = {"device": Term("device", "--device", "Device")}


def ref(key: str) -> str:
    """A knob (or term) named in a hint, front-end neutral: ``⟨key⟩``, worded by ``words``."""
    if key not in KNOB and key not in TERMS:
        raise KeyError(f"no knob or term {key!r}")
    return f"⟨{key}⟩"


def words(text: str | None, style: str) -> str | None:
    """``text`` with every ``⟨key⟩`` in the words of ``style``: ``CLI`` (``--fp16``), ``PAGE``
    (``option ‘HTP fp16 precision’``) or ``KEYS`` (``setting fp16``, for Python callers)."""
    if not text or "⟨" not in text:
        return text
    for key, named in (*KNOB.items(), *TERMS.items()):
        spelled = {CLI: named.cli_words, PAGE: named.page_words, KEYS: f"setting {key}"}[style]
        text = text.replace(f"⟨{key}⟩", spelled)
    return text


def worded_error(exc: UserError, style: str) -> UserError:
    """``exc`` with its hints worded for ``style`` (its type kept when it takes just a message)."""
    message = words(str(exc), style)
    if message == str(exc):
        return exc
    try:
        return type(exc)(message)
    except TypeError:
        return UserError(message)


def parse_assignments(items: list[str], what: str, integer: bool = False) -> dict:
    """``["NAME=VALUE", ...]`` from the command line or a text box; ``what`` names the field in
    the caller's words (``--dim``, ``provider option``)."""
    out: dict = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise UserError(f"{what} {item!r} is not NAME=VALUE")
        if integer:
            try:
                out[name] = int(value)
            except ValueError:
                raise UserError(f"{what} {name!r} must be an integer, got {value!r}") from None
            if out[name] <= 0:
                raise UserError(f"{what} {name!r} must be positive, got {value}")
        else:
            out[name] = value
    return out
