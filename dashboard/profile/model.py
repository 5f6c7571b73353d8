"""The profile record: what each node of the model costs on each backend, and per backend the totals.

These plain dataclasses are the JSON contract of ``python -m dashboard profile --json``, of the
worker's ``profile`` reply, of an imported AI Hub profile and of everything the pages, the report and
the notebook draw (data model first, as TensorRT Engine Explorer does: every view is a function of
this record, so the CLI, the page and the notebook cannot disagree)::

    {"schema": SCHEMA, "model": str, "digest": str, "source": "measured" | "imported",
     "runs": int, "warmup": int,
     "backends": {"htp": BackendProfile, "cpu": ..., "gpu": ...},
     "nodes": [NodeCost], "unmatched": [UnmatchedLayer], ...}

Why the units stay apart: the HTP reports **cycles** per node (``CYCLES`` rows of QNN's profiling
CSV), the CPU EP and AI Hub report **microseconds**. HTP ops overlap, so cycles cannot be turned
into time; on this x86_64 host they are *simulated* HTP cycles, which are not a phone's NPU
cycles either. Every figure therefore carries its backend's ``unit``, shares are only taken within
one backend, and ``label`` says which kind of number it is.

Node rows (``NodeCost``):

- a model node the backend ran, named as in the model (layout renames such as ``_token_1`` undone);
- a **fused group**: QNN puts a group's cycles on one row; that node (the group's carrier) holds the
  group cost and lists ``members``; the other members are rows of their own with ``group`` naming
  the carrier and a cost of 0, so sums stay exact and every model node is found;
- an **inserted** row: an op the EP's layout transformation added (the input ``Transpose`` NCHW →
  NHWC), named as QNN names it, ``inserted=True`` and ``serves`` the model node it was added for.
  Never dropped: on a CNN it can be most of the accelerator's cycles.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterable, Literal

from dashboard.errors import UserError
from dashboard.serde import Record

if TYPE_CHECKING:  # pandas is imported by the frame helpers only
    import pandas as pd

SCHEMA = "qnn-backend-lab/profile/1"
DEFAULT_RUNS = 10
DEFAULT_WARMUP = 1
MAX_RUNS = 1000

Unit = Literal["cycles", "us"]
UNIT_LABELS = {"cycles": "cycles", "us": "µs"}
BACKEND_TITLES = {"htp": "HTP", "gpu": "GPU", "cpu": "CPU EP", "unspecified": "unit not given"}
IMPORTED_TITLES = {"htp": "NPU", "gpu": "GPU", "cpu": "CPU", "unspecified": "unit not given"}
"""An import's words for its compute units: AI Hub's CPU is the phone's CPU, not this host's CPU EP."""
SIMULATOR_HARDWARE = "HTP simulator (x86_64)"


@dataclass
class Figure(Record):
    """One named figure of a backend's root rows (a finalize phase, HVX power-on, VTCM acquire)."""

    name: str
    value: float
    unit: str  # "us", "cycles", "bytes", ... as the runtime gave it


