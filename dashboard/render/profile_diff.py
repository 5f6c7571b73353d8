"""Two cost profiles side by side, per node and per op type (no Streamlit, no runtime).

What a model engineer compares: the same model under two setting sets (fp16 on and off, two SoCs,
a QDQ copy against the float model) or two models whose nodes share names. Nodes are joined by
their name as the user sees it (an inserted row by its own name). A difference is only computed
between figures of the same unit on the same kind of hardware: simulated HTP cycles minus µs, or a
simulator's cycles minus a phone's, mean nothing, so such a row says why it has no difference
instead of showing one. Why here and not on the page: the CLI and the notebook compare the same
way, and a pure function is tested without a browser.

A side is anything with ``nodes`` whose items have ``name``, ``op_type``, ``backend``, ``unit`` and
``median`` (the profile record's nodes, as its ``--json`` lists them); ``kinds`` maps each of a
side's backends to the kind of hardware its figures come from (the HTP simulator, a phone's NPU,
an x86_64 CPU): figures of one unit are subtracted only when they come from the same kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ONLY_A, ONLY_B = "only in A", "only in B"


@dataclass(frozen=True)
class Figure:
    """One node's cost on one side, reduced to what a comparison needs."""

    op_type: str
    backend: str
    unit: str
    median: float | None


@dataclass(frozen=True)
class NodeDiff:
    """One node in both profiles (or in one). ``delta`` is B − A and ``ratio`` B / A, both None
    when the figures cannot be compared (``note`` says why)."""

    name: str
    op_type: str
    a: Figure | None
    b: Figure | None
    delta: float | None
    ratio: float | None
    note: str = ""


@dataclass(frozen=True)
class OpTypeDiff:
    """The summed cost of one op type in one unit from one kind of hardware on each side (an op
    type whose nodes ran on two kinds has a row per kind and side: its A-only row has B's total 0)."""

    op_type: str
    unit: str
    kind: str
    nodes_a: int
    nodes_b: int
    total_a: float
    total_b: float

    @property
    def delta(self) -> float:
        return self.total_b - self.total_a

    @property
    def ratio(self) -> float | None:
        return self.total_b / self.total_a if self.total_a else None


def _figures(nodes: Iterable[Any]) -> dict[str, Figure]:
    """Name -> figure. A name listed twice (an inserted row next to the node it serves would not
    share its name, but a careless file might) keeps its first figure."""
    out: dict[str, Figure] = {}
    for node in nodes:
        median = getattr(node, "median", None)
        out.setdefault(node.name, Figure(node.op_type, node.backend, node.unit,
                                         None if median is None else float(median)))
    return out


def comparable(a: Figure, b: Figure, kinds_a: dict[str, str] | None = None,
               kinds_b: dict[str, str] | None = None) -> str:
    """Why two figures cannot be subtracted ("" when they can): another unit, or the same unit
    from another kind of hardware (a simulator's cycles are not a phone's)."""
    if a.unit != b.unit:
        return f"not comparable: {a.unit} against {b.unit}"
    if a.median is None or b.median is None:
        return "no figure on one side"
    kind_a, kind_b = (kinds_a or {}).get(a.backend, ""), (kinds_b or {}).get(b.backend, "")
    if kind_a != kind_b:
        return f"not comparable: {kind_a or 'unknown hardware'} against {kind_b or 'unknown hardware'}"
    return ""


def node_diff(nodes_a: Iterable[Any], nodes_b: Iterable[Any], kinds_a: dict[str, str] | None = None,
              kinds_b: dict[str, str] | None = None) -> list[NodeDiff]:
    """Every node of either profile, A's order first then B's extra ones, largest change first
    among the comparable ones (nodes found on one side only, and incomparable ones, follow in
    their order)."""
    fa, fb = _figures(nodes_a), _figures(nodes_b)
    rows: list[NodeDiff] = []
    for name in dict.fromkeys([*fa, *fb]):
        a, b = fa.get(name), fb.get(name)
        op_type = (a or b).op_type
        if a is None or b is None:
            rows.append(NodeDiff(name, op_type, a, b, None, None, ONLY_B if a is None else ONLY_A))
            continue
        why = comparable(a, b, kinds_a, kinds_b)
        if why:
            rows.append(NodeDiff(name, op_type, a, b, None, None, why))
            continue
        note = f"moved from {a.backend.upper()} to {b.backend.upper()}" if a.backend != b.backend else ""
        rows.append(NodeDiff(name, op_type, a, b, b.median - a.median,
                             b.median / a.median if a.median else None, note))
    compared = sorted((r for r in rows if r.delta is not None), key=lambda r: -abs(r.delta))
    return compared + [r for r in rows if r.delta is None]


def op_type_diff(nodes_a: Iterable[Any], nodes_b: Iterable[Any], kinds_a: dict[str, str] | None = None,
                 kinds_b: dict[str, str] | None = None) -> list[OpTypeDiff]:
    """Per (op type, unit, kind of hardware): the node count and summed medians on each side,
    largest change first. Sums never mix units or kinds: an op type with nodes on the HTP and the
    CPU has two rows, and a simulator's cycles sit in another row than a phone's."""
    sums: dict[tuple[str, str, str], list] = {}
    for side, (nodes, kinds) in enumerate(((nodes_a, kinds_a or {}), (nodes_b, kinds_b or {}))):
        for figure in _figures(nodes).values():
            row = sums.setdefault((figure.op_type, figure.unit, kinds.get(figure.backend, "")), [0, 0, 0.0, 0.0])
            row[side] += 1
            row[2 + side] += figure.median or 0.0
    rows = [OpTypeDiff(op, unit, kind, *values) for (op, unit, kind), values in sums.items()]
    return sorted(rows, key=lambda r: (-abs(r.delta), r.op_type, r.unit, r.kind))
