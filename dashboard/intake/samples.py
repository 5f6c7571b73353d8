"""Bundled sample models, built deterministically from ``onnx.helper`` and seeded numpy.

Why generate instead of downloading: the samples must be tiny (they ship with the project), free
of licences, and shaped like the real exports the classifier has to recognise (an
onnxruntime-genai LLM with GroupQueryAttention/MatMulNBits, a CNN, a BERT encoder, a ViT and an
audio encoder). The building blocks here (``GraphBuilder`` and the layer helpers) are also what the
test zoo (``tests/zoo.py``) composes its variants from.

``python -m dashboard.intake.samples OUTDIR`` (``make samples``) writes every sample; the output is
byte-identical from run to run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

from dashboard.errors import UserError

F, I64, I32, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
OPSET = 17  # LayerNormalization is opset 17; old enough for every onnxruntime and QNN build
IR_VERSION = 8
MS = "com.microsoft"
PRODUCER = "qnn-backend-lab"
NEG_INF = float(np.finfo(np.float32).min)  # what exporters use for masked attention scores

Shape = Sequence[int | str | None]


class GraphBuilder:
    """Accumulates one ONNX graph. Nodes get exporter-style names (``/scope/Op``, suffixed when
    repeated) and outputs ``<node>_output_<i>``, so the samples read like real exports."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.scope = ""
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[TensorProto] = []
        self._node_names: set[str] = set()
        self._weight_names: set[str] = set()
        self._consts: dict[tuple, str] = {}

    # graph boundary -------------------------------------------------------------------------
    def input(self, name: str, elem_type: int, shape: Shape | None) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, tensor: str, name: str, elem_type: int, shape: Shape | None) -> str:
        """Expose ``tensor`` as graph output ``name`` (renaming the producer's output in place)."""
        if tensor != name:
            self.rename(tensor, name)
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def rename(self, old: str, new: str) -> None:
        for node in self.nodes:
            for i, value in enumerate(node.output):
                if value == old:
                    node.output[i] = new
            for i, value in enumerate(node.input):
                if value == old:
                    node.input[i] = new

    # weights --------------------------------------------------------------------------------
    def weight(self, name: str, array: np.ndarray) -> str:
        if name in self._weight_names:
            raise ValueError(f"duplicate initializer {name!r}")
        self._weight_names.add(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def randn(self, name: str, shape: Sequence[int], scale: float = 0.02) -> str:
        return self.weight(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def full(self, name: str, shape: Sequence[int], value: float) -> str:
        return self.weight(name, np.full(shape, value, np.float32))

    def const(self, values, dtype=np.int64) -> str:
        """A small shared constant (axes, shapes, scalars); equal constants are stored once."""
        array = np.asarray(values, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.weight(f"const_{len(self._consts)}", array)
        return self._consts[key]

    # nodes ----------------------------------------------------------------------------------
    def op(self, op_type: str, inputs: Sequence[str], outputs: int | Sequence[str] = 1, *,
           name: str | None = None, domain: str = "", **attrs):
        """Add a node; returns its output name, or the list of names when it has several."""
        base = f"{self.scope}/{name or op_type}"
        node_name, k = base, 0
        while node_name in self._node_names:
            k += 1
            node_name = f"{base}_{k}"
        self._node_names.add(node_name)
        outs = [f"{node_name}_output_{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=node_name, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def model(self, *, opset: int = OPSET, extra_opsets: dict[str, int] | None = None,
              ir_version: int = IR_VERSION, doc: str = "") -> ModelProto:
        domains = {n.domain for n in self.nodes} - {"", "ai.onnx"}
        versions = {d: 1 for d in domains} | (extra_opsets or {})
        imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in sorted(versions.items())]
        return helper.make_model(self.graph(), opset_imports=imports, producer_name=PRODUCER,
                                 ir_version=ir_version, doc_string=doc)

    def graph(self) -> onnx.GraphProto:
        """The graph alone (also how control-flow bodies are built)."""
        return helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)


# layer helpers ------------------------------------------------------------------------------

def dim(b: GraphBuilder, tensor: str, axis: int) -> str:
    """1-D [1] int64 tensor holding ``tensor.shape[axis]``."""
    return b.op("Shape", [tensor], start=axis, end=axis + 1)


def scalar(b: GraphBuilder, one_d: str) -> str:
    return b.op("Squeeze", [one_d, b.const([0])])


def linear(b: GraphBuilder, x: str, k: int, n: int, name: str, bias: bool = True) -> str:
    """Float MatMul (+ bias Add), the way torch exports ``nn.Linear`` on 3-D activations."""
    y = b.op("MatMul", [x, b.randn(f"{name}.weight", (k, n))], name=f"{name}/MatMul")
    return b.op("Add", [y, b.randn(f"{name}.bias", (n,))], name=f"{name}/Add") if bias else y


def quantize_4bit(w: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric blockwise int4 quantization of ``w`` [K, N] in MatMulNBits layout:
    B uint8 [N, K/block_size, block_size/2] (low nibble first), scales float [N * K/block_size];
    without zero_points the runtime uses 8."""
    k, n = w.shape
    blocks = w.T.reshape(n, k // block_size, block_size)
    scales = np.abs(blocks).max(axis=2) / 7.0
    scales[scales == 0] = 1.0
    q = np.clip(np.round(blocks / scales[..., None]) + 8, 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    return packed, scales.reshape(-1).astype(np.float32)


def linear_4bit(b: GraphBuilder, x: str, k: int, n: int, name: str, block_size: int = 32) -> str:
    """com.microsoft MatMulNBits: int4 weight-only quantized linear layer (onnxruntime-genai)."""
    packed, scales = quantize_4bit((b.rng.standard_normal((k, n)) * 0.02).astype(np.float32), block_size)
    return b.op("MatMulNBits", [x, b.weight(f"{name}.weight_Q4", packed), b.weight(f"{name}.weight_scales", scales)],
                name=f"{name}/MatMulNBits", domain=MS, K=k, N=n, bits=4, block_size=block_size,
                accuracy_level=4)


def layer_norm(b: GraphBuilder, x: str, hidden: int, name: str) -> str:
    return b.op("LayerNormalization", [x, b.full(f"{name}.weight", (hidden,), 1.0),
                                       b.full(f"{name}.bias", (hidden,), 0.0)],
                name=f"{name}/LayerNorm", axis=-1, epsilon=1e-5)


def gelu(b: GraphBuilder, x: str) -> str:
    """Exact GELU as torch exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    erf = b.op("Erf", [b.op("Div", [x, b.const(math.sqrt(2.0), np.float32)])])
    half = b.op("Mul", [x, b.op("Add", [erf, b.const(1.0, np.float32)])])
    return b.op("Mul", [half, b.const(0.5, np.float32)])


def split_heads(b: GraphBuilder, x: str, heads: int, head_dim: int) -> str:
    """[batch, seq, heads*head_dim] -> [batch, heads, seq, head_dim]."""
    return b.op("Transpose", [b.op("Reshape", [x, b.const([0, 0, heads, head_dim])])], perm=[0, 2, 1, 3])


def merge_heads(b: GraphBuilder, x: str, hidden: int) -> str:
    return b.op("Reshape", [b.op("Transpose", [x], perm=[0, 2, 1, 3]), b.const([0, 0, hidden])])


def padding_mask(b: GraphBuilder, attention_mask: str) -> str:
    """int64 [batch, kv_len] 1/0 mask -> additive float [batch, 1, 1, kv_len] (0 or -inf-ish)."""
    m = b.op("Cast", [b.op("Unsqueeze", [attention_mask, b.const([1, 2])])], to=F)
    return b.op("Mul", [b.op("Sub", [b.const(1.0, np.float32), m]), b.const(NEG_INF, np.float32)])


def attention(b: GraphBuilder, q: str, k: str, v: str, head_dim: int, *, additive_mask: str | None = None,
              bool_mask: str | None = None) -> str:
    """Decomposed scaled dot-product attention on [batch, heads, seq, head_dim] tensors:
    MatMul(Q, K^T) / sqrt(d) (+ mask) -> Softmax -> MatMul(V)."""
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.op("Div", [scores, b.const(math.sqrt(head_dim), np.float32)])
    if bool_mask is not None:
        scores = b.op("Where", [bool_mask, scores, b.const(NEG_INF, np.float32)])
    if additive_mask is not None:
        scores = b.op("Add", [scores, additive_mask])
    return b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])


