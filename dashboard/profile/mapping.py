"""The runtime's rows mapped back onto the nodes the user sees (``NodeCost``), never dropping one.

The HTP's rows name the graph the EP compiled, which is not the file:

- ONNX Runtime's level-1 optimizer fused some model nodes first (BatchNormalization into its Conv):
  those nodes are placed on the node they became part of (``partition.measure.place_model_nodes``)
  and listed as members of its group, at no cost of their own;
- the layout transformation renamed claimed nodes (``/features.0/Conv_token_1``): the suffix is
  undone as the partition analysis does (``partition.measure.resolve_ep_name``);
- QNN fuses ops inside its graph (a Conv and its Relu): the member's row has 0 cycles in every run
  and the group's cycles land on the row of the op that consumes it. Such a row is joined to the
  group of the next row when that row reads its output (ops that are plain data movement, such as a
  Reshape QNN makes free, are kept apart: they cost nothing, they are not fused);
- rows that name no node of the graph it was given (the input ``Transpose`` NCHW → NHWC, a
  ``Transpose_token_16``, QNN's ``Input``/``Output`` ops) are **inserted** rows, kept under their own
  name and attributed to the nearest mapped row (``serves``; a graph's input side serves the node
  after it).

A group's carrier is its member first in model order (the Conv of Conv+BatchNormalization+Relu,
though QNN puts the cycles on the Relu's row): it holds the group's cost and lists the members in
model order, so sums per op type read "Conv+BatchNormalization+Relu", never a costly Relu beside a
free Conv (``model.group_op_type``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from dashboard.profile.model import NodeCost, scope_of, spread
from dashboard.profile.parse import CPU_PROVIDER, KernelEvent, QnnBlock

FREE_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Cast", "Input", "Output"}


@dataclass
class Graphs:
    """What the mapping needs from the model: the runtime's graph (``partition.measure.OptGraph``),
    each model node's placement on it, the model's node order and op types."""

    opt: object
    placement: dict  # model node -> partition.measure.Placement
    order: list[str]
    op_types: dict[str, str]
    members: dict[str, list[str]] = field(default_factory=dict)  # runtime node -> model nodes placed on it

    def __post_init__(self) -> None:
        index = {name: i for i, name in enumerate(self.order)}
        for name in self.order:
            p = self.placement.get(name)
            if p is not None and p.target is not None:
                self.members.setdefault(p.target, []).append(name)
        for target, names in self.members.items():  # the node that kept its name first
            names.sort(key=lambda n: (n != target, index.get(n, 0)))

    def model_nodes(self, runtime_name: str, resolve) -> tuple[str | None, list[str]]:
        """(runtime node, model nodes placed on it) for a name the runtime reported."""
        target = resolve(runtime_name, None, self.opt)
        if target is None:
            return None, []
        return target, list(self.members.get(target, [target] if target in self.op_types else []))


@dataclass
class _Entry:
    runtime: list[str]  # runtime-graph nodes of the row(s)
    nodes: list[str]  # model nodes, carrier first ([] for an inserted row)
    name: str
    op_type: str
    values: list[float]
    qnn_ops: list[str]
    group: int | None = None  # index of the entry this one was fused into


def htp_nodes(runs: list[list[QnnBlock]], graphs: Graphs, resolve, qnn_types: dict[str, str],
              backend: str = "htp") -> list[NodeCost]:
    """One ``NodeCost`` per mapped model node and per inserted row, over the timed ``runs`` (each a
    list of one block per QNN graph). Per-run values keep the rows' own sums exact."""
    if not runs:
        return []
    out: list[NodeCost] = []
    for g in range(len(runs[0])):
        entries = _entries([run[g] for run in runs if g < len(run)], graphs, resolve, qnn_types, g, len(runs[0]))
        _fuse(entries, graphs)
        out += _costs(entries, graphs, backend, runs[0][g].rows[0].unit if runs[0][g].rows else "cycles")
    return _merge_duplicates(out)


def _entries(blocks: list[QnnBlock], graphs: Graphs, resolve, qnn_types: dict[str, str], g: int,
             total_graphs: int) -> list[_Entry]:
    first = blocks[0]
    per_label = [{r.label: r.value for r in b.rows} for b in blocks]
    entries: list[_Entry] = []
    by_carrier: dict[str, _Entry] = {}
    for row in first.rows:
        values = [labels.get(row.label, 0.0) for labels in per_label]
        runtime, nodes = [], []
        for source in row.sources:
            target, members = graphs.model_nodes(source, resolve)
            if target is not None:
                runtime.append(target)
                nodes += [m for m in members if m not in nodes]
        if nodes and nodes[0] in by_carrier:  # one model node compiled into several QNN ops
            known = by_carrier[nodes[0]]
            known.values = [a + b for a, b in zip(known.values, values)]
            known.qnn_ops.append(row.name)
            continue
        if nodes:
            entry = _Entry(runtime, nodes, nodes[0], graphs.op_types.get(nodes[0], "?"), values, [row.name])
            by_carrier[nodes[0]] = entry
        else:
            name = row.name if total_graphs == 1 else f"{row.name} (graph {g + 1})"
            op = qnn_types.get(row.name) or row.name.split("_token_")[0].split(" ")[0]
            entry = _Entry([], [], name, op, values, [row.name])
        entries.append(entry)
    return entries


