"""The refined classifier: tells autoregressive decoders (GenAI, what GPU routing is for) from
encoders and vision / audio / tabular models by graph *structure*, not by name hints or op
densities.

Why not the EP rules: they send every text encoder to GPU (``input_ids`` and ``attention_mask``
match their KV-cache name hints), let a ViT's LayerNorm density outweigh its image input, never see
an image with symbolic H/W, and leave audio encoders, MLPs, RNNs and small CNNs on Unknown.

What counts here is what only a decoder has: past inputs that come back as present outputs one
token longer (a KV cache), a causal attention mask, logits over the token-embedding vocabulary,
int4 weight-only matmuls; against that, signal inputs that a decoder never has: images reaching a
conv stem or patch embedding, spectrograms or waveforms, dense feature vectors, recurrent cells,
classical-ML ops, or token ids feeding a bidirectional (non-causal, cache-less) encoder.

Scores use the EP's decision rule (a side needs >= 10 and strictly more than the other), so a tie
between strong evidence on both sides, or too little evidence, is Unknown.

Cost: one pass over the nodes builds producer/consumer indexes and per-op buckets; every later
check is a dict lookup or a walk of at most a few hops from a graph input, output or a bucketed
node, never a rescan of the node list. Attributes are read only where they matter (attention ops
whose causality is an attribute, Constant masks), from ``Node.attributes``, which decodes them on
first access: the file is never read again. Control-flow bodies (``Node.bodies``) are flattened
into the index with their formal inputs bound to the outer tensors, so a decoder inside a
generation Loop is seen.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from dashboard.classify.verdicts import GENAI, NON_GENAI, UNKNOWN, Classification, Signal, capped, decide
from dashboard.intake.graph import MS_DOMAIN, Initializer, ModelGraph, Node, TensorSpec, TensorValue

MIN_DECISION_SCORE = 10.0  # the EP's rule, so verdicts mean the same on both sides

# GenAI (autoregressive decoder) evidence.
KV_PAIRS_SCORE = 10.0
CAUSAL_MASK_SCORE = 8.0
INT4_WEIGHT_ONLY_SCORE = 8.0
VOCAB_LOGITS_SCORE = 4.0
TOKEN_IDS_SCORE = 2.0
# NonGenAI evidence.
IMAGE_CONV_SCORE = 10.0
IMAGE_SHAPE_ONLY_SCORE = 4.0
AUDIO_SCORE = 10.0
RECURRENT_SCORE = 10.0
DENSE_INPUT_SCORE = 10.0
CLASSICAL_ML_SCORE = 10.0
TEXT_ENCODER_SCORE = 10.0
CNN_STRUCTURE_SCORE = 4.0

INT_TYPES = frozenset({6, 7})  # int32, int64
FLOAT_TYPES = frozenset({1, 10, 11, 16})  # float32, float16, double, bfloat16
LOW_BIT_TYPES = frozenset({"int4", "uint4"})
IMAGE_CHANNELS = frozenset({1, 3, 4})
MIN_IMAGE_SIDE = 8
MEL_BINS = frozenset({40, 64, 80, 128})
PATCH_KERNEL = 8  # a conv kernel this large on the raw image is a patch embedding (ViT), not a stem
SEGMENT_VOCAB_MAX = 16  # token_type_ids embed into a handful of rows

CONV_OPS = frozenset({"Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "NhwcConv", "FusedConv"})
DENSE_OPS = frozenset({"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "QGemm", "FusedMatMul", "MatMulNBits"})
RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN"})
SPECTRAL_OPS = frozenset({"STFT", "DFT", "MelWeightMatrix"})
COMPARE_OPS = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
# Decoder-only attention kernels: causal whatever their attributes say.
CAUSAL_OPS = frozenset({"GroupQueryAttention", "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention",
                        "SparseAttention", "PagedAttention"})
# Attention ops whose causality is an attribute: (domain, op) -> attribute name.
CAUSAL_ATTRIBUTE = {(MS_DOMAIN, "Attention"): "unidirectional", (MS_DOMAIN, "MultiHeadAttention"): "unidirectional",
                    ("", "Attention"): "is_causal"}
MASK_PASS = frozenset({"Slice", "Cast", "Identity", "Unsqueeze", "Reshape", "Expand", "Not"})
MAX_MASKS_CHECKED = 4  # one triangular mask proves causality; a 48-layer export repeats it 48 times
SEQUENCE_OPS = frozenset({"ConcatFromSequence", "SequenceAt", "SplitToSequence"})
ML_DOMAIN = "ai.onnx.ml"

# Ops a signal input passes through on its way to the first real layer (casts, layout,
# normalisation by constants, (de)quantisation).
SIGNAL_PASS = frozenset({
    "Cast", "Transpose", "QuantizeLinear", "DequantizeLinear", "Sub", "Div", "Mul", "Add", "Reshape",
    "Pad", "Identity", "Resize", "Slice", "Unsqueeze", "Squeeze", "Clip", "Flatten", "Concat",
    "BatchNormalization", "Normalizer", "Scaler",
})
SIGNAL_OR_SEQUENCE_PASS = SIGNAL_PASS | SEQUENCE_OPS
CONV_OR_SPECTRAL = CONV_OPS | SPECTRAL_OPS
INDEX_PASS = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Clip"})
CACHE_PASS = frozenset({"Cast", "Transpose", "Reshape", "Identity", "DequantizeLinear", "QuantizeLinear"})
LOGITS_PASS = frozenset({"Reshape", "Cast", "Identity", "Add", "Transpose", "Squeeze", "Unsqueeze", "Softmax",
                         "LogSoftmax", "Slice", "Gather", "Div", "Mul", "Tanh"})
RANGE_PASS = frozenset({"Unsqueeze", "Reshape", "Add", "Sub", "Cast", "Expand", "Slice", "Squeeze", "Mul"})

# Attention ops with a KV cache: (domain, op) -> ((past input slot, present output slot), ...).
ATTENTION_KV_SLOTS = {
    (MS_DOMAIN, "GroupQueryAttention"): ((3, 1), (4, 2)),
    (MS_DOMAIN, "MultiHeadAttention"): ((6, 1), (7, 2)),
    (MS_DOMAIN, "DecoderMaskedMultiHeadAttention"): ((5, 1), (6, 2)),
    (MS_DOMAIN, "Attention"): ((4, 1),),
    ("", "Attention"): ((4, 1), (5, 2)),
}
CACHE_UPDATE_OPS = frozenset({"Concat", "ScatterND", "ScatterElements", "TensorScatter"})
_CACHE_COMPOUND = re.compile(r"(past|present)_key_values?")
_TOKEN_SPLIT = re.compile(r"[^0-9a-z]+")
_CACHE_TOKENS = frozenset({"past", "present", "cache", "kv", "in", "out", "new", "next", "updated"})
_PAST_HINTS = ("past", "cache", "kv", "key", "value")
_PRESENT_HINTS = ("present", "cache", "kv", "key", "value", "past")


@dataclass
class _Index:
    """Everything built by the single pass over the nodes (top level plus flattened bodies)."""

    nodes: list[Node]
    inits: dict[str, Initializer]
    producer: dict[str, Node] = field(default_factory=dict)
    consumers: dict[str, list[Node]] = field(default_factory=lambda: defaultdict(list))
    by_op: dict[str, list[Node]] = field(default_factory=lambda: defaultdict(list))
    ml_nodes: list[Node] = field(default_factory=list)
    control_flow: list[Node] = field(default_factory=list)


def _index(nodes: list[Node], inits: dict[str, Initializer]) -> _Index:
    index = _Index([], inits)
    _index_add(index, nodes)
    return index


def _index_add(index: _Index, nodes: list[Node]) -> None:
    producer, consumers, by_op = index.producer, index.consumers, index.by_op
    index.nodes.extend(nodes)
    for node in nodes:
        by_op[node.op_type].append(node)
        for name in node.outputs:
            if name:
                producer[name] = node
        for name in node.inputs:
            if name:
                consumers[name].append(node)
        if node.domain == ML_DOMAIN:
            index.ml_nodes.append(node)
        if node.subgraphs:
            index.control_flow.append(node)


def _forward(index: _Index, start: str, targets, passing, max_hops: int = 5, limit: int = 64):
    """First node with op in ``targets`` reached from tensor ``start`` through ``passing`` ops.
    Returns (node, the tensor name it consumes) or (None, None). Bounded: at most ``limit`` visits."""
    frontier, seen = [start], {start}
    for _ in range(max_hops):
        next_frontier = []
        for name in frontier:
            for node in index.consumers.get(name, ()):
                if node.op_type in targets:
                    return node, name
                if node.op_type in passing:
                    for out in node.outputs:
                        if out and out not in seen and len(seen) < limit:
                            seen.add(out)
                            next_frontier.append(out)
        frontier = next_frontier
    return None, None


def _backward(index: _Index, start: str, targets, passing, max_hops: int = 4) -> Node | None:
    """The first node with op in ``targets`` that produces ``start`` through ``passing`` ops (any
    of their inputs). Bounded like ``_forward``."""
    frontier, seen = [start], {start}
    for _ in range(max_hops + 1):
        next_frontier = []
        for name in frontier:
            node = index.producer.get(name)
            if node is None:
                continue
            if node.op_type in targets:
                return node
            if node.op_type in passing:
                for inp in node.inputs:
                    if inp and inp not in seen and len(seen) < 32:
                        seen.add(inp)
                        next_frontier.append(inp)
        frontier = next_frontier
    return None


def _source(index: _Index, name: str, passing, max_hops: int = 4) -> str:
    """Follow first inputs back through ``passing`` ops: the tensor a chain of casts/slices starts at."""
    for _ in range(max_hops):
        node = index.producer.get(name)
        if node is None or node.op_type not in passing or not node.inputs:
            return name
        name = node.inputs[0]
    return name


def _weight_shape(index: _Index, name: str) -> tuple[str, tuple] | None:
    """(initializer name, shape) of a weight fed directly or through DequantizeLinear/Transpose/Cast."""
    for _ in range(3):
        init = index.inits.get(name)
        if init is not None:
            return init.name, init.shape
        node = index.producer.get(name)
        if node is None or node.op_type not in ("DequantizeLinear", "Transpose", "Cast", "Identity") or not node.inputs:
            return None
        name = node.inputs[0]
    return None


def _spec_text(spec: TensorSpec) -> str:
    return f"'{spec.name}' {spec.dtype} {spec.shape_text()}"


def _spatial(dim) -> bool:
    return not isinstance(dim, int) or dim >= MIN_IMAGE_SIDE


# -- control-flow bodies -----------------------------------------------------------------------

def _flatten(parent: Node):
    """The nodes and initializers of ``parent``'s bodies, renamed into the outer scope: names a
    body defines get a ``<parent>/<body>/`` prefix, Loop/Scan formal inputs are bound to the
    tensors the parent passes in, free (outer-scope) names stay as they are."""
    nodes: list[Node] = []
    inits: dict[str, Initializer] = {}
    for key, body in parent.bodies.items():
        prefix = f"{parent.name}/{key}"
        first = {"Loop": 2, "Scan": 0}.get(parent.op_type, len(body.inputs))
        bind = {body.inputs[i].name: parent.inputs[i]
                for i in range(first, min(len(body.inputs), len(parent.inputs))) if parent.inputs[i]}
        local = {v.name for v in body.inputs} | set(body.initializers) | {out for n in body.nodes for out in n.outputs}

        def rename(name: str) -> str:
            if not name:
                return name
            return bind.get(name) or (f"{prefix}/{name}" if name in local else name)

        for init in body.initializers.values():
            inits[rename(init.name)] = replace(init, name=rename(init.name))
        taken: set[str] = set()
        for i, sub in enumerate(body.nodes):
            name = f"{prefix}/{sub.onnx_name.lstrip('/')}" if sub.onnx_name else f"{prefix}/{sub.op_type}#{i}"
            if name in taken:
                name += f"#{i}"
            taken.add(name)
            node = replace(sub, index=-1, name=name, inputs=tuple(rename(x) for x in sub.inputs),
                           outputs=tuple(rename(x) for x in sub.outputs))
            nodes.append(node)
            if node.subgraphs:
                inner_nodes, inner_inits = _flatten(node)
                nodes += inner_nodes
                inits.update(inner_inits)
    return nodes, inits


def _flatten_bodies(index: _Index) -> list[str]:
    """Add the bodies of the top-level control-flow nodes to ``index``; one note per parent."""
    notes, extra_nodes, extra_inits = [], [], {}
    for parent in list(index.control_flow):
        body_nodes, body_inits = _flatten(parent)
        extra_nodes += body_nodes
        extra_inits.update(body_inits)
        notes.append(f"{parent.op_type} '{parent.name}': {len(body_nodes)} subgraph node(s) analysed with it")
    if extra_nodes:
        index.inits = {**index.inits, **extra_inits}
        _index_add(index, extra_nodes)
    return notes


def _mask_sources(index: _Index) -> list[tuple[Node, str]]:
    """(mask consumer, source tensor) for every Where condition and every Add that feeds a Softmax:
    where a causal mask, if any, enters the attention scores."""
    sources = [(n, _source(index, n.inputs[0], MASK_PASS)) for n in index.by_op.get("Where", ()) if n.inputs]
    for softmax in index.by_op.get("Softmax", ()):
        add = index.producer.get(softmax.inputs[0]) if softmax.inputs else None
        if add is not None and add.op_type == "Add":
            sources += [(add, _source(index, name, MASK_PASS)) for name in add.inputs if name]
    return sources


def _triangular(tensor: TensorValue) -> str | None:
    """'lower' / 'strictly upper' if the last two axes of a Constant hold a causal pattern (only
    small Constants carry their values; see ``model_io.SMALL_TENSOR_BYTES``)."""
    dims = tensor.shape
    if tensor.values is None or tensor.values.size == 0 or len(dims) < 2 or dims[-1] != dims[-2] or dims[-1] < 2:
        return None
    values = tensor.values.reshape(-1, dims[-1], dims[-1])[0]
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        marked = ~np.isfinite(values)  # additive mask: -inf where attention is blocked
    else:
        marked = values != 0  # boolean "allowed" mask, or an additive mask of large negatives
    ones = np.ones(values.shape, dtype=bool)
    if np.array_equal(marked, np.tril(ones)):
        return "lower-triangular"
    if np.array_equal(marked, np.triu(ones, 1)):
        return "strictly upper-triangular"
    return None


# -- signals --------------------------------------------------------------------------------------

@dataclass
class _Embedding:
    input: TensorSpec
    node: Node
    table: str
    rows: int
    cols: int | None


def _embeddings(index: _Index, inputs: list[TensorSpec]) -> list[_Embedding]:
    """Integer [batch, seq] inputs that index an embedding table: token, position or segment ids."""
    found = []
    for spec in inputs:
        if spec.elem_type not in INT_TYPES or spec.shape is None or len(spec.shape) != 2:
            continue
        node, via = _forward(index, spec.name, {"Gather", "GatherBlockQuantized", "EmbedLayerNormalization"},
                             INDEX_PASS, max_hops=3)
        if node is None:
            continue
        if node.op_type == "EmbedLayerNormalization":  # input_ids -> word table, segment_ids -> segment table
            slot = {0: 2, 1: 4}.get(node.inputs.index(via))
            table = node.inputs[slot] if slot is not None and len(node.inputs) > slot else ""
        elif len(node.inputs) > 1 and node.inputs[1] == via:
            table = node.inputs[0]
        else:
            continue
        weight = _weight_shape(index, table)
        if weight is None or len(weight[1]) < 2:
            continue
        found.append(_Embedding(spec, node, weight[0], weight[1][0], weight[1][1]))
    return found


def _name_signature(name: str) -> tuple[str, ...]:
    """Layer index and key/value role of a cache tensor, with past/present/in/out wording removed:
    ``past_key_values.3.key`` and ``present.3.key`` both give ('3', 'key')."""
    tokens = _TOKEN_SPLIT.split(_CACHE_COMPOUND.sub(" ", name.lower()))
    return tuple(t for t in tokens if t and t not in _CACHE_TOKENS)


def _hinted(name: str, hints: tuple[str, ...]) -> bool:
    lower = name.lower()
    return any(h in lower for h in hints)


def _shapes_compatible(past: TensorSpec, present: TensorSpec) -> bool:
    """Same dtype and rank (>= 3), equal on every axis but (at most) the sequence axis."""
    if past.elem_type != present.elem_type or past.shape is None or present.shape is None:
        return False
    if len(past.shape) != len(present.shape) or len(past.shape) < 3:
        return False
    return sum(1 for a, b in zip(past.shape, present.shape) if a != b or a is None) <= 1


@dataclass
class _KvPair:
    past: TensorSpec
    present: TensorSpec
    link: str  # how present is built from past, or "" when matched by name and shape only
    attention: Node | None = None


def _kv_pairs(model: ModelGraph, index: _Index, inputs: list[TensorSpec], token_inputs: set[str]):
    """KV-cache pairs, and the recurrent states (inputs that initialise an RNN cell) set aside."""
    outputs = {o.name: o for o in model.outputs}
    candidates = [s for s in inputs if s.name not in token_inputs and (s.shape is None or len(s.shape) >= 3)]
    pairs: dict[str, _KvPair] = {}
    states: dict[str, str] = {}
    for spec in candidates:
        recurrent = [n for n in index.consumers.get(spec.name, ()) if n.op_type in RECURRENT_OPS]
        if recurrent:
            states[spec.name] = (f"input '{spec.name}' is the initial state of {recurrent[0].op_type} "
                                 f"'{recurrent[0].name}'")
            continue
        pair = _structural_kv(index, outputs, spec)
        if pair is not None:
            pairs[spec.name] = pair
    by_signature: dict[tuple, list[TensorSpec]] = defaultdict(list)
    paired_outputs = {p.present.name for p in pairs.values()}
    for out in model.outputs:
        if out.name not in paired_outputs:
            by_signature[_name_signature(out.name)].append(out)
    for spec in candidates:
        if spec.name in pairs or spec.name in states or not _hinted(spec.name, _PAST_HINTS):
            continue
        for out in by_signature.get(_name_signature(spec.name), ()):
            if out.name != spec.name and _hinted(out.name, _PRESENT_HINTS) and _shapes_compatible(spec, out):
                pairs[spec.name] = _KvPair(spec, out, "")
                break
    return list(pairs.values()), list(states.values())


def _structural_kv(index: _Index, outputs: dict[str, TensorSpec], spec: TensorSpec) -> _KvPair | None:
    """present = concat/scatter(past, new), or an attention op that reads past and writes present."""
    frontier = [spec.name]
    for _ in range(2):
        next_frontier = []
        for name in frontier:
            for node in index.consumers.get(name, ()):
                slots = ATTENTION_KV_SLOTS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
                for past_slot, present_slot in slots or ():
                    if len(node.inputs) > past_slot and node.inputs[past_slot] == name \
                            and len(node.outputs) > present_slot:
                        out = _to_output(index, outputs, node.outputs[present_slot])
                        if out is not None:
                            return _KvPair(spec, out, f"{node.op_type} '{node.name}' reads it and writes "
                                                      f"'{out.name}'", node)
                if node.op_type in CACHE_UPDATE_OPS and node.outputs:
                    out = _to_output(index, outputs, node.outputs[0])
                    if out is not None:
                        return _KvPair(spec, out, f"'{out.name}' = {node.op_type} '{node.name}'(past, new)")
                if node.op_type in CACHE_PASS:
                    next_frontier.extend(o for o in node.outputs if o)
        frontier = next_frontier
    return None


def _to_output(index: _Index, outputs: dict[str, TensorSpec], name: str) -> TensorSpec | None:
    for _ in range(3):
        if name in outputs:
            return outputs[name]
        nxt = [n for n in index.consumers.get(name, ()) if n.op_type in CACHE_PASS and n.outputs]
        if len(nxt) != 1:
            return None
        name = nxt[0].outputs[0]
    return outputs.get(name)


def _causal_evidence(index: _Index, kv_pairs: list[_KvPair]) -> list[str]:
    evidence = [f"{n.op_type} '{n.name}' (decoder-only attention kernel, causal by construction)"
                for op in CAUSAL_OPS for n in index.by_op.get(op, ()) if n.domain == MS_DOMAIN]
    incremental = {p.attention.name: p.attention for p in kv_pairs
                   if p.attention is not None and p.attention.op_type not in CAUSAL_OPS}
    evidence += [f"{n.op_type} '{n.name}' attends over a KV cache (incremental decoding)"
                 for n in incremental.values()]
    for (domain, op), attr in CAUSAL_ATTRIBUTE.items():
        for node in index.by_op.get(op, ()):
            value = node.attributes.get(attr) if node.domain == domain and node.name not in incremental else None
            if isinstance(value, int) and value:
                evidence.append(f"{op} '{node.name}' has {attr}=1")
    evidence += [f"Trilu '{n.name}' builds a triangular mask" for n in index.by_op.get("Trilu", ())]
    for op in COMPARE_OPS:
        for node in index.by_op.get(op, ()):
            if len(node.inputs) < 2:
                continue
            left = _backward(index, node.inputs[0], {"Range"}, RANGE_PASS)
            right = _backward(index, node.inputs[1], {"Range"}, RANGE_PASS)
            if left is not None and right is not None:
                evidence.append(f"{op} '{node.name}' compares positions from Range '{left.name}' and "
                                f"Range '{right.name}' (query >= key mask)")
    checked = 0
    for user, source in _mask_sources(index):
        producer = index.producer.get(source)
        value = None
        if producer is not None and producer.op_type == "Constant" and checked < MAX_MASKS_CHECKED:
            checked += 1
            value = producer.attributes.get("value")
        # A buffer judged by shape alone: an initializer, or a Constant too large to carry its values.
        buffer = index.inits.get(source) or (value if isinstance(value, TensorValue) and value.values is None else None)
        if buffer is not None and buffer.dtype in ("bool", "uint8") and len(buffer.shape) >= 2 \
                and buffer.shape[-1] == buffer.shape[-2] >= 2 and user.op_type == "Where":
            evidence.append(f"square {buffer.dtype} mask buffer '{source}' {list(buffer.shape)} selects scores in "
                            f"Where '{user.name}' (values not read)")
        kind = _triangular(value) if isinstance(value, TensorValue) else None
        if kind:
            evidence.append(f"Constant '{producer.name}' {list(value.shape)} is {kind} (a causal mask) and "
                            f"feeds {user.op_type} '{user.name}'")
    return list(dict.fromkeys(evidence))


def _logits_evidence(model: ModelGraph, index: _Index, vocab: _Embedding | None) -> list[str]:
    if vocab is None:
        return []
    evidence = []
    for out in model.outputs:
        if out.elem_type not in FLOAT_TYPES:
            continue
        if out.shape and out.shape[-1] == vocab.rows:
            evidence.append(f"output {_spec_text(out)}: last dim = vocab {vocab.rows} of '{vocab.table}'")
            continue
        head = _backward_chain(index, out.name, DENSE_OPS, LOGITS_PASS)
        if head is None or len(head.inputs) < 2:
            continue
        weight = _weight_shape(index, head.inputs[1])
        if weight is not None and (weight[0] == vocab.table or vocab.rows in (weight[1][:1] + weight[1][-1:])):
            evidence.append(f"output '{out.name}' comes from {head.op_type} '{head.name}' with weight "
                            f"'{weight[0]}' {list(weight[1])} projecting to vocab {vocab.rows}")
    return evidence


def _backward_chain(index: _Index, name: str, targets, passing, max_hops: int = 4) -> Node | None:
    """Like ``_source`` but returns the first ``targets`` node on the first-input chain."""
    for _ in range(max_hops):
        node = index.producer.get(name)
        if node is None:
            return None
        if node.op_type in targets:
            return node
        if node.op_type not in passing or not node.inputs:
            return None
        name = node.inputs[0]
    return None


def _int4_evidence(index: _Index, quantizes_activations: bool) -> list[str]:
    evidence = [f"com.microsoft::{n.op_type} '{n.name}'"
                for op in ("MatMulNBits", "GatherBlockQuantized") for n in index.by_op.get(op, ())
                if n.domain == MS_DOMAIN]
    if not quantizes_activations:
        for node in index.by_op.get("DequantizeLinear", ()):
            init = index.inits.get(node.inputs[0]) if node.inputs else None
            if init is not None and init.dtype in LOW_BIT_TYPES:
                evidence.append(f"DequantizeLinear '{node.name}' of {init.dtype} weight '{init.name}'")
    return evidence


def _signal_inputs(index: _Index, inputs: list[TensorSpec], skip: set[str]):
    """Image, audio and dense-feature evidence from the float (or non-tensor) inputs."""
    image_conv, image_shape, audio, dense = [], [], [], []
    for spec in inputs:
        if spec.name in skip or (spec.elem_type and spec.elem_type not in FLOAT_TYPES):
            continue
        shape = spec.shape
        rank = len(shape) if shape is not None else None
        conv, _ = _forward(index, spec.name, CONV_OR_SPECTRAL, SIGNAL_OR_SEQUENCE_PASS)
        stem = _conv_weight(index, conv) if conv is not None and conv.op_type in CONV_OPS else None
        image_like = rank == 4 and "mask" not in spec.name.lower() and (
            (shape[1] in IMAGE_CHANNELS and _spatial(shape[2]) and _spatial(shape[3]))
            or (shape[3] in IMAGE_CHANNELS and _spatial(shape[1]) and _spatial(shape[2])))
        if image_like and stem is not None:
            layout = "NCHW" if shape[1] in IMAGE_CHANNELS else "NHWC"
            image_conv.append(f"image input {_spec_text(spec)} ({layout}) feeds {_conv_role(conv, stem)}")
        elif image_like:
            image_shape.append(f"image-shaped input {_spec_text(spec)}; no conv stem on it at top level")
        elif rank in (None, 4) and stem is not None and len(stem[1]) == 4 and stem[1][1] in IMAGE_CHANNELS:
            image_conv.append(f"input {_spec_text(spec)} feeds {_conv_role(conv, stem)} over {stem[1][1]} "
                              "image channel(s)")
        elif rank == 3 and (shape[1] in MEL_BINS or shape[2] in MEL_BINS) and conv is not None:
            bins = shape[1] if shape[1] in MEL_BINS else shape[2]
            audio.append(f"spectrogram input {_spec_text(spec)} ({bins} mel bins) feeds {conv.op_type} '{conv.name}'")
        elif rank == 2 and conv is not None:
            audio.append(f"waveform input {_spec_text(spec)} feeds {conv.op_type} '{conv.name}'")
        if rank in (2, 4) and conv is None:
            layer, _ = _forward(index, spec.name, DENSE_OPS, SIGNAL_PASS)
            if layer is not None:
                dense.append(f"feature input {_spec_text(spec)} feeds {layer.op_type} '{layer.name}' (dense layer)")
    for op in SPECTRAL_OPS:
        audio += [f"{op} '{n.name}' computes a spectrogram" for n in index.by_op.get(op, ())]
    return image_conv, image_shape, audio, dense


def _conv_weight(index: _Index, conv: Node) -> tuple[str, tuple] | None:
    return _weight_shape(index, conv.inputs[1]) if len(conv.inputs) > 1 else None


def _conv_role(conv: Node, weight: tuple[str, tuple] | None) -> str:
    if weight is not None and len(weight[1]) == 4:
        k = weight[1][2:]
        role = "patch embedding" if min(k) >= PATCH_KERNEL else "conv stem"
        return f"{role} {conv.op_type} '{conv.name}' (kernel {k[0]}x{k[1]}, weight '{weight[0]}')"
    return f"conv stem {conv.op_type} '{conv.name}'"


def classify_refined(model: ModelGraph) -> Classification:
    """Classify ``model`` by structure; every signal names the nodes, inputs and shapes behind it."""
    if not model.nodes:
        return Classification(UNKNOWN, 0.0, 0.0, None, [], "The graph has no nodes: nothing to classify.")
    index = _index(model.nodes, model.initializers)
    top_level_flow = list(index.control_flow)
    flow_notes = _flatten_bodies(index)
    inputs = model.inputs
    signals: list[Signal] = []

    def add(name, side, weight, evidence, description, value=None, threshold=None):
        fired = bool(evidence)
        signals.append(Signal(name, side, weight, fired, len(evidence) if value is None else value, threshold,
                              capped(evidence), weight if fired else 0.0, True, description))

    embeddings = _embeddings(index, inputs)
    token = max(embeddings, default=None, key=lambda e: (
        not any(w in e.input.name.lower() for w in ("position", "type", "segment")), e.rows))
    kv_pairs, states = _kv_pairs(model, index, inputs, {e.input.name for e in embeddings})
    causal = _causal_evidence(index, kv_pairs)
    quantizes_activations = bool(index.by_op.get("QuantizeLinear"))
    int4 = _int4_evidence(index, quantizes_activations)
    logits = _logits_evidence(model, index, token)
    image_conv, image_shape, audio, dense = _signal_inputs(
        index, inputs, {p.past.name for p in kv_pairs} | {e.input.name for e in embeddings})

    add("kv_cache_pairs", "genai", KV_PAIRS_SCORE,
        [f"'{p.past.name}' {p.past.shape_text()} -> '{p.present.name}' {p.present.shape_text()}"
         + (f": {p.link}" if p.link else ": same layer/role and dtype, shapes differ only on the sequence axis")
         for p in kv_pairs],
        "past inputs that return as present outputs of the same layer and role (present = past + new "
        "tokens): a KV cache, which only autoregressive decoders carry")
    add("causal_mask", "genai", CAUSAL_MASK_SCORE, causal,
        "causal attention: decoder-only kernels (GroupQueryAttention ...), attention over a KV cache, "
        "unidirectional/is_causal attributes, Trilu, Range-vs-Range position comparisons, triangular "
        "mask constants or square mask buffers")
    add("int4_weight_only", "genai", INT4_WEIGHT_ONLY_SCORE, int4,
        "weight-only low-bit quantization (MatMulNBits, GatherBlockQuantized, int4 DequantizeLinear "
        "with float activations): the LLM deployment format")
    add("vocab_logits", "genai", VOCAB_LOGITS_SCORE, logits,
        "an output over the token-embedding vocabulary (last dim = rows of the embedding table, or an "
        "lm_head projection to that size)", value=token.rows if token and logits else None,
        threshold=token.rows if token else None)
    add("token_ids_input", "genai", TOKEN_IDS_SCORE,
        [f"{_spec_text(token.input)} indexes {token.node.op_type} '{token.node.name}' over '{token.table}' "
         f"[{token.rows}, {token.cols}]"] if token else [],
        "integer [batch, seq] token ids feeding an embedding table (text model; decoder or encoder)")

    text_encoder = []
    if token is not None and not kv_pairs and not causal:
        text_encoder.append(f"token ids {_spec_text(token.input)} with no KV-cache pairs and no causal mask: "
                            "a bidirectional encoder")
        text_encoder += [f"segment ids {_spec_text(e.input)} index '{e.table}' [{e.rows}, {e.cols}]"
                         for e in embeddings if e.rows <= SEGMENT_VOCAB_MAX]
        text_encoder += [f"EmbedLayerNormalization '{n.name}' (BERT embedding block)"
                         for n in index.by_op.get("EmbedLayerNormalization", ())]
    add("text_encoder", "non_genai", TEXT_ENCODER_SCORE, text_encoder,
        "token ids without any decoder structure (no KV pairs, no causal mask): BERT/MiniLM-style encoder")
    add("image_input", "non_genai", IMAGE_CONV_SCORE, image_conv,
        "float [B, C, H, W] or [B, H, W, C] input with C in 1/3/4 (symbolic H, W count) reaching a conv "
        "stem or patch embedding, or any input whose first conv reads 1/3/4 channels")
    add("image_shaped_input", "non_genai", IMAGE_SHAPE_ONLY_SCORE, image_shape if not image_conv else [],
        "image-shaped float input whose first layer is not a conv (weaker)")
    add("audio_input", "non_genai", AUDIO_SCORE, audio,
        "spectrogram [B, mel, T] / waveform [B, samples] input reaching a conv, or STFT/DFT ops")
    cells = [f"{n.op_type} '{n.name}'" for op in RECURRENT_OPS for n in index.by_op.get(op, ())]
    add("recurrent_cells", "non_genai", RECURRENT_SCORE, cells + states if cells else [],
        "LSTM / GRU / RNN cells (speech, VAD, sequence models)")
    add("dense_feature_input", "non_genai", DENSE_INPUT_SCORE, dense if not embeddings else [],
        "float feature vector whose first layer is Gemm/MatMul (MLP / tabular model)")
    add("classical_ml", "non_genai", CLASSICAL_ML_SCORE,
        [f"{ML_DOMAIN}::{n.op_type} '{n.name}'" for n in index.ml_nodes],
        "ai.onnx.ml operators (tree ensembles, linear/SVM classifiers)")
    convs = [n for op in CONV_OPS for n in index.by_op.get(op, ())]
    cnn = []
    if len(convs) >= 2:
        bn = len(index.by_op.get("BatchNormalization", ()))
        pools = sum(len(index.by_op.get(op, ())) for op in ("MaxPool", "AveragePool", "GlobalAveragePool"))
        cnn = [f"{len(convs)} conv layers, {bn} BatchNormalization, {pools} pooling of {len(index.nodes)} nodes"]
        cnn += [f"{n.op_type} '{n.name}'" for n in convs]
    add("cnn_structure", "non_genai", CNN_STRUCTURE_SCORE, cnn,
        "a convolutional backbone (two or more conv layers)", value=len(convs), threshold=2)

    attention = [f"{n.domain + '::' if n.domain else ''}{n.op_type} '{n.name}'"
                 for op in ("Attention", "MultiHeadAttention", "GroupQueryAttention", "Softmax")
                 for n in index.by_op.get(op, ())]
    add("attention_ops", "neutral", 0.0, attention,
        "attention present (context only: encoders and decoders both attend)")
    qdq = [f"{len(index.by_op.get('QuantizeLinear', ()))} QuantizeLinear / "
           f"{len(index.by_op.get('DequantizeLinear', ()))} DequantizeLinear nodes (activations quantized)"] \
        if quantizes_activations else []
    add("qdq_quantization", "neutral", 0.0, qdq, "QDQ activation quantization (context: prepared for HTP)")
    flow = flow_notes or [f"{n.op_type} '{n.name}' holds {n.subgraphs} subgraph(s)" for n in top_level_flow]
    add("control_flow", "neutral", 0.0, flow,
        "control-flow nodes; their subgraph bodies are analysed together with the top-level graph")

    genai = sum(s.score for s in signals if s.side == "genai")
    non_genai = sum(s.score for s in signals if s.side == "non_genai")
    verdict = decide(genai, non_genai, MIN_DECISION_SCORE)
    return Classification(verdict, genai, non_genai, None, signals,
                          _summary(verdict, genai, non_genai, signals))


def _summary(verdict: str, genai: float, non_genai: float, signals: list[Signal]) -> str:
    def names(side):
        return ", ".join(s.name for s in signals if s.side == side and s.score) or "none"

    text = f"decoder evidence {genai:g} ({names('genai')}) vs non-decoder evidence {non_genai:g} ({names('non_genai')})"
    if verdict == GENAI:
        return f"GenAI: an autoregressive decoder; {text}."
    if verdict == NON_GENAI:
        return f"NonGenAI: {text}."
    if genai >= MIN_DECISION_SCORE and genai == non_genai:
        return f"Unknown: contradictory structure, {text}."
    return f"Unknown: too little structural evidence, {text}."
