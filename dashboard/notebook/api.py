"""Results for notebooks: each wraps the record the CLI and the pages use and adds ``to_frame()``
(pandas) and ``figure()`` (plotly). No computation is done here that the CLI does not do the same
way: classification is ``dashboard.classify``, partitions are ``partition.analysis.analyze`` and
timelines are ``timeline.remote.run_on_device`` (both in a runtime worker process), tables come from
the records and figures from ``dashboard.render``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Callable

import pandas as pd
import plotly.graph_objects as go

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.refined import classify_refined
from dashboard.classify.verdicts import Classification, explain_disagreement
from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.intake.overview import io_table
from dashboard.intake.reader import load_model
from dashboard.intake.samples import SAMPLES, sample_path
from dashboard.partition.analysis import DEFAULT_TIMEOUT as PARTITION_TIMEOUT
from dashboard.partition.analysis import analyze, worded
from dashboard.partition.report import CLASS_LABELS, PartitionReport
from dashboard.render import classify_figures, partition_graph, timeline_figures
from dashboard.runtime.knobs import KEYS, Settings, worded_error
from dashboard.runtime.protocol import ProgressEvent
from dashboard.timeline.model import DEFAULT_TIMEOUT as TIMELINE_TIMEOUT
from dashboard.timeline.model import TimelineOptions, TimelineRun, strategy_table

if TYPE_CHECKING:
    from dashboard.accuracy.model import AccuracyReport
    from dashboard.profile.model import Profile

OnEvent = Callable[[ProgressEvent], None] | None


def load(path: str | os.PathLike) -> "Model":
    """Read a model without its weights (``intake.reader.load_model``); bad input is a ``UserError``."""
    return Model(str(path), load_model(str(path)))


def sample(file_name: str = "cnn_classifier.onnx") -> "Model":
    """A bundled sample (see ``samples()``), from a checkout or an installed package alike."""
    return load(sample_path(file_name))


def samples() -> pd.DataFrame:
    """The bundled samples: file name, title, kind and what each is for."""
    return pd.DataFrame([{"file_name": s.file_name, "title": s.title, "kind": s.kind, "description": s.description}
                         for s in SAMPLES])


@dataclass
class Model:
    """A loaded model: ``graph`` is the weight-free ``ModelGraph`` every analysis reads."""

    path: str
    graph: ModelGraph

    def to_frame(self) -> pd.DataFrame:
        """Inputs and outputs: dtype, shape, the symbolic dimensions QNN needs fixed."""
        return io_table(self.graph)

    def classify(self, optimized: bool = False) -> "Classified":
        """Both classifiers; ``optimized`` adds the EP rules on the graph ONNX Runtime hands the EP
        (after its level-1 optimizations, computed by a CPU session in a worker process)."""
        after = None
        if optimized:
            from dashboard.classify.optimized import classify_after_ort_optimizations
            from dashboard.runtime.client import optimized_copy

            after, _ = classify_after_ort_optimizations(self.path, optimized_copy)
        return Classified(classify_ep(self.graph), classify_refined(self.graph), after)

    def partition(self, *, timeout: float | None = PARTITION_TIMEOUT, use_cache: bool = True, on_event: OnEvent = None,
                  **options) -> "Partitioned":
        """Which nodes the HTP and GPU backends claim, the node classes and both migration plans:
        ``partition`` of the CLI with the same options (``runtime.knobs.Settings`` fields:
        ``backends``, ``dims``, ``shapes``, ``fp16``, ``soc``, ``provider_options``,
        ``optimization_level``) and the same disk cache. Hints name settings by these keys."""
        parsed = _options(Settings, "partition", options)
        report = analyze(self.path, parsed, timeout=timeout, on_event=on_event, use_cache=use_cache)
        return Partitioned(worded(report, KEYS), self.graph)

    def profile(self, *, runs: int = 10, device: str = "local", on_event: OnEvent = None, **options) -> "Profiled":
        """Where the time goes: per-node cost on each backend over ``runs`` timed runs (``profile``
        of the CLI, in a worker process); ``options`` are ``Settings`` fields as for ``partition``.
        On this host the HTP's figures are simulated HTP cycles, never time."""
        from dashboard.profile.run import profile_model
        from dashboard.runtime.devices import Device

        parsed = _options(Settings, "profile", options)
        try:
            return Profiled(profile_model(self.path, parsed, runs=runs, device=Device.parse(device),
                                          on_event=on_event))
        except UserError as exc:
            raise worded_error(exc, KEYS) from None

    def accuracy(self, data=None, *, quantized: str | os.PathLike | None = None, layers=("cumulative", "layerwise"),
                 preset: str | None = None, limit: int | None = None, on_event: OnEvent = None,
                 **options) -> "Accuracy":
        """Does the HTP give the right answer on ``data`` (a path: images, .npy, .npz; None: random
        inputs, said on every figure): ``accuracy`` of the CLI, in a worker process. ``quantized``: the
        model's QDQ form; ``layers``: the layer modes; ``options``: ``Settings`` fields."""
        from dashboard.accuracy.preprocess import preprocess_for
        from dashboard.accuracy.run import accuracy_model

        parsed = _options(Settings, "accuracy", options)
        try:
            preprocess = preprocess_for(self.graph, preset=preset) if data is not None else None
            return Accuracy(accuracy_model(self.path, data, parsed, quantized=quantized, layers=layers,
                                           preprocess=preprocess, limit=limit, on_event=on_event))
        except UserError as exc:
            raise worded_error(exc, KEYS) from None

    def quantize(self, data, out: str | os.PathLike, *, target: str | None = None, activations: str = "u8",
                 weights: str = "u8", per_channel: bool = False, calibration: str = "minmax",
                 preset: str | None = None, on_event: OnEvent = None, **options):
        """The QDQ model for the HTP at ``out`` (``quantize`` of the CLI): ORT's QNN recipe calibrated on
        ``data``; with ``target`` (``"30"`` dB or ``"cosine=0.999"``) the mixed-precision search. Returns
        the ``QuantizeResult`` record (``steps_frame()`` is its table)."""
        from dashboard.accuracy.preprocess import preprocess_for
        from dashboard.accuracy.quantize import quantize_model

        parsed = _options(Settings, "quantize", options)
        try:
            return quantize_model(self.path, data, out, parsed, activations=activations, weights=weights,
                                  per_channel=per_channel, calibration=calibration, target=target,
                                  preprocess=preprocess_for(self.graph, preset=preset), on_event=on_event)
        except UserError as exc:
            raise worded_error(exc, KEYS) from None

    def import_aihub(self, path: str | os.PathLike, device_name: str | None = None) -> "Profiled":
        """A profile downloaded from Qualcomm AI Hub (``ProfileJob.download_profile``) on this
        model's nodes; ``record.unmatched`` lists the layers no node was found for."""
        from dashboard.profile.aihub import import_profile, read_file

        return Profiled(import_profile(read_file(path), self.graph, str(path), device_name))

    def timeline(self, *, device: str = "local", timeout: float | None = TIMELINE_TIMEOUT, on_event: OnEvent = None,
                 **options) -> "Timeline":
        """Serve one workload with each strategy (``timeline`` of the CLI) on ``device`` (``local``
        or ``ssh://...``); ``options`` are ``TimelineOptions`` fields: the settings (``fp16``,
        ``soc``, ``shapes``, ``optimization_level`` ...) and the workload (``strategies``,
        ``requests``, ``rate``, ``policy`` ...)."""
        from dashboard.runtime.devices import Device
        from dashboard.timeline.remote import run_on_device

        parsed = _options(TimelineOptions, "timeline", options)
        return Timeline(run_on_device(Device.parse(device), self.path, parsed, on_event=on_event, timeout=timeout))


