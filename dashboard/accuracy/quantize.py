"""Quantizing a model for the HTP, and the mixed-precision search: the fewest tensors lifted to 16
bits until a target accuracy holds on the user's data, each step's accuracy *and* its HTP cost shown.

``quantize_model`` is the one entry point (CLI, page, sweep, notebook). It composes the worker
commands every other analysis uses: ``quantize`` (``build``: ORT's QNN recipe), ``accuracy`` (the
QDQ model on the HTP against float on the CPU EP), ``profile`` (simulated cycles per step, same unit
and SoC) and ``partition`` (the HTP's coverage of the integer path, with the blockers and their fix).

The search is Polygraphy's ``debug precision`` on ORT's overrides: the layerwise debugger ranks the
u8 model's tensors worst first; lifting the k worst to u16 is bisected over k (accuracy grows with
k), so a model with N tensors takes about log2(N) + 2 builds: u8, all 16-bit (is the target
reachable at all), then the bisection.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.accuracy.model import AccuracyReport, DataInfo
from dashboard.accuracy.protocol import QuantizeArgs, QuantizeBuild
from dashboard.errors import UserError
from dashboard.partition.protocol import Stage
from dashboard.runtime.jobs import Cancellation
from dashboard.runtime.knobs import TIMEOUTS, Settings
from dashboard.serde import Record

DEFAULT_TIMEOUT = TIMEOUTS["quantize"]
OVERRIDES_SUFFIX = ".overrides.json"


@dataclass
class Target(Record):
    """What the search must reach on every output: an SQNR in dB, or a cosine similarity."""

    metric: str  # "sqnr" | "cosine"
    value: float

    def met(self, sqnr: float | None, cosine: float | None) -> bool:
        figure = sqnr if self.metric == "sqnr" else cosine
        return figure is not None and figure >= self.value

    @property
    def text(self) -> str:
        return f"SQNR >= {self.value:g} dB" if self.metric == "sqnr" else f"cosine >= {self.value:g}"


def parse_target(text: str) -> Target:
    """``30`` or ``sqnr=30`` (dB), or ``cosine=0.999``."""
    match = re.fullmatch(r"\s*(?:(sqnr|cosine)\s*=\s*)?(-?[0-9]+(?:\.[0-9]+)?)\s*", str(text), re.IGNORECASE)
    if not match:
        raise UserError(f"--target is SQNR_DB (e.g. 30) or cosine=X (e.g. cosine=0.999), got {text!r}")
    metric = (match.group(1) or "sqnr").lower()
    value = float(match.group(2))
    if metric == "cosine" and not -1 <= value <= 1:
        raise UserError(f"a cosine target is between -1 and 1, got {value:g}")
    if metric == "sqnr" and not 0 < value <= 200:
        raise UserError(f"an SQNR target is in dB between 0 and 200, got {value:g}")
    return Target(metric, value)


@dataclass
class Step(Record):
    """One model the search built: the tensors lifted, its accuracy against float on the HTP
    (worst output), and its HTP cost (median simulated cycles per run, or the reason there is none)."""

    label: str
    lifted: list[str]
    sqnr_db: float | None = None
    cosine: float | None = None
    meets: bool | None = None
    cycles: float | None = None
    cost_unit: str | None = None
    hardware: str | None = None
    note: str | None = None


@dataclass
class Coverage(Record):
    """The HTP's partition of the QDQ model on the integer path (no fp16)."""

    claimed: int
    refused: int
    subgraphs: int
    blockers: list[dict] = field(default_factory=list)
    error: str | None = None
    ends: int = 0  # the input's QuantizeLinear and the output's DequantizeLinear, left to the CPU EP by design


@dataclass
class QuantizeResult(Record):
    model: str
    out: str
    options: dict
    data: DataInfo
    left_float: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target: Target | None = None
    steps: list[Step] = field(default_factory=list)
    lifted: list[str] = field(default_factory=list)
    reached: bool | None = None
    overrides: str | None = None
    coverage: Coverage | None = None
    float_cycles: float | None = None
    cycles_ratio: float | None = None
    accuracy: AccuracyReport | None = None

    def steps_frame(self):
        import pandas as pd

        return pd.DataFrame([{**s.to_json(), "count": len(s.lifted)} for s in self.steps],
                            columns=["label", "count", "sqnr_db", "cosine", "meets", "cycles", "cost_unit", "hardware",
                                     "note", "lifted"])