@dataclass
class BackendProfile(Record):
    """One backend's run: ``status`` ``ok`` or ``failed`` (``reason`` says why; the other backends
    are kept). ``hardware`` says what produced the figures: ``HTP simulator (x86_64)``, a device's
    SoC name, ``AI Hub, <device>``, ``CPU (x86_64)``. ``total`` is the median over the runs of the
    backend's total in ``unit`` (HTP: the accelerator's execute cycles; CPU: its kernels' µs);
    ``execute_us`` the median QNN execute time the runtime reports in µs (on the simulator that is
    the simulator's own wall time, not the NPU's), ``finalize`` the graph finalize phases (µs),
    ``figures`` the power-on and VTCM rows and other root figures."""

    status: Literal["ok", "failed"]
    hardware: str
    unit: Unit
    reason: str | None = None
    total: float | None = None
    total_min: float | None = None
    total_max: float | None = None
    runs: int = 0  # runs whose rows were read (a truncated file gives fewer)
    execute_us: float | None = None
    finalize: list[Figure] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    level: str | None = None  # the profiling level that ran (``detailed`` when ``optrace`` fell back)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status == "failed" and not self.reason:
            raise UserError("a failed backend says why (reason)")

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class NodeCost(Record):
    """One row of the profile (see the module docstring for the three kinds). ``median``/``min``/
    ``max``/``p10``/``p90`` are over the timed runs, in ``unit``; ``share`` is the median's fraction
    of the backend's ``total`` (0..1). ``scope`` is the node's name-scope block (``/encoder/layer.0``
    of ``/encoder/layer.0/attention/MatMul``; ``""`` for a flat name). ``qnn_ops`` names the
    runtime's rows mapped here (QNN op names, ORT kernel names)."""

    name: str
    op_type: str
    backend: str
    unit: Unit
    median: float
    min: float = 0.0
    max: float = 0.0
    p10: float | None = None
    p90: float | None = None
    share: float = 0.0
    group: str | None = None  # the carrier of the fused group this node belongs to (itself for the carrier)
    members: list[str] = field(default_factory=list)  # on a carrier: every node of its group, itself first
    inserted: bool = False
    serves: str | None = None  # an inserted row: the model node it was added for
    scope: str = ""
    qnn_ops: list[str] = field(default_factory=list)
    compute_unit: str | None = None  # an import's own word (AI Hub's NPU/GPU/CPU)
    cycles: float | None = None  # an import's execution_cycles (the device's own count; never time)

    @property
    def fused(self) -> bool:
        return self.group is not None and self.group != self.name

    @property
    def carrier(self) -> bool:
        return self.group == self.name and len(self.members) > 1


@dataclass
class UnmatchedLayer(Record):
    """A layer of an imported profile that no model node could be found for (listed, never dropped)."""

    name: str
    type: str
    compute_unit: str
    value: float
    unit: Unit