def _options(cls: type, what: str, options: dict):
    """``cls(**options)``, with a name that is not one of its fields as a one-line ``UserError``
    (hints in it name settings by key)."""
    unknown = sorted(set(options) - {f.name for f in fields(cls)})
    if unknown:
        raise UserError(f"unknown {what} option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(f.name for f in fields(cls))}")
    try:
        return cls(**options)
    except UserError as exc:
        raise worded_error(exc, KEYS) from None


@dataclass
class Classified:
    """Both classifiers' results (``ep``, ``refined``), and ``optimized``: the EP rules on ONNX
    Runtime's optimized graph when it was asked for."""

    ep: Classification
    refined: Classification
    optimized: Classification | None = None

    @property
    def results(self) -> dict[str, Classification]:
        out = {"EP rules": self.ep, "refined": self.refined}
        if self.optimized is not None:
            out["EP rules (ORT-optimized graph)"] = self.optimized
        return out

    @property
    def disagreement(self) -> str | None:
        """Why the two classifiers disagree, in one sentence (None when they agree)."""
        return explain_disagreement(self.ep, self.refined)

    def to_frame(self) -> pd.DataFrame:
        """One row per signal per classifier: side, weight, whether it fired (and was reached),
        score, measured value against its threshold, and the first pieces of evidence."""
        rows = [{"classifier": title, "verdict": result.verdict, "backend": result.backend, "signal": s.name,
                 "side": s.side, "weight": s.weight, "fired": s.fired, "reached": s.reached, "score": s.score,
                 "value": s.value, "threshold": s.threshold, "evidence": "; ".join(s.evidence)}
                for title, result in self.results.items() for s in result.signals]
        return pd.DataFrame(rows)

    def figure(self) -> go.Figure:
        """The scoring signals of each classifier, GenAI against NonGenAI."""
        return classify_figures.signal_scores(self.results)

    def __repr__(self) -> str:
        return " | ".join(f"{title}: {r.verdict} → {r.backend}" for title, r in self.results.items())