def _fuse(entries: list[_Entry], graphs: Graphs) -> None:
    """Join each row QNN fused away (0 cycles in every run, not a free op) to the next row's group
    when that row reads its output."""
    for i in range(len(entries) - 2, -1, -1):
        entry, after = entries[i], entries[i + 1]
        if not entry.nodes or not after.nodes or any(entry.values) or entry.op_type in FREE_OPS:
            continue
        outputs = {t for n in entry.runtime for t in graphs.opt.nodes[n].outputs}
        inputs = {t for n in after.runtime for t in graphs.opt.nodes[n].inputs}
        if outputs & inputs:
            entry.group = after.group if after.group is not None else i + 1


def _costs(entries: list[_Entry], graphs: Graphs, backend: str, unit: str) -> list[NodeCost]:
    groups: dict[int, list[int]] = {}
    for i, e in enumerate(entries):
        if e.group is not None:
            groups.setdefault(e.group, []).append(i)
    mapped = [i for i, e in enumerate(entries) if e.nodes]  # ascending: bisected by _served
    out: list[NodeCost] = []
    for i, e in enumerate(entries):
        if not e.nodes:
            served = _served(i, entries, mapped)
            out.append(NodeCost(name=e.name, op_type=e.op_type, backend=backend, unit=unit, **spread(e.values),
                                inserted=True, serves=served, scope=scope_of(served or ""), qnn_ops=e.qnn_ops))
            continue
        if e.group is not None:
            continue  # written with its group's carrier below
        fused_in = [entries[j] for j in sorted(groups.get(i, []))]
        members = model_ordered(list(e.nodes) + [n for f in fused_in for n in f.nodes if n not in e.nodes], graphs)
        carrier = members[0]
        values = [sum(vs) for vs in zip(e.values, *[f.values for f in fused_in])]
        grouped = len(members) > 1
        out.append(NodeCost(name=carrier, op_type=graphs.op_types.get(carrier, e.op_type), backend=backend, unit=unit,
                            **spread(values),
                            group=carrier if grouped else None, members=members if grouped else [],
                            scope=scope_of(carrier), qnn_ops=e.qnn_ops + [q for f in fused_in for q in f.qnn_ops]))
        for member in members[1:]:
            out.append(NodeCost(name=member, op_type=graphs.op_types.get(member, "?"), backend=backend, unit=unit,
                                **spread([0.0] * len(values)), group=carrier, scope=scope_of(member)))
    return out


def model_ordered(names: list[str], graphs: Graphs) -> list[str]:
    """A fused group's members in model order: its carrier is the member the model runs first (the
    Conv of Conv+BatchNormalization+Relu), so the group's cost is read on the op that opens it,
    never on a Relu next to a "free" Conv."""
    index = {name: i for i, name in enumerate(graphs.order)}
    return sorted(names, key=lambda n: index.get(n, len(index)))


def _served(i: int, entries: list[_Entry], mapped: list[int]) -> str | None:
    """The mapped row nearest before an inserted row (the one after, on a graph's input side)."""
    at = bisect.bisect_left(mapped, i)  # mapped[:at] are before i, mapped[at:] after
    if at > 0:
        return entries[mapped[at - 1]].nodes[0]
    return entries[mapped[at]].nodes[0] if at < len(mapped) else None


def _merge_duplicates(nodes: list[NodeCost]) -> list[NodeCost]:
    """A node seen in two graphs (never expected) keeps its first row; the second is renamed, not lost."""
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            n.name = f"{n.name} (again)"
        seen.add(n.name)
    return nodes


def cpu_nodes(runs: list[list[KernelEvent]], graphs: Graphs, resolve, backend: str = "cpu") -> list[NodeCost]:
    """One ``NodeCost`` per model node the CPU EP ran (µs per run from ONNX Runtime's trace; a node
    run twice in one run counts twice). Nodes ORT added (no model node) are inserted rows."""
    per_run: list[dict[str, float]] = []
    kinds: dict[str, str] = {}
    for events in runs:
        sums: dict[str, float] = {}
        for e in events:
            if e.provider != CPU_PROVIDER:
                continue
            sums[e.name] = sums.get(e.name, 0.0) + e.dur_us
            kinds.setdefault(e.name, e.op_type)
        per_run.append(sums)
    out: list[NodeCost] = []
    for name in dict.fromkeys(n for sums in per_run for n in sums):
        values = [sums.get(name, 0.0) for sums in per_run]
        target, members = graphs.model_nodes(name, resolve)
        members = model_ordered(members, graphs)
        if not members:
            out.append(NodeCost(name=name, op_type=kinds[name], backend=backend, unit="us", **spread(values),
                                inserted=True, scope=scope_of(name), qnn_ops=[name]))
            continue
        grouped = len(members) > 1
        out.append(NodeCost(name=members[0], op_type=graphs.op_types.get(members[0], kinds[name]), backend=backend,
                            unit="us", **spread(values), group=members[0] if grouped else None,
                            members=members if grouped else [], scope=scope_of(members[0]), qnn_ops=[name]))
        for member in members[1:]:
            out.append(NodeCost(name=member, op_type=graphs.op_types.get(member, "?"), backend=backend, unit="us",
                                **spread([0.0] * len(values)), group=members[0], scope=scope_of(member)))
    return _merge_duplicates(out)


def run_totals(runs: list[list[KernelEvent]]) -> list[float]:
    """The CPU EP's µs per timed run (its kernels' sum)."""
    return [sum(e.dur_us for e in events if e.provider == CPU_PROVIDER) for events in runs]
