"""The ``backend_type=auto`` classifier proposed for the QNN EP, re-implemented exactly.

Source: ``onnxruntime/core/providers/qnn/builder/qnn_model_classifier.cc`` in GitHub
``onnxruntime/onnxruntime-qnn`` at commit a2442e0 (PR "Adaptive backend routing"). Same op
tables, KV-cache name hints, weights, thresholds, order of checks, early exits and tie rule.
Densities are computed in float32 like the C++ (``count / static_cast<float>(num_nodes)``), so
edge cases round the same way.

The EP runs on the graph it is handed in ``GetCapability``; that is the file's top-level graph
when ONNX Runtime's graph optimizations are disabled. With them enabled, basic optimizations
(constant folding, Conv+BatchNorm fusion ...) may change the node counts first.

Every signal is reported, including those after an early exit (marked ``reached=False``), so a
user sees what the EP never looked at.
"""

from __future__ import annotations

import numpy as np

from .model_io import MS_DOMAIN, ModelGraph
from .verdicts import GENAI, NON_GENAI, UNKNOWN, Classification, Signal, capped

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


def matches_kv_cache_hint(name: str) -> bool:
    """Substring match against the EP's hint list (so ``input_ids`` counts as 'KV-cache')."""
    return any(hint in name for hint in KV_CACHE_HINTS)


def _density(count: int, num_nodes: int) -> np.float32:
    return np.float32(count) / np.float32(num_nodes)


def _decide(genai: float, non_genai: float) -> str:
    if genai >= MIN_DECISION_SCORE and genai > non_genai:
        return GENAI
    if non_genai >= MIN_DECISION_SCORE and non_genai > genai:
        return NON_GENAI
    return UNKNOWN


