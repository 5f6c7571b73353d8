"""The nodes that keep a model off the NPU, grouped by op type and reason, each group with the fix to try.

Why: the off-NPU table lists every refused node with the EP's message, which on a real model is
hundreds of lines saying a handful of things ("Failed to add node" forty times on Gathers). A model
engineer acts on groups: *these 40 uint8 Gathers, for this reason: change this*. Reasons that name
something the user never set (the EP's ``op_affinity`` default) are explained as defaults, with how
to change them.

The fixes are a rule table (``RULES``): a regular expression over the EP's reason and, optionally,
the op types it applies to; the first rule that matches a group gives its fix. Hints name settings
by key (``knobs.ref``), worded by each front end (``knobs.words``). Streamlit-free: the Partitions
page, ``partition``'s text and its ``--json`` (field ``blockers``) all use ``blockers``.

Sources of the ``op_affinity`` rule: onnxruntime-qnn ``onnxruntime/core/providers/qnn/qnn_op_affinity_map.cc``
(``OpAffinityMap::Evaluate``: with no config file, or an op not listed in it, "HTP is opt-in (reject),
every other backend is opt-out (proceed)"; ``FromConfigFile``: a JSON file ``{"op_type": {OP: BACKEND}}``
named by provider option ``op_affinity``), and the installed 2.7.0 library's messages ("filtered
off QNN by the op_affinity provider option", "op_affinity pins it to a backend this session is not running").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dashboard.intake.graph import ModelGraph
from dashboard.partition.report import REMOVED, PartitionReport
from dashboard.runtime.knobs import ref
from dashboard.serde import Record

EXAMPLES = 3
DYNAMIC_QUANT_OPS = frozenset({"MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "DynamicQuantizeMatMul",
                               "DynamicQuantizeLSTM", "MatMulIntegerToFloat"})
QDQ = ("quantise statically to QDQ (onnxruntime.quantization.quantize_static with quant_format=QuantFormat.QDQ "
       "and a few calibration inputs): the HTP is built for statically quantised models, whose "
       "QuantizeLinear/DequantizeLinear pairs it folds into integer kernels")


@dataclass(frozen=True)
class Rule:
    """A reason pattern (regular expression, case-insensitive) and, optionally, the op types it
    applies to; ``fix`` names settings by key (``⟨key⟩``)."""

    key: str
    pattern: str
    fix: str
    ops: frozenset[str] = frozenset()
    fix_fp16: str = ""  # the fix when fp16 is on already (a fix that says "turn on fp16" then misleads)

    def matches(self, op_type: str, reason: str) -> bool:
        """Read in the reason's own words (``root_causes.own_words``): an op type or node name that
        holds "dynamic" is not a shape problem."""
        from dashboard.partition.root_causes import own_words

        return (not self.ops or op_type in self.ops) and \
            re.search(self.pattern, own_words(reason, op_type), re.IGNORECASE) is not None


RULES: tuple[Rule, ...] = (
    Rule("op_affinity_default", r"filtered off QNN by the op_affinity",
         "not a setting you made: it is the QNN EP's default op affinity. With no op_affinity config file "
         "(or one that does not list this op type) the EP treats this op as opt-in on the HTP (refused) and "
         "opt-out on every other backend (the GPU takes it). To try it on the HTP, give the session the provider "
         "option op_affinity=PATH naming a JSON file {\"op_type\": {\"OP\": \"htp\"}} (in your own session: see "
         "the reproduction snippet; the dashboard does not accept op_affinity, a file the EP reads), or run "
         "this part on the GPU backend (" + ref("backends") + ")"),
    Rule("op_affinity_pinned", r"op_affinity pins",
         "an op_affinity config file pins this op type to another backend: pin it to the backend the session "
         "runs, or to \"cpu\", in that file (provider option op_affinity)"),
    Rule("dynamic_quant", r".", "a dynamically quantised op the HTP refuses: " + QDQ + "; or keep the float model and "
         "turn on " + ref("fp16"), DYNAMIC_QUANT_OPS,
         fix_fp16="a dynamically quantised op the HTP refuses: " + QDQ + "; or export the float model instead of the "
         "dynamically quantised one (" + ref("fp16") + " is on already: it runs float ops in fp16)"),
    Rule("shape", r"cannot get shape|must be static|not static|dynamic",
         "a size known only at run time: fix its root cause (listed under Root causes when one is found), or "
         "give the symbolic dimension a value (" + ref("dims") + ") or the input its whole shape ("
         + ref("shapes") + ")"),
    Rule("integer_data", r"(u?int8|uint16|int16).*(failed to add node|not supported|validation)"
         r"|(failed to add node|validation).*(u?int8|uint16|int16)",
         "integer data without quantisation parameters: the HTP takes 8/16-bit tensors only as quantised "
         "tensors (a scale and zero point, from QDQ). " + QDQ[0].upper() + QDQ[1:] + " so the tensor gets "
         "them, or store it as float and turn on " + ref("fp16"),
         fix_fp16="integer data without quantisation parameters: the HTP takes 8/16-bit tensors only as quantised "
         "tensors (a scale and zero point, from QDQ). " + QDQ[0].upper() + QDQ[1:] + " so the tensor gets "
         "them, or store it as float (" + ref("fp16") + " is on already)"),
    Rule("op_validation", r"failed to add node|op validation|validateopconfig|QNN_OP|not supported by the backend",
         "the HTP's own op validation refused this node's configuration (its data types, ranks or attributes), "
         "not the op itself. Check the data type column: uint8/int8 data without QDQ needs static QDQ "
         "quantisation (" + QDQ.split(' (')[0] + "); float32 needs " + ref("fp16") + "; otherwise change the "
         "attribute the reason names in the export (or leave this node on the CPU)",
         fix_fp16="the HTP's own op validation refused this node's configuration (its data types, ranks or "
         "attributes), not the op itself. Check the data type column: uint8/int8 data without QDQ needs static QDQ "
         "quantisation (" + QDQ.split(' (')[0] + "); " + ref("fp16") + " is on already, so float precision is not "
         "the cause; otherwise change the attribute the reason names in the export (or leave this node on the CPU)"),
    Rule("float32", r"float32|float 32|fp32",
         "a float32 tensor the HTP does not take: turn on " + ref("fp16") + " (or quantise to QDQ)",
         fix_fp16="a float32 tensor the HTP does not take although " + ref("fp16") + " is on (a tensor fp16 does not "
         "convert, e.g. a graph input or an integer cast to float): cast it in the export, or quantise to QDQ"),
    Rule("int64", r"int64",
         "64-bit integers: the HTP has none; cast to int32 in the export (indices, shapes) or leave the node on "
         "the CPU"),
    Rule("no_builder", r"no builder|unsupported op|not supported op|op type .* is not supported|unsupported operator"
         r"|operators of type .* (is|are) not supported",
         "the QNN EP cannot translate this op at all (no builder for it): replace it in the export with ops "
         "the HTP takes (decompose it), or let the CPU or the GPU (" + ref("backends") + ") run it"),
    Rule("left_on_cpu", r"did not claim it",
         "the EP validated the node but partitioning left it out (usually a small island between refused "
         "nodes): fix its neighbours first"),
)
NO_RULE = "no known fix: read the EP's reason (it names the input or attribute it refused)"


@dataclass
class Blocker(Record):
    """One group of nodes the HTP refuses: one op type (and data type, when known), one reason."""

    op_type: str
    reason: str  # the EP's reason, node names and numbers replaced (the group's pattern)
    count: int
    examples: list[str] = field(default_factory=list)  # a few node names, in model order
    fix: str = NO_RULE  # with ⟨key⟩ references, worded by each front end
    rule: str = ""  # the RULES key that gave the fix ("" when none did)
    dtype: str = ""  # the data type of the nodes' first input, when the caller gave the graph
    gpu_takes: int = 0  # how many of them the GPU claims (measured or predicted)
    example_reason: str = ""  # one reason as the EP wrote it


def pattern(reason: str, node: str) -> str:
    """``reason`` without what differs from node to node: its own name, quoted names, numbers."""
    text = reason.replace(node, "<node>") if node else reason
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+", "N", text).strip()


def fix_for(op_type: str, reason: str, fp16: bool = False) -> tuple[str, str]:
    """``(rule key, fix)`` of the first rule that matches; ``("", NO_RULE)`` when none does. With
    ``fp16`` (the analysis ran with it on), a fix never says to turn it on."""
    for rule in RULES:
        if rule.matches(op_type, reason):
            return rule.key, (rule.fix_fp16 or rule.fix) if fp16 else rule.fix
    return "", NO_RULE


def _dtype(report: PartitionReport, graph: ModelGraph | None, by_name: dict, name: str) -> str:
    """The data type of the node's first input ("" without the graph or when unknown)."""
    node = by_name.get(name)
    first = next((t for t in (node.inputs if node else ()) if t), None)
    if graph is None or first is None:
        return ""
    known = report.shapes.get(first)
    if known is not None:
        return known.dtype
    init = graph.initializers.get(first)
    return init.dtype if init is not None else ""