class Search:
    """One search's state: the dashboard-side loop over worker commands."""

    def __init__(self, model: Path, dataset, settings: Settings, args: QuantizeArgs, folder: Path, *,
                 cost: bool, on_event, cancel: Cancellation | None) -> None:
        self.model, self.dataset, self.settings, self.args, self.folder = model, dataset, settings, args, folder
        self.cost, self.on_event, self.cancel = cost, on_event or (lambda e: None), cancel
        self.built = 0

    def emit(self, text: str, progress: float) -> None:
        self.on_event(Stage(text, progress))

    def build(self, lifted: dict[str, str], activations: str | None = None) -> QuantizeBuild:
        from dashboard.runtime.devices import Device
        from dashboard.runtime.jobs import run_command

        self.built += 1
        out = self.folder / f"step{self.built}.onnx"
        args = QuantizeArgs(**{**self.args.to_json(), "out": str(out), "lifted": lifted,
                               "activations": activations or self.args.activations})
        answer = run_command(Device.parse("local"), str(self.model), None, "quantize", lambda located: args,
                             timeout=self.settings.timeout or DEFAULT_TIMEOUT, on_event=None, cancel=self.cancel)
        if answer.failure is not None:
            raise UserError(f"quantizing {self.model.name} failed: {answer.failure}")
        return answer.result

    def evaluate(self, built: QuantizeBuild, label: str, lifted: list[str], target: Target | None,
                 layers=()) -> tuple[Step, AccuracyReport]:
        from dashboard.accuracy.run import accuracy_model

        report = accuracy_model(self.model, self.dataset, self.settings, quantized=built.out, layers=layers,
                                cancel=self.cancel)
        step = Step(label=label, lifted=list(lifted))
        comparison = report.comparison("qdq_htp_vs_float")
        if comparison is None or not comparison.ok:
            step.note = comparison.reason if comparison else "no comparison"
        else:
            step.sqnr_db = comparison.worst_sqnr()
            cosines = [o.overall.cosine for o in comparison.outputs if o.overall.cosine is not None]
            step.cosine = min(cosines) if cosines else None
            step.hardware = comparison.hardware
        if target is not None:
            step.meets = target.met(step.sqnr_db, step.cosine)
        if self.cost:
            self._cost(step, built.out)
        return step, report

    def _cost(self, step: Step, path: str) -> None:
        from dashboard.profile.run import profile_model

        profile = profile_model(path, self.settings.replace(fp16=False, backends=("htp",)), runs=1, warmup=0,
                                cancel=self.cancel)
        backend = profile.backends.get("htp")
        if backend is None or not backend.ok:
            step.note = f"no cost: {backend.reason if backend else 'the HTP was not profiled'}"
            return
        step.cycles, step.cost_unit, step.hardware = backend.total, backend.unit, backend.hardware


def quantize_model(model_path: str | os.PathLike, data, out: str | os.PathLike, settings: Settings | None = None, *,
                   activations: str = "u8", weights: str = "u8", per_channel: bool = False,
                   calibration: str = "minmax", target: Target | str | None = None, cost: bool = True,
                   coverage: bool = True, preprocess=None, limit: int | None = None, on_event=None,
                   cancel: Cancellation | None = None) -> QuantizeResult:
    """Quantize ``model_path`` to ``out`` calibrated on ``data`` (a path or a ``Dataset``; random
    inputs only when None, and said); with ``target``, search the fewest tensors to lift to 16 bits
    and write their overrides beside ``out``. ``cost``: each step's simulated HTP cycles and the
    ratio against the float model in fp16; ``coverage``: the HTP's partition of the result."""
    from dashboard.accuracy.run import _data_info, dataset_for
    from dashboard.runtime import scratch

    settings = settings or Settings()
    target = parse_target(target) if isinstance(target, str) else target
    given = Path(model_path).expanduser()
    out = Path(out).expanduser()
    if out.resolve() == given.resolve():
        raise UserError(f"{out}: the QDQ model would overwrite the float model: write it elsewhere")
    if not out.parent.is_dir():
        raise UserError(f"{out}: its folder does not exist")
    _, _, dataset = dataset_for(given, settings, data, preprocess=preprocess, limit=limit)
    float_settings = settings if settings.fp16 else settings.replace(fp16=True)
    with scratch.folder("qbl-quantize-") as folder:
        data_path = folder / "data.npz"
        dataset.save(data_path)
        args = QuantizeArgs(path=str(given.resolve()), data=str(data_path), out="", activations=activations,
                            weights=weights, per_channel=per_channel, calibration=calibration)
        search = Search(given, dataset, float_settings, args, folder, cost=cost, on_event=on_event, cancel=cancel)
        result = QuantizeResult(model=given.name, out=str(out), data=_data_info(dataset),
                                options={"activations": activations, "weights": weights, "per_channel": per_channel,
                                         "calibration": calibration}, target=target)
        final = _search(search, result, target)
        shutil.copyfile(final.out, out)
    result.left_float, result.notes = final.left_float, final.notes + result.notes
    if result.lifted:
        result.overrides = str(out.with_suffix(OVERRIDES_SUFFIX))
        write_overrides(result.overrides, {t: "QUInt16" for t in result.lifted})
    if cost:
        _float_cost(search, result)
    if coverage:
        result.coverage = coverage_of(out, settings)
    return result


