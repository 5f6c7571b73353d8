"""The ``backend_type=auto`` classifier proposed for the QNN EP, re-implemented exactly.

Source: ``onnxruntime/core/providers/qnn/builder/qnn_model_classifier.cc`` in GitHub
``onnxruntime/onnxruntime-qnn`` at commit a2442e0 (PR "Adaptive backend routing"). Same op
tables, KV-cache name hints, weights, thresholds, order of checks, early exits and tie rule.
Densities are computed in float32 like the C++ (``count / static_cast<float>(num_nodes)``), so
edge cases round the same way.

The EP classifies the graph it is handed in its first ``GetCapability`` call (the main graph;
subgraphs of If/Loop/Scan return early, and EPContext models skip classification). That graph is
not the file's node list: ONNX Runtime always lifts ``Constant`` nodes into initializers when it
builds the graph (for IR < 4 it also lists them as graph inputs), and, unless
``session.disable_quant_qdq=1``, gives every consumer of a shared DequantizeLinear its own copy
(``EnsureUniqueDQForNodeUnit``) before partitioning. ``ep_view`` applies both, so the counts here
equal the EP's with graph optimizations disabled; enabled optimizations (constant folding,
Conv+BatchNorm fusion ...) change the counts further. The EP walks nodes in topological order;
only which decisive node is named depends on that order, never the verdict.

Every signal is reported, including those after an early exit (marked ``reached=False``), so a
user sees what the EP never looked at.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dashboard.classify.verdicts import GENAI, UNKNOWN, Classification, Scorecard, decide
from dashboard.intake.graph import MS_DOMAIN, ModelGraph, Node, TensorSpec

MIN_DECISION_SCORE = 10.0

MATMUL_NBITS_SCORE = 10.0
HEAVY_ATTN_OP_SCORE = 10.0
LIGHT_ATTN_OP_SCORE = 3.0
KV_CACHE_INPUT_SCORE = 5.0
DECOMPOSED_ATTN_SCORE = 5.0
LAYER_NORM_DENSE_SCORE = 10.0

CONV_DENSE_SCORE = 10.0
BATCH_NORM_DENSE_SCORE = 5.0
CLASSIF_HEAD_SCORE = 5.0
IMAGE_4D_SCORE = 5.0

CONV_DENSITY_THRESHOLD = np.float32(0.30)
BATCH_NORM_DENSITY_THRESHOLD = np.float32(0.10)
LAYER_NORM_DENSITY_THRESHOLD = np.float32(0.05)
MIN_SPATIAL_DIM = 224

HEAVY_ATTN_OPS = ("MultiHeadAttention", "GroupQueryAttention", "Attention")
LIGHT_ATTN_OPS = ("RotaryEmbedding", "SkipLayerNormalization", "FastGelu", "BiasGelu")
KV_CACHE_HINTS = ("past_key_values", "past_", "present", "input_ids", "attention_mask", "position_ids")
LAYER_NORM_OPS = ("LayerNormalization", "SimplifiedLayerNormalization")
CONV_OPS = ("Conv", "ConvTranspose", "ConvInteger")
SOFTMAX_OPS = ("Softmax", "LogSoftmax")


DQ_DOMAINS = ("", "ai.onnx", MS_DOMAIN)


@dataclass(frozen=True)
class EpView:
    """The graph as the EP's ``ClassifyModel`` sees it (optimizations disabled).

    ``nodes`` are the file's top-level nodes in topological order minus lifted ``Constant`` nodes;
    ``num_nodes`` adds the DequantizeLinear copies ONNX Runtime inserts, which only dilute densities
    (no signal counts DequantizeLinear). ``inputs`` is ``Graph_GetInputs``: graph.input as listed,
    initializers included."""

    nodes: list[Node]
    num_nodes: int
    inputs: list[TensorSpec]
    lifted_constants: int
    duplicated_dq: int

    def notes(self) -> list[str]:
        out = []
        if self.lifted_constants:
            out.append(f"{self.lifted_constants} Constant node(s) lifted to initializers by ONNX Runtime")
        if self.duplicated_dq:
            out.append(f"{self.duplicated_dq} DequantizeLinear copies added by ONNX Runtime (one per consumer)")
        return out


def ep_view(model: ModelGraph) -> EpView:
    """Apply ONNX Runtime's always-on graph changes that precede the EP's classification."""
    nodes = [model.nodes[i] for i in model.topo_order if model.nodes[i].op_type != "Constant"]
    lifted = [n for n in model.nodes if n.op_type == "Constant"]
    inputs = list(model.listed_inputs)
    if model.ir_version < 4:  # Graph::Graph lists lifted constants as inputs for old IR versions
        inputs += [TensorSpec(n.outputs[0], "unknown", 0, None) for n in lifted if n.outputs]
    duplicated = _duplicated_dq_count(model, nodes)
    return EpView(nodes, len(nodes) + duplicated, inputs, len(lifted), duplicated)


def _duplicated_dq_count(model: ModelGraph, nodes: list[Node]) -> int:
    """DequantizeLinear copies made by ``EnsureUniqueDQForNodeUnit``: one per consumer input edge
    beyond the first, or one per edge when the DQ output is also a graph output. (Consumers inside
    subgraphs are not visible here; ORT would also keep the original DQ outside for them.)"""
    dq_outputs = {n.outputs[0] for n in nodes
                  if n.op_type == "DequantizeLinear" and n.domain in DQ_DOMAINS and n.outputs and n.outputs[0]}
    if not dq_outputs:
        return 0
    edges = dict.fromkeys(dq_outputs, 0)
    for node in nodes:
        for name in node.inputs:
            if name in edges:
                edges[name] += 1
    graph_outputs = {o.name for o in model.outputs}
    extra = 0
    for name, count in edges.items():
        if count == 0 or (count == 1 and name not in graph_outputs):
            continue
        extra += count if name in graph_outputs else count - 1
    return extra


def matches_kv_cache_hint(name: str) -> bool:
    """Substring match against the EP's hint list (so ``input_ids`` counts as 'KV-cache')."""
    return any(hint in name for hint in KV_CACHE_HINTS)


