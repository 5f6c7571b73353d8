"""The refined classifier: tells autoregressive decoders (GenAI, what GPU routing is for) from
encoders and vision / audio / tabular models by graph *structure*, not by name hints or op
densities.

Why not the EP rules: they send every text encoder to GPU (``input_ids`` and ``attention_mask``
match their KV-cache name hints), let a ViT's LayerNorm density outweigh its image input, never see
an image with symbolic H/W, and leave audio encoders, MLPs, RNNs and small CNNs on Unknown.

What counts here is what only a decoder has: past inputs that come back as present outputs one
token longer (a KV cache, whose cross-attention past with no present is the encoder half), a
causal attention mask (however the exporter builds it: kernels, attributes, Trilu, constants, or
positions compared as rows against columns), logits over the token-embedding vocabulary, int4
weight-only matmuls, and the autoregressive loop itself where a decoder carries no cache: a step
state in and out, of any rank, next to a token input (an RNN, Mamba or RWKV step decoder), frames
in, frames out and a stop head (a speech-synthesis decoder), an ArgMax fed back into the token
embedding (a greedy loop, unrolled in the graph or carried by a Loop), target-so-far tokens next
to a source (seq2seq), an image stem feeding a text decoder's logits (a captioner); what a model
*produces* weighs too: a pooled embedding with no vocabulary output is an encoder's, even under a
causal mask (CLIP's text tower). Against that, signal inputs that a decoder never has: images reaching a conv stem or
patch embedding (through layout, normalisation or quantisation), spectrograms, waveforms or
in-graph filterbanks, dense feature vectors, recurrent cells over signal features, a deep conv
backbone, classical-ML ops, or token ids feeding a bidirectional (non-causal, cache-less) encoder.

The side with more evidence wins; a tie is Unknown, and so is a graph with no evidence at all.
The lead (``margin``) says how sure the verdict is: below ``CONFIDENT_MARGIN`` (one decisive
signal's worth) it is reported as uncertain.

Cost: the graph's own producer/consumer index (``ModelGraph.producers``/``consumers``, built once
per graph) and one pass over the nodes for per-op buckets; every later check is a dict lookup or a
walk of at most a few hops from a graph input, output or a bucketed node, never a rescan of the
node list. Attributes are read only where they matter (attention ops
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

from dashboard.classify.verdicts import GENAI, NON_GENAI, UNKNOWN, Classification, Scorecard, Signal, decide
from dashboard.intake.graph import (MS_DOMAIN, Initializer, ModelGraph, Node, TensorSpec, TensorValue, consumers_of,
                                    producers_of)
from dashboard.intake.proto import TensorProto  # onnx's own class, without importing onnx (and ml_dtypes)

MIN_EVIDENCE = 2.0  # the weakest signal: any fired evidence can decide, a tie cannot
# A decisive signal's worth of lead (10) net of the weakest hint against it (token ids, 2): a text
# encoder is sure, a two-conv model with nothing else is not.
CONFIDENT_MARGIN = 8.0
DECISION_RULE = "a verdict needs strictly more evidence on one side"

# GenAI (autoregressive decoder) evidence.
KV_PAIRS_SCORE = 10.0
CAUSAL_MASK_SCORE = 8.0
INT4_WEIGHT_ONLY_SCORE = 8.0
VOCAB_LOGITS_SCORE = 4.0
TOKEN_IDS_SCORE = 2.0
# The generation loop itself, in the graph: it outweighs whatever the model reads, up to an image
# stem plus the deepest backbone (10 + 10), since captioners and OCR decoders read images too.
GREEDY_FEEDBACK_SCORE = 22.0
STEP_DECODER_SCORE = 12.0
SEQ2SEQ_DECODER_SCORE = 10.0
FRAME_DECODER_SCORE = 12.0  # a step decoder whose tokens are spectrogram frames
# An image stem feeding a text decoder's logits: offsets the image input (10), so a captioner is
# judged by its decoder evidence, and its backbone still counts against it.
CAPTIONER_SCORE = 10.0
# NonGenAI evidence.
IMAGE_CONV_SCORE = 10.0
IMAGE_SHAPE_ONLY_SCORE = 4.0
AUDIO_SCORE = 10.0
RECURRENT_SCORE = 10.0
DENSE_INPUT_SCORE = 10.0
CLASSICAL_ML_SCORE = 10.0
TEXT_ENCODER_SCORE = 10.0
POOLED_EMBEDDING_SCORE = 10.0
SEQUENCE_CLASSIFIER_SCORE = 10.0
CNN_STRUCTURE_SCORE = 4.0  # two conv layers; each further conv adds CNN_DEPTH_STEP up to CNN_MAX_SCORE
CNN_DEPTH_STEP = 0.5
CNN_MAX_SCORE = 10.0

INT_TYPES = frozenset({TensorProto.INT32, TensorProto.INT64})
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16})
LOW_BIT_TYPES = frozenset({"int4", "uint4"})
IMAGE_CHANNELS = frozenset({1, 3, 4})
MIN_IMAGE_SIDE = 8
MEL_BINS = frozenset({40, 64, 80, 128})
FILTERBANK_KERNEL = 64  # a Conv1D this wide over one channel is a learned filterbank / STFT as conv
MIN_FRAME_FEATURES = 13  # MFCC count: fewer channels per frame is not a spectrogram
PATCH_KERNEL = 8  # a conv kernel this large on the raw image is a patch embedding (ViT), not a stem
SEGMENT_VOCAB_MAX = 16  # token_type_ids embed into a handful of rows
# Spectrogram frame widths: mel counts, and n_fft / 2 + 1 linear bins.
FRAME_WIDTHS = MEL_BINS | frozenset({100, 257, 513, 1025})
STOP_HEAD_MAX = 4  # a stop-token head predicts one flag per frame (a few with a reduction factor)

CONV_OPS = frozenset({"Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "NhwcConv", "FusedConv"})
DENSE_OPS = frozenset({"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "QGemm", "FusedMatMul", "MatMulNBits"})
RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN", "DynamicQuantizeLSTM", "AttnLSTM"})
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
    "BatchNormalization", "Normalizer", "Scaler", "DynamicQuantizeLinear",
})
# A dense head may normalise its input by hand (LayerNorm written as ReduceMean/Sub/Pow/Sqrt/Div).
DENSE_PASS = SIGNAL_PASS | frozenset({"ReduceMean", "Pow", "Sqrt", "LayerNormalization", "LpNormalization",
                                      "ReduceL2", "Relu", "Gelu", "Dropout", "Abs", "Neg", "Reciprocal"})
SIGNAL_OR_SEQUENCE_PASS = SIGNAL_PASS | SEQUENCE_OPS
CONV_OR_SPECTRAL = CONV_OPS | SPECTRAL_OPS
INDEX_PASS = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Clip", "Slice"})
# Ops an ArgMax's token ids pass on their way back into the embedding (the next step's input).
FEEDBACK_PASS = INDEX_PASS | frozenset({"Concat", "Expand", "Where", "Add", "Sub", "Mul", "Max", "Min"})
# Ops that pick the next token, and the output slot of its id: greedy (ArgMax, TopK) or sampled.
PICK_OUTPUT = {"ArgMax": 0, "TopK": 1, "Multinomial": 0}
STATE_VISIT_LIMIT = 4096  # tensors visited when proving a state input reaches its output
CACHE_PASS = frozenset({"Cast", "Transpose", "Reshape", "Identity", "DequantizeLinear", "QuantizeLinear"})
# A sliding-window cache (Mistral's, Phi-3's) keeps a window of its positions: on a past with a
# length axis (symbolic: it grows with the text) a Slice is a cache op too. A fixed-width rolling
# window (Mamba's conv state) is a step state, judged by the step-decoder rule.
WINDOW_CACHE_PASS = CACHE_PASS | {"Slice"}
CACHE_HOPS = 3  # past -> a copy or a window -> the update
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
# Words that say a tensor is the next step's copy of an input: ``conv_state`` -> ``conv_state_out``.
_STEP_HINTS = ("present", "out", "new", "next", "updated")


@dataclass
class _Index:
    """The graph's edges (top level plus flattened bodies) and what one pass over the nodes buckets."""

    nodes: list[Node]
    inits: dict[str, Initializer]
    producer: dict[str, Node]
    consumers: dict[str, list[Node]]
    by_op: dict[str, list[Node]] = field(default_factory=lambda: defaultdict(list))
    ml_nodes: list[Node] = field(default_factory=list)
    control_flow: list[Node] = field(default_factory=list)
    # A Loop's or Scan's carried state: body output -> the body input it becomes at the next
    # iteration (both renamed, see ``_flatten``); a forward walk crosses it as an Identity.
    carried: dict[str, str] = field(default_factory=dict)


