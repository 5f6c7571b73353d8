"""Accuracy inside the runtime worker: the same samples through every session, errors added up as
the samples go (``metrics.Accumulator``: no tensor is kept past its sample).

Runs as the worker command ``accuracy`` (``dashboard.runtime.worker``), so a native crash or hang of
QNN is a failed worker, never a dead dashboard. The sessions:

- ``float_cpu``: the float model on the CPU EP in fp32, the reference of every comparison (with every
  float tensor as an output too when layers are asked: the reference of every probe);
- ``float_htp``: the float model on the HTP (fp16 when asked);
- ``qdq_htp`` / ``qdq_cpu``: the QDQ model on the HTP (integer path, no fp16) and on the CPU EP;
- for layers, on the HTP: the target's cumulative and layerwise debug copies (``probes``), and the
  QDQ model's cumulative copy on the CPU EP (which of the two deviates, layer by layer).

Each session fails alone: its comparisons carry the runtime's reason and the others are kept.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from dashboard.accuracy import probes as P
from dashboard.accuracy.explain import explain_layers, quant_params
from dashboard.accuracy.metrics import Accumulator
from dashboard.accuracy.model import AccuracyReport, Comparison, DataInfo, LayerError, Layers, Metrics, OutputAccuracy
from dashboard.accuracy.protocol import AccuracyArgs
from dashboard.errors import UserError, one_line
from dashboard.partition.protocol import Stage

Emit = Callable[[Stage], None]
WORST = 5  # samples listed as the worst of each output
SENTINEL = 1e30  # a float beyond this is a mask value (finfo.min/max), not a signal
DRIFT_DB = 3.0  # an output this much apart between the plain session and the debug copy is said

PAIRS = {  # key -> (target session, reference session, target words, reference words)
    "htp_vs_float": ("float_htp", "float_cpu", "float model on the HTP", "float model on the CPU EP (fp32)"),
    "qdq_htp_vs_float": ("qdq_htp", "float_cpu", "QDQ model on the HTP", "float model on the CPU EP (fp32)"),
    "qdq_cpu_vs_float": ("qdq_cpu", "float_cpu", "QDQ model on the CPU EP", "float model on the CPU EP (fp32)"),
    "qdq_htp_vs_qdq_cpu": ("qdq_htp", "qdq_cpu", "QDQ model on the HTP", "QDQ model on the CPU EP"),
}


class Sessions:
    """The created sessions by role, and each role's failure."""

    def __init__(self) -> None:
        self.handles: dict[str, object] = {}
        self.failed: dict[str, str] = {}

    def make(self, role: str, build: Callable[[], object]) -> None:
        try:
            self.handles[role] = build()
        except UserError as exc:
            self.failed[role] = str(exc)

    def run(self, role: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        handle = self.handles.get(role)
        if handle is None:
            return None
        session = handle.session
        names = {i.name for i in session.get_inputs()}
        try:
            values = session.run(None, {k: v for k, v in feeds.items() if k in names})
        except Exception as exc:  # a run that fails is that session's failure, the others go on
            self.failed[role] = f"run failed: {one_line(exc)}"
            self.handles.pop(role)
            return None
        return dict(zip([o.name for o in session.get_outputs()], values))


def _hardware(role: str) -> str:
    from dashboard.runtime.qnn import hardware

    if role.endswith("_cpu"):
        return "CPU EP"
    where = hardware("htp")
    return {"simulator": "HTP simulator (x86_64)", "npu": "HTP (NPU)"}.get(where, f"HTP ({where})")


def _load(path: str, shapes: dict[str, tuple[int, ...]]):
    import onnx

    from dashboard.intake.shapes import fix_input_shapes

    model = onnx.load(path)
    fix_input_shapes(model, shapes)
    return model


def _bytes(model) -> bytes:
    return model.SerializeToString()


def run(args: AccuracyArgs, emit: Emit) -> AccuracyReport:
    from dashboard.accuracy.data import load_saved

    data = load_saved(args.data)
    emit(Stage("reading the model", 0.02))
    float_model = _load(args.path, args.input_shapes)
    qdq_model = _load(args.quantized, args.input_shapes) if args.quantized else None
    notes: list[str] = []
    if qdq_model is None and P.is_qdq(float_model):
        qdq_model, float_model = float_model, None
        notes.append("the model is quantized (QDQ) and no float model was given: the QDQ model on the HTP is "
                     "compared with the same model on the CPU EP only")
    target = qdq_model if qdq_model is not None else float_model
    plan = Plan(args, float_model, qdq_model, target)
    sessions = plan.build(emit)
    accumulators = plan.accumulate(sessions, data, emit)
    report = AccuracyReport(model="", data=DataInfo(source=data.source, count=len(data), names=list(data.names),
                                                   preprocess=data.preprocess.to_json() if data.preprocess else None,
                                                   random=data.random, licence=data.licence,
                                                   description=data.describe()), notes=notes)
    report.comparisons = plan.comparisons(sessions, accumulators)
    if args.layers:
        report.layers = plan.layers(sessions, accumulators)
    emit(Stage("done", 1.0))
    return report


class Plan:
    """Which sessions one request builds, and how their outputs pair up."""

    def __init__(self, args: AccuracyArgs, float_model, qdq_model, target) -> None:
        self.args, self.float_model, self.qdq_model, self.target = args, float_model, qdq_model, target
        self.qdq_path = args.quantized or args.path
        self.reference_tensors: set[str] = set()
        self.probes: list[P.Probe] = []
        self.pairs = [key for key, (t, r, *_) in PAIRS.items() if self._has(t) and self._has(r)]
        self.layer_target = "qdq_htp" if qdq_model is not None else "float_htp"
        self.quant = quant_params(target) if qdq_model is not None else {}

    def _has(self, role: str) -> bool:
        return (self.float_model is not None) if role.startswith("float") else (self.qdq_model is not None)

    def build(self, emit: Emit) -> Sessions:
        from dashboard.runtime.config import SessionConfig
        from dashboard.runtime.qnn import create_session

        config = self.args.config
        htp = config.replace(backend="htp")
        integer = htp.replace(fp16=False)
        cpu = SessionConfig(backend="cpu", dims=dict(config.dims), optimization_level=config.optimization_level)
        sessions = Sessions()
        layers = bool(self.args.layers) and self.float_model is not None
        if self.float_model is not None:
            plain = self._source(self.float_model)
            reference = plain
            if layers:
                augmented, self.reference_tensors = P.reference_model(self.float_model)
                reference = _bytes(augmented)
            emit(Stage("creating the float reference (CPU EP)", 0.05))
            sessions.make("float_cpu", lambda: create_session(reference, cpu))
            emit(Stage("compiling the float model for the HTP", 0.10, "htp"))
            sessions.make("float_htp", lambda: create_session(plain, htp, require_qnn=True))
        if self.qdq_model is not None:
            emit(Stage("compiling the QDQ model for the HTP", 0.20, "htp"))
            qdq = self._source(self.qdq_model)
            sessions.make("qdq_htp", lambda: create_session(qdq, integer, require_qnn=True))
            sessions.make("qdq_cpu", lambda: create_session(qdq, cpu))
        if layers:
            self._debug_sessions(sessions, emit, htp if self.qdq_model is None else integer, cpu)
        elif self.args.layers:
            sessions.failed["layers"] = "layers need the float model as their reference"
        return sessions

    def _source(self, model) -> str | bytes:
        """The file itself when the model is as stored (no input shape declared), else its bytes."""
        if self.args.input_shapes:
            return _bytes(model)
        return self.qdq_path if model is self.qdq_model else self.args.path

    def _debug_sessions(self, sessions: Sessions, emit: Emit, htp, cpu) -> None:
        """The debug copies, built once the reference's shapes are known (from a first reference
        run on the first sample, in ``accumulate``): here only the probes are chosen."""
        self.probes = P.probes_of(self.target, self.reference_tensors)
        self._debug_configs = (htp, cpu)
        if not self.probes:
            sessions.failed["layers"] = "no tensor of the model matches one of the float model's"

    def _make_debug(self, sessions: Sessions, shapes: dict[str, tuple[int, ...]], emit: Emit) -> None:
        from dashboard.runtime.qnn import create_session

        htp, cpu = self._debug_configs
        modes = self.args.layers
        if "cumulative" in modes:
            emit(Stage("compiling the cumulative debug copy for the HTP", 0.30, "htp"))
            cumulative = _bytes(P.cumulative_model(self.target, self.probes))
            sessions.make("cumulative", lambda: create_session(cumulative, htp, require_qnn=True))
            if self.qdq_model is not None:
                sessions.make("cumulative_cpu", lambda: create_session(cumulative, cpu))
        if "layerwise" in modes:
            emit(Stage("compiling the layerwise debug copy for the HTP", 0.35, "htp"))
            layerwise = _bytes(P.layerwise_model(self.target, self.probes, shapes))
            sessions.make("layerwise", lambda: create_session(layerwise, htp, require_qnn=True))

    def accumulate(self, sessions: Sessions, data, emit: Emit) -> dict:
        """Every sample through every session; per pair and output one accumulator over all samples
        and one per sample; per probe and mode one accumulator, plus the reference's range."""
        acc: dict = {"pairs": {}, "samples": {}, "probes": {}, "range": {}, "clip": {}}
        total = max(len(data), 1)
        for index, feeds in enumerate(data.samples):
            emit(Stage(f"sample {index + 1} of {total}", 0.4 + 0.55 * index / total))
            ref = sessions.run("float_cpu", feeds)
            if ref is not None and self.probes and index == 0 and not any(
                    k in sessions.handles for k in ("cumulative", "layerwise")):
                self._make_debug(sessions, {k: tuple(v.shape) for k, v in ref.items()}, emit)
            outs = {role: sessions.run(role, feeds) for role in ("float_htp", "qdq_htp", "qdq_cpu")}
            outs["float_cpu"] = ref
            self._pairs(acc, outs, index)
            if self.probes and ref is not None:
                self._probes(acc, sessions, feeds, ref)
        return acc

    def output_names(self) -> list[str]:
        model = self.float_model if self.float_model is not None else self.qdq_model
        return [o.name for o in model.graph.output]

    def _pairs(self, acc: dict, outs: dict, index: int) -> None:
        for key in self.pairs:
            target, reference = PAIRS[key][:2]
            got, want = outs.get(target), outs.get(reference)
            if got is None or want is None:
                continue
            for name in self.output_names():
                if name not in got or name not in want:
                    continue
                acc["pairs"].setdefault((key, name), Accumulator()).add(got[name], want[name])
                one = Accumulator()
                one.add(got[name], want[name])
                acc["samples"].setdefault((key, name), []).append(one.metrics())
                acc.setdefault("shapes", {})[name] = list(np.shape(want[name]))

    def _probes(self, acc: dict, sessions: Sessions, feeds: dict, ref: dict) -> None:
        runs = {"cumulative": sessions.run("cumulative", feeds),
                "cumulative_cpu": sessions.run("cumulative_cpu", feeds)}
        if "layerwise" in sessions.handles:
            cut = dict(feeds)
            cut.update({p.tensor + P.REF_SUFFIX: np.asarray(ref[p.tensor], dtype=np.float32) for p in self.probes})
            runs["layerwise"] = sessions.run("layerwise", cut)
        for probe in self.probes:
            want = ref.get(probe.tensor)
            if want is None:
                continue
            _range(acc["range"], probe.tensor, want)
            if self.qdq_model is None:
                want = _unmasked(want)
            q = self.quant.get(probe.source)
            if q is not None:
                v = np.asarray(want)
                out, count = acc["clip"].get(probe.tensor, (0, 0))
                half = q.scale / 2  # within half a step of an end, a value rounds to that end: not clipped
                beyond = np.count_nonzero((v < q.low - half) | (v > q.high + half))
                acc["clip"][probe.tensor] = (out + int(beyond), count + v.size)
            for mode, got in runs.items():
                if got is not None and probe.output in got:
                    acc["probes"].setdefault((mode, probe.tensor), Accumulator()).add(got[probe.output], want)

    def comparisons(self, sessions: Sessions, acc: dict) -> list[Comparison]:
        out = []
        for key in self.pairs:
            target, reference, target_words, reference_words = PAIRS[key]
            failed = sessions.failed.get(target) or sessions.failed.get(reference)
            comparison = Comparison(key=key, target=target_words, reference=reference_words,
                                    hardware=_hardware(target))
            if failed:
                comparison.status, comparison.reason = "failed", failed
            else:
                comparison.outputs = [_output(name, acc, key) for name in self.output_names()
                                      if (key, name) in acc["pairs"]]
            out.append(comparison)
        return out

    def layers(self, sessions: Sessions, acc: dict) -> Layers:
        words = "QDQ model" if self.qdq_model is not None else "float model" + (" (fp16)" if self.args.config.fp16 else "")
        layers = Layers(target=f"{words} on the {_hardware('htp')}", modes=list(self.args.layers))
        failed = sessions.failed.get("layers") or sessions.failed.get("float_cpu")
        if failed:
            layers.status, layers.reason = "failed", failed
            return layers
        for mode in self.args.layers:
            if mode in sessions.failed:
                layers.partition.append(f"the {mode} debug copy failed: {sessions.failed[mode]}")
        quant = self.quant
        for order, probe in enumerate(self.probes):
            low, high, std = acc["range"].get(probe.tensor, (None, None, None))
            row = LayerError(order=order, tensor=probe.tensor, node=probe.node, op_type=probe.op_type,
                             ref_low=low, ref_high=high, ref_std=std, quant=quant.get(probe.source))
            for mode, field_name in (("cumulative", "cumulative"), ("layerwise", "layerwise"),
                                     ("cumulative_cpu", "cpu_cumulative")):
                a = acc["probes"].get((mode, probe.tensor))
                if a is not None:
                    m = a.metrics()
                    setattr(row, field_name, m.sqnr_db)
                    if mode == "cumulative":
                        row.cosine = m.cosine
            out, count = acc["clip"].get(probe.tensor, (0, 0))
            row.clipped = out / count if count else None
            layers.rows.append(row)
        explain_layers(layers, P.upstream(self.target, self.probes), fp16=self.args.config.fp16)
        layers.partition += self._partition_notes(sessions) + self._output_drift(layers, acc)
        return layers

    def _output_drift(self, layers: Layers, acc: dict) -> list[str]:
        """Where a graph output's cumulative figure (the debug copy) and the plain session's differ by
        more than ``DRIFT_DB``: the extra outputs changed how the HTP computes it (a fusion, the
        partition), so the layer figures are the debug copy's, not the plain model's. Said, with both."""
        key = "qdq_htp_vs_float" if self.qdq_model is not None else "htp_vs_float"
        notes = []
        for name in self.output_names():
            row, plain = layers.row(name), acc["pairs"].get((key, name))
            if row is None or row.cumulative is None or plain is None:
                continue
            figure = plain.metrics().sqnr_db
            if figure is not None and abs(figure - row.cumulative) > DRIFT_DB:
                notes.append(f"output {name}: {row.cumulative:.1f} dB in the cumulative debug copy against {figure:.1f} dB "
                             "in the plain session: the extra outputs changed how the HTP computes it (a fusion or the "
                             "partition), so the layer figures describe the debug copy, not the plain model")
        return notes

    def _partition_notes(self, sessions: Sessions) -> list[str]:
        """What the debug copies' extra outputs changed in the HTP's partition: the model's own
        nodes the plain session ran on the HTP that a debug copy left to the CPU EP."""
        plain = sessions.handles.get(self.layer_target)
        if plain is None:
            return []
        own = {n.name for n in self.target.graph.node}
        on_cpu = {name for name, _ in plain.assigned_nodes().get("CPUExecutionProvider", [])}
        notes = []
        for mode in ("cumulative", "layerwise"):
            handle = sessions.handles.get(mode)
            if handle is None:
                continue
            assigned = handle.assigned_nodes()
            moved = sorted(name for name, _ in assigned.get("CPUExecutionProvider", []) if name in own and name not in on_cpu)
            subgraphs = sum(1 for ep, _ in handle.assignment() if ep == "QNNExecutionProvider")
            if moved:
                kinds = sorted({op for name, op in assigned.get("CPUExecutionProvider", []) if name in moved})
                exact = (" (quantize/dequantize only: the figures are the HTP's own)"
                         if set(kinds) <= {"QuantizeLinear", "DequantizeLinear"}
                         else ": those layers' figures in this mode are the CPU EP's, not the HTP's (the copy "
                              "broke a fusion the HTP needs)")
                notes.append(f"{mode}: the extra outputs moved {len(moved)} of the model's node(s) to the CPU EP "
                             f"({', '.join(kinds)}){exact}; the HTP runs it in {subgraphs} subgraph(s)")
            else:
                notes.append(f"{mode}: the extra outputs left the partition as it is ({subgraphs} HTP subgraph(s))")
        return notes


def _range(ranges: dict, tensor: str, values: np.ndarray) -> None:
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    if not finite.size:
        return
    low, high, std = ranges.get(tensor, (float("inf"), float("-inf"), 0.0))
    ranges[tensor] = (min(low, float(finite.min())), max(high, float(finite.max())), max(std, float(finite.std())))


def _unmasked(values: np.ndarray) -> np.ndarray:
    """A float reference with its mask sentinels (``|x| > SENTINEL``: an attention mask's
    ``finfo(float32).min``) as NaN, which the accumulator leaves out: fp16 saturates them at
    ±65504 by design, and a Softmax after them gives the same zeros, so they are no error."""
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.floating):
        return v
    masked = np.abs(v) > SENTINEL
    return np.where(masked, np.nan, v) if masked.any() else v


def _output(name: str, acc: dict, key: str) -> OutputAccuracy:
    samples: list[Metrics] = acc["samples"].get((key, name), [])
    order = sorted(range(len(samples)), key=lambda i: (samples[i].sqnr_db is None, samples[i].sqnr_db or 0.0))
    return OutputAccuracy(name=name, shape=acc.get("shapes", {}).get(name, []),
                          overall=acc["pairs"][(key, name)].metrics(), samples=samples, worst=order[:WORST])
