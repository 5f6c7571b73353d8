"""The JSON contract of a classification: plain dataclasses, shared by both classifiers, the CLI
and the classifier page."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

GENAI, NON_GENAI, UNKNOWN = "GenAI", "NonGenAI", "Unknown"
VERDICTS = (GENAI, NON_GENAI, UNKNOWN)

EVIDENCE_LIMIT = 12


def backend_for(verdict: str) -> str:
    """The QNN backend ``backend_type=auto`` loads for a verdict: GPU for GenAI, HTP otherwise."""
    return "gpu" if verdict == GENAI else "htp"


def capped(items: list[str], limit: int = EVIDENCE_LIMIT) -> list[str]:
    """Evidence lists stay readable on 20,000-node models: the first ``limit`` items and a count."""
    if len(items) <= limit:
        return list(items)
    return list(items[:limit]) + [f"... and {len(items) - limit} more"]


@dataclass
class Signal:
    """One piece of evidence. ``side`` says which score it feeds (``genai`` / ``non_genai``, or
    ``neutral`` for refined signals that only explain); ``score`` is what it added. ``reached`` is
    False when an earlier early exit means the classifier never evaluated it (shown for context)."""

    name: str
    side: str
    weight: float
    fired: bool
    value: float | int | str | None
    threshold: float | int | str | None
    evidence: list[str] = field(default_factory=list)
    score: float = 0.0
    reached: bool = True
    description: str = ""


@dataclass
class Classification:
    verdict: str
    genai_score: float
    non_genai_score: float
    early_exit: str | None
    signals: list[Signal]
    summary: str = ""

    @property
    def backend(self) -> str:
        return backend_for(self.verdict)

    def to_json(self) -> dict:
        out = asdict(self)
        out["backend"] = self.backend
        return out