def _index(model: ModelGraph) -> _Index:
    """The top level's edges are the graph's own index (shared, never mutated here)."""
    index = _Index(list(model.nodes), model.initializers, model.producers, model.consumers)
    _bucket(index, model.nodes)
    return index


def _index_add(index: _Index, nodes: list[Node]) -> None:
    """Add flattened body nodes: their edges go into new maps layered over the graph's."""
    index.nodes.extend(nodes)
    index.producer = {**index.producer, **producers_of(nodes)}
    consumers = dict(index.consumers)
    for name, readers in consumers_of(nodes).items():
        consumers[name] = consumers.get(name, []) + readers
    index.consumers = consumers
    _bucket(index, nodes)


def _bucket(index: _Index, nodes: list[Node]) -> None:
    by_op = index.by_op
    for node in nodes:
        by_op[node.op_type].append(node)
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
            following = index.carried.get(name)
            if following is not None and following not in seen:  # the next iteration reads it
                seen.add(following)
                next_frontier.append(following)
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
        value = node.attributes.get("value") if node is not None and node.op_type == "Constant" else None
        if isinstance(value, TensorValue):  # paddle2onnx and others store weights as Constant nodes
            return node.outputs[0], value.shape
        if node is None or node.op_type not in ("DequantizeLinear", "Transpose", "Cast", "Identity") or not node.inputs:
            return None
        name = node.inputs[0]
    return None


def _spec_text(spec: TensorSpec) -> str:
    return f"'{spec.name}' {spec.dtype} {spec.shape_text()}"


def _spatial(dim) -> bool:
    return not isinstance(dim, int) or dim >= MIN_IMAGE_SIDE


# -- control-flow bodies -----------------------------------------------------------------------

def _carried_slots(parent: Node, body) -> list[tuple[int, int]]:
    """(body output, body input) slots of the state a Loop or Scan carries from one iteration to
    the next: a Loop's outputs 1..N become its inputs 2..N+1, a Scan's first N outputs its first N
    inputs (N: the inputs that are not scanned)."""
    if parent.op_type == "Loop":
        return [(1 + i, 2 + i) for i in range(max(0, min(len(body.inputs) - 2, len(body.outputs) - 1)))]
    if parent.op_type == "Scan":
        scanned = parent.attributes.get("num_scan_inputs")
        states = len(body.inputs) - scanned if isinstance(scanned, int) else 0
        return [(i, i) for i in range(max(0, min(states, len(body.outputs))))]
    return []


def _flatten(parent: Node):
    """The nodes, initializers and carried state (``_Index.carried``) of ``parent``'s bodies,
    renamed into the outer scope: names a body defines get a ``<parent>/<body>/`` prefix, Loop/Scan
    formal inputs are bound to the tensors the parent passes in, free (outer-scope) names stay as
    they are. The carried state is what makes a generation Loop's feedback visible: the token a
    body picks is the token its next iteration embeds."""
    nodes: list[Node] = []
    inits: dict[str, Initializer] = {}
    carried: dict[str, str] = {}
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

        for out_slot, in_slot in _carried_slots(parent, body):
            source, target = rename(body.outputs[out_slot].name), rename(body.inputs[in_slot].name)
            if source and target and source != target:
                carried[source] = target
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
                inner_nodes, inner_inits, inner_carried = _flatten(node)
                nodes += inner_nodes
                inits.update(inner_inits)
                carried.update(inner_carried)
    return nodes, inits, carried


def _flatten_bodies(index: _Index) -> list[str]:
    """Add the bodies of the top-level control-flow nodes to ``index``; one note per parent."""
    notes, extra_nodes, extra_inits = [], [], {}
    for parent in list(index.control_flow):
        body_nodes, body_inits, carried = _flatten(parent)
        extra_nodes += body_nodes
        extra_inits.update(body_inits)
        index.carried.update(carried)
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


# -- token streams -------------------------------------------------------------------------------

EMBED_OPS = frozenset({"Gather", "GatherBlockQuantized", "EmbedLayerNormalization"})
_POSITIONAL = ("position", "type", "segment")


@dataclass
class _Embedding:
    input: TensorSpec
    node: Node
    table: str
    rows: int
    cols: int | None


def _embeddings(index: _Index, inputs: list[TensorSpec]) -> list[_Embedding]:
    """Integer inputs that index an embedding table: token, position or segment ids. Rank 1 counts
    (a step decoder's previous word), and so does any name: a decoder's tokens so far are often
    ``prefix``, ``tokens`` or ``prev_output_tokens``, not ``input_ids``."""
    found = []
    for spec in inputs:
        if spec.elem_type not in INT_TYPES or spec.shape is None or len(spec.shape) not in (1, 2):
            continue
        hit = _lookup(index, spec.name)
        weight = _weight_shape(index, hit[1]) if hit is not None else None
        if weight is not None and len(weight[1]) >= 2:
            found.append(_Embedding(spec, hit[0], weight[0], weight[1][0], weight[1][1]))
    return found


def _lookup(index: _Index, name: str) -> tuple[Node, str] | None:
    """(embedding node, table tensor) that the ids in ``name`` index. A Gather that picks positions
    out of the ids (``tokens[:, -1]``: a step decoder reads only the last token) is followed through
    to the table lookup."""
    for _ in range(3):
        node, via = _forward(index, name, EMBED_OPS, INDEX_PASS, max_hops=3)
        if node is None:
            return None
        if node.op_type == "EmbedLayerNormalization":  # input_ids -> word table, segment_ids -> segment table
            slot = {0: 2, 1: 4}.get(node.inputs.index(via))
            return (node, node.inputs[slot]) if slot is not None and len(node.inputs) > slot else None
        if len(node.inputs) > 1 and node.inputs[1] == via:
            return node, node.inputs[0]
        if not node.outputs or _weight_shape(index, node.inputs[1] if len(node.inputs) > 1 else "") is None:
            return None
        name = node.outputs[0]  # the ids are the data of a position-selecting Gather
    return None


def _token_streams(embeddings: list[_Embedding]) -> list[_Embedding]:
    """Embeddings of token ids, not of positions or segments: what a text model reads."""
    return [e for e in embeddings
            if e.rows > SEGMENT_VOCAB_MAX and not any(w in e.input.name.lower() for w in _POSITIONAL)]


def _reach(index: _Index, starts: list[str], limit: int = STATE_VISIT_LIMIT) -> set[str]:
    """Tensors computed from ``starts`` (bounded: at most ``limit`` tensors are visited)."""
    seen, frontier = set(starts), list(starts)
    while frontier and len(seen) < limit:
        for node in index.consumers.get(frontier.pop(), ()):
            for out in node.outputs:
                if out and out not in seen:
                    seen.add(out)
                    frontier.append(out)
    return seen