def classify_ep(model: ModelGraph) -> Classification:
    """Classify ``model`` as the proposed QNN EP would, with every signal's evidence."""
    num_nodes = len(model.nodes)
    if num_nodes == 0:
        return Classification(UNKNOWN, 0.0, 0.0, "empty graph (0 nodes)", [],
                              "The graph has no nodes; the EP returns Unknown at once.")

    genai = non_genai = 0.0
    signals: list[Signal] = []

    # Pre-scan of graph inputs (graph.input as listed, initializers included, like Graph_GetInputs).
    kv_names = [spec.name for spec in model.listed_inputs if matches_kv_cache_hint(spec.name)]
    kv_score = KV_CACHE_INPUT_SCORE * len(kv_names)
    genai += kv_score
    signals.append(Signal(
        "kv_cache_input_names", "genai", KV_CACHE_INPUT_SCORE, bool(kv_names), len(kv_names), 1,
        capped([f"input '{n}'" for n in kv_names]), kv_score,
        description="+5 per graph input whose name contains past_key_values, past_, present, "
                    "input_ids, attention_mask or position_ids"))

    image_fired, image_value, image_evidence = False, None, []
    first = model.listed_inputs[0] if model.listed_inputs else None
    if first is not None and first.elem_type and first.shape is not None and len(first.shape) == 4:
        # GetDimensions reports symbolic/unknown dims as -1, which never reaches 224.
        dims = [d if isinstance(d, int) else -1 for d in first.shape]
        image_value = min(dims[2], dims[3])
        image_fired = dims[2] >= MIN_SPATIAL_DIM and dims[3] >= MIN_SPATIAL_DIM
        image_evidence = [f"first input '{first.name}' {first.shape_text()}"]
    elif first is not None:
        image_evidence = [f"first input '{first.name}' {first.shape_text()} is not 4-D"]
    image_score = IMAGE_4D_SCORE if image_fired else 0.0
    non_genai += image_score
    signals.append(Signal(
        "image_input_4d", "non_genai", IMAGE_4D_SCORE, image_fired, image_value, MIN_SPATIAL_DIM,
        image_evidence, image_score,
        description="+5 if the first graph input is 4-D with H and W >= 224 (symbolic dims never count)"))

    early_exit = None
    if genai >= MIN_DECISION_SCORE and genai > non_genai:
        early_exit = f"kv-cache input names (score {genai:g} >= {MIN_DECISION_SCORE:g} before any node is read)"

    conv, layer_norm, batch_norm = [], [], []
    light, heavy, nbits = [], [], []
    matmul, softmax, global_avg, gemm = [], [], [], []
    decisive = None
    for node in model.nodes:
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

    signals.append(Signal(
        "matmul_nbits", "genai", MATMUL_NBITS_SCORE, bool(nbits), len(nbits), 1,
        capped(nbits), 0.0, early_exit is None or bool(nbits),
        "any com.microsoft MatMulNBits (int4 LLM weights) returns GenAI at once"))
    signals.append(Signal(
        "heavy_attention_ops", "genai", HEAVY_ATTN_OP_SCORE, bool(heavy), len(heavy), 1,
        capped(heavy), 0.0, early_exit is None or bool(heavy),
        "any com.microsoft MultiHeadAttention / GroupQueryAttention / Attention returns GenAI at once"))

    def add(name, side, weight, fired, value, threshold, evidence, description, per_hit=1):
        nonlocal genai, non_genai
        score = weight * per_hit if fired and reached else 0.0
        if side == "genai":
            genai += score
        else:
            non_genai += score
        signals.append(Signal(name, side, weight, fired, value, threshold, capped(evidence), score,
                              reached, description))

    add("light_attention_ops", "genai", LIGHT_ATTN_OP_SCORE, bool(light), len(light), 1, light,
        "+3 per com.microsoft RotaryEmbedding / SkipLayerNormalization / FastGelu / BiasGelu node",
        per_hit=len(light))

    ln_density = _density(len(layer_norm), num_nodes)
    add("layernorm_density", "genai", LAYER_NORM_DENSE_SCORE, bool(ln_density > LAYER_NORM_DENSITY_THRESHOLD),
        float(ln_density), float(LAYER_NORM_DENSITY_THRESHOLD),
        [f"{len(layer_norm)} of {num_nodes} nodes are LayerNormalization/SimplifiedLayerNormalization"] + layer_norm,
        "+10 if (Simplified)LayerNormalization nodes are more than 5% of all nodes")
    has_decomposed = bool(matmul) and bool(softmax)
    add("decomposed_attention", "genai", DECOMPOSED_ATTN_SCORE, has_decomposed,
        f"{len(matmul)} MatMul, {len(softmax)} Softmax", "MatMul and Softmax both present",
        [f"MatMul '{n}'" for n in matmul[:3]] + [f"Softmax '{n}'" for n in softmax[:3]],
        "+5 if the graph has both a MatMul and a Softmax/LogSoftmax (anywhere, not necessarily connected)")
    conv_density = _density(len(conv), num_nodes)
    add("conv_density", "non_genai", CONV_DENSE_SCORE, bool(conv_density > CONV_DENSITY_THRESHOLD),
        float(conv_density), float(CONV_DENSITY_THRESHOLD),
        [f"{len(conv)} of {num_nodes} nodes are Conv/ConvTranspose/ConvInteger"] + conv,
        "+10 if Conv-family nodes are more than 30% of all nodes")
    bn_density = _density(len(batch_norm), num_nodes)
    add("batchnorm_density", "non_genai", BATCH_NORM_DENSE_SCORE, bool(bn_density > BATCH_NORM_DENSITY_THRESHOLD),
        float(bn_density), float(BATCH_NORM_DENSITY_THRESHOLD),
        [f"{len(batch_norm)} of {num_nodes} nodes are BatchNormalization"] + batch_norm,
        "+5 if BatchNormalization nodes are more than 10% of all nodes")
    has_head = bool(global_avg) and bool(softmax or gemm)
    add("classification_head", "non_genai", CLASSIF_HEAD_SCORE, has_head,
        f"{len(global_avg)} GlobalAveragePool, {len(softmax)} Softmax, {len(gemm)} Gemm",
        "GlobalAveragePool and (Softmax or Gemm)",
        [f"GlobalAveragePool '{n}'" for n in global_avg[:3]] + [f"Softmax '{n}'" for n in softmax[:2]]
        + [f"Gemm '{n}'" for n in gemm[:2]],
        "+5 if the graph has a GlobalAveragePool and a Softmax/LogSoftmax or Gemm")

    if early_exit is not None:
        verdict = GENAI
        summary = f"GenAI by early exit: {early_exit}."
    else:
        verdict = _decide(genai, non_genai)
        summary = (f"GenAI score {genai:g} vs NonGenAI score {non_genai:g}; a verdict needs >= "
                   f"{MIN_DECISION_SCORE:g} and strictly more than the other side.")
    return Classification(verdict, genai, non_genai, early_exit, signals, summary)