def _density(count: int, num_nodes: int) -> np.float32:
    return np.float32(count) / np.float32(num_nodes)


def classify_ep(model: ModelGraph) -> Classification:
    """Classify ``model`` as the proposed QNN EP would, with every signal's evidence."""
    view = ep_view(model)
    num_nodes = view.num_nodes
    if num_nodes == 0:
        lifted = f" once ONNX Runtime lifted its {view.lifted_constants} Constant node(s)" if view.lifted_constants else ""
        return Classification(UNKNOWN, 0.0, 0.0, "empty graph (0 nodes)", [],
                              f"The graph has no nodes{lifted}; the EP returns Unknown at once.")

    card = Scorecard()

    # Pre-scan of graph inputs (graph.input as listed, initializers included, like Graph_GetInputs).
    kv_names = [spec.name for spec in view.inputs if matches_kv_cache_hint(spec.name)]
    card.add(name="kv_cache_input_names", side="genai", weight=KV_CACHE_INPUT_SCORE, value=len(kv_names),
             threshold=1, evidence=[f"input '{n}'" for n in kv_names], score=KV_CACHE_INPUT_SCORE * len(kv_names),
             description="+5 per graph input whose name contains past_key_values, past_, present, "
                         "input_ids, attention_mask or position_ids")

    image_fired, image_value, image_evidence = False, None, []
    first = view.inputs[0] if view.inputs else None
    if first is not None and first.elem_type and first.shape is not None and len(first.shape) == 4:
        # GetDimensions reports symbolic/unknown dims as -1, which never reaches 224.
        dims = [d if isinstance(d, int) else -1 for d in first.shape]
        image_value = min(dims[2], dims[3])
        image_fired = dims[2] >= MIN_SPATIAL_DIM and dims[3] >= MIN_SPATIAL_DIM
        image_evidence = [f"first input '{first.name}' {first.shape_text()}"]
    elif first is not None:
        image_evidence = [f"first input '{first.name}' {first.shape_text()} is not 4-D"]
    card.add(name="image_input_4d", side="non_genai", weight=IMAGE_4D_SCORE, fired=image_fired, value=image_value,
             threshold=MIN_SPATIAL_DIM, evidence=image_evidence,
             description="+5 if the first graph input is 4-D with H and W >= 224 (symbolic dims never count)")

    prescan = card.total("genai")
    kv_exit = prescan >= MIN_DECISION_SCORE and prescan > card.total("non_genai")
    early_exit = (f"kv-cache input names (score {prescan:g} >= {MIN_DECISION_SCORE:g} before any node is read)"
                  if kv_exit else None)

    conv, layer_norm, batch_norm = [], [], []
    light, heavy, nbits = [], [], []
    matmul, softmax, global_avg, gemm = [], [], [], []
    decisive = None
    for node in view.nodes:
        op = node.op_type
        if node.domain == MS_DOMAIN:
            if op in HEAVY_ATTN_OPS or op == "MatMulNBits":
                (nbits if op == "MatMulNBits" else heavy).append(f"com.microsoft::{op} '{node.name}'")
                if decisive is None:
                    decisive = node
            elif op in LIGHT_ATTN_OPS:
                light.append(f"com.microsoft::{op} '{node.name}'")
            elif op in LAYER_NORM_OPS:
                layer_norm.append(node.name)
        elif op in CONV_OPS:
            conv.append(node.name)
        elif op in LAYER_NORM_OPS:
            layer_norm.append(node.name)
        elif op == "BatchNormalization":
            batch_norm.append(node.name)
        elif op == "GlobalAveragePool":
            global_avg.append(node.name)
        elif op in SOFTMAX_OPS:
            softmax.append(node.name)
        elif op == "Gemm":
            gemm.append(node.name)
        elif op == "MatMul":
            matmul.append(node.name)

    if early_exit is None and decisive is not None:
        early_exit = f"decisive op {decisive.op_type} (node '{decisive.name}')"
        # The EP returns at the first decisive node; light ops seen before it were counted but
        # no longer matter, so scores are reported as they stood after the input pre-scan.
    reached = early_exit is None

    card.add(name="matmul_nbits", side="genai", weight=MATMUL_NBITS_SCORE, value=len(nbits), threshold=1,
             evidence=nbits, score=0.0, reached=not kv_exit,
             description="any com.microsoft MatMulNBits (int4 LLM weights) returns GenAI at once")
    card.add(name="heavy_attention_ops", side="genai", weight=HEAVY_ATTN_OP_SCORE, value=len(heavy), threshold=1,
             evidence=heavy, score=0.0, reached=not kv_exit,
             description="any com.microsoft MultiHeadAttention / GroupQueryAttention / Attention returns GenAI at once")

    def add(name, side, weight, fired, value, threshold, evidence, description, per_hit=1):
        card.add(name=name, side=side, weight=weight, fired=fired, value=value, threshold=threshold,
                 evidence=evidence, score=weight * per_hit if fired and reached else 0.0, reached=reached,
                 description=description)

    add("light_attention_ops", "genai", LIGHT_ATTN_OP_SCORE, bool(light), len(light), 1, light,
        "+3 per com.microsoft RotaryEmbedding / SkipLayerNormalization / FastGelu / BiasGelu node",
        per_hit=len(light))

    of_nodes = f"of {num_nodes} nodes" + (f" ({'; '.join(view.notes())})" if view.notes() else "")
    ln_density = _density(len(layer_norm), num_nodes)
    add("layernorm_density", "genai", LAYER_NORM_DENSE_SCORE, bool(ln_density > LAYER_NORM_DENSITY_THRESHOLD),
        float(ln_density), float(LAYER_NORM_DENSITY_THRESHOLD),
        [f"{len(layer_norm)} {of_nodes} are LayerNormalization/SimplifiedLayerNormalization"] + layer_norm,
        "+10 if (Simplified)LayerNormalization nodes are more than 5% of all nodes")
    has_decomposed = bool(matmul) and bool(softmax)
    add("decomposed_attention", "genai", DECOMPOSED_ATTN_SCORE, has_decomposed,
        f"{len(matmul)} MatMul, {len(softmax)} Softmax", "MatMul and Softmax both present",
        [f"MatMul '{n}'" for n in matmul[:3]] + [f"Softmax '{n}'" for n in softmax[:3]],
        "+5 if the graph has both a MatMul and a Softmax/LogSoftmax (anywhere, not necessarily connected)")
    conv_density = _density(len(conv), num_nodes)
    add("conv_density", "non_genai", CONV_DENSE_SCORE, bool(conv_density > CONV_DENSITY_THRESHOLD),
        float(conv_density), float(CONV_DENSITY_THRESHOLD),
        [f"{len(conv)} {of_nodes} are Conv/ConvTranspose/ConvInteger"] + conv,
        "+10 if Conv-family nodes are more than 30% of all nodes")
    bn_density = _density(len(batch_norm), num_nodes)
    add("batchnorm_density", "non_genai", BATCH_NORM_DENSE_SCORE, bool(bn_density > BATCH_NORM_DENSITY_THRESHOLD),
        float(bn_density), float(BATCH_NORM_DENSITY_THRESHOLD),
        [f"{len(batch_norm)} {of_nodes} are BatchNormalization"] + batch_norm,
        "+5 if BatchNormalization nodes are more than 10% of all nodes")
    has_head = bool(global_avg) and bool(softmax or gemm)
    add("classification_head", "non_genai", CLASSIF_HEAD_SCORE, has_head,
        f"{len(global_avg)} GlobalAveragePool, {len(softmax)} Softmax, {len(gemm)} Gemm",
        "GlobalAveragePool and (Softmax or Gemm)",
        [f"GlobalAveragePool '{n}'" for n in global_avg[:3]] + [f"Softmax '{n}'" for n in softmax[:2]]
        + [f"Gemm '{n}'" for n in gemm[:2]],
        "+5 if the graph has a GlobalAveragePool and a Softmax/LogSoftmax or Gemm")

    genai, non_genai = card.total("genai"), card.total("non_genai")
    if early_exit is not None:
        verdict = GENAI
        summary = f"GenAI by early exit: {early_exit}."
    else:
        verdict = decide(genai, non_genai, MIN_DECISION_SCORE)
        summary = (f"GenAI score {genai:g} vs NonGenAI score {non_genai:g}; a verdict needs >= "
                   f"{MIN_DECISION_SCORE:g} and strictly more than the other side.")
    if any(n.op_type == "EPContext" for n in view.nodes):
        summary += (" Note: this is an EPContext (pre-compiled) model; the EP skips classification "
                    "for those and uses the backend baked into the context.")
    return Classification(verdict, genai, non_genai, early_exit, card.signals, summary)