# -- KV caches and causal masks ----------------------------------------------------------------

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
    passing = WINDOW_CACHE_PASS if spec.shape is not None and any(not isinstance(d, int) for d in spec.shape[1:]) \
        else CACHE_PASS
    frontier = [spec.name]
    for _ in range(CACHE_HOPS):
        next_frontier = []
        for name in frontier:
            for node in index.consumers.get(name, ()):
                slots = ATTENTION_KV_SLOTS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
                for past_slot, present_slot in slots or ():
                    if len(node.inputs) > past_slot and node.inputs[past_slot] == name \
                            and len(node.outputs) > present_slot:
                        out = _to_output(index, outputs, node.outputs[present_slot], passing)
                        if out is not None:
                            return _KvPair(spec, out, f"{node.op_type} '{node.name}' reads it and writes "
                                                      f"'{out.name}'", node)
                copy = node.op_type == "Concat" and len(node.inputs) == 1  # an identity (TorchScript's cache copy)
                if node.op_type in CACHE_UPDATE_OPS and node.outputs and not copy:
                    out = _to_output(index, outputs, node.outputs[0], passing)
                    if out is not None:
                        return _KvPair(spec, out, f"'{out.name}' = {node.op_type} '{node.name}'(past, new)")
                if node.op_type in passing or copy:
                    next_frontier.extend(o for o in node.outputs if o)
        frontier = next_frontier
    return None


def _to_output(index: _Index, outputs: dict[str, TensorSpec], name: str,
               passing=CACHE_PASS) -> TensorSpec | None:
    """The graph output ``name`` becomes through at most three cache ops (casts, layout, a window),
    whichever branch gets there: the updated cache is also read by the attention."""
    frontier = [name]
    for _ in range(4):
        hit = next((outputs[n] for n in frontier if n in outputs), None)
        if hit is not None:
            return hit
        frontier = [out for n in frontier for node in index.consumers.get(n, ())
                    if node.op_type in passing for out in node.outputs[:1] if out][:16]
    return None


def _causal_evidence(index: _Index, kv_pairs: list[_KvPair], int_inputs: set[str]) -> list[str]:
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
            left, right = (_position_origin(index, name, int_inputs) for name in node.inputs[:2])
            if left and right and left[0] == right[0]:
                evidence.append(f"{op} '{node.name}' compares positions from {left[1]} and {right[1]} "
                                "(query >= key mask)")
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


POSITION_PASS = RANGE_PASS | {"Transpose"}
# Ops that pick values out of their data (input 0) by index: a gathered position is still a position
# (torch.export's vmapped mask functions gather the query's and the key's position out of one grid).
POSITION_GATHER = frozenset({"Gather", "GatherND", "GatherElements"})
STOP_PASS = frozenset({"Reshape", "Sigmoid", "Add", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Cast", "Identity",
                       "Slice"})


def _position_origin(index: _Index, name: str, int_inputs: set[str], max_hops: int = 5) -> tuple[str, str] | None:
    """(kind, description) of the positions a compared tensor is laid out from: a Range (torch's
    arange, every exporter), a CumSum (positions counted from the attention mask), or an integer
    graph input (``position_ids``), reached through unsqueezes, expands, transposes and offsets, and
    through the data of a gather (the vmapped mask functions of torch.export pick the query's and
    the key's position out of one positions grid with GatherND). A
    causal mask compares the same kind of positions on both sides (query rows against key
    columns); a padding mask compares positions with lengths, a sliding window a distance with a
    constant."""
    frontier, seen = [name], {name}
    for _ in range(max_hops + 1):
        next_frontier = []
        for tensor in frontier:
            if tensor in int_inputs:
                return "input", f"input '{tensor}'"
            node = index.producer.get(tensor)
            if node is None:
                continue
            if node.op_type in ("Range", "CumSum"):
                return node.op_type, f"{node.op_type} '{node.name}'"
            if node.op_type in POSITION_PASS:
                next_frontier += [i for i in node.inputs if i and i not in seen and not seen.add(i)]
            elif node.op_type in POSITION_GATHER and node.inputs and node.inputs[0] not in seen:
                seen.add(node.inputs[0])
                next_frontier.append(node.inputs[0])
        frontier = next_frontier[:32]
    return None


# -- the autoregressive loop without a cache ----------------------------------------------------

@dataclass
class _StatePair:
    input: TensorSpec
    output: TensorSpec


def _same_layout(a: TensorSpec, b: TensorSpec) -> bool:
    """Same dtype and rank, no fixed dim that differs, and at least one fixed dim in common (two
    fully symbolic shapes say nothing)."""
    if a.elem_type != b.elem_type or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    fixed = [(x, y) for x, y in zip(a.shape, b.shape) if isinstance(x, int) and isinstance(y, int)]
    return bool(fixed) and all(x == y for x, y in fixed)


def _state_pairs(model: ModelGraph, index: _Index, inputs: list[TensorSpec], skip: set[str]) -> list[_StatePair]:
    """Float inputs that come back as a same-shaped output computed from them: a recurrent state
    (GRU/LSTM hidden and cell, a VAD state) carried from one call to the next. Alone it proves
    nothing (a VAD carries one too); next to a token input and a vocabulary output it is the
    decoder's memory of the tokens so far, which is what a KV cache is to a transformer."""
    outputs = [o for o in model.outputs if o.elem_type in FLOAT_TYPES]
    pairs = []
    for spec in inputs:
        if spec.name in skip or spec.elem_type not in FLOAT_TYPES or spec.shape is None or len(spec.shape) < 2:
            continue
        same = [o for o in outputs if o.name != spec.name and _state_output(spec, o)]
        reached = _reach(index, [spec.name]) if same else set()
        hit = next((o for o in same if o.name in reached), None)
        if hit is not None:
            pairs.append(_StatePair(spec, hit))
    return pairs


def _state_output(state: TensorSpec, out: TensorSpec) -> bool:
    """``out`` is ``state`` coming back: the same name with step wording (``present_X``, ``X_out``,
    ``new_X``, ``X_next``), same dtype and rank, whatever the rank (Mamba's stacked conv states are
    4-D); or, without the names, the same layout at rank 2-3 (a GRU's hidden, a VAD's state). A
    same-shaped image out (a U-Net) is neither."""
    if out.shape is None or len(out.shape) != len(state.shape) or out.elem_type != state.elem_type:
        return False
    signature = _name_signature(state.name)
    if signature and signature == _name_signature(out.name) and _hinted(state.name + " " + out.name, _STEP_HINTS):
        return all(a == b for a, b in zip(state.shape, out.shape) if isinstance(a, int) and isinstance(b, int))
    return len(state.shape) <= 3 and _same_layout(state, out)


def _step_decoder(streams: list[_Embedding], logits: dict[str, list[str]], states: list[_StatePair]):
    """Evidence and gist of a step decoder: a token input, a state in and out, and an output over
    that token vocabulary. Each call consumes the token it produced last time: the loop runs
    outside the graph, but every part of it is in the signature."""
    target = next((e for e in streams if logits.get(e.input.name)), None)
    if target is None or not states:
        return [], ""
    evidence = [f"token input {_spec_text(target.input)} indexes '{target.table}' [{target.rows}, {target.cols}]"]
    evidence += [f"state {_spec_text(p.input)} is carried to output {_spec_text(p.output)}" for p in states]
    evidence.append(logits[target.input.name][0])
    state = states[0]
    return evidence, (f"a token input '{target.input.name}' plus a step state in and out ('{state.input.name}' -> "
                      f"'{state.output.name}'), and a vocabulary-sized output ({target.rows}): a step decoder")