@dataclass
class Profile(Record):
    """A model's cost profile on one or more backends (see the module docstring)."""

    FRAME_COLUMNS: ClassVar[tuple[str, ...]] = (
        "name", "op_type", "backend", "unit", "median", "min", "max", "p10", "p90", "share", "group",
        "members", "inserted", "serves", "scope", "hardware",
    )

    model: str
    runs: int
    backends: dict[str, BackendProfile]
    nodes: list[NodeCost] = field(default_factory=list)
    unmatched: list[UnmatchedLayer] = field(default_factory=list)
    source: Literal["measured", "imported"] = "measured"
    digest: str = ""
    warmup: int = DEFAULT_WARMUP
    settings: dict = field(default_factory=dict)  # runtime.knobs.Settings as JSON (the knobs that ran)
    dims: dict[str, int] = field(default_factory=dict)  # every symbolic input dimension, as the sessions fixed it
    runtime: dict[str, str | None] = field(default_factory=dict)
    seconds: float = 0.0
    summary: list[Figure] = field(default_factory=list)  # whole-model figures (AI Hub's estimated inference time, ...)
    data: str = "random inputs"  # what the runs ran on: "random inputs" or "N sample(s) of SOURCE" (--data)
    schema: str = SCHEMA

    def __post_init__(self) -> None:
        if self.schema != SCHEMA:
            raise UserError(f"not a profile of this version (schema {self.schema!r}, expected {SCHEMA!r})")
        bad = next(self._not_finite(), None)
        if bad is not None:
            raise UserError(f"{bad} is not a finite number (NaN or infinity): not a profile this lab wrote")
        unknown = sorted({n.backend for n in self.nodes} - set(self.backends))
        if unknown:
            raise UserError(f"nodes name backend(s) the profile does not have: {', '.join(unknown)}")

    def _not_finite(self) -> Iterable[str]:
        """Where a figure is NaN or infinite (JSON readers accept them; every sum and share would break)."""
        def bad(value) -> bool:
            return isinstance(value, float) and not math.isfinite(value)

        for key, b in self.backends.items():
            for name in ("total", "total_min", "total_max", "execute_us"):
                if bad(getattr(b, name)):
                    yield f"backends.{key}.{name}"
            for f in (*b.finalize, *b.figures):
                if bad(f.value):
                    yield f"backends.{key} figure {f.name!r}"
        for i, n in enumerate(self.nodes):
            for name in ("median", "min", "max", "p10", "p90", "share", "cycles"):
                if bad(getattr(n, name)):
                    yield f"nodes[{i}].{name}"
        for i, u in enumerate(self.unmatched):
            if bad(u.value):
                yield f"unmatched[{i}].value"
        for f in self.summary:
            if bad(f.value):
                yield f"summary figure {f.name!r}"

    # -- looking things up ------------------------------------------------------------------------
    def backend_nodes(self, backend: str) -> list[NodeCost]:
        return [n for n in self.nodes if n.backend == backend]

    def node(self, name: str, backend: str | None = None) -> NodeCost | None:
        """The row of model node (or inserted row) ``name``, on ``backend`` if given."""
        for n in self.nodes:
            if n.name == name and (backend is None or n.backend == backend):
                return n
        return None

    def index(self) -> dict[tuple[str, str], NodeCost]:
        """``{(name, backend): row}``: the lookup an overlay of thousands of nodes wants."""
        return {(n.name, n.backend): n for n in self.nodes}

    def overlay(self) -> dict[str, dict]:
        """Per model node, what a cost overlay draws (a gradient over each backend's share): its
        ``backend``, ``unit``, own ``median`` and ``share``, and ``group_share``, the share of the
        fused group it belongs to (its own when in none), so a Conv whose cycles QNN put on its Relu
        is coloured by the group's cost, not as free. Inserted rows are not model nodes: they are
        listed under ``inserted`` of the node they serve. A node on two backends keeps the costlier
        share."""
        out: dict[str, dict] = {}
        carriers = {(n.name, n.backend): n for n in self.nodes if n.carrier}
        for n in self.nodes:
            if n.inserted:
                continue
            group = carriers.get((n.group, n.backend)) if n.group else None
            entry = {"backend": n.backend, "unit": n.unit, "median": n.median, "share": n.share, "group": n.group,
                     "group_share": group.share if group is not None else n.share, "inserted": []}
            known = out.get(n.name)
            if known is None or entry["group_share"] > known["group_share"]:
                out[n.name] = {**entry, "inserted": known["inserted"] if known else []}
        for n in self.nodes:
            if n.inserted and n.serves in out:
                out[n.serves]["inserted"].append({"name": n.name, "median": n.median, "share": n.share,
                                                  "unit": n.unit})
        return out

    def top(self, n: int = 10, backend: str | None = None) -> list[NodeCost]:
        """The ``n`` costliest rows, per backend by share when several backends are mixed (their
        units differ, so only shares compare)."""
        rows = [r for r in self.nodes if backend is None or r.backend == backend]
        key = (lambda r: r.median) if backend is not None else (lambda r: r.share)
        return sorted(rows, key=lambda r: (-key(r), r.name))[:n]

    def label(self, backend: str) -> str:
        """What the backend's figures are, in words a reader cannot mistake: ``simulated HTP
        cycles``, ``HTP cycles on SM8650``, ``CPU EP µs (x86_64 CPU)``, ``µs measured on <device> by AI Hub``."""
        b = self.backends[backend]
        title = BACKEND_TITLES.get(backend, backend)
        if self.source == "imported":
            title = IMPORTED_TITLES.get(backend, backend)
            return f"{UNIT_LABELS[b.unit]} measured on {b.hardware.removeprefix('AI Hub, ')} by AI Hub ({title})"
        if b.unit == "cycles":
            if b.hardware == SIMULATOR_HARDWARE:
                return f"simulated {title} cycles"
            return f"{title} cycles on {b.hardware}"
        return f"{title} µs ({b.hardware})"

    # -- tables (pandas) ---------------------------------------------------------------------------
    def frame(self) -> "pd.DataFrame":
        """One row per ``NodeCost`` (``FRAME_COLUMNS``), the backend's ``hardware`` alongside."""
        import pandas as pd

        rows = []
        for n in self.nodes:
            row = n.to_json()
            row["members"] = ", ".join(n.members)
            row["hardware"] = self.backends[n.backend].hardware
            rows.append({c: row.get(c) for c in self.FRAME_COLUMNS})
        return pd.DataFrame(rows, columns=list(self.FRAME_COLUMNS))

    def by_op_type(self, backend: str | None = None) -> "pd.DataFrame":
        """Cost summed per (backend, op type): ``backend, unit, op_type, nodes, median, share``,
        costliest first within each backend. Inserted rows count under their own op type; a fused
        group counts as one op type, its members' joined in model order (``Conv+BatchNormalization+Relu``),
        so its cost is never read as the Relu's with the Conv free."""
        return self._sum_by(group_op_types(self.nodes), "op_type", backend)

    def by_scope(self, depth: int = 1, backend: str | None = None) -> "pd.DataFrame":
        """Cost summed per name-scope block cut at ``depth`` levels (``/encoder/layer.0`` at depth 2;
        flat names fall in ``""``); inserted rows count in the block of the node they serve."""
        return self._sum_by(lambda n: cut_scope(n.scope, depth), "scope", backend)

    def _sum_by(self, key, column: str, backend: str | None) -> "pd.DataFrame":
        import pandas as pd

        sums = summed(self.nodes, key, backend)
        rows = [{"backend": b, "unit": u, column: k, "nodes": c, "median": m, "share": s}
                for (b, u, k), (c, m, s) in sums.items()]
        frame = pd.DataFrame(rows, columns=["backend", "unit", column, "nodes", "median", "share"])
        if frame.empty:
            return frame
        return frame.sort_values(["backend", "median", column], ascending=[True, False, True], ignore_index=True)

    def totals(self) -> "pd.DataFrame":
        """One row per backend: status, hardware, unit, label, total, execute µs, runs, reason."""
        import pandas as pd

        rows = [{"backend": k, "status": b.status, "hardware": b.hardware, "unit": b.unit,
                 "label": self.label(k), "total": b.total, "execute_us": b.execute_us, "runs": b.runs,
                 "nodes": len(self.backend_nodes(k)), "reason": b.reason}
                for k, b in self.backends.items()]
        return pd.DataFrame(rows)


