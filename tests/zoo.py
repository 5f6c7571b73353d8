"""Test model zoo: small ONNX graphs shaped like the real exports the classifiers meet.

Every builder returns an ``onnx.ModelProto`` (weights are tiny and seeded, so builds are
deterministic) and is registered in ``ZOO`` with what a *correct* classifier must answer for it
(``expected``): ``GenAI`` for autoregressive decoders (the models GPU routing is meant for),
``NonGenAI`` for encoders, vision, audio, tabular and recurrent models, ``Unknown`` only where the
evidence is genuinely absent. The EP rules get several of them wrong on purpose; each docstring
says how. ``save(model, dir)`` writes one to ``dir/<name>.onnx``.

Torch-exported models (made by ``tests/data/make_torch_models.py``, committed) are listed in
``TORCH_MODELS`` with their expected verdicts; ``data_path(name)`` finds them.

The builders reuse the layer helpers of ``dashboard.intake.samples`` (``GraphBuilder`` and friends).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import ModelProto, helper

from dashboard.intake.samples import (BOOL, I32, I64, MS, F, GraphBuilder, attention, build_audio_encoder,
                                      build_cnn_classifier, build_llm_decoder, build_text_encoder, build_vit_classifier,
                                      classifier_head, conv, conv_bn_relu, dim, encoder_block, gelu, layer_norm, linear,
                                      linear_4bit, merge_heads, padding_mask, scalar, split_heads, text_embeddings)

GENAI, NON_GENAI, UNKNOWN = "GenAI", "NonGenAI", "Unknown"
DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class ZooModel:
    name: str
    build: Callable[[], ModelProto]
    expected: str  # what a correct (refined) classifier must say
    doc: str


ZOO: dict[str, ZooModel] = {}


def _register(expected: str):
    """Register a builder under its function name; the model's graph is named the same, so
    ``save`` writes ``<name>.onnx``."""

    def wrap(func: Callable[..., ModelProto]) -> Callable[..., ModelProto]:
        def build(**kwargs) -> ModelProto:
            model = func(**kwargs)
            model.graph.name = func.__name__
            return model

        build.__name__, build.__doc__, build.__wrapped__ = func.__name__, func.__doc__, func
        ZOO[func.__name__] = ZooModel(func.__name__, build, expected, " ".join((func.__doc__ or "").split()))
        return build

    return wrap


def save(model: ModelProto, directory: str | Path, name: str | None = None) -> Path:
    """Write ``model`` to ``directory/<name or graph name>.onnx`` and return the path."""
    path = Path(directory) / f"{name or model.graph.name or 'model'}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def data_path(file_name: str) -> Path:
    return DATA_DIR / file_name


# Torch exports in tests/data (see make_torch_models.py) and what a correct classifier says.
TORCH_MODELS: dict[str, str] = {
    "torch_gpt2_kv.onnx": GENAI,
    "torch_gpt2_kv_dynamo.onnx": GENAI,
    "torch_bert_encoder.onnx": NON_GENAI,
    "torch_cnn.onnx": NON_GENAI,
}


_SLN_REGISTERED = False


def check(model: ModelProto) -> None:
    """``onnx.checker.check_model`` that also knows onnxruntime's SimplifiedLayerNormalization,
    which onnxruntime-genai exports put in the default domain (onnx itself does not define it).
    com.microsoft ops are not checked by onnx (unknown domains are skipped)."""
    global _SLN_REGISTERED
    if not _SLN_REGISTERED:
        schema = onnx.defs.OpSchema
        param = schema.FormalParameter
        optional = schema.FormalParameterOption.Optional
        onnx.defs.register_schema(schema(
            "SimplifiedLayerNormalization", "", 1,
            inputs=[param("X", "T"), param("scale", "V")],
            outputs=[param("Y", "V"), param("inv_std_var", "U", param_option=optional)],
            type_constraints=[("T", ["tensor(float)", "tensor(float16)"], ""),
                              ("V", ["tensor(float)", "tensor(float16)"], ""), ("U", ["tensor(float)"], "")],
            attributes=[schema.Attribute("axis", schema.AttrType.INT, ""),
                        schema.Attribute("epsilon", schema.AttrType.FLOAT, ""),
                        schema.Attribute("stash_type", schema.AttrType.INT, "")]))
        _SLN_REGISTERED = True
    onnx.checker.check_model(model)


# decoders -------------------------------------------------------------------------------------

KV_NAMING = {
    # past key, past value, present key, present value
    "hf": ("past_key_values.{i}.key", "past_key_values.{i}.value", "present.{i}.key", "present.{i}.value"),
    "flat": ("past_key_{i}", "past_value_{i}", "present_key_{i}", "present_value_{i}"),
    "qai": ("past_key_{i}_in", "past_value_{i}_in", "past_key_{i}_out", "past_value_{i}_out"),
    "cache": ("cache_in_{i}_k", "cache_in_{i}_v", "cache_out_{i}_k", "cache_out_{i}_v"),
}


def linear_qdq(b: GraphBuilder, x: str, k: int, n: int, name: str) -> str:
    """QDQ linear: activation QuantizeLinear/DequantizeLinear (uint8), int8 weight
    DequantizeLinear, MatMul, float bias Add (the QNN HTP quantized-model format)."""
    xs, xz = b.const(0.05, np.float32), b.const(128, np.uint8)
    xq = b.op("DequantizeLinear", [b.op("QuantizeLinear", [x, xs, xz], name=f"{name}/QuantizeLinear"), xs, xz],
              name=f"{name}/DequantizeLinear")
    w = np.clip(np.round(b.rng.standard_normal((k, n)) * 20), -127, 127).astype(np.int8)
    wq = b.op("DequantizeLinear", [b.weight(f"{name}.weight_quantized", w), b.const(0.001, np.float32),
                                   b.const(0, np.int8)], name=f"{name}/weight/DequantizeLinear")
    y = b.op("MatMul", [xq, wq], name=f"{name}/MatMul")
    return b.op("Add", [y, b.randn(f"{name}.bias", (n,))], name=f"{name}/Add")


def _proj(b: GraphBuilder, x: str, k: int, n: int, name: str, weights: str) -> str:
    if weights == "int4":
        return linear_4bit(b, x, k, n, name)
    if weights == "qdq":
        return linear_qdq(b, x, k, n, name)
    return linear(b, x, k, n, name)


def causal_mask(b: GraphBuilder, kind: str, seq: str, total: str, past: str, max_positions: int) -> str:
    """Bool [seq, total] mask, True where query i (absolute position past+i) may see key j.

    ``trilu``: Trilu(ones, k=past, upper=0), as torch exports ``torch.tril``;
    ``where``: a constant lower-triangular [max, max] buffer sliced to [past:total, :total]
    (GPT-2's registered ``bias`` buffer). Both feed a Where(mask, scores, -inf)."""
    if kind == "trilu":
        ones = b.op("ConstantOfShape", [b.op("Concat", [seq, total], axis=0)],
                    value=helper.make_tensor("value", F, [1], [1.0]))
        tril = b.op("Trilu", [ones, scalar(b, past)], upper=0)
        return b.op("Cast", [tril], to=BOOL)
    if kind == "where":
        buffer = b.weight("causal_bias", np.tril(np.ones((max_positions, max_positions), dtype=bool)))
        return b.op("Slice", [buffer, b.op("Concat", [past, b.const([0])], axis=0),
                              b.op("Concat", [total, total], axis=0), b.const([0, 1])])
    raise ValueError(kind)


def _gpt2(*, layers: int = 2, hidden: int = 64, heads: int = 4, vocab: int = 256, max_positions: int = 64,
          kv: str | None = "hf", mask: str = "trilu", weights: str = "float", attention_mask: bool = True,
          token_input: str = "input_ids", seed: int = 10) -> ModelProto:
    """GPT-2-style decoder with decomposed attention (see the registered variants below)."""
    head_dim = hidden // heads
    b = GraphBuilder("gpt2", seed)
    ids = b.input(token_input, I64, ["batch_size", "sequence_length"])
    amask = b.input("attention_mask", I64, ["batch_size", "total_sequence_length"]) if attention_mask else None
    names = KV_NAMING[kv] if kv else None
    kv_shape = ["batch_size", heads, "past_sequence_length", head_dim]
    past = [(b.input(names[0].format(i=i), F, kv_shape), b.input(names[1].format(i=i), F, kv_shape))
            for i in range(layers)] if names else []

    b.scope = "/transformer"
    seq = dim(b, ids, 1)
    past_len = dim(b, past[0][0], 2) if past else b.const([0])
    total = b.op("Add", [past_len, seq])
    wte = b.randn("transformer.wte.weight", (vocab, hidden))
    x = b.op("Gather", [wte, ids], axis=0)
    positions = b.op("Range", [scalar(b, past_len), scalar(b, total), b.const(1)])
    x = b.op("Add", [x, b.op("Gather", [b.randn("transformer.wpe.weight", (max_positions, hidden)), positions],
                             axis=0)])
    allowed = causal_mask(b, mask, seq, total, past_len, max_positions)
    additive = padding_mask(b, amask) if amask else None
    for i in range(layers):
        p = f"transformer.h.{i}"
        b.scope = f"/transformer/h.{i}/attn"
        h = layer_norm(b, x, hidden, f"{p}.ln_1")
        qkv = _proj(b, h, hidden, 3 * hidden, f"{p}.attn.c_attn", weights)
        q, k, v = (split_heads(b, t, heads, head_dim)
                   for t in b.op("Split", [qkv, b.const([hidden] * 3)], 3, axis=-1))
        if past:
            k = b.op("Concat", [past[i][0], k], axis=2)
            v = b.op("Concat", [past[i][1], v], axis=2)
            total_shape = ["batch_size", heads, "total_sequence_length", head_dim]
            b.output(k, names[2].format(i=i), F, total_shape)
            b.output(v, names[3].format(i=i), F, total_shape)
            k, v = names[2].format(i=i), names[3].format(i=i)
        ctx = merge_heads(b, attention(b, q, k, v, head_dim, bool_mask=allowed, additive_mask=additive), hidden)
        x = b.op("Add", [x, _proj(b, ctx, hidden, hidden, f"{p}.attn.c_proj", weights)])
        b.scope = f"/transformer/h.{i}/mlp"
        h = layer_norm(b, x, hidden, f"{p}.ln_2")
        h = _proj(b, gelu(b, _proj(b, h, hidden, 4 * hidden, f"{p}.mlp.c_fc", weights)), 4 * hidden, hidden,
                  f"{p}.mlp.c_proj", weights)
        x = b.op("Add", [x, h])
    b.scope = "/lm_head"
    x = layer_norm(b, x, hidden, "transformer.ln_f")
    logits = b.op("MatMul", [x, b.op("Transpose", [wte], perm=[1, 0])])  # tied to the token embedding
    b.output(logits, "logits", F, ["batch_size", "sequence_length", vocab])
    b.outputs.insert(0, b.outputs.pop())
    return b.model()


@_register(GENAI)
def gpt2_kv_trilu() -> ModelProto:
    """GPT-2 decoder, decomposed attention (MatMul/Softmax), causal mask from Trilu + Where,
    KV cache ``past_key_values.N.key`` -> ``present.N.key``, tied lm_head. EP: GenAI via input names."""
    return _gpt2(kv="hf", mask="trilu")


@_register(GENAI)
def gpt2_kv_where_flat() -> ModelProto:
    """GPT-2 decoder, causal mask sliced from a constant lower-triangular buffer + Where, KV named
    ``past_key_N`` / ``present_key_N``."""
    return _gpt2(kv="flat", mask="where", seed=11)


@_register(GENAI)
def gpt2_kv_qai_names() -> ModelProto:
    """GPT-2 decoder with Qualcomm AI Hub style cache names ``past_key_N_in`` -> ``past_key_N_out``."""
    return _gpt2(kv="qai", mask="trilu", seed=12)


@_register(GENAI)
def gpt2_kv_cache_names() -> ModelProto:
    """GPT-2 decoder whose names carry none of the EP's hints: token input ``tokens``, no
    attention_mask, cache ``cache_in_N_k`` -> ``cache_out_N_k``. EP rules: MatMul+Softmax (+5) and
    LayerNorm density (+10) still make it GenAI; a correct classifier finds the past/present pairs."""
    return _gpt2(kv="cache", mask="where", attention_mask=False, token_input="tokens", seed=13)


@_register(GENAI)
def gpt2_no_kv() -> ModelProto:
    """GPT-2 decoder without KV cache (``input_ids`` + ``attention_mask`` -> ``logits``): still an
    autoregressive decoder (causal Trilu mask, logits over the tied vocabulary)."""
    return _gpt2(kv=None, mask="trilu", seed=14)


@_register(GENAI)
def gpt2_no_kv_tokens_only() -> ModelProto:
    """Decoder without cache, single input named ``tokens``: no name hints at all; only the causal
    mask and the logits over the embedding vocabulary say it is a decoder."""
    return _gpt2(kv=None, mask="where", attention_mask=False, token_input="tokens", seed=15)


@_register(GENAI)
def gpt2_kv_int4() -> ModelProto:
    """GPT-2 decoder with decomposed attention but int4 MatMulNBits projections (weight-only
    quantized LLM). EP: MatMulNBits early exit."""
    return _gpt2(kv="hf", mask="trilu", weights="int4", seed=16)


@_register(GENAI)
def qdq_decoder() -> ModelProto:
    """QDQ-quantized GPT-2 decoder with KV cache (``past_key_N``): QuantizeLinear/DequantizeLinear
    around every MatMul, int8 weights (the HTP-ready format). Still an LLM decoder."""
    return _gpt2(kv="flat", mask="where", weights="qdq", seed=17)


@_register(GENAI)
def llm_gqa_int4() -> ModelProto:
    """onnxruntime-genai style decoder (same builder as the ``llm_decoder_kv`` sample):
    GroupQueryAttention, MatMulNBits, RotaryEmbedding, Simplified/SkipSimplifiedLayerNormalization."""
    return build_llm_decoder(seed=20)


def _contrib_decoder(kind: str, *, layers: int = 2, hidden: int = 64, heads: int = 4, vocab: int = 256,
                     kv: bool = True, seed: int = 21) -> ModelProto:
    """Decoder on com.microsoft MultiHeadAttention (``mha``) or Attention (``attention``, GPT-2 as
    onnxruntime's transformer optimizer writes it: packed ``past_N``/``present_N`` [2, b, h, s, d])."""
    head_dim = hidden // heads
    b = GraphBuilder(kind, seed)
    ids = b.input("input_ids", I64, ["batch_size", "sequence_length"])
    kv_shape = ["batch_size", heads, "past_sequence_length", head_dim]
    if kind == "attention":
        mask = b.input("attention_mask", I32, ["batch_size", "total_sequence_length"])
        past = [b.input(f"past_{i}", F, [2] + kv_shape) for i in range(layers)] if kv else []
    else:
        mask = None
        past = [(b.input(f"past_key_{i}", F, kv_shape), b.input(f"past_value_{i}", F, kv_shape))
                for i in range(layers)] if kv else []
    b.scope = "/embed"
    x = b.op("Gather", [b.randn("wte", (vocab, hidden)), ids], axis=0)
    total_shape = ["batch_size", heads, "total_sequence_length", head_dim]
    for i in range(layers):
        b.scope = f"/h.{i}"
        h = layer_norm(b, x, hidden, f"h.{i}.ln_1")
        if kind == "attention":
            inputs = [h, b.randn(f"h.{i}.attn.weight", (hidden, 3 * hidden)), b.randn(f"h.{i}.attn.bias", (3 * hidden,)),
                      mask] + ([past[i]] if kv else [])
            outs = b.op("Attention", inputs, 2 if kv else 1, domain=MS, num_heads=heads, unidirectional=1)
            attn = outs[0] if kv else outs
            if kv:
                b.output(outs[1], f"present_{i}", F, [2] + total_shape)
        else:
            q, k, v = (linear(b, h, hidden, hidden, f"h.{i}.attn.{p}") for p in "qkv")
            inputs = [q, k, v, "", "", ""] + (list(past[i]) if kv else [])
            outs = b.op("MultiHeadAttention", inputs, 3 if kv else 1, domain=MS, num_heads=heads, unidirectional=1)
            attn = outs[0] if kv else outs
            if kv:
                b.output(outs[1], f"present_key_{i}", F, total_shape)
                b.output(outs[2], f"present_value_{i}", F, total_shape)
        x = b.op("Add", [x, linear(b, attn, hidden, hidden, f"h.{i}.attn.c_proj")])
        h = layer_norm(b, x, hidden, f"h.{i}.ln_2")
        x = b.op("Add", [x, linear(b, gelu(b, linear(b, h, hidden, 4 * hidden, f"h.{i}.mlp.c_fc")), 4 * hidden,
                                   hidden, f"h.{i}.mlp.c_proj")])
    b.scope = "/lm_head"
    logits = linear(b, layer_norm(b, x, hidden, "ln_f"), hidden, vocab, "lm_head", bias=False)
    b.output(logits, "logits", F, ["batch_size", "sequence_length", vocab])
    b.outputs.insert(0, b.outputs.pop())
    return b.model()


@_register(GENAI)
def mha_decoder_kv() -> ModelProto:
    """Decoder on com.microsoft MultiHeadAttention (unidirectional) with ``past_key_N`` ->
    ``present_key_N``. EP: heavy attention op early exit."""
    return _contrib_decoder("mha")


@_register(GENAI)
def mha_decoder_no_kv() -> ModelProto:
    """Decoder on causal (unidirectional=1) MultiHeadAttention without a KV cache."""
    return _contrib_decoder("mha", kv=False, seed=22)


@_register(GENAI)
def attention_decoder_kv() -> ModelProto:
    """GPT-2 as onnxruntime's transformer optimizer writes it: com.microsoft Attention
    (unidirectional=1) with packed ``past_N`` -> ``present_N`` [2, batch, heads, seq, head_dim]."""
    return _contrib_decoder("attention", seed=23)


@_register(GENAI)
def whisper_decoder() -> ModelProto:
    """Whisper-style decoder: ``input_ids``, ``encoder_hidden_states`` [batch, frames, hidden],
    self-attention cache ``past_key_values.N.decoder.key`` -> ``present.N.decoder.key``, cross
    attention over the encoder output, logits over the tied vocabulary."""
    layers, hidden, heads, vocab = 2, 64, 4, 256
    head_dim = hidden // heads
    b = GraphBuilder("whisper_decoder", 24)
    ids = b.input("input_ids", I64, ["batch_size", "decoder_sequence_length"])
    enc = b.input("encoder_hidden_states", F, ["batch_size", "encoder_sequence_length", hidden])
    kv_shape = ["batch_size", heads, "past_decoder_sequence_length", head_dim]
    past = [(b.input(f"past_key_values.{i}.decoder.key", F, kv_shape),
             b.input(f"past_key_values.{i}.decoder.value", F, kv_shape)) for i in range(layers)]
    b.scope = "/model/decoder"
    seq, past_len = dim(b, ids, 1), dim(b, past[0][0], 2)
    total = b.op("Add", [past_len, seq])
    embed = b.randn("model.decoder.embed_tokens.weight", (vocab, hidden))
    x = b.op("Gather", [embed, ids], axis=0)
    positions = b.op("Range", [scalar(b, past_len), scalar(b, total), b.const(1)])
    x = b.op("Add", [x, b.op("Gather", [b.randn("model.decoder.embed_positions.weight", (448, hidden)), positions],
                             axis=0)])
    allowed = causal_mask(b, "trilu", seq, total, past_len, 448)
    for i in range(layers):
        p = f"model.decoder.layers.{i}"
        b.scope = f"/model/decoder/layers.{i}/self_attn"
        h = layer_norm(b, x, hidden, f"{p}.self_attn_layer_norm")
        q, k, v = (split_heads(b, linear(b, h, hidden, hidden, f"{p}.self_attn.{n}_proj"), heads, head_dim)
                   for n in "qkv")
        k = b.output(b.op("Concat", [past[i][0], k], axis=2), f"present.{i}.decoder.key", F,
                     ["batch_size", heads, "total_decoder_sequence_length", head_dim])
        v = b.output(b.op("Concat", [past[i][1], v], axis=2), f"present.{i}.decoder.value", F,
                     ["batch_size", heads, "total_decoder_sequence_length", head_dim])
        ctx = merge_heads(b, attention(b, q, k, v, head_dim, bool_mask=allowed), hidden)
        x = b.op("Add", [x, linear(b, ctx, hidden, hidden, f"{p}.self_attn.out_proj")])
        b.scope = f"/model/decoder/layers.{i}/encoder_attn"
        h = layer_norm(b, x, hidden, f"{p}.encoder_attn_layer_norm")
        q = split_heads(b, linear(b, h, hidden, hidden, f"{p}.encoder_attn.q_proj"), heads, head_dim)
        k, v = (split_heads(b, linear(b, enc, hidden, hidden, f"{p}.encoder_attn.{n}_proj"), heads, head_dim)
                for n in "kv")
        ctx = merge_heads(b, attention(b, q, k, v, head_dim), hidden)
        x = b.op("Add", [x, linear(b, ctx, hidden, hidden, f"{p}.encoder_attn.out_proj")])
        b.scope = f"/model/decoder/layers.{i}/mlp"
        h = layer_norm(b, x, hidden, f"{p}.final_layer_norm")
        x = b.op("Add", [x, linear(b, gelu(b, linear(b, h, hidden, 4 * hidden, f"{p}.fc1")), 4 * hidden, hidden,
                                   f"{p}.fc2")])
    b.scope = "/proj_out"
    x = layer_norm(b, x, hidden, "model.decoder.layer_norm")
    logits = b.op("MatMul", [x, b.op("Transpose", [embed], perm=[1, 0])])
    b.output(logits, "logits", F, ["batch_size", "decoder_sequence_length", vocab])
    b.outputs.insert(0, b.outputs.pop())
    return b.model()


# encoders -------------------------------------------------------------------------------------

@_register(NON_GENAI)
def bert_encoder() -> ModelProto:
    """BERT encoder (``input_ids``, ``attention_mask``, ``token_type_ids``), bidirectional
    decomposed attention, post-LN, pooler. EP rules misroute it: ``input_ids`` and
    ``attention_mask`` match KV-cache hints (+10) and GenAI wins before a node is read."""
    return build_text_encoder(seed=30)


@_register(NON_GENAI)
def minilm_encoder() -> ModelProto:
    """MiniLM/sentence-transformers encoder, 3 layers, narrower FFN. Same EP misroute as BERT."""
    return build_text_encoder(layers=3, hidden=48, heads=4, ffn=96, seed=31)


@_register(NON_GENAI)
def distilbert_encoder() -> ModelProto:
    """DistilBERT-style encoder: ``input_ids`` + ``attention_mask`` only (no token types)."""
    return build_text_encoder(token_type_ids=False, seed=32)


@_register(NON_GENAI)
def bert_encoder_contrib() -> ModelProto:
    """BERT after onnxruntime's transformer optimizer: EmbedLayerNormalization, com.microsoft
    Attention (bidirectional, no cache), SkipLayerNormalization, BiasGelu. EP rules misroute it
    (input-name hints, and Attention is a 'decisive' GenAI op). A correct classifier sees no causal mask, no cache, no
    logits: an encoder."""
    layers, hidden, heads, ffn, vocab = 2, 64, 4, 128, 1000
    b = GraphBuilder("bert_contrib", 33)
    dims = ["batch_size", "sequence_length"]
    ids = b.input("input_ids", I32, dims)
    types = b.input("token_type_ids", I32, dims)
    mask = b.input("attention_mask", I32, dims)
    b.scope = "/embeddings"
    x, mask_index = b.op("EmbedLayerNormalization", [
        ids, types, b.randn("word_embeddings", (vocab, hidden)), b.randn("position_embeddings", (128, hidden)),
        b.randn("segment_embeddings", (2, hidden)), b.full("embeddings.ln.weight", (hidden,), 1.0),
        b.full("embeddings.ln.bias", (hidden,), 0.0), mask], 2, domain=MS, epsilon=1e-12)
    for i in range(layers):
        p = f"encoder.layer.{i}"
        b.scope = f"/encoder/layer.{i}"
        attn = b.op("Attention", [x, b.randn(f"{p}.qkv.weight", (hidden, 3 * hidden)),
                                  b.randn(f"{p}.qkv.bias", (3 * hidden,)), mask_index], domain=MS, num_heads=heads)
        o = b.op("MatMul", [attn, b.randn(f"{p}.attention.output.weight", (hidden, hidden))])
        x = b.op("SkipLayerNormalization", [o, x, b.full(f"{p}.ln1.weight", (hidden,), 1.0),
                                            b.full(f"{p}.ln1.bias", (hidden,), 0.0),
                                            b.randn(f"{p}.attention.output.bias", (hidden,))], domain=MS,
                 epsilon=1e-12)
        h = b.op("BiasGelu", [b.op("MatMul", [x, b.randn(f"{p}.intermediate.weight", (hidden, ffn))]),
                              b.randn(f"{p}.intermediate.bias", (ffn,))], domain=MS)
        o = b.op("MatMul", [h, b.randn(f"{p}.output.weight", (ffn, hidden))])
        x = b.op("SkipLayerNormalization", [o, x, b.full(f"{p}.ln2.weight", (hidden,), 1.0),
                                            b.full(f"{p}.ln2.bias", (hidden,), 0.0),
                                            b.randn(f"{p}.output.bias", (hidden,))], domain=MS, epsilon=1e-12)
    b.output(x, "last_hidden_state", F, dims + [hidden])
    return b.model()


@_register(NON_GENAI)
def sentence_embedder() -> ModelProto:
    """MiniLM sentence-transformer with masked mean pooling and L2 normalisation, output
    ``sentence_embedding`` [batch, hidden]."""
    hidden = 48
    b = GraphBuilder("sentence_embedder", 34)
    dims = ["batch_size", "sequence_length"]
    ids = b.input("input_ids", I64, dims)
    mask = b.input("attention_mask", I64, dims)
    x = text_embeddings(b, ids, None, hidden, 1000, 128)
    b.scope = "/extended_attention_mask"
    additive = padding_mask(b, mask)
    for i in range(2):
        x = encoder_block(b, x, hidden, 4, 96, f"encoder.layer.{i}", additive_mask=additive, pre_norm=False)
    b.scope = "/pooling"
    m = b.op("Cast", [b.op("Unsqueeze", [mask, b.const([-1])])], to=F)
    summed = b.op("ReduceSum", [b.op("Mul", [x, m]), b.const([1])], keepdims=0)
    counts = b.op("Clip", [b.op("ReduceSum", [m, b.const([1])], keepdims=0), b.const(1e-9, np.float32)])
    mean = b.op("Div", [summed, counts])
    norm = b.op("Clip", [b.op("ReduceL2", [mean], axes=[-1], keepdims=1), b.const(1e-12, np.float32)])
    b.output(b.op("Div", [mean, norm]), "sentence_embedding", F, ["batch_size", hidden])
    return b.model()


# vision ---------------------------------------------------------------------------------------

@_register(NON_GENAI)
def vit() -> ModelProto:
    """ViT-style classifier [batch, 3, 224, 224]: patch Conv (stride == kernel), LayerNorm-heavy
    transformer. EP rules misroute it: LayerNorm density (+10) and MatMul+Softmax (+5) beat the
    image input (+5)."""
    return build_vit_classifier(seed=40)


@_register(NON_GENAI)
def cnn_bn_224() -> ModelProto:
    """Plain CNN with BatchNormalization, static [1, 3, 224, 224] (the ``cnn_classifier`` sample)."""
    return build_cnn_classifier(seed=41)


@_register(NON_GENAI)
def cnn_no_bn_224() -> ModelProto:
    """CNN without BatchNormalization (BN folded into Conv, as optimized exports are), static 224,
    Gemm logits without Softmax. EP rules: Conv density 4/11 > 30%, image input, GAP/Gemm head."""
    return build_cnn_classifier(batchnorm=False, softmax=False, seed=42)


@_register(NON_GENAI)
def cnn_symbolic_hw() -> ModelProto:
    """CNN with a ``batch x 3 x height x width`` input: EP rules never count symbolic dims as an
    image, so the image signal stays off."""
    return build_cnn_classifier(size="dynamic", seed=43)


def _resnet(size, batchnorm: bool, seed: int) -> ModelProto:
    b = GraphBuilder("resnet", seed)
    shape = [1, 3, size, size] if isinstance(size, int) else ["batch", 3, "height", "width"]
    x = b.input("input", F, shape)
    b.scope = "/stem"
    x = conv_bn_relu(b, x, 3, 16, 7, "conv1", stride=2, batchnorm=batchnorm)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 16
    for stage, (cout, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
        p = f"layer{stage + 1}.0"
        b.scope = f"/{p}"
        y = conv_bn_relu(b, x, channels, cout, 3, f"{p}.conv1", stride=stride, batchnorm=batchnorm)
        y = conv_bn_relu(b, y, cout, cout, 3, f"{p}.conv2", batchnorm=batchnorm, relu="")
        if stride != 1 or cout != channels:
            x = conv_bn_relu(b, x, channels, cout, 1, f"{p}.downsample", stride=stride, batchnorm=batchnorm, relu="")
        x = b.op("Relu", [b.op("Add", [x, y])])
        channels = cout
    b.scope = "/head"
    b.output(classifier_head(b, x, channels, 1000, softmax=False), "logits", F, [shape[0], 1000])
    return b.model()


@_register(NON_GENAI)
def resnet_bn_224() -> ModelProto:
    """ResNet-ish: 7x7 stem, MaxPool, basic blocks with residual Add, BatchNorm, 224 input."""
    return _resnet(224, True, 44)


@_register(NON_GENAI)
def resnet_no_bn_symbolic() -> ModelProto:
    """ResNet-ish without BatchNorm and with a symbolic ``batch x 3 x height x width`` input."""
    return _resnet("dynamic", False, 45)


def _mobilenet(size, seed: int) -> ModelProto:
    b = GraphBuilder("mobilenet", seed)
    shape = [1, 3, size, size] if isinstance(size, int) else ["batch", 3, "height", "width"]
    x = b.input("input", F, shape)
    b.scope = "/features.0"
    x = conv_bn_relu(b, x, 3, 16, 3, "features.0", stride=2, relu="Clip")
    channels = 16
    for i, (cout, stride, expand) in enumerate([(16, 1, 1), (24, 2, 4), (24, 1, 4), (32, 2, 4)], start=1):
        p = f"features.{i}"
        b.scope = f"/{p}"
        hidden = channels * expand
        y = conv_bn_relu(b, x, channels, hidden, 1, f"{p}.expand", relu="Clip") if expand != 1 else x
        y = conv_bn_relu(b, y, hidden, hidden, 3, f"{p}.depthwise", stride=stride, group=hidden, relu="Clip")
        y = conv_bn_relu(b, y, hidden, cout, 1, f"{p}.project", relu="")
        x = b.op("Add", [x, y]) if stride == 1 and cout == channels else y
        channels = cout
    b.scope = "/classifier"
    b.output(classifier_head(b, x, channels, 1000, softmax=False), "logits", F, [shape[0], 1000])
    return b.model()


@_register(NON_GENAI)
def mobilenet_224() -> ModelProto:
    """MobileNetV2-ish: inverted residuals with depthwise Conv (group == channels), ReLU6 as Clip,
    BatchNorm, static 224 input."""
    return _mobilenet(224, 46)


@_register(NON_GENAI)
def mobilenet_symbolic() -> ModelProto:
    """MobileNetV2-ish with a symbolic ``batch x 3 x height x width`` input."""
    return _mobilenet("dynamic", 47)


@_register(NON_GENAI)
def efficientnet_symbolic() -> ModelProto:
    """EfficientNet-ish with BatchNorm folded into Conv and a symbolic ``batch x 3 x height x
    width`` input: depthwise Conv, SiLU (Sigmoid*Mul) and squeeze-excite blocks, GAP/Gemm head."""
    b = GraphBuilder("efficientnet", 49)
    x = b.input("input", F, ["batch", 3, "height", "width"])

    def silu(t: str) -> str:
        return b.op("Mul", [t, b.op("Sigmoid", [t])])

    b.scope = "/stem"
    x = silu(conv(b, x, 3, 16, 3, "stem", stride=2))
    channels = 16
    for i, (cout, stride) in enumerate([(16, 1), (24, 2), (40, 2)]):
        p = f"blocks.{i}"
        b.scope = f"/{p}"
        y = silu(conv(b, x, channels, channels, 3, f"{p}.depthwise", stride=stride, group=channels))
        squeeze = silu(conv(b, b.op("GlobalAveragePool", [y]), channels, 4, 1, f"{p}.se.reduce"))
        y = b.op("Mul", [y, b.op("Sigmoid", [conv(b, squeeze, 4, channels, 1, f"{p}.se.expand")])])
        y = conv(b, y, channels, cout, 1, f"{p}.project")
        x = b.op("Add", [x, y]) if stride == 1 and cout == channels else y
        channels = cout
    b.scope = "/head"
    b.output(classifier_head(b, silu(x), channels, 1000, softmax=False), "logits", F, ["batch", 1000])
    return b.model()


@_register(NON_GENAI)
def yolo_detector() -> ModelProto:
    """YOLOv8-style detector, static [1, 3, 640, 640]: Conv+SiLU backbone with C2f-like Split/Concat,
    Resize upsampling neck, two detection scales reshaped and concatenated to ``output0``
    [1, 84, 2000]. No classification head and Conv below 30% of the nodes: the EP rules have only
    the image input (+5) and say Unknown."""
    b = GraphBuilder("yolo", 55)
    x = b.input("images", F, [1, 3, 640, 640])

    def cbs(t: str, cin: int, cout: int, k: int, name: str, stride: int = 1) -> str:
        y = conv(b, t, cin, cout, k, name, stride=stride)
        return b.op("Mul", [y, b.op("Sigmoid", [y], name=f"{name}/Sigmoid")], name=f"{name}/Mul")

    def c2f(t: str, c: int, name: str) -> str:
        left, right = b.op("Split", [cbs(t, c, c, 1, f"{name}.cv1"), b.const([c // 2, c // 2])], 2, axis=1)
        mid = cbs(cbs(right, c // 2, c // 2, 3, f"{name}.m.cv1"), c // 2, c // 2, 3, f"{name}.m.cv2")
        return cbs(b.op("Concat", [left, right, mid], axis=1), 3 * c // 2, c, 1, f"{name}.cv2")

    feats, cin = [], 3
    for i, cout in enumerate([8, 16, 32, 64, 64]):
        b.scope = f"/model.{i}"
        x = cbs(x, cin, cout, 3, f"model.{i}.conv", stride=2)
        if i >= 1:
            x = c2f(x, cout, f"model.{i}.c2f")
        feats.append(x)
        cin = cout
    b.scope = "/neck"
    up = b.op("Resize", [feats[4], "", b.const([1.0, 1.0, 2.0, 2.0], np.float32)], mode="nearest")
    p4 = c2f(cbs(b.op("Concat", [up, feats[3]], axis=1), 128, 64, 1, "neck.reduce"), 64, "neck.c2f")
    outs = []
    for name, t in (("p4", p4), ("p5", feats[4])):
        b.scope = f"/head/{name}"
        y = conv(b, cbs(t, 64, 64, 3, f"head.{name}.cv"), 64, 84, 1, f"head.{name}.pred")
        outs.append(b.op("Reshape", [y, b.const([1, 84, -1])]))
    b.scope = "/head"
    out = b.op("Concat", outs, axis=2)
    box, cls = b.op("Split", [out, b.const([4, 80])], 2, axis=1)
    b.output(b.op("Concat", [box, b.op("Sigmoid", [cls])], axis=1), "output0", F, [1, 84, 2000])
    return b.model()


@_register(NON_GENAI)
def qdq_cnn() -> ModelProto:
    """QDQ-quantized CNN (static 224): QuantizeLinear/DequantizeLinear around each Conv input,
    int8 weights through DequantizeLinear, then GlobalAveragePool/Gemm head."""
    b = GraphBuilder("qdq_cnn", 48)
    x = b.input("input", F, [1, 3, 224, 224])
    scale, zero = b.const(0.02, np.float32), b.const(128, np.uint8)
    channels = 3
    for i, cout in enumerate([8, 16, 32]):
        b.scope = f"/features.{i}"
        xq = b.op("DequantizeLinear", [b.op("QuantizeLinear", [x, scale, zero]), scale, zero])
        w = np.clip(np.round(b.rng.standard_normal((cout, channels, 3, 3)) * 30), -127, 127).astype(np.int8)
        wq = b.op("DequantizeLinear", [b.weight(f"features.{i}.weight_quantized", w),
                                       b.const(0.005, np.float32), b.const(0, np.int8)], name="weight/DequantizeLinear")
        y = b.op("Conv", [xq, wq, b.randn(f"features.{i}.bias", (cout,))], kernel_shape=[3, 3], strides=[2, 2],
                 pads=[1, 1, 1, 1])
        x = b.op("Relu", [y])
        channels = cout
    b.scope = "/classifier"
    x = b.op("DequantizeLinear", [b.op("QuantizeLinear", [x, scale, zero]), scale, zero])
    b.output(classifier_head(b, x, channels, 10), "probabilities", F, [1, 10])
    return b.model(opset=17)


# audio, tabular, recurrent --------------------------------------------------------------------

@_register(NON_GENAI)
def audio_encoder() -> ModelProto:
    """Whisper-style audio encoder: log-mel [batch, 80, frames], Conv1d stem, transformer. EP rules
    misroute it: LayerNorm density and MatMul+Softmax make it GenAI."""
    return build_audio_encoder(seed=50)


@_register(NON_GENAI)
def mlp_tabular() -> ModelProto:
    """Tabular MLP: float ``features`` [batch, 32] -> Gemm/Relu x3 -> Softmax over 5 classes. EP
    rules: nothing fires (Unknown); a correct classifier sees a float feature vector and no
    sequence structure."""
    b = GraphBuilder("mlp", 51)
    x = b.input("features", F, ["batch", 32])
    sizes = [32, 64, 64, 5]
    for i in range(3):
        b.scope = f"/layers.{i}"
        x = b.op("Gemm", [x, b.randn(f"layers.{i}.weight", (sizes[i + 1], sizes[i]), 0.2),
                          b.randn(f"layers.{i}.bias", (sizes[i + 1],))], transB=1)
        if i < 2:
            x = b.op("Relu", [x])
    b.output(b.op("Softmax", [x], axis=-1), "probabilities", F, ["batch", 5])
    return b.model()


def _vad(cell: str, seed: int) -> ModelProto:
    features, hidden = 40, 32
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[cell]
    b = GraphBuilder(f"vad_{cell.lower()}", seed)
    x = b.input("features", F, ["batch", "frames", features])
    h0 = b.input("h0", F, [1, "batch", hidden])
    c0 = b.input("c0", F, [1, "batch", hidden]) if cell == "LSTM" else None
    b.scope = f"/{cell.lower()}"
    seq_first = b.op("Transpose", [x], perm=[1, 0, 2])
    inputs = [seq_first, b.randn("rnn.W", (1, gates * hidden, features), 0.1),
              b.randn("rnn.R", (1, gates * hidden, hidden), 0.1), b.randn("rnn.B", (1, 2 * gates * hidden), 0.1),
              "", h0] + ([c0] if c0 else [])
    outs = b.op(cell, inputs, 3 if c0 else 2, hidden_size=hidden)
    y, hn = outs[0], outs[1]
    y = b.op("Transpose", [b.op("Squeeze", [y, b.const([1])])], perm=[1, 0, 2])
    b.scope = "/head"
    prob = b.op("Sigmoid", [linear(b, y, hidden, 1, "head")])
    b.output(prob, "speech_prob", F, ["batch", "frames", 1])
    b.output(hn, "hn", F, [1, "batch", hidden])
    if c0:
        b.output(outs[2], "cn", F, [1, "batch", hidden])
    return b.model()


@_register(NON_GENAI)
def vad_gru() -> ModelProto:
    """Voice-activity detector: GRU over fbank frames with recurrent state ``h0`` -> ``hn`` (a
    state in/out pair that is not a KV cache). EP rules: Unknown."""
    return _vad("GRU", 52)


@_register(NON_GENAI)
def vad_lstm() -> ModelProto:
    """VAD on an LSTM with ``h0``/``c0`` -> ``hn``/``cn`` state."""
    return _vad("LSTM", 53)


@_register(NON_GENAI)
def vad_rnn() -> ModelProto:
    """VAD on a plain RNN cell."""
    return _vad("RNN", 54)


# structural edge cases ------------------------------------------------------------------------

@_register(NON_GENAI)
def control_flow() -> ModelProto:
    """Tabular model with control flow: a Loop (``steps`` iterations of x = tanh(x @ W)) and an If
    choosing Relu or Neg on a runtime flag. Top-level graph: 2 nodes with subgraphs + a few more."""
    b = GraphBuilder("control_flow", 60)
    x = b.input("features", F, ["batch", 16])
    steps = b.input("steps", I64, [])
    flag = b.input("use_relu", BOOL, [])
    w = b.randn("loop.weight", (16, 16), 0.3)

    body = GraphBuilder("loop_body", 61)
    body.scope = "/loop_body"
    body.input("iteration", I64, [])
    body.input("cond_in", BOOL, [])
    state = body.input("state_in", F, ["batch", 16])
    body.output(body.op("Identity", ["cond_in"]), "cond_out", BOOL, [])
    body.output(body.op("Tanh", [body.op("MatMul", [state, w])]), "state_out", F, ["batch", 16])

    looped = b.op("Loop", [steps, b.const(True, np.bool_), x], body=body.graph())
    branches = []
    for branch, op in (("then", "Relu"), ("else", "Neg")):
        g = GraphBuilder(f"{branch}_branch", 62)
        g.scope = f"/{branch}"
        g.output(g.op(op, [looped]), f"{branch}_out", F, ["batch", 16])
        branches.append(g.graph())
    y = b.op("If", [flag], then_branch=branches[0], else_branch=branches[1])
    b.output(b.op("Softmax", [y], axis=-1), "scores", F, ["batch", 16])
    return b.model()


@_register(GENAI)
def generation_loop() -> ModelProto:
    """Greedy generation wrapped in a Loop: the top-level graph holds only the Loop (plus shape
    glue); its body is a tiny causal decoder (Gather embedding, Trilu mask, MatMul/Softmax
    attention, tied logits, ArgMax, Concat the next token). A classifier that only reads the top
    level sees nothing; the decoder lives in the subgraph."""
    hidden, vocab, heads = 32, 128, 2
    head_dim = hidden // heads
    b = GraphBuilder("generation_loop", 63)
    ids = b.input("input_ids", I64, [1, "sequence_length"])
    steps = b.input("max_new_tokens", I64, [])
    wte = b.randn("wte", (vocab, hidden))

    g = GraphBuilder("decode_step", 64)
    g.scope = "/decode_step"
    g.input("step", I64, [])
    g.input("cond_in", BOOL, [])
    tokens = g.input("tokens_in", I64, [1, "n"])
    x = g.op("Gather", [wte, tokens], axis=0)
    n = dim(g, tokens, 1)
    ones = g.op("ConstantOfShape", [g.op("Concat", [n, n], axis=0)], value=helper.make_tensor("v", F, [1], [1.0]))
    allowed = g.op("Cast", [g.op("Trilu", [ones], upper=0)], to=BOOL)
    q, k, v = (split_heads(g, linear(g, x, hidden, hidden, f"decode_step.{p}"), heads, head_dim) for p in "qkv")
    x = g.op("Add", [x, merge_heads(g, attention(g, q, k, v, head_dim, bool_mask=allowed), hidden)])
    logits = g.op("MatMul", [layer_norm(g, x, hidden, "decode_step.ln_f"), g.op("Transpose", [wte], perm=[1, 0])])
    last = g.op("Gather", [logits, g.const(-1)], axis=1)
    next_token = g.op("ArgMax", [last], axis=-1, keepdims=1)
    g.output(g.op("Identity", ["cond_in"]), "cond_out", BOOL, [])
    g.output(g.op("Concat", [tokens, next_token], axis=1), "tokens_out", I64, [1, "n_plus_1"])

    out = b.op("Loop", [steps, b.const(True, np.bool_), ids], body=g.graph())
    b.output(out, "sequences", I64, [1, "total_length"])
    return b.model()


@_register(UNKNOWN)
def empty_graph() -> ModelProto:
    """A graph with 0 nodes: its only output is its input. Nothing to classify: Unknown."""
    b = GraphBuilder("empty", 0)
    b.input("x", F, [1, 4])
    b.outputs.append(helper.make_tensor_value_info("x", F, [1, 4]))
    return b.model()


@_register(NON_GENAI)
def first_input_not_tensor() -> ModelProto:
    """The first graph input is a sequence of [3, 224, 224] images (not a tensor), stacked by
    ConcatFromSequence, then a CNN. Classifiers must not assume inputs are tensors."""
    b = GraphBuilder("sequence_input", 65)
    frames = "frames"
    b.inputs.append(helper.make_tensor_sequence_value_info(frames, F, [3, 224, 224]))
    x = b.op("ConcatFromSequence", [frames], axis=0, new_axis=1)
    channels = 3
    for i, cout in enumerate([8, 16]):
        b.scope = f"/features.{i}"
        x = conv_bn_relu(b, x, channels, cout, 3, f"features.{i}", stride=2)
        channels = cout
    b.scope = "/classifier"
    b.output(classifier_head(b, x, channels, 10), "probabilities", F, ["n", 10])
    return b.model()


# intake edge cases (not classifier verdicts: loading behaviour) -----------------------------------

def custom_domain_model(domain: str = "com.example.custom", opset: int = 17) -> ModelProto:
    """An MLP with one node from an unknown custom-op domain; ``opset`` may be set beyond what
    onnx knows (future opset) to test that intake loads with a warning."""
    b = GraphBuilder("custom_domain", 70)
    x = b.input("features", F, ["batch", 8])
    y = b.op("Relu", [b.op("MatMul", [x, b.randn("w", (8, 8))])])
    b.output(b.op("FancyActivation", [y], domain=domain, alpha=0.5), "y", F, ["batch", 8])
    return b.model(opset=opset, extra_opsets={domain: 3})


HOSTILE_NAMES = [
    "<script>alert('x')</script>",
    "x" * 10_000,
    "注意力/层归一化 — ñandú 🚀",
    "dup",
    "dup",
    "",
    "",
    "Relu#7",  # looks like a generated name
    "a\nb\tc\"quote'&amp;",
]


def hostile_names() -> ModelProto:
    """A chain of Relu nodes named ``HOSTILE_NAMES`` (HTML, 10k chars, non-ASCII, duplicates,
    empty, a name that mimics a generated one, control characters)."""
    b = GraphBuilder("hostile", 71)
    x = b.input("<b>input</b>", F, [1, 4])
    for i, name in enumerate(HOSTILE_NAMES):
        x = b.op("Relu", [x], [f"t{i}"])
        b.nodes[-1].name = name
    b.output(x, "out</td>", F, [1, 4])
    return b.model()