def _greedy_feedback(index: _Index):
    """ArgMax / TopK / Multinomial indices that index a 2-D embedding table: the token picked
    (greedily or sampled) at one step is the input of the next, i.e. decoding unrolled in the
    graph. A classifier's ArgMax ends in an output or a label lookup (a 1-D table), never in an
    embedding. The feedback may cross a Loop's carried state (``_Index.carried``): decoding
    written as a real loop."""
    evidence, loops, sampled, carried_into = [], 0, False, set(index.carried.values())
    for op, slot in PICK_OUTPUT.items():
        for node in index.by_op.get(op, ()):
            ids = node.outputs[slot] if len(node.outputs) > slot else ""
            gather, via = _forward(index, ids, {"Gather", "GatherBlockQuantized"}, FEEDBACK_PASS, max_hops=4) \
                if ids else (None, None)
            table = _weight_shape(index, gather.inputs[0]) if gather is not None and len(gather.inputs) > 1 \
                and gather.inputs[1] == via else None
            if table is not None and len(table[1]) == 2:
                looped = via in carried_into
                evidence.append(f"{op} '{node.name}' picks a token that indexes '{table[0]}' {list(table[1])} in "
                                f"{gather.op_type} '{gather.name}' (" + (
                                    "the loop carries it to its next iteration)" if looped
                                    else "the next step reads this step's output)"))
                loops += looped
                sampled |= op == "Multinomial"
    where = ("in a generation loop" if loops == len(evidence) else "unrolled in the graph" if not loops
             else "unrolled and in a generation loop")
    gist = (f"{len(evidence)} picked token(s) fed back into the token embedding: "
            f"{'sampled' if sampled else 'greedy'} decoding {where}") if evidence else ""
    return evidence, gist


def _memory_inputs(index: _Index, inputs: list[TensorSpec], skip: set[str]) -> list[TensorSpec]:
    """Float [batch, length, width] inputs read by a matmul: encoder states a decoder attends to."""
    found = []
    for spec in inputs:
        if spec.name in skip or spec.elem_type not in FLOAT_TYPES or spec.shape is None or len(spec.shape) != 3 \
                or not isinstance(spec.shape[2], int):
            continue
        node, _ = _forward(index, spec.name, DENSE_OPS, SIGNAL_PASS, max_hops=3)
        if node is not None:
            found.append(spec)
    return found


def _seq2seq_decoder(streams: list[_Embedding], logits: dict[str, list[str]], memory: list[TensorSpec]):
    """Target-so-far tokens with an output over their vocabulary, next to a source: source token ids
    or encoder states. A seq2seq graph's first token input is often the source, so every token
    input is read; an encoder never outputs logits over its input vocabulary next to a source."""
    target = next((e for e in streams if logits.get(e.input.name)), None)
    sources = [e for e in streams if target is not None and e.input.name != target.input.name]
    if target is None or not (sources or memory):
        return [], ""
    evidence = [f"target tokens {_spec_text(target.input)} with {logits[target.input.name][0]}"]
    evidence += [f"source tokens {_spec_text(e.input)} index '{e.table}' [{e.rows}, {e.cols}]" for e in sources]
    evidence += [f"encoder states {_spec_text(m)} are attended to" for m in memory]
    source = sources[0].input.name if sources else memory[0].name
    return evidence, (f"target tokens '{target.input.name}' next to a source '{source}' and an output over the "
                      f"target vocabulary ({target.rows}): a seq2seq decoder")


def _frame_decoder(model: ModelGraph, index: _Index, skip: set[str]) -> tuple[list[str], list[str]]:
    """Evidence and input names of an autoregressive speech decoder: spectrogram frames in (a mel
    count or linear bins wide) through a dense prenet, frames of that width out and a stop head,
    both computed from them. A spectrogram enhancer has frames in and out but no stop head; a
    non-autoregressive TTS model reads phonemes, not frames. Inputs that come back under their own
    name (a state) are taken as the frames only when nothing else is."""
    outputs = [o for o in model.outputs if o.elem_type in FLOAT_TYPES]
    fresh, paired = [], []
    for spec in model.inputs:
        width = spec.shape[-1] if spec.shape else None
        if spec.name in skip or spec.elem_type not in FLOAT_TYPES or len(spec.shape or ()) not in (2, 3) \
                or width not in FRAME_WIDTHS or _forward(index, spec.name, DENSE_OPS, SIGNAL_PASS)[0] is None:
            continue
        reached = _reach(index, [spec.name])
        same = [o for o in outputs if o.name in reached and o.shape and o.shape[-1] == width]
        stops = [(o, head) for o in outputs if o.name in reached for head in [_stop_head(index, o.name)] if head]
        if not same or not stops:
            continue
        own = _name_signature(spec.name)
        evidence = (f"frames {_spec_text(spec)} in, frames {_spec_text(same[0])} out and a stop head "
                    f"{_spec_text(stops[0][0])} ({stops[0][1]})")
        (paired if any(_name_signature(o.name) == own for o in same) else fresh).append((spec.name, evidence))
    chosen = fresh or paired
    return [e for _, e in chosen], [n for n, _ in chosen]


def _stop_head(index: _Index, name: str) -> str:
    """The dense layer, 1 to ``STOP_HEAD_MAX`` wide, that an output comes from (through a sigmoid and
    reshapes): a stop-token / gate head."""
    head = _backward(index, name, DENSE_OPS, STOP_PASS)
    weight = _weight_shape(index, head.inputs[1]) if head is not None and len(head.inputs) > 1 else None
    if weight is None or len(weight[1]) != 2 or not min(weight[1]) <= STOP_HEAD_MAX < max(weight[1]):
        return ""
    return f"{head.op_type} '{head.name}' to {min(weight[1])} value(s) per step"


def _frame_gist(frames: list[str]) -> str:
    if not frames:
        return ""
    return f"{frames[0]}: an autoregressive speech decoder"


def _cross_attention_past(inputs: list[TensorSpec], kv_pairs: list[_KvPair], skip: set[str]) -> list[TensorSpec]:
    """Past inputs with no present output, shaped like the decoder's own past (same rank, heads and
    head size; the length is the encoder's): the cross-attention keys and values a seq2seq or TTS
    decoder computes once from the encoder and reads at every step."""
    pasts = {p.past.name for p in kv_pairs}
    found = []
    for spec in inputs:
        if spec.name in pasts or spec.name in skip or spec.elem_type not in FLOAT_TYPES or spec.shape is None \
                or len(spec.shape) < 3 or not _hinted(spec.name, _PAST_HINTS):
            continue
        if any(_shapes_compatible(spec, p.past) for p in kv_pairs):  # equal but for the length axis
            found.append(spec)
    return found


# Ops between an integer sequence and the first layer that reads it as a signal: a cast to float
# and scaling (SIGNAL_PASS), or a one-hot encoding (OneHot, or the ids compared for equality with
# every value, which is how torch.export lowers ``one_hot``).
SEQUENCE_READ_PASS = SIGNAL_PASS | frozenset({"OneHot", "Equal"})
SEQUENCE_LAYERS = CONV_OPS | DENSE_OPS


def _sequence_classifier(model: ModelGraph, index: _Index, text: _Text, decoder: bool) -> list[str]:
    """An integer sequence ([batch, length]: bytes, nucleotides, residues) read as a signal by a conv
    or dense layer, through a cast to float, a one-hot encoding or an embedding over an alphabet
    (at most ``SEGMENT_VOCAB_MAX`` rows, where no token stream exists), and a class output ([batch,
    classes]) computed from it. No vocabulary is embedded, so nothing can be generated over it; with
    no decoder structure either, the sequence is being classified. (Token ids embedded over a
    vocabulary are judged by the text-encoder and pooled-embedding rules.)"""
    if decoder or text.streams:
        return []
    alphabets = {e.input.name: e for e in text.embeddings if e.rows <= SEGMENT_VOCAB_MAX}
    evidence = []
    for spec in model.inputs:
        if spec.elem_type not in INT_TYPES or spec.shape is None or len(spec.shape) != 2:
            continue
        start = alphabets[spec.name].node.outputs[0] if spec.name in alphabets else spec.name
        layer, _ = _forward(index, start, SEQUENCE_LAYERS, SEQUENCE_READ_PASS, max_hops=6)
        if layer is None:
            continue
        reached = _reach(index, [spec.name])
        classes = [o for o in model.outputs if o.name in reached and o.elem_type in FLOAT_TYPES
                   and o.shape is not None and len(o.shape) == 2 and isinstance(o.shape[1], int)]
        if classes:
            how = (f"embedded over a {alphabets[spec.name].rows}-symbol alphabet" if spec.name in alphabets
                   else "read as a signal")
            evidence.append(f"integer sequence {_spec_text(spec)} {how} by {layer.op_type} '{layer.name}', and "
                            f"class output {_spec_text(classes[0])}")
    return evidence