def compare(a: Profile, b: Profile, backend: str = "htp", by: Literal["name", "op_type", "scope"] = "name",
            depth: int = 1) -> "pd.DataFrame":
    """Two profiles side by side on one backend (two setting sets of one model, or two models with
    the same node names), per node, op type or block: ``key, a, b, a_share, b_share, share_change``
    and ``ratio`` (b / a; only when both are in the same unit **on the same hardware**, else NaN:
    cycles and µs never divide, nor simulated HTP cycles and a phone's, nor a phone's CPU µs and this
    host's; ``attrs["no_ratio"]`` says why there is none). Rows present in one profile only are
    kept, the other side empty."""
    import pandas as pd

    def sums(p: Profile) -> dict[str, tuple[float, float]]:
        key = {"name": lambda n: n.name, "op_type": group_op_types(p.nodes),
               "scope": lambda n: cut_scope(n.scope, depth)}[by]
        return {k: (m, s) for (_, _, k), (_, m, s) in summed(p.nodes, key, backend).items()}

    left, right = sums(a), sums(b)
    why = no_ratio(a, b, backend)
    rows = []
    for key in dict.fromkeys([*left, *right]):
        (am, ash), (bm, bsh) = left.get(key, (math.nan, 0.0)), right.get(key, (math.nan, 0.0))
        ratio = bm / am if why is None and am and not math.isnan(am) and not math.isnan(bm) else math.nan
        rows.append({by: key, "a": am, "b": bm, "a_share": ash, "b_share": bsh, "share_change": bsh - ash,
                     "ratio": ratio})
    frame = pd.DataFrame(rows, columns=[by, "a", "b", "a_share", "b_share", "share_change", "ratio"])
    frame.attrs.update(a=a.label(backend) if backend in a.backends else "",
                       b=b.label(backend) if backend in b.backends else "", no_ratio=why)
    return frame.sort_values("share_change", key=abs, ascending=False, ignore_index=True)