def _search(search: Search, result: QuantizeResult, target: Target | None) -> QuantizeBuild:
    """The steps; returns the build to keep (the fewest lifts that meet the target, else the best)."""
    search.emit(f"quantizing ({search.args.activations} activations)", 0.05)
    base = search.build({})
    first, report = search.evaluate(base, f"all {search.args.activations}", [], target,
                                    layers=("layerwise",) if target else ())
    result.steps.append(first)
    result.accuracy = report
    if target is None or first.meets or search.args.activations == "u16":
        result.reached = first.meets
        return base
    ranked = _ranked(report)
    search.emit("quantizing with 16-bit activations everywhere", 0.2)
    everything = search.build({}, activations="u16")
    top, top_report = search.evaluate(everything, "all u16", ranked, target)
    result.steps.append(top)
    if not top.meets:
        result.reached, result.lifted = False, []
        result.notes.append(f"{target.text} is not reached even with 16-bit activations everywhere "
                            f"(worst output {top.sqnr_db} dB): the u8 model is kept; keep the worst layers float "
                            "or recalibrate")
        return base
    low, high, best = 0, len(ranked), (everything, top_report, ranked)
    while high - low > 1:
        mid = (low + high) // 2
        search.emit(f"lifting the {mid} worst tensor(s) to u16", 0.3 + 0.6 * (1 - (high - low) / max(len(ranked), 1)))
        built = search.build({t: "u16" for t in ranked[:mid]})
        step, step_report = search.evaluate(built, f"{mid} lifted", ranked[:mid], target)
        result.steps.append(step)
        if step.meets:
            high, best = mid, (built, step_report, ranked[:mid])
        else:
            low = mid
    if best[2] is ranked and high == len(ranked):  # the search never met it below all: lift every ranked one
        built = search.build({t: "u16" for t in ranked})
        step, step_report = search.evaluate(built, f"{len(ranked)} lifted", ranked, target)
        result.steps.append(step)
        if step.meets:
            best = (built, step_report, ranked)
    built, report, lifted = best
    result.reached, result.lifted, result.accuracy = True, list(lifted), report
    return built


def _ranked(report: AccuracyReport) -> list[str]:
    """The u8 model's probed tensors, worst own (layerwise) error first."""
    layers = report.layers
    if layers is None or not layers.ok:
        raise UserError(f"the search needs the layerwise debugger on the u8 model: "
                        f"{layers.reason if layers else 'no layers measured'}")
    rows = [r for r in layers.rows if r.layerwise is not None or r.cumulative is not None]
    return [r.tensor for r in sorted(rows, key=lambda r: r.layerwise if r.layerwise is not None else r.cumulative)]


def write_overrides(path: str, lifted: dict[str, str]) -> None:
    """ORT's ``TensorQuantOverrides`` as JSON (``quant_type`` by its ``QuantType`` name): what
    ``get_qnn_qdq_config(init_overrides=...)`` takes, read back with ``read_overrides``."""
    data = {tensor: [{"quant_type": kind}] for tensor, kind in lifted.items()}
    try:
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot write the overrides ({exc.strerror or exc})") from None


def _float_cost(search: Search, result: QuantizeResult) -> None:
    """The float model's cycles in fp16 on the same SoC, and the kept step's ratio to it (only when
    both are in the same unit on the same hardware)."""
    from dashboard.profile.run import profile_model

    profile = profile_model(search.model, search.settings.replace(backends=("htp",)), runs=1, warmup=0,
                            cancel=search.cancel)
    backend = profile.backends.get("htp")
    kept = next((s for s in reversed(result.steps) if s.lifted == result.lifted), result.steps[0])
    if backend is None or not backend.ok:
        result.notes.append(f"no float cost: {backend.reason if backend else 'not profiled'}")
        return
    result.float_cycles = backend.total
    if kept.cycles and backend.total and kept.cost_unit == backend.unit and kept.hardware == backend.hardware:
        result.cycles_ratio = kept.cycles / backend.total


def coverage_of(path: Path, settings: Settings) -> Coverage:
    """The HTP's partition of the QDQ model without fp16, and its blockers with their fix."""
    from dashboard.partition.analysis import analyze
    from dashboard.partition.report import claims

    report = analyze(path, settings.replace(fp16=False, backends=("htp",)), use_cache=False)
    htp = report.backends.get("htp")
    if htp is None or not htp.usable:
        return Coverage(0, 0, 0, error=(htp.error if htp else "the HTP was not measured"))
    counts = claims(report, "htp")
    rows = [b.to_json() for b in report.blockers]
    ends = [r for r in rows if _is_end(r)]
    return Coverage(counts.claimed, counts.refused - sum(r["count"] for r in ends), htp.qnn_subgraphs,
                    blockers=[r for r in rows if not _is_end(r)], ends=sum(r["count"] for r in ends))


def _is_end(row: dict) -> bool:
    """The QNN EP leaves a graph input's QuantizeLinear and a graph output's DequantizeLinear to the
    CPU EP on purpose (its reason says "configured to not take"): the model's ends, not blockers."""
    return row["op_type"] in ("QuantizeLinear", "DequantizeLinear") and "configured to not take" in row["reason"]