def _pooled_outputs(model: ModelGraph, index: _Index, text: _Text) -> list[str]:
    """Outputs with one vector per sequence ([batch, width], width fixed and not a vocabulary)
    computed from the token ids, in a model with no output over its vocabulary."""
    if not text.streams or text.logit_outputs:
        return []
    vocabularies = {e.rows for e in text.streams}
    reached = _reach(index, [e.input.name for e in text.streams])
    return [f"output {_spec_text(o)} is one vector per sequence computed from the tokens" for o in model.outputs
            if o.elem_type in FLOAT_TYPES and o.shape is not None and len(o.shape) == 2
            and isinstance(o.shape[1], int) and o.shape[1] not in vocabularies and o.name in reached]


def _image_to_text(index: _Index, found: _Inputs, text: _Text) -> list[str]:
    """Image inputs whose features reach an output over a token input's vocabulary: a captioner's
    image stem (ViT + GPT-2, CNN + GRU), the encoder half of an image-to-text decoder."""
    if not found.image_names or not text.logit_outputs:
        return []
    evidence = []
    for name in found.image_names:
        reached = _reach(index, [name])
        hits = [out for out in text.logit_outputs if out in reached]
        if hits:
            evidence.append(f"image input '{name}' reaches the vocabulary output '{hits[0]}' of token input "
                            f"'{text.token.input.name}'")
    return evidence


# -- other decoder evidence ------------------------------------------------------------------------

def _logits_evidence(model: ModelGraph, index: _Index, vocab: _Embedding | None) -> list[str]:
    return [text for _, text in _logits_outputs(model, index, vocab)]


def _logits_outputs(model: ModelGraph, index: _Index, vocab: _Embedding | None) -> list[tuple[str, str]]:
    """(output name, evidence) of every output over ``vocab``'s vocabulary."""
    if vocab is None:
        return []
    evidence = []
    for out in model.outputs:
        if out.elem_type not in FLOAT_TYPES:
            continue
        if out.shape and out.shape[-1] == vocab.rows:
            evidence.append((out.name, f"output {_spec_text(out)}: last dim = vocab {vocab.rows} of '{vocab.table}'"))
            continue
        head = _backward_chain(index, out.name, DENSE_OPS, LOGITS_PASS)
        if head is None or len(head.inputs) < 2:
            continue
        weight = _weight_shape(index, head.inputs[1])
        if weight is not None and (weight[0] == vocab.table or vocab.rows in (weight[1][:1] + weight[1][-1:])):
            evidence.append((out.name, f"output '{out.name}' comes from {head.op_type} '{head.name}' with weight "
                                       f"'{weight[0]}' {list(weight[1])} projecting to vocab {vocab.rows}"))
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


# -- signal inputs -------------------------------------------------------------------------------

@dataclass
class _Inputs:
    image_conv: list[str] = field(default_factory=list)
    image_names: list[str] = field(default_factory=list)  # the inputs behind ``image_conv``
    image_shape: list[str] = field(default_factory=list)
    audio: list[str] = field(default_factory=list)
    dense: list[str] = field(default_factory=list)


def _signal_inputs(index: _Index, inputs: list[TensorSpec], skip: set[str], dense_ranks: tuple[int, ...]) -> _Inputs:
    """Image, audio and dense-feature evidence from the float (or non-tensor) inputs. The way from
    an input to its first real layer may pass layout (a channels-last Transpose), normalisation
    (Sub/Div/Mul, Resize, Pad) and quantisation (DynamicQuantizeLinear -> ConvInteger)."""
    found = _Inputs()
    for spec in inputs:
        if spec.name in skip or (spec.elem_type and spec.elem_type not in FLOAT_TYPES):
            continue
        conv, _ = _forward(index, spec.name, CONV_OR_SPECTRAL, SIGNAL_OR_SEQUENCE_PASS)
        stem = _conv_weight(index, conv) if conv is not None and conv.op_type in CONV_OPS else None
        if not _image_evidence(found, spec, conv, stem):
            _audio_evidence(found, spec, conv, stem)
        rank = len(spec.shape) if spec.shape is not None else None
        if rank in dense_ranks and conv is None:
            layer, _ = _forward(index, spec.name, DENSE_OPS, DENSE_PASS)
            if layer is not None:
                found.dense.append(f"feature input {_spec_text(spec)} feeds {layer.op_type} '{layer.name}' "
                                   "(dense layer)")
    for op in SPECTRAL_OPS:
        found.audio += [f"{op} '{n.name}' computes a spectrogram" for n in index.by_op.get(op, ())]
    found.audio += _filterbank_convs(index)
    return found


def _image_evidence(found: _Inputs, spec: TensorSpec, conv: Node | None, stem) -> bool:
    """An image: [B, C, H, W] or [B, H, W, C] with C in 1/3/4 (symbolic H and W count, as detectors
    and segmenters take any size), or any input whose first conv reads 1/3/4 channels in 2-D."""
    shape = spec.shape
    rank = len(shape) if shape is not None else None
    image_like = rank == 4 and "mask" not in spec.name.lower() and (
        (shape[1] in IMAGE_CHANNELS and _spatial(shape[2]) and _spatial(shape[3]))
        or (shape[3] in IMAGE_CHANNELS and _spatial(shape[1]) and _spatial(shape[2])))
    if image_like and stem is not None:
        layout = "NCHW" if shape[1] in IMAGE_CHANNELS else "NHWC"
        found.image_conv.append(f"image input {_spec_text(spec)} ({layout}) feeds {_conv_role(conv, stem)}")
        found.image_names.append(spec.name)
    elif image_like:
        found.image_shape.append(f"image-shaped input {_spec_text(spec)}; no conv stem on it at top level")
    elif rank in (None, 4) and stem is not None and len(stem[1]) == 4 and stem[1][1] in IMAGE_CHANNELS:
        found.image_conv.append(f"input {_spec_text(spec)} feeds {_conv_role(conv, stem)} over {stem[1][1]} "
                                "image channel(s)")
        found.image_names.append(spec.name)
    else:
        return False
    return True


def _audio_evidence(found: _Inputs, spec: TensorSpec, conv: Node | None, stem) -> None:
    """Audio: a waveform [B, samples] (or [B, samples, 1] / [B, 1, samples]) or spectrogram frames
    [B, F, T] / [B, T, F] reaching a conv. F is a mel count, or the conv's input channels (a
    linear spectrogram of 257 bins, 20 MFCCs ...), so frames of any width count."""
    shape = spec.shape
    if conv is None or shape is None:
        return
    channels = stem[1][1] if stem is not None and len(stem[1]) == 3 else None
    if len(shape) == 2:
        found.audio.append(f"waveform input {_spec_text(spec)} feeds {conv.op_type} '{conv.name}'")
    elif len(shape) == 3 and 1 in (shape[1], shape[2]):
        found.audio.append(f"waveform input {_spec_text(spec)} (one channel) feeds {conv.op_type} '{conv.name}'")
    elif len(shape) == 3 and (shape[1] in MEL_BINS or shape[2] in MEL_BINS):
        bins = shape[1] if shape[1] in MEL_BINS else shape[2]
        found.audio.append(f"spectrogram input {_spec_text(spec)} ({bins} mel bins) feeds {conv.op_type} '{conv.name}'")
    elif len(shape) == 3 and channels is not None and channels >= MIN_FRAME_FEATURES and channels in shape[1:]:
        found.audio.append(f"frames input {_spec_text(spec)} ({channels} features per frame) feed the 1-D "
                           f"{conv.op_type} '{conv.name}'")