def encoder_block(b: GraphBuilder, x: str, hidden: int, heads: int, ffn: int, name: str, *,
                  additive_mask: str | None = None, pre_norm: bool = True) -> str:
    """One transformer encoder layer with decomposed attention and an Erf-GELU FFN.
    ``pre_norm``: ViT/Whisper style (LN before each sub-block); else BERT post-LN."""
    head_dim = hidden // heads
    b.scope = f"/{name}/attention"
    h = layer_norm(b, x, hidden, f"{name}.ln_1") if pre_norm else x
    q, k, v = (split_heads(b, linear(b, h, hidden, hidden, f"{name}.attention.{p}"), heads, head_dim)
               for p in ("query", "key", "value"))
    ctx = merge_heads(b, attention(b, q, k, v, head_dim, additive_mask=additive_mask), hidden)
    x = b.op("Add", [x, linear(b, ctx, hidden, hidden, f"{name}.attention.output")])
    if not pre_norm:
        x = layer_norm(b, x, hidden, f"{name}.attention.LayerNorm")
    b.scope = f"/{name}/mlp"
    h = layer_norm(b, x, hidden, f"{name}.ln_2") if pre_norm else x
    h = linear(b, gelu(b, linear(b, h, hidden, ffn, f"{name}.intermediate")), ffn, hidden, f"{name}.output")
    x = b.op("Add", [x, h])
    if not pre_norm:
        x = layer_norm(b, x, hidden, f"{name}.output.LayerNorm")
    b.scope = ""
    return x


