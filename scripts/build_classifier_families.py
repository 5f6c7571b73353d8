"""Build the hand-written members of issue 20's classifier families with onnx.helper into
``tests/data/families/built_*.onnx`` (committed; the project venv is enough, no torch):

    python scripts/build_classifier_families.py

The exporters cover most members (``scripts/export_classifier_families.py``); these are the graph
patterns people write by hand or that other toolchains emit: causal masks built from a
``position_ids`` input, from a CumSum of the attention mask, from a Range compared with its own
transpose, or a Trilu of -inf added to the scores; a Mamba-2-style step with 4-D SSM states named
``*_out``; a Transformer-TTS decoder with a KV cache; a CLIP-like text encoder that mean-pools;
and two negatives: an encoder with a bidirectional sliding-window mask computed from positions,
and a recurrent-memory text encoder whose memory comes back out but which outputs a pooled class.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard.intake.samples import (BOOL, I64, F, GraphBuilder, attention, dim, gelu, layer_norm,  # noqa: E402
                                      linear, merge_heads, scalar, split_heads)

OUT = ROOT / "tests" / "data" / "families"
VOCAB, D, HEADS = 300, 32, 2
NEG_INF = -1e9


def _scores_mask(b: GraphBuilder, kind: str, ids: str, positions: str | None, amask: str | None):
    """(bool mask or None, additive mask or None) on [seq, seq] / [batch, 1, seq, seq]."""
    seq = dim(b, ids, 1)
    if kind == "position_ids":  # query position >= key position, from the positions the caller passes
        query = b.op("Unsqueeze", [positions, b.const([2])])
        key = b.op("Unsqueeze", [positions, b.const([1])])
        return b.op("Unsqueeze", [b.op("LessOrEqual", [key, query]), b.const([1])]), None
    if kind == "cumsum":  # positions counted from the attention mask, mask as 0 / -inf
        pos = b.op("Sub", [b.op("CumSum", [amask, b.const(1)]), b.const(1)])
        allowed = b.op("GreaterOrEqual", [b.op("Unsqueeze", [pos, b.const([2])]),
                                          b.op("Unsqueeze", [pos, b.const([1])])])
        additive = b.op("Where", [allowed, b.const(0.0, np.float32), b.const(NEG_INF, np.float32)])
        return None, b.op("Unsqueeze", [additive, b.const([1])])
    if kind == "range_transpose":  # a column of positions against its transpose, blocked above the diagonal
        column = b.op("Unsqueeze", [b.op("Range", [b.const(0), scalar(b, seq), b.const(1)]), b.const([1])])
        square = b.op("Expand", [column, b.op("Concat", [seq, seq], axis=0)])
        blocked = b.op("Greater", [b.op("Transpose", [square], perm=[1, 0]), square])
        return None, b.op("Where", [blocked, b.const(NEG_INF, np.float32), b.const(0.0, np.float32)])
    if kind == "trilu_add":  # -inf above the diagonal, added to the scores
        full = b.op("ConstantOfShape", [b.op("Concat", [seq, seq], axis=0)],
                    value=helper.make_tensor("value", F, [1], [NEG_INF]))
        return None, b.op("Trilu", [full, b.const(1)], upper=1)
    if kind == "window":  # bidirectional: |i - j| <= 2, no causality
        r = b.op("Range", [b.const(0), scalar(b, seq), b.const(1)])
        distance = b.op("Abs", [b.op("Sub", [b.op("Unsqueeze", [r, b.const([0])]),
                                            b.op("Unsqueeze", [r, b.const([1])])])])
        return b.op("LessOrEqual", [distance, b.const(2)]), None
    raise ValueError(kind)


def _blocks(b: GraphBuilder, x: str, layers: int, bool_mask, additive, prefix: str) -> str:
    head_dim = D // HEADS
    for i in range(layers):
        p = f"{prefix}.{i}"
        b.scope = f"/{prefix}.{i}/attn"
        h = layer_norm(b, x, D, f"{p}.ln_1")
        q, k, v = (split_heads(b, linear(b, h, D, D, f"{p}.{n}"), HEADS, head_dim) for n in ("q", "k", "v"))
        ctx = merge_heads(b, attention(b, q, k, v, head_dim, bool_mask=bool_mask, additive_mask=additive), D)
        x = b.op("Add", [x, linear(b, ctx, D, D, f"{p}.o")])
        b.scope = f"/{prefix}.{i}/mlp"
        x = b.op("Add", [x, linear(b, gelu(b, linear(b, layer_norm(b, x, D, f"{p}.ln_2"), D, 64, f"{p}.fc")), 64,
                                   D, f"{p}.proj")])
    b.scope = ""
    return x


def lm(mask: str, seed: int) -> onnx.ModelProto:
    """A decoder-only LM without a cache whose causal mask is built by ``mask``; logits tied to the
    token embedding."""
    b = GraphBuilder(f"lm_{mask}", seed)
    ids = b.input("input_ids", I64, ["batch", "sequence"])
    positions = b.input("position_ids", I64, ["batch", "sequence"]) if mask == "position_ids" else None
    amask = b.input("attention_mask", I64, ["batch", "sequence"]) if mask == "cumsum" else None
    wte = b.randn("embed_tokens.weight", (VOCAB, D))
    x = b.op("Gather", [wte, ids], axis=0)
    bool_mask, additive = _scores_mask(b, mask, ids, positions, amask)
    x = layer_norm(b, _blocks(b, x, 2, bool_mask, additive, "layers"), D, "norm")
    b.output(b.op("MatMul", [x, b.op("Transpose", [wte], perm=[1, 0])]), "logits", F, ["batch", "sequence", VOCAB])
    return b.model()


def causal_text_encoder_mean_pool() -> onnx.ModelProto:
    """A CLIP-like text tower (causal mask from Trilu) that mean-pools over the attention mask and
    L2-normalises: a sentence embedding out, no logits."""
    b = GraphBuilder("causal_text_encoder", 31)
    ids = b.input("input_ids", I64, ["batch", "sequence"])
    amask = b.input("attention_mask", I64, ["batch", "sequence"])
    x = b.op("Gather", [b.randn("token_embedding.weight", (VOCAB, D)), ids], axis=0)
    seq = dim(b, ids, 1)
    ones = b.op("ConstantOfShape", [b.op("Concat", [seq, seq], axis=0)],
                value=helper.make_tensor("value", F, [1], [1.0]))
    causal = b.op("Cast", [b.op("Trilu", [ones], upper=0)], to=BOOL)
    x = layer_norm(b, _blocks(b, x, 2, causal, None, "encoder.layers"), D, "final_layer_norm")
    weights = b.op("Cast", [b.op("Unsqueeze", [amask, b.const([2])])], to=F)
    pooled = b.op("Div", [b.op("ReduceSum", [b.op("Mul", [x, weights]), b.const([1])], keepdims=0),
                          b.op("ReduceSum", [weights, b.const([1])], keepdims=0)])
    b.output(b.op("LpNormalization", [linear(b, pooled, D, 24, "text_projection", bias=False)], axis=-1, p=2),
             "sentence_embedding", F, ["batch", 24])
    return b.model()


def windowed_encoder() -> onnx.ModelProto:
    """A bidirectional local-attention encoder: positions from Range compared, but |i - j| <= 2,
    not i >= j; per-token hidden states and a pooled first token out."""
    b = GraphBuilder("windowed_encoder", 32)
    ids = b.input("input_ids", I64, ["batch", "sequence"])
    x = b.op("Gather", [b.randn("embeddings.word_embeddings.weight", (VOCAB, D)), ids], axis=0)
    bool_mask, _ = _scores_mask(b, "window", ids, None, None)
    x = layer_norm(b, _blocks(b, x, 2, bool_mask, None, "encoder.layer"), D, "final_norm")
    x = b.output(x, "last_hidden_state", F, ["batch", "sequence", D])
    first = b.op("Gather", [x, b.const(0)], axis=1)
    b.output(b.op("Tanh", [linear(b, first, D, D, "pooler.dense")]), "pooler_output", F, ["batch", D])
    return b.model()


def memory_text_encoder() -> onnx.ModelProto:
    """A recurrent-memory text classifier (RMT-style): token ids and a memory [batch, slots, D] in,
    the updated memory and class scores out. Its memory comes back out like a step state, but it
    outputs a pooled class, not logits over its token vocabulary."""
    b = GraphBuilder("memory_text_encoder", 33)
    ids = b.input("input_ids", I64, ["batch", "sequence"])
    memory = b.input("memory", F, ["batch", 4, D])
    x = b.op("Gather", [b.randn("embeddings.weight", (VOCAB, D)), ids], axis=0)
    x = b.op("Concat", [memory, x], axis=1)
    x = layer_norm(b, _blocks(b, x, 2, None, None, "encoder.layer"), D, "final_norm")
    b.output(b.op("Slice", [x, b.const([0]), b.const([4]), b.const([1])]), "memory_out", F, ["batch", 4, D])
    pooled = b.op("ReduceMean", [x], axes=[1], keepdims=0)
    b.output(linear(b, pooled, D, 4, "classifier"), "class_logits", F, ["batch", 4])
    return b.model()


def mamba2_step() -> onnx.ModelProto:
    """A Mamba-2-style LM step: one token, per layer a conv state [batch, channels, 3] and a 4-D SSM
    state [batch, heads, head_dim, d_state] in, logits and ``*_out`` states out."""
    b = GraphBuilder("mamba2_step", 34)
    layers, heads, head_dim, d_state, k = 2, 4, 16, 8, 4
    inner = heads * head_dim
    ids = b.input("input_ids", I64, ["batch", 1])
    wte = b.randn("backbone.embeddings.weight", (VOCAB, D))
    x = b.op("Squeeze", [b.op("Gather", [wte, ids], axis=0), b.const([1])])
    for i in range(layers):
        b.scope = f"/backbone/layers.{i}/mixer"
        conv = b.input(f"conv_state_{i}", F, ["batch", inner, k - 1])
        ssm = b.input(f"ssm_state_{i}", F, ["batch", heads, head_dim, d_state])
        xs, z = b.op("Split", [linear(b, x, D, 2 * inner, f"layers.{i}.in_proj", bias=False), b.const([inner, inner])],
                     2, axis=-1)
        window = b.op("Concat", [conv, b.op("Unsqueeze", [xs, b.const([2])])], axis=2)
        b.output(b.op("Slice", [window, b.const([1]), b.const([k]), b.const([2])]), f"conv_state_{i}_out", F,
                 ["batch", inner, k - 1])
        xs = b.op("ReduceSum", [b.op("Mul", [window, b.randn(f"layers.{i}.conv1d.weight", (inner, k))]),
                                b.const([2])], keepdims=0)
        xs = b.op("Mul", [xs, b.op("Sigmoid", [xs])])
        bc = linear(b, xs, inner, 2 * d_state + heads, f"layers.{i}.bc_proj", bias=False)
        bm, cm, dt = b.op("Split", [bc, b.const([d_state, d_state, heads])], 3, axis=-1)
        dt = b.op("Softplus", [dt])
        decay = b.op("Exp", [b.op("Mul", [dt, b.randn(f"layers.{i}.A", (heads,))])])
        decay = b.op("Unsqueeze", [decay, b.const([2, 3])])
        xh = b.op("Reshape", [xs, b.const([0, heads, head_dim, 1])])
        update = b.op("Mul", [xh, b.op("Unsqueeze", [bm, b.const([1, 2])])])
        state = b.op("Add", [b.op("Mul", [ssm, decay]), update])
        state = b.output(state, f"ssm_state_{i}_out", F, ["batch", heads, head_dim, d_state])
        y = b.op("ReduceSum", [b.op("Mul", [state, b.op("Unsqueeze", [cm, b.const([1, 2])])]), b.const([3])],
                 keepdims=0)
        y = b.op("Mul", [b.op("Reshape", [y, b.const([0, inner])]), b.op("Sigmoid", [z])])
        x = b.op("Add", [x, linear(b, y, inner, D, f"layers.{i}.out_proj", bias=False)])
    b.scope = ""
    logits = b.op("MatMul", [layer_norm(b, x, D, "norm_f"), b.op("Transpose", [wte], perm=[1, 0])])
    b.output(logits, "logits", F, ["batch", VOCAB])
    b.outputs.insert(0, b.outputs.pop())
    return b.model()


def transformer_tts_decoder() -> onnx.ModelProto:
    """A Transformer-TTS decoder step: the last mel frame through a prenet, self-attention over a
    KV cache (``cache_in_k_N`` -> ``cache_out_k_N``), attention over the encoder ``memory``; the next
    mel frame and a stop logit out."""
    b = GraphBuilder("transformer_tts_decoder", 35)
    mels, head_dim = 80, D // HEADS
    frame = b.input("mel_in", F, ["batch", 1, mels])
    memory = b.input("memory", F, ["batch", "text_len", D])
    x = linear(b, b.op("Relu", [linear(b, frame, mels, 64, "prenet.0")]), 64, D, "prenet.1")
    for i in range(2):
        b.scope = f"/decoder/layers.{i}"
        cache_shape = ["batch", HEADS, "past", head_dim]
        past_k, past_v = b.input(f"cache_in_k_{i}", F, cache_shape), b.input(f"cache_in_v_{i}", F, cache_shape)
        q, k, v = (split_heads(b, linear(b, x, D, D, f"layers.{i}.self.{n}"), HEADS, head_dim) for n in "qkv")
        k = b.output(b.op("Concat", [past_k, k], axis=2), f"cache_out_k_{i}", F, ["batch", HEADS, "total", head_dim])
        v = b.output(b.op("Concat", [past_v, v], axis=2), f"cache_out_v_{i}", F, ["batch", HEADS, "total", head_dim])
        x = layer_norm(b, b.op("Add", [x, linear(b, merge_heads(b, attention(b, q, k, v, head_dim), D), D, D,
                                                 f"layers.{i}.self.o")]), D, f"layers.{i}.ln1")
        q = split_heads(b, linear(b, x, D, D, f"layers.{i}.cross.q"), HEADS, head_dim)
        mk, mv = (split_heads(b, linear(b, memory, D, D, f"layers.{i}.cross.{n}"), HEADS, head_dim) for n in "kv")
        x = layer_norm(b, b.op("Add", [x, linear(b, merge_heads(b, attention(b, q, mk, mv, head_dim), D), D, D,
                                                 f"layers.{i}.cross.o")]), D, f"layers.{i}.ln2")
    b.scope = ""
    b.output(linear(b, x, D, mels, "mel_linear"), "mel_out", F, ["batch", 1, mels])
    b.output(linear(b, x, D, 1, "stop_linear"), "stop_logit", F, ["batch", 1, 1])
    b.outputs.insert(0, b.outputs.pop())
    b.outputs.insert(0, b.outputs.pop())
    return b.model()


BUILDERS = {
    "built_lm_mask_from_position_ids.onnx": lambda: lm("position_ids", 21),
    "built_lm_mask_trilu_float_add.onnx": lambda: lm("trilu_add", 22),
    "built_lm_mask_cumsum_positions.onnx": lambda: lm("cumsum", 23),
    "built_lm_mask_range_transpose.onnx": lambda: lm("range_transpose", 24),
    "built_causal_text_encoder_mean_pool.onnx": causal_text_encoder_mean_pool,
    "built_windowed_encoder.onnx": windowed_encoder,
    "built_memory_text_encoder.onnx": memory_text_encoder,
    "built_mamba2_step_4d_state.onnx": mamba2_step,
    "built_transformer_tts_decoder_kv.onnx": transformer_tts_decoder,
}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        model = build()
        onnx.checker.check_model(model)
        onnx.save(model, OUT / name)
        print(f"{name}: {(OUT / name).stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
