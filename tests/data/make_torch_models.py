"""Export the torch-made test models in this folder (run once; the .onnx files are committed).

torch is not a project dependency: the tests use the exported files without it. To regenerate:

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 onnx==1.23.2 onnxscript
    /tmp/torchvenv/bin/python tests/data/make_torch_models.py

Why torch exports at all: hand-built graphs follow our own idea of an export; these follow
torch's (its node names, shape arithmetic, mask construction), which is what users upload.
Models (tiny, seeded):
- torch_gpt2_kv.onnx: GPT-2-style causal decoder, KV cache ``past_key_values.N.key/value`` in,
  ``present.N.key/value`` out, causal mask from a registered ``tril`` buffer, tied lm_head.
- torch_gpt2_kv_dynamo.onnx: the same decoder through the torch.export-based exporter (torch's
  default since 2.9): ``node_*`` names, opset 18, present dims ``past_sequence_length + sequence_length``.
- torch_bert_encoder.onnx: BERT-style encoder (``input_ids``, ``attention_mask``,
  ``token_type_ids``) -> ``last_hidden_state``, ``pooler_output``.
- torch_cnn.onnx: small CNN classifier, Conv+BatchNorm+ReLU (the exporter folds BatchNorm into
  Conv in eval mode), static [1, 3, 224, 224].
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from torch import nn

OUT = Path(__file__).resolve().parent
OPSET = 18
HIDDEN, HEADS, VOCAB, LAYERS, MAX_POS = 32, 2, 128, 2, 64
HEAD_DIM = HIDDEN // HEADS


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("bias", torch.tril(torch.ones(MAX_POS, MAX_POS, dtype=torch.bool)), persistent=False)

    def forward(self, x, padding, past_k, past_v):
        batch, seq, _ = x.shape
        q, k, v = self.c_attn(x).split(HIDDEN, dim=2)
        q, k, v = (t.view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2) for t in (q, k, v))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        past, total = past_k.shape[2], k.shape[2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
        causal = self.bias[past:total, :total]
        scores = torch.where(causal, scores, torch.finfo(scores.dtype).min) + padding
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, seq, HIDDEN)
        return self.c_proj(y), k, v


class DecoderBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))

    def forward(self, x, padding, past_k, past_v):
        a, k, v = self.attn(self.ln_1(x), padding, past_k, past_v)
        x = x + a
        return x + self.mlp(self.ln_2(x)), k, v


class TinyGPT2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(MAX_POS, HIDDEN)
        self.h = nn.ModuleList(DecoderBlock() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, attention_mask, *past):
        past_len = past[0].shape[2]
        positions = torch.arange(past_len, past_len + input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        padding = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        presents = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, padding, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.ln_f(x)), *presents)


class EncoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.attention_output = nn.Linear(HIDDEN, HIDDEN)
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.intermediate = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.output = nn.Linear(4 * HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)

    def forward(self, x, padding):
        batch, seq, _ = x.shape
        q, k, v = (f(x).view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2) for f in (self.query, self.key, self.value))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM) + padding
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, seq, HIDDEN)
        x = self.ln_1(x + self.attention_output(y))
        return self.ln_2(x + self.output(nn.functional.gelu(self.intermediate(x))))


class TinyBert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.position_embeddings = nn.Embedding(MAX_POS, HIDDEN)
        self.token_type_embeddings = nn.Embedding(2, HIDDEN)
        self.embeddings_ln = nn.LayerNorm(HIDDEN)
        self.layer = nn.ModuleList(EncoderLayer() for _ in range(LAYERS))
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = self.embeddings_ln(x + self.token_type_embeddings(token_type_ids))
        padding = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layer:
            x = layer(x, padding)
        return x, torch.tanh(self.pooler(x[:, 0]))


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers, cin = [], 3
        for cout in (8, 16, 32):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.fc(x).softmax(dim=-1)


def _export(model: nn.Module, args: tuple, path: Path, input_names, output_names, dynamic_axes) -> None:
    """Legacy TorchScript exporter: its output is what most models in the wild were made with
    and its dynamic axes keep the exact input/output names we ask for."""
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, str(path), input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=OPSET, dynamo=False)
    print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


def _export_dynamo(model: nn.Module, args: tuple, path: Path, input_names, output_names, dynamic_shapes) -> None:
    """torch.export-based exporter, weights embedded (it would write a .data file otherwise)."""
    model.eval()
    with torch.no_grad():
        program = torch.onnx.export(model, args, input_names=input_names, output_names=output_names,
                                    dynamic_shapes=dynamic_shapes, opset_version=OPSET, dynamo=True)
    program.save(str(path), external_data=False)
    print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


def main() -> int:
    torch.manual_seed(0)
    batch, seq, past = 1, 3, 2
    kv_in = [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    kv_out = [f"present.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    past_tensors = tuple(torch.randn(batch, HEADS, past, HEAD_DIM) for _ in kv_in)
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    axes |= {n: {0: "batch_size", 2: "past_sequence_length"} for n in kv_in}
    axes |= {n: {0: "batch_size", 2: "total_sequence_length"} for n in kv_out}
    gpt2 = TinyGPT2()
    gpt2_args = (torch.randint(0, VOCAB, (batch, seq)), torch.ones(batch, seq + past, dtype=torch.int64),
                 *past_tensors)
    _export(gpt2, gpt2_args, OUT / "torch_gpt2_kv.onnx", ["input_ids", "attention_mask", *kv_in], ["logits", *kv_out],
            axes)
    dims = {name: torch.export.Dim(name) for name in ("batch_size", "sequence_length", "total_sequence_length",
                                                      "past_sequence_length")}
    shapes = {"input_ids": {0: dims["batch_size"], 1: dims["sequence_length"]},
              "attention_mask": {0: dims["batch_size"], 1: dims["total_sequence_length"]},
              "past": tuple({0: dims["batch_size"], 2: dims["past_sequence_length"]} for _ in kv_in)}
    _export_dynamo(gpt2, gpt2_args, OUT / "torch_gpt2_kv_dynamo.onnx", ["input_ids", "attention_mask", *kv_in],
                   ["logits", *kv_out], shapes)

    text_axes = {n: {0: "batch_size", 1: "sequence_length"} for n in ("input_ids", "attention_mask",
                                                                       "token_type_ids", "last_hidden_state")}
    text_axes["pooler_output"] = {0: "batch_size"}
    ids = torch.randint(0, VOCAB, (batch, seq))
    _export(TinyBert(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), OUT / "torch_bert_encoder.onnx",
            ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state", "pooler_output"], text_axes)

    _export(TinyCNN(), (torch.randn(1, 3, 224, 224),), OUT / "torch_cnn.onnx", ["input"], ["probabilities"], None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