def blockers(report: PartitionReport, graph: ModelGraph | None = None) -> list[Blocker]:
    """The HTP's refused nodes (never the ones ONNX Runtime removed) grouped by op type, data type
    (with ``graph``) and reason pattern, largest group first. Empty without HTP verdicts."""
    htp = report.backends.get("htp")
    if htp is None or not htp.nodes:
        return []
    gpu = report.backends.get("gpu")
    removed = set(report.classes.removed)
    order = report.node_order or list(htp.nodes)
    by_name = graph.node_by_name() if graph is not None else {}
    groups: dict[tuple[str, str, str], Blocker] = {}
    for name in order:
        verdict = htp.nodes.get(name)
        if verdict is None or verdict.supported or verdict.status == REMOVED or name in removed:
            continue
        reason = verdict.reason or "no reason given"
        dtype = _dtype(report, graph, by_name, name)
        key = (verdict.op_type, dtype, pattern(reason, name))
        group = groups.get(key)
        if group is None:
            rule, fix = fix_for(verdict.op_type, reason, bool(report.options and report.options.fp16))
            group = groups[key] = Blocker(verdict.op_type, key[2], 0, fix=fix, rule=rule, dtype=dtype,
                                          example_reason=reason)
        group.count += 1
        if len(group.examples) < EXAMPLES:
            group.examples.append(name)
        g = gpu.nodes.get(name) if gpu else None
        group.gpu_takes += bool(g and g.supported)
    return sorted(groups.values(), key=lambda b: (-b.count, b.op_type, b.reason))


def text_lines(rows: list[Blocker], limit: int = 10) -> list[str]:
    """The groups as the CLI prints them (fixes still with ``⟨key⟩``: the caller words them)."""
    if not rows:
        return []
    lines = [f"  blockers by op and reason ({len(rows)} group(s)):"]
    for row in rows[:limit]:
        what = f"{row.dtype} {row.op_type}" if row.dtype else row.op_type
        lines.append(f"    {row.count}x {what}: {row.reason}")
        lines.append(f"      fix: {row.fix}")
    if len(rows) > limit:
        lines.append(f"    ... {len(rows) - limit} more group(s) (see --json, field blockers)")
    return lines


def csv_rows(rows: list[Blocker]) -> list[dict]:
    """One flat dict per group, for a CSV download (examples joined)."""
    return [{"op type": b.op_type, "data type": b.dtype, "reason": b.reason, "nodes": b.count,
             "GPU takes": b.gpu_takes, "examples": " ".join(b.examples), "fix": b.fix,
             "e.g. reason": b.example_reason} for b in rows]