@dataclass
class Partitioned:
    """A ``PartitionReport`` (``record``) with the model graph it describes."""

    record: PartitionReport
    graph: ModelGraph

    def to_frame(self) -> pd.DataFrame:
        """One row per model node in topological order: op type, class, and per backend whether
        it is claimed, the status (measured, predicted, fused, removed ...), the runtime's reason
        for a refusal and the QNN op it became."""
        classes = self.record.classes.of()
        ops = self.graph.node_by_name()
        rows = []
        for name in self.record.node_order:
            row = {"node": name, "op_type": ops[name].op_type, "class": classes.get(name)}
            for backend, report in self.record.backends.items():
                verdict = report.nodes.get(name)
                row.update({backend: None if verdict is None else verdict.supported,
                            f"{backend}_status": verdict and verdict.status,
                            f"{backend}_reason": verdict and verdict.reason,
                            f"{backend}_qnn_op": verdict and verdict.qnn_op})
            rows.append(row)
        return pd.DataFrame(rows)

    def plans_frame(self) -> pd.DataFrame:
        """One row per segment of each migration plan: backend, node count, boundary bytes."""
        return pd.DataFrame([{"plan": kind, "segment": s.index, "backend": s.backend, "nodes": len(s.nodes),
                              "inputs": len(s.inputs), "outputs": len(s.outputs), "boundary_bytes": s.boundary_bytes}
                             for kind, plan in self.record.plans.items() for s in plan.segments])

    def figure(self, plan: str | None = None) -> go.Figure:
        """Nodes per op type stacked by class (both / GPU only / HTP only / neither / removed), or
        with ``plan`` (``intersection`` / ``segmented``) that plan's segment strip. The whole graph
        with these overlays is the dashboard's Model Explorer view."""
        if self.record.classes.note:
            raise UserError(self.record.classes.note)
        if plan is not None:
            return self.plan_figure(plan)
        return partition_graph.classes_by_op_figure(self.record, CLASS_LABELS)

    def plan_figure(self, plan: str = "segmented") -> go.Figure:
        """A plan's segments side by side in execution order (width = node count)."""
        return partition_graph.strip_figure(self._plan(plan))

    def _plan(self, kind: str):
        if kind not in self.record.plans:
            raise UserError(f"no plan {kind!r}; plans: {', '.join(self.record.plans) or 'none (see record.classes)'}")
        return self.record.plans[kind]


