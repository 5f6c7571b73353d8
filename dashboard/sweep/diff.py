"""``sweep diff OLD NEW``: what changed between two sweeps, and the gate a CI job fails on.

Cells of the two folders are matched by model path (as the spec names it, not by digest: the
point is to see what an edited model did), SoC, setting set and analysis. For each matched pair
the diff says what moved: the HTP coverage, the nodes newly left to the CPU (or given back to the
HTP), a classifier's verdict, a cell that now fails or now works; cells only one side has are
listed as added or removed. ``diff_results`` is a pure function of the two sides' results and the
gates, returning a ``SweepDiff`` record, so the command line and the Sweep page show the same.

Gates (``--fail-on``, comma-separated): ``coverage-drop=PCT`` trips when a partition cell's HTP
coverage fell by more than PCT percentage points (``coverage-drop`` alone: by any amount), or the
cell went from ok to failed; ``new-fallback`` when a partition cell leaves a node to the CPU that
the old run's HTP claimed; ``verdict-change`` when a classify cell's verdict (either classifier)
changed, or the cell went from ok to failed; ``cycles-rise=PCT`` when a profile cell's HTP total
rose by more than PCT percent (``cycles-rise`` alone: by any amount), or the cell went from ok to
failed; ``accuracy-drop=DB`` when an accuracy or quantize cell's worst output SQNR of any
comparison (the HTP against float, the QDQ model against float, ...) fell by more than DB dB
(``accuracy-drop`` alone: by any amount), or the cell went from ok to failed; a pair measured on
other data (another digest, random inputs against a data set) is said beside the change. The first
layer where the error jumps, a quantize cell's lifted tensors, cycles ratio and integer-path
coverage are reported when they move, gated by nothing. Profile totals are compared only within one unit and one hardware (simulated HTP cycles
against simulated HTP cycles, a SoC's against the same SoC's): a pair measured on different
hardware is reported as not comparable and trips nothing. Every backend's change and a new
costliest node are reported either way. A partition cell that went from ok to failed trips
``new-fallback`` too (everything is then left to the CPU). A cell OLD has and NEW lacks trips
``missing-cell`` whenever any gate is set: a gate that passes because the sweep that should have
measured the regression did not finish, or a model was renamed away, is no gate. Added cells trip
nothing (the spec grew).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal

from dashboard.errors import UserError
from dashboard.serde import Record
from dashboard.sweep.cells import CellResult

COVERAGE_DROP, NEW_FALLBACK, VERDICT_CHANGE = "coverage-drop", "new-fallback", "verdict-change"
CYCLES_RISE = "cycles-rise"
ACCURACY_DROP = "accuracy-drop"
MISSING = "missing-cell"  # not asked for by name: any gate set makes a cell NEW lacks trip it
GATES = (COVERAGE_DROP, NEW_FALLBACK, VERDICT_CHANGE, CYCLES_RISE, ACCURACY_DROP)
Kind = Literal["coverage", "fallback-new", "fallback-gone", "verdict", "cost", "cost-incomparable", "top-node",
               "accuracy", "first-jump", "quantized", "now-failed", "now-ok", "added", "removed"]
GATE_WORDS = "coverage-drop=PCT, new-fallback, verdict-change, cycles-rise=PCT, accuracy-drop=DB"
EPSILON = 1e-9


@dataclass
class Gates(Record):
    """What trips: ``coverage_drop`` in percentage points (None: not gated), the other two on or off."""

    coverage_drop: float | None = None
    new_fallback: bool = False
    verdict_change: bool = False
    cycles_rise: float | None = None  # percent of the old HTP total (None: not gated)
    accuracy_drop: float | None = None  # dB of a comparison's worst output SQNR (None: not gated)

    @property
    def any(self) -> bool:
        return (self.coverage_drop is not None or self.new_fallback or self.verdict_change
                or self.cycles_rise is not None or self.accuracy_drop is not None)


def parse_gates(text: str) -> Gates:
    """``coverage-drop=PCT,new-fallback,verdict-change`` (any of them, any order); a bad item is
    one ``UserError`` naming it."""
    gates = Gates()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        if name == COVERAGE_DROP:
            gates.coverage_drop = _points(value.strip()) if sep else 0.0
        elif name == CYCLES_RISE:
            gates.cycles_rise = _percent(value.strip()) if sep else 0.0
        elif name == ACCURACY_DROP:
            gates.accuracy_drop = _decibels(value.strip()) if sep else 0.0
        elif name in (NEW_FALLBACK, VERDICT_CHANGE) and not sep:
            setattr(gates, name.replace("-", "_"), True)
        elif name in (NEW_FALLBACK, VERDICT_CHANGE):
            raise UserError(f"--fail-on {item!r}: {name} takes no value")
        else:
            raise UserError(f"--fail-on: unknown gate {item!r}; gates: {GATE_WORDS}")
    return gates


def _points(value: str) -> float:
    return _bounded(COVERAGE_DROP, value, "a number of percentage points", 100, "percentage points", 1)


def _percent(value: str) -> float:
    return _bounded(CYCLES_RISE, value, "a percentage of the old HTP total", 10000, "percent", 10)


def _decibels(value: str) -> float:
    return _bounded(ACCURACY_DROP, value.lower().removesuffix("db").strip(), "a number of dB of SQNR", 200, "dB", 3,
                    word="DB")


def _bounded(gate: str, value: str, what: str, top: float, unit: str, example: float, word: str = "PCT") -> float:
    """A gate's PCT (or DB): a number from 0 to ``top`` (a trailing ``%`` allowed; NaN refused)."""
    try:
        number = float(value.rstrip("%"))
    except ValueError:
        raise UserError(f"--fail-on {gate}={value!r}: {word} must be {what}, e.g. {gate}={example:g}") from None
    if not 0 <= number <= top:  # also False for NaN
        raise UserError(f"--fail-on {gate}={value}: {word} must be between 0 and {top:g} {unit}")
    return number


