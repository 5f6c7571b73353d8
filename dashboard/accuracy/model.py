"""The accuracy record: the JSON contract every surface reads (``accuracy --json``, the page, the
notebook, the report), with its tables (``frame``, ``sample_frame``, ``layer_frame``).

A report holds *comparisons* (a target against a reference on the same samples: the HTP's fp16
against the CPU EP's fp32; the QDQ model on the HTP, on the CPU EP and against float) and, when
asked, the *layers*: every probed tensor's error in the cumulative and the layerwise mode, the first
layer where the error jumps and why when it can be told. Every figure carries what it was measured
on (``hardware``: the HTP simulator here, never the NPU) and what data (``data.random`` says the
inputs were generated: then every figure reads "random inputs").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dashboard.serde import Record

LAYER_MODES = ("cumulative", "layerwise")
JUMP_DB = 6.0
"""A layer whose error is this much worse than the worst of its inputs' (SQNR in dB; 6 dB is one bit
of a quantizer's resolution) is where the error jumps."""
FINE_DB = 45.0
"""A layer at least this accurate on its own (SQNR in dB; about 0.6% noise) never "jumps", however
far below the others it is: an fp16 model's layers sit at 55-70 dB, and naming one of them as the
break would send the user after noise."""
HTP_DEVIATES_DB = 1.0
"""ORT's own rule for QNN QDQ tests: the HTP should be as accurate as the CPU EP on the same QDQ
model; an HTP this many dB below the CPU EP against float deviates (1 dB is about 12% more noise)."""


@dataclass
class Metrics(Record):
    """One tensor, or one output over many samples, against its reference (``accuracy.metrics``)."""

    sqnr_db: float | None = None
    max_abs: float | None = None
    rel_error: float | None = None
    cosine: float | None = None
    top1: float | None = None  # class scores only: share of rows whose top-1 class matches
    topk: float | None = None  # class scores only: mean overlap of the top-k
    note: str | None = None


@dataclass
class OutputAccuracy(Record):
    """One model output: over all samples (``overall``) and per sample, and the worst samples."""

    name: str
    shape: list[int]
    overall: Metrics
    samples: list[Metrics] = field(default_factory=list)
    worst: list[int] = field(default_factory=list)  # sample indices, lowest SQNR first


@dataclass
class Comparison(Record):
    """``target`` against ``reference`` on the same samples. ``key`` names the pair for code
    (``htp_vs_float``, ``qdq_htp_vs_float``, ``qdq_cpu_vs_float``, ``qdq_htp_vs_qdq_cpu``)."""

    key: str
    target: str
    reference: str
    hardware: str
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    outputs: list[OutputAccuracy] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def worst_sqnr(self) -> float | None:
        values = [o.overall.sqnr_db for o in self.outputs if o.overall.sqnr_db is not None]
        return min(values) if values else None


@dataclass
class Quant(Record):
    """A probed tensor's quantization (QDQ only): the range its scale and zero point cover."""

    dtype: str
    scale: float
    zero_point: int
    low: float
    high: float


@dataclass
class LayerError(Record):
    """One probed tensor (``probes.Probe``), SQNR against the float reference over every sample:
    ``cumulative`` on the HTP (the whole model ran), ``layerwise`` on the HTP (the node fed the
    reference's inputs), ``cpu_cumulative`` the same QDQ model on the CPU EP. ``ref_low``/``ref_high``
    are the reference's range over the samples, ``clipped`` the share of its values outside the
    quantized range, ``why`` what explains the error when something does."""

    order: int
    tensor: str
    node: str
    op_type: str
    cumulative: float | None = None
    layerwise: float | None = None
    cpu_cumulative: float | None = None
    cosine: float | None = None
    ref_low: float | None = None
    ref_high: float | None = None
    ref_std: float | None = None
    quant: Quant | None = None
    clipped: float | None = None
    why: str | None = None


@dataclass
class Layers(Record):
    """The layer-by-layer part: ``target`` says which model ran on the HTP; ``first_jump`` the first
    tensor (graph order) whose error jumps, ``worst`` the tensor with the worst own (layerwise)
    error; ``partition`` what the debug copies' extra outputs changed in the HTP's partition."""

    target: str
    modes: list[str]
    rows: list[LayerError] = field(default_factory=list)
    first_jump: str | None = None
    worst: str | None = None
    partition: list[str] = field(default_factory=list)
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def row(self, tensor: str) -> LayerError | None:
        return next((r for r in self.rows if r.tensor == tensor), None)


@dataclass
class DataInfo(Record):
    """What the figures were computed on."""

    source: str
    count: int
    names: list[str] = field(default_factory=list)
    preprocess: dict | None = None
    random: bool = False
    licence: str | None = None
    description: str = ""

    @property
    def label(self) -> str:
        return "random inputs" if self.random else f"{self.count} sample(s) of {self.source}"


@dataclass
class AccuracyReport(Record):
    model: str
    data: DataInfo
    comparisons: list[Comparison] = field(default_factory=list)
    layers: Layers | None = None
    quantized: str | None = None
    digest: str | None = None
    settings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)

    def comparison(self, key: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.key == key), None)

    def frame(self):
        """One row per comparison and output: the overall metrics."""
        import pandas as pd

        rows = [{"comparison": c.key, "target": c.target, "reference": c.reference, "hardware": c.hardware,
                 "output": o.name, **o.overall.to_json(), "data": self.data.label}
                for c in self.comparisons if c.ok for o in c.outputs]
        return pd.DataFrame(rows, columns=["comparison", "target", "reference", "hardware", "output", "sqnr_db",
                                           "max_abs", "rel_error", "cosine", "top1", "topk", "note", "data"])

    def sample_frame(self):
        """One row per comparison, output and sample."""
        import pandas as pd

        names = self.data.names
        rows = [{"comparison": c.key, "output": o.name, "sample": i,
                 "name": names[i] if i < len(names) else str(i), **m.to_json()}
                for c in self.comparisons if c.ok for o in c.outputs for i, m in enumerate(o.samples)]
        return pd.DataFrame(rows, columns=["comparison", "output", "sample", "name", "sqnr_db", "max_abs",
                                           "rel_error", "cosine", "top1", "topk", "note"])

    def layer_frame(self):
        """One row per probed tensor, in graph order."""
        import pandas as pd

        columns = ["order", "tensor", "node", "op_type", "cumulative", "layerwise", "cpu_cumulative", "cosine",
                   "ref_low", "ref_high", "ref_std", "clipped", "quant_dtype", "scale", "zero_point", "why"]
        if self.layers is None:
            return pd.DataFrame(columns=columns)
        rows = []
        for r in self.layers.rows:
            q = r.quant
            rows.append({**{k: v for k, v in r.to_json().items() if k != "quant"},
                         "quant_dtype": q.dtype if q else None, "scale": q.scale if q else None,
                         "zero_point": q.zero_point if q else None})
        return pd.DataFrame(rows, columns=columns)