def no_ratio(a: Profile, b: Profile, backend: str) -> str | None:
    """Why ``backend``'s figures of ``a`` and ``b`` do not divide (None when they do): another unit,
    or another piece of hardware (simulated HTP cycles against a device's, AI Hub's phone CPU
    against this host's CPU EP): only their shares of each backend's own total compare."""
    if backend not in a.backends or backend not in b.backends:
        return "the backend ran in one profile only"
    x, y = a.backends[backend], b.backends[backend]
    if x.unit != y.unit:
        return f"different units ({UNIT_LABELS[x.unit]} against {UNIT_LABELS[y.unit]})"
    if x.hardware != y.hardware:
        return f"different hardware ({x.hardware} against {y.hardware})"
    return None


def group_op_types(nodes: Iterable[NodeCost]):
    """The op-type key of each row: its own op type, or for a fused group's carrier and members the
    members' op types joined in model order (``Conv+BatchNormalization+Relu``), so a group's cost
    and its node count land on one key, not on the carrier's op type beside "free" members."""
    nodes = list(nodes)
    types = {(n.name, n.backend): n.op_type for n in nodes}
    joined = {(n.name, n.backend): "+".join(types.get((m, n.backend), "?") for m in n.members)
              for n in nodes if n.carrier}

    def key(n: NodeCost) -> str:
        return joined.get((n.group, n.backend), n.op_type) if n.group else n.op_type

    return key


# -- helpers shared by the parsers, the views and the record --------------------------------------
def summed(nodes: Iterable[NodeCost], key, backend: str | None = None
           ) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    """``{(backend, unit, key(node)): (rows, median sum, share sum)}``, pandas-free (the CLI's tables)."""
    out: dict[tuple[str, str, str], list] = {}
    for n in nodes:
        if backend is not None and n.backend != backend:
            continue
        slot = out.setdefault((n.backend, n.unit, key(n)), [0, 0.0, 0.0])
        slot[0] += 1
        slot[1] += n.median
        slot[2] += n.share
    return {k: (c, m, s) for k, (c, m, s) in out.items()}


SUMMARIES = (("op types", group_op_types), ("blocks", lambda nodes: lambda n: cut_scope(n.scope, 1) or "(top level)"))
"""The sums every surface shows next to the top nodes: per op type (a fused group as one), per
first-level block; each a function of the rows giving the key of a row."""


def summaries(nodes: list[NodeCost], top: int = 10) -> list[tuple[str, list[tuple[str, str, int, float, float]]]]:
    """``[(title, [(label, unit, rows, median sum, share sum)])]`` for ``SUMMARIES``, costliest first."""
    out = []
    for title, keyed in SUMMARIES:
        key = keyed(nodes)
        rows = sorted(summed(nodes, key).items(), key=lambda kv: (-kv[1][1], kv[0][2]))[:top]
        out.append((title, [(label, unit, c, m, s) for (_, unit, label), (c, m, s) in rows]))
    return out


def scope_of(name: str) -> str:
    """The name-scope block of an exporter's node name: everything before the last ``/``
    (``/features/features.0/Conv`` → ``/features/features.0``); ``""`` for a flat name."""
    head, sep, _ = name.rpartition("/")
    return head if sep else ""


def cut_scope(scope: str, depth: int) -> str:
    """``scope`` cut to its first ``depth`` levels (PyTorch repeats a module's name as
    ``/features/features.0``; each ``/`` is a level)."""
    if depth <= 0 or not scope:
        return scope if depth > 0 else ""
    parts = scope.lstrip("/").split("/")
    return "/" + "/".join(parts[:depth])


def spread(values: list[float]) -> dict[str, float]:
    """``median``, ``min``, ``max``, ``p10``, ``p90`` of a node's per-run values (nearest-rank
    percentiles: a value that ran, never one between runs)."""
    if not values:
        return {"median": 0.0, "min": 0.0, "max": 0.0, "p10": 0.0, "p90": 0.0}
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)]

    return {"median": float(statistics.median(ordered)), "min": float(ordered[0]), "max": float(ordered[-1]),
            "p10": float(rank(0.10)), "p90": float(rank(0.90))}


def with_shares(nodes: list[NodeCost], backends: dict[str, BackendProfile]) -> list[NodeCost]:
    """Each node's ``share`` of its backend's total (0 when the total is 0 or unknown)."""
    for n in nodes:
        total = backends[n.backend].total if n.backend in backends else None
        n.share = n.median / total if total else 0.0
    return nodes