def _filterbank_convs(index: _Index) -> list[str]:
    """A Conv1D over one channel with a wide kernel: a learned filterbank or an STFT written as a
    conv, the front end of raw-audio models (SincNet, wav2vec-style encoders, in-graph mel)."""
    evidence = []
    for node in index.by_op.get("Conv", ()):
        weight = _conv_weight(index, node)
        if weight is not None and len(weight[1]) == 3 and weight[1][1] == 1 and weight[1][2] >= FILTERBANK_KERNEL:
            evidence.append(f"Conv '{node.name}' is a 1-D filterbank over one channel (weight '{weight[0]}' "
                            f"{list(weight[1])})")
    return evidence


def _conv_weight(index: _Index, conv: Node) -> tuple[str, tuple] | None:
    return _weight_shape(index, conv.inputs[1]) if len(conv.inputs) > 1 else None


def _conv_role(conv: Node, weight: tuple[str, tuple] | None) -> str:
    if weight is not None and len(weight[1]) == 4:
        k = weight[1][2:]
        role = "patch embedding" if min(k) >= PATCH_KERNEL else "conv stem"
        return f"{role} {conv.op_type} '{conv.name}' (kernel {k[0]}x{k[1]}, weight '{weight[0]}')"
    return f"conv stem {conv.op_type} '{conv.name}'"


def _recurrent_cells(index: _Index, streams: list[str]) -> list[Node]:
    """Recurrent cells (quantised ones included) over signal features. Cells that read token
    embeddings, or the frames a speech decoder feeds back, belong to a decoder (or a text encoder),
    and other rules judge those."""
    cells = [n for op in RECURRENT_OPS for n in index.by_op.get(op, ())]
    if not cells or not streams:
        return cells
    text = _reach(index, streams)
    return [n for n in cells if not (n.inputs and n.inputs[0] in text)]


def _cnn_score(convs: int) -> float:
    """Two convs make a small CNN (+4); depth adds evidence, so a deep backbone is decisive alone."""
    return min(CNN_MAX_SCORE, CNN_STRUCTURE_SCORE + CNN_DEPTH_STEP * (convs - 2)) if convs >= 2 else 0.0


# -- the classification ----------------------------------------------------------------------------

@dataclass
class _Text:
    """What the token inputs show: the streams, logits over each stream's vocabulary, the main stream."""

    embeddings: list[_Embedding]
    streams: list[_Embedding]
    logits: dict[str, list[str]]
    token: _Embedding | None
    logit_outputs: list[str] = field(default_factory=list)  # names of the outputs over a vocabulary


def _nearest_first(index: _Index, model: ModelGraph, streams: list[_Embedding]) -> list[_Embedding]:
    """Token streams ordered by how close their embedding is to the outputs: in a seq2seq graph the
    target-so-far tokens feed the decoder, next to the logits, and the source sits further back."""
    if len(streams) < 2:
        return streams
    depth: dict[str, int] = {}
    frontier, hops = [o.name for o in model.outputs], 0
    while frontier and len(depth) < STATE_VISIT_LIMIT:
        next_frontier = []
        for name in frontier:
            node = index.producer.get(name)
            if node is None or node.name in depth:
                continue
            depth[node.name] = hops
            next_frontier += [i for i in node.inputs if i]
        frontier, hops = next_frontier, hops + 1
    return sorted(streams, key=lambda e: depth.get(e.node.name, STATE_VISIT_LIMIT))


def _text(model: ModelGraph, index: _Index) -> _Text:
    embeddings = _embeddings(index, model.inputs)
    streams = _nearest_first(index, model, _token_streams(embeddings))
    found = {e.input.name: _logits_outputs(model, index, e) for e in streams}
    logits = {name: [text for _, text in hits] for name, hits in found.items()}
    target = next((e for e in streams if logits[e.input.name]), None)
    token = target or max(embeddings, default=None, key=lambda e: (
        not any(w in e.input.name.lower() for w in _POSITIONAL), e.rows))
    outputs = [out for hits in found.values() for out, _ in hits]
    return _Text(embeddings, streams, logits, token, list(dict.fromkeys(outputs)))


def classify_refined(model: ModelGraph) -> Classification:
    """Classify ``model`` by structure; every signal names the nodes, inputs and shapes behind it."""
    if not model.nodes:
        return Classification(UNKNOWN, 0.0, 0.0, None, [], "The graph has no nodes: nothing to classify.",
                              margin=0.0, confidence="uncertain", explanation="Unknown: the graph has no nodes.",
                              decision_rule=DECISION_RULE)
    index = _index(model)
    top_level_flow = list(index.control_flow)
    flow_notes = _flatten_bodies(index)
    text = _text(model, index)
    facts = _decoder_facts(model, index, text)
    found = _signal_inputs(index, model.inputs, facts.not_signals(text),
                           (2, 4) if text.embeddings or facts.kv_pairs else (2, 3, 4))
    card = Scorecard()
    _decoder_signals(card, model, index, text, facts, found)
    _non_decoder_signals(card, model, index, text, facts, found)
    _context_signals(card, index, flow_notes or [f"{n.op_type} '{n.name}' holds {n.subgraphs} subgraph(s)"
                                                 for n in top_level_flow])
    genai, non_genai = card.total("genai"), card.total("non_genai")
    verdict = decide(genai, non_genai, MIN_EVIDENCE)
    margin = abs(genai - non_genai) if verdict != UNKNOWN else 0.0
    confidence = "confident" if verdict != UNKNOWN and margin >= CONFIDENT_MARGIN else "uncertain"
    return Classification(verdict, genai, non_genai, None, card.signals, _summary(verdict, genai, non_genai, card.signals),
                          margin=margin, confidence=confidence,
                          explanation=_explain(verdict, margin, confidence, card.signals),
                          decision_rule=DECISION_RULE)


@dataclass
class _Facts:
    """The decoder structure found before any score is given: the non-decoder rules must know which
    inputs are a decoder's state (not images, audio or features) and whether a loop is proven."""

    kv_pairs: list[_KvPair]
    cross_past: list[TensorSpec]  # the encoder half of the cache: a past with no present
    states: list[str]  # inputs that initialise an RNN cell
    carried: list[_StatePair]
    frames: list[str]  # evidence of an autoregressive frame decoder
    frame_inputs: list[str]
    memory: list[TensorSpec]
    causal: list[str]
    pooled: list[str]
    step: tuple[list[str], str]
    greedy: tuple[list[str], str]
    seq2seq: tuple[list[str], str]

    @property
    def loop(self) -> bool:
        """Some part of the autoregressive loop is in the signature or the graph."""
        return bool(self.step[0] or self.greedy[0] or self.seq2seq[0] or self.frames)

    def not_signals(self, text: _Text) -> set[str]:
        """Inputs that are decoder state, never image / audio / feature evidence: token ids, the KV
        cache and its encoder half, and, once a loop is proven, the step states, the frames fed
        back and the encoder states attended to."""
        names = {p.past.name for p in self.kv_pairs} | {e.input.name for e in text.embeddings}
        names |= {spec.name for spec in self.cross_past}
        if self.loop:
            names |= {p.input.name for p in self.carried} | set(self.frame_inputs) | {m.name for m in self.memory}
        return names