@dataclass
class Profiled:
    """A cost profile (``record``: ``profile.model.Profile``): per node and backend, median and
    spread in the backend's unit and the share of its total."""

    record: "Profile"

    def to_frame(self) -> pd.DataFrame:
        """One row per node and backend (``Profile.frame``); ``record.by_op_type()`` and
        ``record.by_scope()`` sum them per op type and per block."""
        return self.record.frame()

    def figure(self, backend: str | None = None, n: int = 15) -> go.Figure:
        """The ``n`` costliest nodes of ``backend`` (default: the first that ran), in its own unit."""
        from dashboard.render.profile_views import top_nodes

        if backend is not None and backend not in self.record.backends:
            raise UserError(f"no backend {backend!r} in this profile; it has {', '.join(self.record.backends)}")
        return top_nodes(self.record, backend, n)

    def __repr__(self) -> str:
        parts = [f"{k}: {self.record.label(k)}" if b.ok else f"{k}: failed" for k, b in self.record.backends.items()]
        return f"<Profiled {self.record.model}: {len(self.record.nodes)} rows; {'; '.join(parts)}>"


@dataclass
class Accuracy:
    """An accuracy report (``record``: ``accuracy.model.AccuracyReport``): per comparison and output
    the metrics, per sample, and the layers."""

    record: "AccuracyReport"

    def to_frame(self) -> pd.DataFrame:
        """One row per comparison and output (``AccuracyReport.frame``); ``record.sample_frame()``
        per sample, ``layers_frame()`` per layer."""
        return self.record.frame()

    def layers_frame(self) -> pd.DataFrame:
        return self.record.layer_frame()

    def figure(self, kind: str = "layers") -> go.Figure:
        """``layers``: each layer's SQNR in graph order (cumulative and layerwise, the first jump
        marked); ``outputs``: each output's SQNR per comparison."""
        from dashboard.render import accuracy_figures

        if kind not in ("layers", "outputs"):
            raise UserError(f"figure kind is 'layers' or 'outputs', got {kind!r}")
        return accuracy_figures.layer_chart(self.record) if kind == "layers" else accuracy_figures.output_chart(self.record)

    def __repr__(self) -> str:
        return f"<Accuracy {self.record.model} on {self.record.data.label}: " + "; ".join(self.record.verdicts[:2]) + ">"


@dataclass
class Timeline:
    """A ``TimelineRun`` (``record``): every strategy's events, requests and metrics."""

    record: TimelineRun

    def to_frame(self) -> pd.DataFrame:
        """The strategy comparison: first response, swap time, p50 before / after, p99, throughput."""
        return pd.DataFrame(strategy_table(self.record))

    def requests_frame(self) -> pd.DataFrame:
        """Every request of every strategy: arrival, start, end, latency, backend, ok."""
        return pd.DataFrame([{"strategy": name, **r.to_json(), "latency": r.latency, "response": r.response}
                             for name, run in self.record.strategies.items() for r in run.requests])

    def events_frame(self) -> pd.DataFrame:
        """Every event of every strategy (session creation, warm-up, swap, drain, failures ...)."""
        return pd.DataFrame([{"strategy": name, **e.to_json()}
                             for name, run in self.record.strategies.items() for e in run.events])

    def figure(self, kind: str = "compare", strategy: str | None = None) -> go.Figure:
        """``compare``: the strategies' latencies side by side; ``gantt``: one strategy's sessions
        and phases; ``latency``: its requests over time, the swap marked. ``strategy`` defaults to
        ``migrate`` when it ran, else the first."""
        if kind == "compare":
            return timeline_figures.strategy_bars([("run", self.record)])
        name = strategy or ("migrate" if "migrate" in self.record.strategies else next(iter(self.record.strategies)))
        if name not in self.record.strategies:
            raise UserError(f"strategy {name!r} did not run; ran: {', '.join(self.record.strategies)}")
        labels = timeline_figures.backend_labels(self.record.fast, self.record.target)
        draw = {"gantt": timeline_figures.gantt, "latency": timeline_figures.latency_scatter}.get(kind)
        if draw is None:
            raise UserError(f"unknown timeline figure {kind!r}; use compare, gantt or latency")
        return draw(self.record.strategies[name], labels)
