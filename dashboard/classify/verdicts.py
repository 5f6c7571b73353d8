"""The JSON contract of a classification: plain dataclasses, shared by both classifiers, the CLI
and the classifier page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from dashboard.serde import Record

GENAI, NON_GENAI, UNKNOWN = "GenAI", "NonGenAI", "Unknown"
VERDICTS = (GENAI, NON_GENAI, UNKNOWN)

EVIDENCE_LIMIT = 12


def backend_for(verdict: str) -> str:
    """The QNN backend ``backend_type=auto`` loads for a verdict: GPU for GenAI, HTP otherwise."""
    return "gpu" if verdict == GENAI else "htp"


def decide(genai: float, non_genai: float, minimum: float) -> str:
    """The EP's tie rule, shared by both classifiers: a side needs at least ``minimum`` and strictly
    more than the other; anything else is Unknown."""
    if genai >= minimum and genai > non_genai:
        return GENAI
    if non_genai >= minimum and non_genai > genai:
        return NON_GENAI
    return UNKNOWN


def capped(items: list[str], limit: int = EVIDENCE_LIMIT) -> list[str]:
    """Evidence lists stay readable on 20,000-node models: the first ``limit`` items and a count."""
    if len(items) <= limit:
        return list(items)
    return list(items[:limit]) + [f"... and {len(items) - limit} more"]


@dataclass
class Signal(Record):
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
    gist: str = ""  # refined only: a phrase naming the decisive evidence, for the one-sentence explanation


SIDES = ("genai", "non_genai", "neutral")


class Scorecard:
    """The one place both classifiers create and score their signals, by keyword: a signal fires
    when it has evidence (unless ``fired`` says otherwise) and scores its ``weight`` once fired and
    reached (unless ``score`` says otherwise, like the EP's per-hit scores). Totals are sums of
    the scores on each side, so a report and its verdict can never disagree."""

    def __init__(self) -> None:
        self.signals: list[Signal] = []

    def add(self, *, name: str, side: str, weight: float, evidence: list[str], description: str,
            fired: bool | None = None, value: float | int | str | None = None,
            threshold: float | int | str | None = None, score: float | None = None, reached: bool = True,
            gist: str = "") -> Signal:
        if side not in SIDES:
            raise ValueError(f"unknown side {side!r}")
        fired = bool(evidence) if fired is None else fired
        if score is None:
            score = weight if fired and reached and side != "neutral" else 0.0
        signal = Signal(name=name, side=side, weight=weight, fired=fired, value=value, threshold=threshold,
                        evidence=capped(evidence), score=score, reached=reached, description=description,
                        gist=gist if fired else "")
        self.signals.append(signal)
        return signal

    def total(self, side: str) -> float:
        return sum(s.score for s in self.signals if s.side == side)


@dataclass
class Classification(Record):
    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ("backend",)

    verdict: str
    genai_score: float
    non_genai_score: float
    early_exit: str | None
    signals: list[Signal]
    summary: str = ""
    # Refined only (None / empty for the EP rules, which have no notion of them): the winning
    # side's lead, whether it clears the confidence bar, and one sentence naming the decisive
    # evidence.
    margin: float | None = None
    confidence: str | None = None
    explanation: str = ""
    decision_rule: str = "a verdict needs >= 10 and strictly more"

    @property
    def backend(self) -> str:
        return backend_for(self.verdict)


def _decisive(result: Classification, limit: int = 2) -> str:
    """The evidence that carried ``result``: its early exit, else its strongest fired signals on
    the winning side (both sides for Unknown), each with its first piece of evidence."""
    if result.early_exit:
        inputs = [_short(e) for s in result.signals if s.side == "genai" and s.score > 0 for e in s.evidence[:3]]
        return f"of its early exit on {result.early_exit}" + (f": {', '.join(inputs)}" if inputs else "")
    sides = {GENAI: ("genai",), NON_GENAI: ("non_genai",)}.get(result.verdict, ("genai", "non_genai"))
    fired = sorted((s for s in result.signals if s.side in sides and s.score > 0), key=lambda s: -s.score)
    if not fired:
        return "no signal fired"
    reasons = "; ".join(f"{s.name} +{s.score:g} ({_measure(s)}{_short(s.evidence[0]) if s.evidence else s.value})"
                        for s in fired[:limit])
    if result.verdict == UNKNOWN:
        return (f"neither side wins (GenAI {result.genai_score:g} vs NonGenAI {result.non_genai_score:g}, "
                f"{result.decision_rule}): {reasons}")
    return reasons


def _short(text: str, limit: int = 200) -> str:
    """Evidence quoted in a sentence stays readable even when a node name is 10,000 characters."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _measure(signal: Signal) -> str:
    """``6.3% > 5%: `` for density signals, nothing for the others."""
    if isinstance(signal.value, float) and isinstance(signal.threshold, float):
        return f"{signal.value:.1%} > {signal.threshold:.0%}: "
    return ""


def explain_disagreement(ep: Classification, refined: Classification) -> str | None:
    """One sentence saying why the EP rules and the refined classifier disagree, naming the
    decisive evidence on each side; None when they agree."""
    if ep.verdict == refined.verdict:
        return None
    return (f"EP rules say {ep.verdict} (backend {ep.backend}) because {_decisive(ep)}; refined says "
            f"{refined.verdict} (backend {refined.backend}) because {_decisive(refined)}.")