def _decoder_facts(model: ModelGraph, index: _Index, text: _Text) -> _Facts:
    """Frames first (a speech decoder's frames so far are its tokens, not a cache), then the KV
    cache and its encoder half, then the states that remain: each later rule skips what an
    earlier one explained."""
    token_inputs = {e.input.name for e in text.embeddings}
    frames, frame_inputs = _frame_decoder(model, index, token_inputs)
    kv_pairs, states = _kv_pairs(model, index, model.inputs, token_inputs | set(frame_inputs))
    pasts = {p.past.name for p in kv_pairs}
    cross = _cross_attention_past(model.inputs, kv_pairs, token_inputs | set(frame_inputs))
    carried = _state_pairs(model, index, model.inputs, token_inputs | pasts | set(frame_inputs)
                           | {c.name for c in cross})
    skip = token_inputs | {p.input.name for p in carried} | pasts | set(frame_inputs) | {c.name for c in cross}
    memory = _memory_inputs(index, model.inputs, skip)
    causal = _causal_evidence(index, kv_pairs, {spec.name for spec in model.inputs if spec.elem_type in INT_TYPES})
    return _Facts(kv_pairs, cross, states, carried, frames, frame_inputs, memory, causal,
                  _pooled_outputs(model, index, text),
                  _step_decoder(text.streams, text.logits, carried), _greedy_feedback(index),
                  _seq2seq_decoder(text.streams, text.logits, memory))


def _decoder_signals(card: Scorecard, model: ModelGraph, index: _Index, text: _Text, facts: _Facts,
                     found: _Inputs) -> None:
    """GenAI evidence."""
    kv_pairs = facts.kv_pairs
    # A cache with nothing fed back (no token ids, no frames) next to an audio or image input is a
    # streaming encoder's state between chunks, not a decoder's cache.
    streaming = bool(kv_pairs) and not text.streams and not facts.frames and bool(found.audio or found.image_conv)
    kv_evidence = [f"'{p.past.name}' {p.past.shape_text()} -> '{p.present.name}' {p.present.shape_text()}"
                   + (f": {p.link}" if p.link else ": same layer/role and dtype, shapes differ only on the "
                      "sequence axis") for p in kv_pairs]
    kv_evidence += [f"'{c.name}' {c.shape_text()} is the encoder half of the cache (cross-attention past: same "
                    "heads and head size, no present output)" for c in facts.cross_past]
    if streaming:
        kv_evidence.insert(0, "not counted: nothing is fed back (no token ids, no frames) and the model reads "
                              "audio or an image, so these are a streaming encoder's state between chunks")
    card.add(name="kv_cache_pairs", side="genai", weight=KV_PAIRS_SCORE, value=len(kv_pairs), evidence=kv_evidence,
             score=0.0 if streaming or not kv_pairs else KV_PAIRS_SCORE,
             gist=f"{len(kv_pairs)} KV-cache pair(s) such as '{kv_pairs[0].past.name}' -> "
                  f"'{kv_pairs[0].present.name}'" + (f" (and {len(facts.cross_past)} cross-attention past(s))"
                                                     if facts.cross_past else "") + ": an incremental decoder"
             if kv_pairs else "",
             description="past inputs that return as present outputs of the same layer and role (present = past "
                         "+ new tokens): a KV cache, which only autoregressive decoders carry; a cross-attention "
                         "past with no present is its encoder half. Not counted when nothing is fed back and the "
                         "model reads audio or an image (a streaming encoder's state)")
    greedy, greedy_gist = facts.greedy
    card.add(name="greedy_feedback", side="genai", weight=GREEDY_FEEDBACK_SCORE, value=len(greedy), evidence=greedy,
             gist=greedy_gist, description=_greedy_feedback.__doc__.split(":")[0].strip())
    step, step_gist = facts.step
    card.add(name="step_decoder", side="genai", weight=STEP_DECODER_SCORE, evidence=step, gist=step_gist,
             value=len(facts.carried),
             description="a token input, a step state carried from input to output (an RNN hidden state, "
                         "Mamba's conv and SSM states, RWKV's state: any rank), and an output over the token "
                         "vocabulary: one step of a recurrent or state-space decoder")
    card.add(name="frame_decoder", side="genai", weight=FRAME_DECODER_SCORE, evidence=facts.frames,
             gist=_frame_gist(facts.frames),
             description="spectrogram frames in, frames of the same width out and a stop head (a 1-4 wide "
                         "output, the stop-token probability): one step of an autoregressive speech-synthesis "
                         "decoder (SpeechT5, Tacotron, Transformer-TTS)")
    seq2seq, seq2seq_gist = facts.seq2seq
    card.add(name="seq2seq_decoder", side="genai", weight=SEQ2SEQ_DECODER_SCORE, evidence=seq2seq, gist=seq2seq_gist,
             description="target-so-far tokens with an output over their vocabulary, next to source tokens or "
                         "encoder states: a seq2seq decoder (read on every token input, not just the first)")
    causal = facts.causal
    card.add(name="causal_mask", side="genai", weight=CAUSAL_MASK_SCORE, evidence=causal,
             gist=f"a causal mask ({_first_words(causal)})" if causal else "",
             description="causal attention: decoder-only kernels (GroupQueryAttention ...), attention over a KV "
                         "cache, unidirectional/is_causal attributes, Trilu, query-vs-key position comparisons "
                         "(two Ranges, one positions input or one CumSum laid out as rows and columns), "
                         "triangular mask constants or square mask buffers")
    captioner = _image_to_text(index, found, text)
    card.add(name="image_to_text", side="genai", weight=CAPTIONER_SCORE, evidence=captioner,
             gist=f"an image stem feeding a text decoder's vocabulary output ({captioner[0].split(' reaches ')[0]}): "
                  "a captioner" if captioner else "",
             description="an image input whose features reach the logits over a token vocabulary, next to that "
                         "token input: the image stem is the encoder half of a captioner, not a vision model")
    int4 = _int4_evidence(index, bool(index.by_op.get("QuantizeLinear")))
    card.add(name="int4_weight_only", side="genai", weight=INT4_WEIGHT_ONLY_SCORE, evidence=int4,
             gist="int4 weight-only matmuls (the LLM deployment format)" if int4 else "",
             description="weight-only low-bit quantization (MatMulNBits, GatherBlockQuantized, int4 "
                         "DequantizeLinear with float activations): the LLM deployment format")
    token, logits = text.token, text.logits.get(text.token.input.name, []) if text.token else []
    card.add(name="vocab_logits", side="genai", weight=VOCAB_LOGITS_SCORE, evidence=logits,
             value=token.rows if token and logits else None, threshold=token.rows if token else None,
             gist=f"an output over the {token.rows}-token vocabulary" if logits else "",
             description="an output over the token-embedding vocabulary (last dim = rows of the embedding table, "
                         "or an lm_head projection to that size)")
    card.add(name="token_ids_input", side="genai", weight=TOKEN_IDS_SCORE,
             evidence=[f"{_spec_text(token.input)} indexes {token.node.op_type} '{token.node.name}' over "
                       f"'{token.table}' [{token.rows}, {token.cols}]"] if token else [],
             gist=f"token ids '{token.input.name}'" if token else "",
             description="integer token ids (any name, rank 1 or 2) feeding an embedding table (text model; decoder "
                         "or encoder)")


def _first_words(evidence: list[str], words: int = 3) -> str:
    return " ".join(evidence[0].split()[:words]) if evidence else ""