@dataclass
class Change(Record):
    """One thing that changed in one cell; ``gate`` is the gate it trips (None: none does)."""

    model: str
    soc: str
    option_set: str
    analysis: str
    kind: Kind
    text: str
    old: str | float | None = None
    new: str | float | None = None
    nodes: list[str] = field(default_factory=list)  # the nodes newly left to the CPU (or given back)
    gate: str | None = None


@dataclass
class SweepDiff(Record):
    old: str
    new: str
    gates: Gates
    matched: int = 0
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    JSON_EXTRAS = ("tripped_gates",)

    @property
    def tripped(self) -> list[Change]:
        return [c for c in self.changes if c.gate]

    @property
    def tripped_gates(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for change in self.tripped:
            out[change.gate] = out.get(change.gate, 0) + 1
        return out


Identity = tuple[str, str, str, str]


def _identity(result: CellResult) -> Identity:
    cell = result.cell
    return cell.model, cell.soc, cell.option_set, cell.analysis


@dataclass
class _Side:
    """What the diff needs of one cell (so the old run is held as a few fields per cell)."""

    ok: bool
    reason: str | None
    coverage: float | None
    cpu: dict[str, str]  # node -> op type
    verdicts: dict[str, str]
    costs: dict[str, tuple[float, str, str, str]] = field(default_factory=dict)  # backend -> total, unit, hw, label
    top: dict[str, tuple[str, float]] = field(default_factory=dict)  # backend -> costliest node, its share
    ranked: dict[str, set[str]] = field(default_factory=dict)  # backend -> its costliest nodes kept
    sqnr: dict[str, tuple[str, float | None]] = field(default_factory=dict)  # comparison -> its words, worst SQNR
    data: tuple[str | None, str] = (None, "")  # what the figures were computed on: (label, data digest)
    jump: str | None = None
    quantized: dict = field(default_factory=dict)  # lifted, cycles_ratio, htp_refused

    @classmethod
    def of(cls, result: CellResult) -> "_Side":
        costs = {c.backend: (c.total, c.unit, c.hardware, c.label) for c in result.costs
                 if c.status == "ok" and c.total is not None}
        top: dict[str, tuple[str, float]] = {}
        ranked: dict[str, set[str]] = {}
        for node in result.top_nodes:
            top.setdefault(node.backend, (node.name, node.share))
            ranked.setdefault(node.backend, set()).add(node.name)
        sqnr = {f.comparison: (f"{f.target} vs {f.reference}", f.sqnr_db) for f in result.accuracy if f.status == "ok"}
        data = (result.data, result.cell.data.digest if result.cell.data is not None else "")
        q = result.quantized
        quantized = {} if q is None else {"lifted": len(q.lifted), "cycles_ratio": q.cycles_ratio,
                                          "htp_refused": q.htp_refused}
        return cls(result.ok, result.reason, result.htp_coverage, {n.node: n.op_type for n in result.cpu_nodes},
                   dict(result.verdicts), costs, top, ranked, sqnr, data, result.first_jump, quantized)


def diff_results(old: Iterable[CellResult], new: Iterable[CellResult], gates: Gates | None = None, *,
                 old_label: str = "OLD", new_label: str = "NEW") -> SweepDiff:
    """The changes from ``old`` to ``new`` (each side's results, any order), gated by ``gates``."""
    gates = gates or Gates()
    before: dict[Identity, _Side] = {}
    for result in old:
        before[_identity(result)] = _Side.of(result)
    out = SweepDiff(old_label, new_label, gates)
    for result in new:
        key = _identity(result)
        side = _Side.of(result)
        if key not in before:
            out.changes.append(_change(key, "added", f"new cell ({result.status})"))
            continue
        out.matched += 1
        out.changes += _compare(key, before.pop(key), side, gates)
    for key in before:
        out.changes.append(_change(key, "removed", "cell no longer in the sweep (not run, or its model is gone)",
                                   gate=MISSING if gates.any else None))
    return out


def _change(key: Identity, kind: str, text: str, **fields) -> Change:
    model, soc, option_set, analysis = key
    return Change(model, soc, option_set, analysis, kind, text, **fields)


def _compare(key: Identity, old: _Side, new: _Side, gates: Gates) -> list[Change]:
    analysis = key[3]
    if old.ok and not new.ok:
        gate = (COVERAGE_DROP if analysis == "partition" and gates.coverage_drop is not None else
                NEW_FALLBACK if analysis == "partition" and gates.new_fallback else
                VERDICT_CHANGE if analysis == "classify" and gates.verdict_change else
                CYCLES_RISE if analysis == "profile" and gates.cycles_rise is not None else
                ACCURACY_DROP if analysis in ("accuracy", "quantize") and gates.accuracy_drop is not None else None)
        return [_change(key, "now-failed", f"now fails: {new.reason}", old="ok", new="failed", gate=gate)]
    if not old.ok and new.ok:
        return [_change(key, "now-ok", f"now runs (it failed: {old.reason})", old="failed", new="ok")]
    if not new.ok:
        return []
    if analysis == "partition":
        return _partition_changes(key, old, new, gates)
    if analysis == "profile":
        return _profile_changes(key, old, new, gates)
    if analysis in ("accuracy", "quantize"):
        return _accuracy_changes(key, old, new, gates)
    return [_change(key, "verdict", f"{name} verdict {old.verdicts.get(name)} -> {verdict}",
                    old=old.verdicts.get(name), new=verdict, gate=VERDICT_CHANGE if gates.verdict_change else None)
            for name, verdict in new.verdicts.items() if old.verdicts.get(name) != verdict]


def _partition_changes(key: Identity, old: _Side, new: _Side, gates: Gates) -> list[Change]:
    changes = []
    if old.coverage is not None and new.coverage is not None and abs(new.coverage - old.coverage) > EPSILON:
        drop = (old.coverage - new.coverage) * 100
        gate = (COVERAGE_DROP if gates.coverage_drop is not None and drop > gates.coverage_drop + EPSILON
                else None)
        changes.append(_change(key, "coverage", f"HTP coverage {old.coverage:.1%} -> {new.coverage:.1%} "
                               f"({-drop:+.1f} points)", old=old.coverage, new=new.coverage, gate=gate))
    added = [n for n in new.cpu if n not in old.cpu]
    gone = [n for n in old.cpu if n not in new.cpu]
    if added:
        changes.append(_change(key, "fallback-new", f"{len(added)} node(s) newly left to the CPU: "
                               + _nodes(added, new.cpu), nodes=added,
                               gate=NEW_FALLBACK if gates.new_fallback else None))
    if gone:
        changes.append(_change(key, "fallback-gone", f"{len(gone)} node(s) now on the HTP: " + _nodes(gone, old.cpu),
                               nodes=gone))
    return changes


def _profile_changes(key: Identity, old: _Side, new: _Side, gates: Gates) -> list[Change]:
    """Each backend's total that moved (same unit and hardware only; else said not comparable) and
    a new costliest node (one the old costliest is not even next to). Only the HTP's cycles are
    gated (``cycles-rise``)."""
    changes = []
    for backend in dict.fromkeys([*old.costs, *new.costs]):
        before, after = old.costs.get(backend), new.costs.get(backend)
        if before is None or after is None:
            word = "now profiled" if before is None else "no longer profiled"
            changes.append(_change(key, "cost", f"{backend.upper()} {word}"))
            continue
        (a, unit_a, hw_a, label_a), (b, unit_b, hw_b, label_b) = before, after
        if (unit_a, hw_a) != (unit_b, hw_b):
            changes.append(_change(key, "cost-incomparable", f"{backend.upper()} not comparable: {label_a} on "
                                   f"{hw_a} -> {label_b} on {hw_b}"))
            continue
        if abs(b - a) <= EPSILON:
            continue
        rise = (b - a) / a * 100 if a else float("inf")
        gate = (CYCLES_RISE if backend == "htp" and unit_b == "cycles" and gates.cycles_rise is not None
                and rise > gates.cycles_rise + EPSILON else None)
        changes.append(_change(key, "cost", f"{backend.upper()} total {a:,.0f} -> {b:,.0f} {label_b} ({rise:+.1f}%)",
                               old=a, new=b, gate=gate))
    for backend, (name, share) in new.top.items():
        was = old.top.get(backend)
        # Only when the old costliest node left the new run's top rows: two near-equal nodes (the
        # same Softmax in two layers) swap places from run to run, which is noise, not news.
        if was is not None and was[0] != name and was[0] not in new.ranked.get(backend, set()):
            changes.append(_change(key, "top-node", f"{backend.upper()} costliest node {was[0]} ({was[1]:.0%}) -> "
                                   f"{name} ({share:.0%})", old=was[0], new=name))
    return changes


def _accuracy_changes(key: Identity, old: _Side, new: _Side, gates: Gates) -> list[Change]:
    """Each comparison's worst output SQNR that moved (a drop beyond the gate trips it), said with the
    data when the two runs read different data; the first jump and a quantize cell's recipe outcome."""
    changes = []
    other = "" if old.data == new.data else f" (measured on other data: {old.data[0]} -> {new.data[0]})"
    for name, (words, after) in new.sqnr.items():
        before = old.sqnr.get(name, (words, None))[1]
        if before is None or after is None or abs(after - before) <= 1e-6:
            continue
        drop = before - after
        gate = (ACCURACY_DROP if gates.accuracy_drop is not None and drop > gates.accuracy_drop + EPSILON else None)
        changes.append(_change(key, "accuracy", f"{words}: worst output SQNR {before:.1f} -> {after:.1f} dB "
                               f"({-drop:+.1f} dB){other}", old=before, new=after, gate=gate))
    if old.jump != new.jump and (old.jump or new.jump):
        changes.append(_change(key, "first-jump", f"the error first jumps at {new.jump or 'no layer'} "
                               f"(was {old.jump or 'no layer'})", old=old.jump, new=new.jump))
    for field_name, words in (("lifted", "tensors lifted to 16 bits"), ("cycles_ratio", "cycles against float"),
                              ("htp_refused", "nodes the HTP refuses on the integer path")):
        a, b = old.quantized.get(field_name), new.quantized.get(field_name)
        if a is not None and b is not None and abs(b - a) > EPSILON:
            changes.append(_change(key, "quantized", f"{words} {a:g} -> {b:g}", old=a, new=b))
    return changes


def _nodes(names: list[str], ops: dict[str, str], limit: int = 5) -> str:
    shown = ", ".join(f"{n} [{ops.get(n, '?')}]" for n in names[:limit])
    return shown + (f", ... {len(names) - limit} more" if len(names) > limit else "")


def diff_folders(old: str, new: str, gates: Gates | None = None) -> SweepDiff:
    """``diff_results`` of two results folders (a folder that is not one: ``UserError``, exit 2);
    corrupt records are failed cells with a note (``store.Store``)."""
    from dashboard.sweep.store import Store

    old_store, new_store = Store(old), Store(new)
    result = diff_results(old_store.results(), new_store.results(), gates, old_label=str(old), new_label=str(new))
    result.notes = [f"{old}: {n}" for n in old_store.notes] + [f"{new}: {n}" for n in new_store.notes]
    return result


def render_text(diff: SweepDiff) -> list[str]:
    """What ``sweep diff`` prints: a head line, each change naming its model, and the verdict."""
    added = sum(c.kind == "added" for c in diff.changes)
    removed = sum(c.kind == "removed" for c in diff.changes)
    lines = [f"sweep diff {diff.old} -> {diff.new}: {diff.matched} cells matched, {added} added, {removed} removed"]
    changed = [c for c in diff.changes if c.kind not in ("added", "removed")]
    if not changed:
        lines.append("no matched cell changed")
    for c in diff.changes:
        mark = f"  [gate {c.gate}]" if c.gate else ""
        lines.append(f"{c.model} · {c.soc} · {c.option_set} · {c.analysis}: {c.text}{mark}")
    for note in diff.notes:
        lines.append(f"note: {note}")
    if not diff.gates.any:
        lines.append("gate: none set (--fail-on coverage-drop=PCT,new-fallback,verdict-change,cycles-rise=PCT,"
                     "accuracy-drop=DB)")
    elif diff.tripped:
        lines.append("gate: TRIPPED (" + ", ".join(f"{g} {n}" for g, n in diff.tripped_gates.items()) + ")")
    else:
        lines.append("gate: passed")
    return lines
