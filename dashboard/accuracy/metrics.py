"""How far a tensor is from its reference, in the figures the field reads.

- ``sqnr_db``: signal-to-quantization-noise ratio, ``20 log10(||ref|| / ||got - ref||)``, the figure
  Qualcomm's tools and ``onnxruntime.quantization.qdq_loss_debug`` report (the same epsilon floor as
  ``compute_signal_to_quantization_noice_ratio``, so an exact match is a large finite number, the
  same one ORT prints);
- ``max_abs`` and ``rel_error`` (``||got - ref|| / ||ref||``: scale-free, boxes and scores alike);
- ``cosine``: the direction;
- for class scores (a last axis of ``CLASS_AXIS`` or more), the share of rows whose top-1 class
  matches and the mean overlap of their top-k.

``Accumulator`` adds samples one at a time (sums of squares and products, never the tensors), so a
layer's error over 256 samples costs the memory of one sample, and its SQNR over all samples is the
SQNR of their concatenation, exactly as ``qdq_loss_debug`` computes it over its list of batches.
"""

from __future__ import annotations

import math

import numpy as np

from dashboard.accuracy.model import Metrics
from dashboard.timeline.model import CLASS_AXIS, TOP_K

EPSILON = float(np.finfo("float").eps)  # qdq_loss_debug's floor for both norms


def sqnr(ref_norm: float, diff_norm: float) -> float:
    return 20 * math.log10(max(ref_norm, EPSILON) / max(diff_norm, EPSILON))


def is_class_scores(shape) -> bool:
    return len(shape) >= 1 and shape[-1] >= CLASS_AXIS


def ranks(got: np.ndarray, want: np.ndarray) -> tuple[int, int, float]:
    """(rows, rows whose top-1 class matches, summed top-k overlap) over the last axis."""
    a = np.asarray(got, dtype=np.float64).reshape(-1, got.shape[-1])
    b = np.asarray(want, dtype=np.float64).reshape(-1, want.shape[-1])
    k = min(TOP_K, a.shape[-1])
    same = int(np.sum(np.argmax(a, axis=-1) == np.argmax(b, axis=-1)))
    top_a, top_b = np.argsort(-a, axis=-1)[:, :k], np.argsort(-b, axis=-1)[:, :k]
    overlap = float(sum(len(set(x) & set(y)) / k for x, y in zip(top_a, top_b)))
    return len(a), same, overlap


class Accumulator:
    """One tensor's error against its reference, over the samples added so far."""

    def __init__(self) -> None:
        self.ref2 = self.got2 = self.diff2 = self.dot = 0.0
        self.max_abs = 0.0
        self.count = 0
        self.rows = self.top1 = 0
        self.topk = 0.0
        self.classes = False
        self.nonfinite = 0
        self.shape_error: str | None = None

    def add(self, got, want) -> None:
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            self.shape_error = f"shape {list(got.shape)} against the reference's {list(want.shape)}"
            return
        a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
        finite = np.isfinite(a) & np.isfinite(b)
        self.nonfinite += int(a.size - np.count_nonzero(finite))
        a, b = np.where(finite, a, 0.0), np.where(finite, b, 0.0)
        diff = a - b
        self.ref2 += float(b @ b)
        self.got2 += float(a @ a)
        self.diff2 += float(diff @ diff)
        self.dot += float(a @ b)
        self.max_abs = max(self.max_abs, float(np.max(np.abs(diff))) if diff.size else 0.0)
        self.count += 1
        if is_class_scores(want.shape) and np.issubdtype(want.dtype, np.floating):
            self.classes = True
            rows, same, overlap = ranks(got, want)
            self.rows, self.top1, self.topk = self.rows + rows, self.top1 + same, self.topk + overlap

    def metrics(self) -> Metrics:
        if self.shape_error is not None or not self.count:
            return Metrics(note=self.shape_error or "nothing compared")
        ref, got, diff = math.sqrt(self.ref2), math.sqrt(self.got2), math.sqrt(self.diff2)
        notes = [f"{self.nonfinite} non-finite or masked value(s) left out"] if self.nonfinite else []
        if ref <= EPSILON:  # an all-zero reference has no signal to compare with: max |diff| says the rest
            notes.append("the reference is all zeros: no SQNR")
        return Metrics(
            sqnr_db=round(sqnr(ref, diff), 4) if ref > EPSILON else None, max_abs=self.max_abs,
            rel_error=diff / ref if ref else None,
            cosine=self.dot / (ref * got) if ref and got else None,
            top1=self.top1 / self.rows if self.classes and self.rows else None,
            topk=self.topk / self.rows if self.classes and self.rows else None,
            note="; ".join(notes) or None)


def compare(got, want) -> Metrics:
    """One pair of tensors (one sample)."""
    acc = Accumulator()
    acc.add(got, want)
    return acc.metrics()