def _non_decoder_signals(card: Scorecard, model: ModelGraph, index: _Index, text: _Text, facts: _Facts,
                         found: _Inputs) -> None:
    """NonGenAI evidence: what a decoder never has. A causal mask alone does not make a decoder of a
    model that outputs a pooled embedding (CLIP's text tower): it still reads as an encoder."""
    decoder = bool(facts.kv_pairs or facts.loop or (facts.causal and not facts.pooled))
    token = text.token
    encoder = []
    if token is not None and not decoder:
        encoder.append(f"token ids {_spec_text(token.input)} with no KV-cache pairs and no causal mask (nor a "
                       "step state, greedy feedback or target tokens): a bidirectional encoder")
        encoder += [f"segment ids {_spec_text(e.input)} index '{e.table}' [{e.rows}, {e.cols}]"
                    for e in text.embeddings if e.rows <= SEGMENT_VOCAB_MAX]
        encoder += [f"EmbedLayerNormalization '{n.name}' (BERT embedding block)"
                    for n in index.by_op.get("EmbedLayerNormalization", ())]
    card.add(name="text_encoder", side="non_genai", weight=TEXT_ENCODER_SCORE, evidence=encoder,
             gist=f"token ids '{token.input.name}' read without any decoder structure: a text encoder" if encoder else "",
             description="token ids without any decoder structure (no KV pairs, no causal mask, no step state, "
                         "greedy feedback or target tokens): BERT/MiniLM-style encoder")
    pooled = facts.pooled if text.streams else []
    card.add(name="pooled_embedding", side="non_genai", weight=POOLED_EMBEDDING_SCORE, evidence=pooled,
             gist=f"{pooled[0].split(' is ')[0]} is one vector per sequence and no output is over the vocabulary: "
                  "a pooled embedding" if pooled else "",
             description="an output with one vector per sequence ([batch, width]) computed from the token ids, and "
                         "no output over the token vocabulary: a text encoder's pooled or projected embedding "
                         "(CLIP, sentence embedders), even with a causal mask")
    sequence = _sequence_classifier(model, index, text, decoder or bool(text.logit_outputs))
    card.add(name="sequence_classifier", side="non_genai", weight=SEQUENCE_CLASSIFIER_SCORE, evidence=sequence,
             gist=f"{sequence[0].split(' by ')[0]} and a class output: a sequence classifier" if sequence else "",
             description="an integer [batch, length] sequence (bytes, nucleotides, residues) read by a conv or dense "
                         "layer through a cast, a one-hot encoding or an alphabet embedding (no token vocabulary), "
                         "and a [batch, classes] output, with no decoder structure: a sequence classifier")
    card.add(name="image_input", side="non_genai", weight=IMAGE_CONV_SCORE, evidence=found.image_conv,
             gist=f"an {found.image_conv[0].split(' feeds ')[0]} feeding a conv" if found.image_conv else "",
             description="float [B, C, H, W] or [B, H, W, C] input with C in 1/3/4 (symbolic H, W count) reaching a "
                         "conv stem or patch embedding through layout, normalisation or quantisation, or any input "
                         "whose first conv reads 1/3/4 channels")
    card.add(name="image_shaped_input", side="non_genai", weight=IMAGE_SHAPE_ONLY_SCORE,
             evidence=found.image_shape if not found.image_conv else [],
             gist="an image-shaped input" if found.image_shape and not found.image_conv else "",
             description="image-shaped float input whose first layer is not a conv (weaker)")
    card.add(name="audio_input", side="non_genai", weight=AUDIO_SCORE, evidence=found.audio,
             gist=f"audio: {found.audio[0].split(' feeds ')[0].split(' computes ')[0]}" if found.audio else "",
             description="waveform [B, samples] / [B, samples, 1] or spectrogram frames [B, F, T] (mel bins, or "
                         "any width a 1-D conv reads) reaching a conv; STFT/DFT ops; a wide Conv1D filterbank over "
                         "one channel")
    cells = _recurrent_cells(index, [e.input.name for e in text.streams] + facts.frame_inputs)
    card.add(name="recurrent_cells", side="non_genai", weight=RECURRENT_SCORE,
             evidence=[f"{n.op_type} '{n.name}'" for n in cells] + facts.states if cells else [],
             gist=f"{cells[0].op_type} cells over signal features" if cells else "",
             description="LSTM / GRU / RNN cells, quantised ones (DynamicQuantizeLSTM) included, over signal "
                         "features rather than token embeddings (speech, VAD, OCR, sequence models)")
    card.add(name="dense_feature_input", side="non_genai", weight=DENSE_INPUT_SCORE,
             evidence=found.dense if not text.embeddings else [],
             gist=f"a {found.dense[0].split(' feeds ')[0]} read by a dense layer" if found.dense and not text.embeddings
             else "",
             description="float feature vector (an embedding, tabular features) whose first layer is Gemm/MatMul, "
                         "possibly after a hand-written normalisation (MLP / head over embeddings)")
    card.add(name="classical_ml", side="non_genai", weight=CLASSICAL_ML_SCORE,
             evidence=[f"{ML_DOMAIN}::{n.op_type} '{n.name}'" for n in index.ml_nodes],
             gist="ai.onnx.ml operators (a classical model)" if index.ml_nodes else "",
             description="ai.onnx.ml operators (tree ensembles, linear/SVM classifiers)")
    _cnn_signal(card, index)


def _cnn_signal(card: Scorecard, index: _Index) -> None:
    convs = [n for op in CONV_OPS for n in index.by_op.get(op, ())]
    evidence = []
    if len(convs) >= 2:
        bn = len(index.by_op.get("BatchNormalization", ()))
        pools = sum(len(index.by_op.get(op, ())) for op in ("MaxPool", "AveragePool", "GlobalAveragePool"))
        evidence = [f"{len(convs)} conv layers, {bn} BatchNormalization, {pools} pooling of {len(index.nodes)} nodes"]
        evidence += [f"{n.op_type} '{n.name}'" for n in convs]
    card.add(name="cnn_structure", side="non_genai", weight=CNN_MAX_SCORE, evidence=evidence,
             score=_cnn_score(len(convs)), value=len(convs), threshold=2,
             gist=f"a backbone of {len(convs)} conv layers" if evidence else "",
             description="a convolutional backbone: +4 for two conv layers, +0.5 per further layer, up to +10")


def _context_signals(card: Scorecard, index: _Index, flow: list[str]) -> None:
    attention = [f"{n.domain + '::' if n.domain else ''}{n.op_type} '{n.name}'"
                 for op in ("Attention", "MultiHeadAttention", "GroupQueryAttention", "Softmax")
                 for n in index.by_op.get(op, ())]
    card.add(name="attention_ops", side="neutral", weight=0.0, evidence=attention,
             description="attention present (context only: encoders and decoders both attend)")
    qdq = [f"{len(index.by_op.get('QuantizeLinear', ()))} QuantizeLinear / "
           f"{len(index.by_op.get('DequantizeLinear', ()))} DequantizeLinear nodes (activations quantized)"] \
        if index.by_op.get("QuantizeLinear") else []
    card.add(name="qdq_quantization", side="neutral", weight=0.0, evidence=qdq,
             description="QDQ activation quantization (context: prepared for HTP)")
    card.add(name="control_flow", side="neutral", weight=0.0, evidence=flow,
             description="control-flow nodes; their subgraph bodies are analysed together with the top-level graph")


def _summary(verdict: str, genai: float, non_genai: float, signals: list[Signal]) -> str:
    def names(side):
        return ", ".join(s.name for s in signals if s.side == side and s.score) or "none"

    text = f"decoder evidence {genai:g} ({names('genai')}) vs non-decoder evidence {non_genai:g} ({names('non_genai')})"
    if verdict == GENAI:
        return f"GenAI: an autoregressive decoder; {text}."
    if verdict == NON_GENAI:
        return f"NonGenAI: {text}."
    if genai:
        return f"Unknown: contradictory structure, {text}."
    return f"Unknown: no structural evidence, {text}."


def _explain(verdict: str, margin: float, confidence: str, signals: list[Signal]) -> str:
    """One sentence naming the decisive evidence: the strongest one or two fired signals of the
    winning side (both sides when they tie)."""
    def gists(sides: tuple[str, ...], limit: int = 2) -> list[str]:
        fired = sorted((s for s in signals if s.side in sides and s.score > 0), key=lambda s: -s.score)
        return [s.gist or s.name.replace("_", " ") for s in fired[:limit]]

    if verdict == UNKNOWN:
        genai, non_genai = gists(("genai",), 1), gists(("non_genai",), 1)
        if not genai and not non_genai:
            return "Unknown: no structural evidence either way (no tokens, image, audio, features or decoder structure)."
        return f"Unknown: the evidence ties, {genai[0]} against {non_genai[0]}."
    side = "genai" if verdict == GENAI else "non_genai"
    return f"{verdict} ({confidence}, margin {margin:g}): {'; also '.join(gists((side,)))}."