def conv(b: GraphBuilder, x: str, cin: int, cout: int, kernel: int, name: str, *, stride: int = 1,
         group: int = 1, bias: bool = True, dims: int = 2) -> str:
    """Conv with 'same'-style padding (2-D image or 1-D audio)."""
    pad = kernel // 2
    shape = (cout, cin // group) + (kernel,) * dims
    scale = 1.0 / math.sqrt(cin // group * kernel ** dims)
    inputs = [x, b.randn(f"{name}.weight", shape, scale)] + ([b.randn(f"{name}.bias", (cout,))] if bias else [])
    return b.op("Conv", inputs, name=f"{name}/Conv", kernel_shape=[kernel] * dims, strides=[stride] * dims,
                pads=[pad] * (2 * dims), group=group)


def conv_bn_relu(b: GraphBuilder, x: str, cin: int, cout: int, kernel: int, name: str, *, stride: int = 1,
                 group: int = 1, batchnorm: bool = True, relu: str = "Relu") -> str:
    """Conv (+ BatchNormalization, as in an unfused torch export) + activation."""
    y = conv(b, x, cin, cout, kernel, name, stride=stride, group=group, bias=not batchnorm)
    if batchnorm:
        y = b.op("BatchNormalization", [y, b.full(f"{name}.bn.weight", (cout,), 1.0),
                                        b.randn(f"{name}.bn.bias", (cout,), 0.1),
                                        b.randn(f"{name}.bn.running_mean", (cout,), 0.1),
                                        b.full(f"{name}.bn.running_var", (cout,), 1.0)],
                 name=f"{name}/BatchNormalization", epsilon=1e-5)
    if relu == "Clip":  # ReLU6 (MobileNet)
        return b.op("Clip", [y, b.const(0.0, np.float32), b.const(6.0, np.float32)], name=f"{name}/Clip")
    return b.op(relu, [y], name=f"{name}/{relu}") if relu else y


def classifier_head(b: GraphBuilder, x: str, channels: int, classes: int, softmax: bool = True) -> str:
    """GlobalAveragePool -> Flatten -> Gemm (-> Softmax)."""
    pooled = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    logits = b.op("Gemm", [pooled, b.randn("fc.weight", (classes, channels)), b.randn("fc.bias", (classes,))],
                  name="fc/Gemm", transB=1)
    return b.op("Softmax", [logits], axis=-1) if softmax else logits


# the bundled samples --------------------------------------------------------------------------

def build_llm_decoder(*, layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
                      ffn: int = 128, vocab: int = 512, max_positions: int = 256, seed: int = 1) -> ModelProto:
    """A Llama/Phi-style decoder laid out like an onnxruntime-genai int4 export: token embedding
    Gather, SimplifiedLayerNormalization then SkipSimplifiedLayerNormalization for the residuals,
    MatMulNBits projections, RotaryEmbedding on Q and K, GroupQueryAttention with a KV cache
    (``past_key_values.N.key/value`` in, ``present.N.key/value`` out), SiLU MLP, int4 lm_head."""
    head_dim = hidden // heads
    b = GraphBuilder("llm_decoder_kv", seed)
    ids = b.input("input_ids", I64, ["batch_size", "sequence_length"])
    mask = b.input("attention_mask", I64, ["batch_size", "total_sequence_length"])
    kv_shape = ["batch_size", kv_heads, "past_sequence_length", head_dim]
    past = [(b.input(f"past_key_values.{i}.key", F, kv_shape), b.input(f"past_key_values.{i}.value", F, kv_shape))
            for i in range(layers)]

    b.scope = "/model/attn_mask_reformat"
    seqlens = b.op("Cast", [b.op("Sub", [b.op("ReduceSum", [mask, b.const([1])], keepdims=0), b.const(1)])], to=I32)
    total = b.op("Cast", [b.op("Gather", [b.op("Shape", [mask]), b.const(1)], axis=0)], to=I32)
    b.scope = "/model/position_ids"
    past_len = scalar(b, dim(b, past[0][0], 2))
    seq_len = scalar(b, dim(b, ids, 1))
    positions = b.op("Range", [past_len, b.op("Add", [past_len, seq_len]), b.const(1)])
    position_ids = b.op("Expand", [b.op("Unsqueeze", [positions, b.const([0])]), b.op("Shape", [ids])])
    inv_freq = 1.0 / (10000 ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    angles = np.outer(np.arange(max_positions, dtype=np.float64), inv_freq)
    cos = b.weight("cos_cache", np.cos(angles).astype(np.float32))
    sin = b.weight("sin_cache", np.sin(angles).astype(np.float32))

    b.scope = "/model/embed_tokens"
    x = b.op("Gather", [b.randn("model.embed_tokens.weight", (vocab, hidden)), ids], axis=0)
    b.scope = "/model/layers.0/input_layernorm"
    h = b.op("SimplifiedLayerNormalization", [x, b.full("model.layers.0.input_layernorm.weight", (hidden,), 1.0)],
             axis=-1, epsilon=1e-5, stash_type=1)
    residual = x
    for i in range(layers):
        p = f"model.layers.{i}"
        b.scope = f"/model/layers.{i}/attn"
        q = linear_4bit(b, h, hidden, hidden, f"{p}.attn.q_proj")
        k = linear_4bit(b, h, hidden, kv_heads * head_dim, f"{p}.attn.k_proj")
        v = linear_4bit(b, h, hidden, kv_heads * head_dim, f"{p}.attn.v_proj")
        q = b.op("RotaryEmbedding", [q, position_ids, cos, sin], name="q_rotary/RotaryEmbedding", domain=MS,
                 num_heads=heads, interleaved=0)
        k = b.op("RotaryEmbedding", [k, position_ids, cos, sin], name="k_rotary/RotaryEmbedding", domain=MS,
                 num_heads=kv_heads, interleaved=0)
        attn, present_k, present_v = b.op(
            "GroupQueryAttention", [q, k, v, past[i][0], past[i][1], seqlens, total], 3, domain=MS,
            name="GroupQueryAttention", num_heads=heads, kv_num_heads=kv_heads, scale=1.0 / math.sqrt(head_dim))
        b.output(present_k, f"present.{i}.key", F, ["batch_size", kv_heads, "total_sequence_length", head_dim])
        b.output(present_v, f"present.{i}.value", F, ["batch_size", kv_heads, "total_sequence_length", head_dim])
        o = linear_4bit(b, attn, hidden, hidden, f"{p}.attn.o_proj")
        b.scope = f"/model/layers.{i}/post_attention_layernorm"
        h, _, _, residual = b.op("SkipSimplifiedLayerNormalization",
                                 [o, residual, b.full(f"{p}.post_attention_layernorm.weight", (hidden,), 1.0)],
                                 [f"{b.scope}/output_0", "", "", f"{b.scope}/output_3"], domain=MS, epsilon=1e-5)
        b.scope = f"/model/layers.{i}/mlp"
        gate = linear_4bit(b, h, hidden, ffn, f"{p}.mlp.gate_proj")
        up = linear_4bit(b, h, hidden, ffn, f"{p}.mlp.up_proj")
        act = b.op("Mul", [b.op("Mul", [gate, b.op("Sigmoid", [gate])]), up])
        down = linear_4bit(b, act, ffn, hidden, f"{p}.mlp.down_proj", block_size=32)
        last = i == layers - 1
        norm = "model.norm" if last else f"model.layers.{i + 1}.input_layernorm"
        b.scope = "/model/norm" if last else f"/model/layers.{i + 1}/input_layernorm"
        h, _, _, residual = b.op("SkipSimplifiedLayerNormalization", [down, residual, b.full(f"{norm}.weight",
                                                                                           (hidden,), 1.0)],
                                 [f"{b.scope}/output_0", "", "", f"{b.scope}/output_3"], domain=MS, epsilon=1e-5)
    b.scope = "/lm_head"
    logits = linear_4bit(b, h, hidden, vocab, "lm_head")
    b.output(logits, "logits", F, ["batch_size", "sequence_length", vocab])
    _drop_unused_outputs(b)
    b.outputs.insert(0, b.outputs.pop())  # logits first, as onnxruntime-genai lists them
    return b.model(doc="Tiny onnxruntime-genai style int4 decoder with GroupQueryAttention and a KV cache.")


def _drop_unused_outputs(b: GraphBuilder) -> None:
    """Blank optional node outputs nothing reads (the residual sum of the last Skip*Norm), as
    exporters do, so no dangling tensors stay in the graph."""
    used = {i for n in b.nodes for i in n.input} | {o.name for o in b.outputs}
    for node in b.nodes:
        if node.op_type.startswith("Skip"):
            for i in range(1, len(node.output)):
                if node.output[i] not in used:
                    node.output[i] = ""
            while node.output and node.output[-1] == "":
                node.output.pop()


def build_cnn_classifier(*, size: int | str = 224, channels: Sequence[int] = (8, 16, 16, 32), classes: int = 10,
                         batchnorm: bool = True, softmax: bool = True, seed: int = 2,
                         name: str = "cnn_classifier") -> ModelProto:
    """A small image classifier: stride-2 Conv+BatchNormalization+Relu blocks, then
    GlobalAveragePool, Flatten, Gemm and Softmax. Static [1, 3, size, size] input unless ``size`` is
    a string, which makes the input ``batch x 3 x H x W`` symbolic."""
    b = GraphBuilder(name, seed)
    shape = [1, 3, size, size] if isinstance(size, int) else ["batch", 3, "height", "width"]
    x = b.input("input", F, shape)
    cin = 3
    for i, cout in enumerate(channels):
        b.scope = f"/features.{i}"
        x = conv_bn_relu(b, x, cin, cout, 3, f"features.{i}", stride=2, batchnorm=batchnorm)
        cin = cout
    b.scope = "/classifier"
    probs = classifier_head(b, x, cin, classes, softmax)
    b.output(probs, "probabilities" if softmax else "logits", F, [shape[0], classes])
    return b.model(doc="Small CNN image classifier (Conv+BN+Relu, GAP, Gemm, Softmax).")


def text_embeddings(b: GraphBuilder, ids: str, token_types: str | None, hidden: int, vocab: int,
                    max_positions: int) -> str:
    """BERT embeddings: word + position (+ token type) Gathers, summed, then LayerNorm."""
    b.scope = "/embeddings"
    x = b.op("Gather", [b.randn("embeddings.word_embeddings.weight", (vocab, hidden)), ids], axis=0)
    positions = b.op("Range", [b.const(0), scalar(b, dim(b, ids, 1)), b.const(1)])
    pos = b.op("Gather", [b.randn("embeddings.position_embeddings.weight", (max_positions, hidden)), positions],
               axis=0)
    x = b.op("Add", [x, pos])
    if token_types is not None:
        x = b.op("Add", [x, b.op("Gather", [b.randn("embeddings.token_type_embeddings.weight", (2, hidden)),
                                            token_types], axis=0)])
    x = layer_norm(b, x, hidden, "embeddings.LayerNorm")
    b.scope = ""
    return x


def build_text_encoder(*, layers: int = 2, hidden: int = 64, heads: int = 4, ffn: int = 128, vocab: int = 1000,
                       max_positions: int = 128, token_type_ids: bool = True, seed: int = 3,
                       name: str = "text_encoder") -> ModelProto:
    """A BERT/MiniLM sentence encoder: ``input_ids``, ``attention_mask``, ``token_type_ids``;
    word/position/type embeddings, post-LN layers with decomposed attention and an Erf-GELU FFN;
    outputs ``last_hidden_state`` and a tanh ``pooler_output`` over the [CLS] token."""
    b = GraphBuilder(name, seed)
    dims = ["batch_size", "sequence_length"]
    ids = b.input("input_ids", I64, dims)
    mask = b.input("attention_mask", I64, dims)
    types = b.input("token_type_ids", I64, dims) if token_type_ids else None
    x = text_embeddings(b, ids, types, hidden, vocab, max_positions)
    b.scope = "/extended_attention_mask"
    additive = padding_mask(b, mask)
    for i in range(layers):
        x = encoder_block(b, x, hidden, heads, ffn, f"encoder.layer.{i}", additive_mask=additive, pre_norm=False)
    b.scope = "/pooler"
    cls = b.op("Gather", [x, b.const(0)], axis=1)
    pooled = b.op("Tanh", [linear(b, cls, hidden, hidden, "pooler.dense")])
    b.output(x, "last_hidden_state", F, dims + [hidden])
    b.output(pooled, "pooler_output", F, ["batch_size", hidden])
    return b.model(doc="Tiny BERT/MiniLM-style text encoder.")


def build_vit_classifier(*, layers: int = 2, hidden: int = 64, heads: int = 4, ffn: int = 128, patch: int = 16,
                         size: int = 224, classes: int = 1000, seed: int = 4) -> ModelProto:
    """A ViT image classifier: patch-embedding Conv (stride == kernel), [CLS] token and learned
    position embeddings, pre-LN transformer blocks, final LayerNorm, linear head on [CLS]."""
    b = GraphBuilder("vit_classifier", seed)
    x = b.input("pixel_values", F, ["batch_size", 3, size, size])
    tokens = (size // patch) ** 2
    b.scope = "/embeddings/patch_embeddings"
    x = b.op("Conv", [x, b.randn("embeddings.patch_embeddings.projection.weight", (hidden, 3, patch, patch)),
                      b.randn("embeddings.patch_embeddings.projection.bias", (hidden,))],
             name="projection/Conv", kernel_shape=[patch, patch], strides=[patch, patch])
    x = b.op("Transpose", [b.op("Reshape", [x, b.const([0, hidden, -1])])], perm=[0, 2, 1])
    b.scope = "/embeddings"
    batch = dim(b, x, 0)
    cls = b.op("Expand", [b.randn("embeddings.cls_token", (1, 1, hidden)),
                          b.op("Concat", [batch, b.const([1, hidden])], axis=0)])
    x = b.op("Concat", [cls, x], axis=1)
    x = b.op("Add", [x, b.randn("embeddings.position_embeddings", (1, tokens + 1, hidden))])
    for i in range(layers):
        x = encoder_block(b, x, hidden, heads, ffn, f"encoder.layer.{i}")
    b.scope = ""
    x = layer_norm(b, x, hidden, "layernorm")
    cls_out = b.op("Gather", [x, b.const(0)], axis=1)
    logits = b.op("Gemm", [cls_out, b.randn("classifier.weight", (classes, hidden)),
                           b.randn("classifier.bias", (classes,))], name="classifier/Gemm", transB=1)
    b.output(logits, "logits", F, ["batch_size", classes])
    return b.model(doc="Tiny ViT image classifier (patch Conv, LayerNorm-heavy transformer).")


def build_audio_encoder(*, layers: int = 2, hidden: int = 64, heads: int = 4, ffn: int = 128, mels: int = 80,
                        max_frames: int = 1500, seed: int = 5) -> ModelProto:
    """A Whisper-style audio encoder: float log-mel input [batch, 80, frames], two Conv1d+GELU
    stem layers (the second with stride 2), sinusoid-free learned positions sliced to length,
    pre-LN transformer blocks and a final LayerNorm."""
    b = GraphBuilder("audio_encoder", seed)
    x = b.input("input_features", F, ["batch_size", mels, "frames"])
    b.scope = "/conv1"
    x = gelu(b, conv(b, x, mels, hidden, 3, "conv1", dims=1))
    b.scope = "/conv2"
    x = gelu(b, conv(b, x, hidden, hidden, 3, "conv2", stride=2, dims=1))
    b.scope = "/embed_positions"
    x = b.op("Transpose", [x], perm=[0, 2, 1])
    positions = b.op("Slice", [b.randn("embed_positions.weight", (max_frames, hidden)), b.const([0]),
                               dim(b, x, 1), b.const([0])])
    x = b.op("Add", [x, positions])
    for i in range(layers):
        x = encoder_block(b, x, hidden, heads, ffn, f"layers.{i}")
    x = layer_norm(b, x, hidden, "layer_norm")
    b.output(x, "last_hidden_state", F, ["batch_size", "encoder_frames", hidden])
    return b.model(doc="Tiny Whisper-style audio encoder (log-mel input, Conv1d stem, transformer).")


# The benchmark decoder (``build_decoder``): what one block adds, and the embedding/mask/head around them.
BENCH_HIDDEN, BENCH_HEADS, BENCH_VOCAB, BENCH_POSITIONS = 64, 4, 1000, 2048
NODES_PER_LAYER, BASE_NODES = 34, 17


def build_decoder(nodes: int, hidden: int = BENCH_HIDDEN) -> onnx.ModelProto:
    """A GPT-2-style decoder with about ``nodes`` nodes: per layer LayerNorm, fused QKV projection,
    KV-cache Concat (``past_key_values.N.*`` -> ``present.N.*``), decomposed attention under a
    Trilu causal mask, GELU MLP; tied lm_head. ``hidden`` (a multiple of 4) sets the weights:
    about ``48 * hidden**2`` bytes per layer, so a small one gives a node-heavy graph and a large
    one a weight-heavy file."""
    layers = max(1, round((nodes - BASE_NODES) / NODES_PER_LAYER))
    head_dim = hidden // BENCH_HEADS
    b = GraphBuilder("bench_decoder", 7)
    ids = b.input("input_ids", I64, ["batch_size", "sequence_length"])
    kv_shape = ["batch_size", BENCH_HEADS, "past_sequence_length", head_dim]
    total_shape = ["batch_size", BENCH_HEADS, "total_sequence_length", head_dim]
    past = [(b.input(f"past_key_values.{i}.key", F, kv_shape), b.input(f"past_key_values.{i}.value", F, kv_shape))
            for i in range(layers)]
    b.scope = "/transformer"
    seq, past_len = dim(b, ids, 1), dim(b, past[0][0], 2)
    total = b.op("Add", [past_len, seq])
    wte = b.randn("transformer.wte.weight", (BENCH_VOCAB, hidden))
    positions = b.op("Range", [scalar(b, past_len), scalar(b, total), b.const(1)])
    x = b.op("Add", [b.op("Gather", [wte, ids], axis=0),
                     b.op("Gather", [b.randn("transformer.wpe.weight", (BENCH_POSITIONS, hidden)), positions], axis=0)])
    ones = b.op("ConstantOfShape", [b.op("Concat", [seq, total], axis=0)],
                value=onnx.helper.make_tensor("value", F, [1], [1.0]))
    allowed = b.op("Cast", [b.op("Trilu", [ones, scalar(b, past_len)], upper=0)], to=onnx.TensorProto.BOOL)
    for i in range(layers):
        p = f"transformer.h.{i}"
        b.scope = f"/transformer/h.{i}/attn"
        qkv = linear(b, layer_norm(b, x, hidden, f"{p}.ln_1"), hidden, 3 * hidden, f"{p}.attn.c_attn")
        q, k, v = (split_heads(b, t, BENCH_HEADS, head_dim) for t in b.op("Split", [qkv, b.const([hidden] * 3)], 3, axis=-1))
        k = b.op("Concat", [past[i][0], k], [f"present.{i}.key"], axis=2)
        v = b.op("Concat", [past[i][1], v], [f"present.{i}.value"], axis=2)
        b.output(k, k, F, total_shape)
        b.output(v, v, F, total_shape)
        ctx = merge_heads(b, attention(b, q, k, v, head_dim, bool_mask=allowed), hidden)
        x = b.op("Add", [x, linear(b, ctx, hidden, hidden, f"{p}.attn.c_proj")])
        b.scope = f"/transformer/h.{i}/mlp"
        h = linear(b, layer_norm(b, x, hidden, f"{p}.ln_2"), hidden, 4 * hidden, f"{p}.mlp.c_fc")
        x = b.op("Add", [x, linear(b, gelu(b, h), 4 * hidden, hidden, f"{p}.mlp.c_proj")])
    b.scope = "/lm_head"
    logits = b.op("MatMul", [layer_norm(b, x, hidden, "transformer.ln_f"), b.op("Transpose", [wte], perm=[1, 0])],
                  ["logits"])
    b.output(logits, logits, F, ["batch_size", "sequence_length", BENCH_VOCAB])
    b.outputs.insert(0, b.outputs.pop())
    return b.model(doc="Benchmark decoder generated by `python -m dashboard bench`.")


@dataclass(frozen=True)
class Sample:
    """One bundled sample, as the UI's picker lists it."""

    file_name: str
    title: str
    description: str
    kind: str  # "genai-decoder", "vision", "text-encoder", "audio"
    build: Callable[[], ModelProto]


SAMPLES: list[Sample] = [
    Sample("llm_decoder_kv.onnx", "LLM decoder with KV cache (int4, GQA)",
           "onnxruntime-genai style: GroupQueryAttention, MatMulNBits, RotaryEmbedding, past/present KV cache",
           "genai-decoder", build_llm_decoder),
    Sample("cnn_classifier.onnx", "CNN image classifier (224x224)",
           "Conv+BatchNorm+Relu blocks, GlobalAveragePool, Gemm, Softmax; static shapes", "vision",
           build_cnn_classifier),
    Sample("text_encoder.onnx", "BERT/MiniLM text encoder",
           "input_ids, attention_mask, token_type_ids; decomposed attention, LayerNorm, GELU", "text-encoder",
           build_text_encoder),
    Sample("vit_classifier.onnx", "ViT image classifier",
           "patch Conv (stride = kernel), LayerNorm-heavy transformer, 224x224 input", "vision",
           build_vit_classifier),
    Sample("audio_encoder.onnx", "Whisper-style audio encoder",
           "log-mel input [batch, 80, frames], Conv1d stem, transformer blocks", "audio", build_audio_encoder),
]

_PACKAGE = Path(__file__).resolve().parents[1]
# An installed package ships the samples inside it (dashboard/samples/); a checkout keeps them in
# samples/ beside the package, where they are rebuilt if missing.
SAMPLES_DIR = _PACKAGE / "samples" if (_PACKAGE / "samples").is_dir() else _PACKAGE.parent / "samples"


def sample_bytes(sample: Sample) -> bytes:
    return sample.build().SerializeToString()


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; samples are meant to be read by anyone
    os.replace(tmp, path)


def sample_path(file_name: str) -> Path:
    """Path of a bundled sample; rebuilt into ``samples/`` if a checkout lacks the file."""
    sample = next((s for s in SAMPLES if s.file_name == file_name), None)
    if sample is None:
        raise UserError(f"unknown sample {file_name!r}; known: {', '.join(s.file_name for s in SAMPLES)}")
    path = SAMPLES_DIR / file_name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, sample_bytes(sample))
    return path


def write_samples(outdir: str | os.PathLike) -> list[Path]:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for sample in SAMPLES:
        path = out / sample.file_name
        _write_atomic(path, sample_bytes(sample))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.intake.samples", description="write the bundled samples")
    parser.add_argument("outdir", nargs="?", default=str(SAMPLES_DIR))
    args = parser.parse_args(argv)
    for path in write_samples(args.outdir):
        print(f"{path}  {path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
