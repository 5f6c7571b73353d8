"""Export the real architectures of issues 20's and 28's classifier families into ``tests/data/families/``
(run once; the .onnx files are committed, tiny, randomly initialised, weights over 64 KiB stripped
as ``scripts/fetch_zoo_models.py`` strips them: the classifiers read structure, not weights).

torch and transformers are not project dependencies; run with a venv that has them:

    /work/torch-venv/bin/python scripts/export_classifier_families.py [--only FILE.onnx ...]

(torch 2.14.1, transformers 5.24.0, onnx 1.23.2, onnxscript 0.7.2.) Nothing is downloaded: every
model is built from a transformers config class or a module written here, and exported both ways
users export: the TorchScript exporter (``torch.onnx.export(dynamo=False)``) and the
torch.export-based one (``dynamo=True``). The families (issue 20):

1. state-space / recurrent-state LMs in step form: Mamba-style (conv and SSM states, stacked 4-D
   or per layer 3-D) and RWKV-style (one packed state);
2. autoregressive speech-synthesis decoders: SpeechT5-style (mel frames and a stop probability out,
   self-attention past/present, cross-attention past with no present) and a Tacotron-style step;
3. text encoders with a causal mask: CLIP's text tower (transformers);
4. decoder-only LMs without a cache, masks built by other exporters (GPT-2, Llama, Qwen2);
5. captioners: an image stem and a text decoder in one graph (VisionEncoderDecoder, CNN + GRU);

plus negatives: a streaming speech encoder with cache pairs, a video matting model with 4-D
recurrent states, and a non-autoregressive (FastSpeech-style) TTS model. The hand-written mask
patterns are built with onnx.helper by ``scripts/build_classifier_families.py``.

Issue 28 (exported with torch 2.13.0+cpu, transformers 5.25.0, onnx 1.23.2, onnxscript 0.7.2;
rebuild them with ``--only`` so issue 20's files keep their exporter versions):

1. decoder-only LMs: Llama, Qwen2, Mistral, Phi, GPT-2, Gemma and Phi-3 from tiny random configs, each
   exported four ways: dynamo and TorchScript, without a cache (token ids only) and with a flat
   KV cache (``hf_<arch>_<exporter>_<ids_only|cache>.onnx``);
2. classifiers over sequences: file-type detectors over 2,048 raw bytes (embedding, cast to a
   one-channel signal, one-hot), DNA and protein classifiers (one-hot or embedded nucleotides and
   residues, convs or a bidirectional transformer) and intent / keyword classifiers over token
   ids (bag of words, GRU, TextCNN).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import onnx
import torch
from torch import nn
from torch.nn import functional as fn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from fetch_zoo_models import strip_weights  # noqa: E402

OUT = ROOT / "tests" / "data" / "families"
OPSET = 17
DYNAMO_OPSET = 18
SEED = 0
VOCAB, D = 300, 32
_ONLY: set[str] | None = None


def _save(path: Path) -> None:
    model = onnx.load(str(path))
    strip_weights(model)
    onnx.save(model, str(path))
    print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


def _wanted(name: str) -> bool:
    return _ONLY is None or name in _ONLY


def export(model: nn.Module, args: tuple, name: str, inputs: list[str], outputs: list[str],
           axes: dict[str, dict[int, str]] | None = None) -> None:
    """The TorchScript exporter, named inputs and outputs, dynamic axes."""
    if not _wanted(name):
        return
    torch.manual_seed(SEED)
    path = OUT / name
    with torch.no_grad():
        torch.onnx.export(model.eval(), args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    _save(path)


def export_dynamo(model: nn.Module, args: tuple, name: str, inputs: list[str], outputs: list[str],
                  dynamic: dict | None = None) -> None:
    """The torch.export-based exporter, weights embedded."""
    if not _wanted(name):
        return
    path = OUT / name
    torch.manual_seed(SEED)
    with torch.no_grad():
        program = torch.onnx.export(model.eval(), args, input_names=inputs, output_names=outputs,
                                    dynamic_shapes=dynamic, opset_version=DYNAMO_OPSET, dynamo=True)
    program.save(str(path), external_data=False)
    _save(path)


# -- 1. state-space / recurrent-state LMs in step form ----------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class MambaMixerStep(nn.Module):
    """One Mamba block for one token, as transformers' MambaMixer slow path runs it with a cache:
    roll the conv window, depthwise conv, selective-scan update of the SSM state."""

    def __init__(self, d_inner: int = 64, d_state: int = 8, d_conv: int = 4, dt_rank: int = 4) -> None:
        super().__init__()
        self.norm = RMSNorm(D)
        self.in_proj = nn.Linear(D, 2 * d_inner, bias=False)
        self.conv_weight = nn.Parameter(torch.randn(d_inner, d_conv) * 0.1)
        self.conv_bias = nn.Parameter(torch.zeros(d_inner))
        self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, d_inner)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1).float()).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, D, bias=False)
        self.dt_rank, self.d_state = dt_rank, d_state

    def forward(self, x, conv_state, ssm_state):
        xs, z = self.in_proj(self.norm(x)).chunk(2, dim=-1)
        conv_state = torch.cat([conv_state[:, :, 1:], xs.unsqueeze(-1)], dim=-1)
        xs = fn.silu((conv_state * self.conv_weight).sum(-1) + self.conv_bias)
        dt, b, c = torch.split(self.x_proj(xs), [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = fn.softplus(self.dt_proj(dt))
        a = -torch.exp(self.A_log)
        ssm_state = ssm_state * torch.exp(dt.unsqueeze(-1) * a) + dt.unsqueeze(-1) * b.unsqueeze(1) * xs.unsqueeze(-1)
        y = (ssm_state * c.unsqueeze(1)).sum(-1) + self.D * xs
        return x + self.out_proj(y * fn.silu(z)), conv_state, ssm_state


class MambaStepLM(nn.Module):
    """A Mamba LM in step form: one token, the conv and SSM states of every layer in, logits and the
    updated states out. ``stacked``: one 4-D tensor per kind ([layers, batch, d_inner, k]), as
    hand-written ports ship them; otherwise 3-D states per layer."""

    def __init__(self, layers: int = 2, stacked: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList(MambaMixerStep() for _ in range(layers))
        self.norm_f = RMSNorm(D)
        self.stacked = stacked

    def forward(self, input_ids, *states):
        if self.stacked:
            conv, ssm = states[0].unbind(0), states[1].unbind(0)
        else:
            conv, ssm = states[0::2], states[1::2]
        x = self.embed(input_ids[:, -1])
        new_conv, new_ssm = [], []
        for layer, c, s in zip(self.layers, conv, ssm):
            x, c, s = layer(x, c, s)
            new_conv.append(c)
            new_ssm.append(s)
        logits = (self.norm_f(x) @ self.embed.weight.t()).unsqueeze(1)
        if self.stacked:
            return logits, torch.stack(new_conv), torch.stack(new_ssm)
        return (logits, *[t for pair in zip(new_conv, new_ssm) for t in pair])


class RwkvStepLM(nn.Module):
    """RWKV-4 in step form (as ChatRWKV's ONNX export runs it): one token id, one packed state
    [5 * layers, batch, hidden] (att_x, att_a, att_b, att_p, ffn_x per layer) in and out."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.ln0 = nn.LayerNorm(D)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln1": nn.LayerNorm(D), "ln2": nn.LayerNorm(D), "key": nn.Linear(D, D, bias=False),
            "value": nn.Linear(D, D, bias=False), "receptance": nn.Linear(D, D, bias=False),
            "output": nn.Linear(D, D, bias=False), "ffn_key": nn.Linear(D, 4 * D, bias=False),
            "ffn_value": nn.Linear(4 * D, D, bias=False), "ffn_receptance": nn.Linear(D, D, bias=False),
        }) for _ in range(layers))
        self.mix = nn.Parameter(torch.rand(layers, 5, D))
        self.time_decay = nn.Parameter(-torch.rand(layers, D))
        self.time_first = nn.Parameter(torch.rand(layers, D))
        self.ln_out = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx, state):
        x = self.ln0(self.emb(idx))
        new = []
        for i, blk in enumerate(self.blocks):
            att_x, aa, bb, pp, ffn_x = state[5 * i:5 * i + 5].unbind(0)
            mk, mv, mr, fk, fr = self.mix[i].unbind(0)
            h = blk["ln1"](x)
            k = blk["key"](h * mk + att_x * (1 - mk))
            v = blk["value"](h * mv + att_x * (1 - mv))
            r = torch.sigmoid(blk["receptance"](h * mr + att_x * (1 - mr)))
            ww = self.time_first[i] + k
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            wkv = (e1 * aa + e2 * v) / (e1 * bb + e2)
            ww = pp + self.time_decay[i]
            p2 = torch.maximum(ww, k)
            e1, e2 = torch.exp(ww - p2), torch.exp(k - p2)
            new += [h, e1 * aa + e2 * v, e1 * bb + e2, p2]
            x = x + blk["output"](r * wkv)
            h = blk["ln2"](x)
            kk = torch.square(torch.relu(blk["ffn_key"](h * fk + ffn_x * (1 - fk))))
            x = x + torch.sigmoid(blk["ffn_receptance"](h * fr + ffn_x * (1 - fr))) * blk["ffn_value"](kk)
            new.append(h)
        return self.head(self.ln_out(x)), torch.stack(new)


# -- 2. autoregressive speech-synthesis decoders ------------------------------------------------

MELS = 80


class SpeechT5StyleDecoder(nn.Module):
    """SpeechT5's speech decoder with a past, the way its ONNX export runs it: the last mel frame
    through the speech prenet (+ speaker embedding, positional encoding), self-attention over a
    past that comes back as a present, cross-attention over the encoder's precomputed keys/values
    (a past with no present: the encoder half of the cache), then ``feat_out`` (r mel frames) and
    ``prob_out`` (stop-token probability)."""

    def __init__(self, layers: int = 2, heads: int = 2, reduction: int = 1, speaker: int = 16) -> None:
        super().__init__()
        self.prenet = nn.Sequential(nn.Linear(MELS, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, D))
        self.speaker = nn.Linear(D + speaker, D)
        self.register_buffer("pe", torch.randn(1, 256, D) * 0.02)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "q": nn.Linear(D, D), "k": nn.Linear(D, D), "v": nn.Linear(D, D), "o": nn.Linear(D, D),
            "xq": nn.Linear(D, D), "xo": nn.Linear(D, D), "ln1": nn.LayerNorm(D), "ln2": nn.LayerNorm(D),
            "ln3": nn.LayerNorm(D), "ff1": nn.Linear(D, 64), "ff2": nn.Linear(64, D)}) for _ in range(layers))
        self.feat_out = nn.Linear(D, MELS * reduction)
        self.prob_out = nn.Linear(D, reduction)
        self.heads, self.reduction = heads, reduction

    def _split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, D // self.heads).transpose(1, 2)

    def forward(self, output_sequence, encoder_attention_mask, speaker_embeddings, *past):
        x = self.prenet(output_sequence[:, -1:])
        spk = speaker_embeddings.unsqueeze(1).expand(-1, x.shape[1], -1)
        x = self.speaker(torch.cat([x, spk], -1))
        start = past[0].shape[2]
        x = x + self.pe[:, start:start + x.shape[1]]
        bias = (1.0 - encoder_attention_mask[:, None, None, :].to(x.dtype)) * -1e4
        presents = []
        for i, layer in enumerate(self.layers):
            pk, pv, ek, ev = past[4 * i:4 * i + 4]
            q = self._split(layer["q"](x))
            k = torch.cat([pk, self._split(layer["k"](x))], 2)
            v = torch.cat([pv, self._split(layer["v"](x))], 2)
            presents += [k, v]
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // self.heads), -1) @ v
            x = layer["ln1"](x + layer["o"](a.transpose(1, 2).reshape(x.shape)))
            q = self._split(layer["xq"](x))
            a = torch.softmax(q @ ek.transpose(-1, -2) / math.sqrt(D // self.heads) + bias, -1) @ ev
            x = layer["ln2"](x + layer["xo"](a.transpose(1, 2).reshape(x.shape)))
            x = layer["ln3"](x + layer["ff2"](torch.relu(layer["ff1"](x))))
        spectrum = self.feat_out(x).view(x.shape[0], -1, MELS)
        prob = torch.sigmoid(self.prob_out(x)).view(x.shape[0], -1)
        return (torch.cat([output_sequence, spectrum[:, -1:]], 1), spectrum, prob, *presents)


class TacotronStepDecoder(nn.Module):
    """Tacotron 2's ``decoder_iter`` (as NVIDIA's ONNX export runs it): the previous mel frame
    through the prenet, attention and decoder LSTM cells with their states, location-sensitive
    attention over the encoder memory; the next frame and the stop gate out, every state out."""

    def __init__(self, memory: int = 32, rnn: int = 64, attn: int = 16) -> None:
        super().__init__()
        self.prenet = nn.Sequential(nn.Linear(MELS, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.attention_rnn = nn.LSTMCell(32 + memory, rnn)
        self.query = nn.Linear(rnn, attn, bias=False)
        self.location = nn.Conv1d(2, 8, 5, padding=2, bias=False)
        self.location_dense = nn.Linear(8, attn, bias=False)
        self.v = nn.Linear(attn, 1, bias=False)
        self.decoder_rnn = nn.LSTMCell(rnn + memory, rnn)
        self.projection = nn.Linear(rnn + memory, MELS)
        self.gate = nn.Linear(rnn + memory, 1)

    def forward(self, decoder_input, attention_hidden, attention_cell, decoder_hidden, decoder_cell,
                attention_weights, attention_weights_cum, attention_context, memory, processed_memory, mask):
        x = self.prenet(decoder_input)
        attention_hidden, attention_cell = self.attention_rnn(torch.cat([x, attention_context], -1),
                                                              (attention_hidden, attention_cell))
        location = self.location(torch.stack([attention_weights, attention_weights_cum], 1)).transpose(1, 2)
        energies = self.v(torch.tanh(self.query(attention_hidden).unsqueeze(1) + self.location_dense(location)
                                     + processed_memory)).squeeze(-1)
        attention_weights = torch.softmax(energies.masked_fill(mask, -1e4), -1)
        attention_context = torch.bmm(attention_weights.unsqueeze(1), memory).squeeze(1)
        decoder_hidden, decoder_cell = self.decoder_rnn(torch.cat([attention_hidden, attention_context], -1),
                                                        (decoder_hidden, decoder_cell))
        out = torch.cat([decoder_hidden, attention_context], -1)
        return (self.projection(out), self.gate(out), attention_hidden, attention_cell, decoder_hidden, decoder_cell,
                attention_weights, attention_weights_cum + attention_weights, attention_context)


class FastSpeechStyle(nn.Module):
    """A non-autoregressive TTS acoustic model (FastSpeech 2-style): phoneme ids through a
    transformer encoder, a convolutional duration predictor, a fixed-rate length regulator and a
    decoder to mel frames in one pass: nothing is fed back."""

    def __init__(self, phonemes: int = 80, upsample: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(phonemes, D)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 64, batch_first=True), 2)
        self.duration = nn.Sequential(nn.Conv1d(D, D, 3, padding=1), nn.ReLU(), nn.Conv1d(D, 1, 3, padding=1))
        self.decoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 64, batch_first=True), 2)
        self.mel = nn.Linear(D, MELS)
        self.upsample = upsample

    def forward(self, phoneme_ids):
        h = self.encoder(self.embed(phoneme_ids))
        durations = self.duration(h.transpose(1, 2)).squeeze(1)
        b, n, d = h.shape
        h = h.unsqueeze(2).expand(b, n, self.upsample, d).reshape(b, n * self.upsample, d)
        return self.mel(self.decoder(h)), durations


# -- negatives with state pairs -----------------------------------------------------------------

class StreamingConformerEncoder(nn.Module):
    """A cache-aware streaming speech encoder (NeMo's export names): mel frames in, encoded frames
    out, and per-layer caches (``cache_last_channel`` for attention, ``cache_last_time`` for the
    depthwise conv) in and ``*_next`` out. It carries state between chunks but generates nothing."""

    def __init__(self, layers: int = 2, cache: int = 8, kernel: int = 4) -> None:
        super().__init__()
        self.subsample = nn.Conv1d(MELS, D, 3, stride=2, padding=1)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "qkv": nn.Linear(D, 3 * D), "o": nn.Linear(D, D), "dw": nn.Conv1d(D, D, kernel, groups=D),
            "ln": nn.LayerNorm(D), "ff": nn.Linear(D, D)}) for _ in range(layers))
        self.cache, self.kernel = cache, kernel

    def forward(self, audio_signal, cache_last_channel, cache_last_time):
        x = self.subsample(audio_signal).transpose(1, 2)
        channel_next, time_next = [], []
        for i, layer in enumerate(self.layers):
            ctx = torch.cat([cache_last_channel[:, i], x], 1)
            channel_next.append(ctx[:, -self.cache:])
            q, k, v = layer["qkv"](ctx).chunk(3, -1)
            a = torch.softmax(q[:, -x.shape[1]:] @ k.transpose(1, 2) / math.sqrt(D), -1) @ v
            x = layer["ln"](x + layer["o"](a))
            t = torch.cat([cache_last_time[:, i], x.transpose(1, 2)], 2)
            time_next.append(t[:, :, -(self.kernel - 1):])
            x = x + layer["ff"](layer["dw"](t).transpose(1, 2))
        return x, torch.stack(channel_next, 1), torch.stack(time_next, 1)


class ConvGru(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.gates = nn.Conv2d(2 * channels, 2 * channels, 3, padding=1)
        self.candidate = nn.Conv2d(2 * channels, channels, 3, padding=1)

    def forward(self, x, h):
        r, z = torch.sigmoid(self.gates(torch.cat([x, h], 1))).chunk(2, 1)
        c = torch.tanh(self.candidate(torch.cat([x, r * h], 1)))
        return (1 - z) * h + z * c


class VideoMattingStep(nn.Module):
    """Robust-video-matting-style: a frame and four 4-D recurrent states (``r1i`` .. ``r4i``) in,
    foreground, alpha and the states (``r1o`` .. ``r4o``) out; a vision model with step state."""

    def __init__(self) -> None:
        super().__init__()
        chans = (8, 16, 24, 32)
        self.stages = nn.ModuleList()
        cin = 3
        for c in chans:
            self.stages.append(nn.Sequential(nn.Conv2d(cin, c, 3, stride=2, padding=1), nn.BatchNorm2d(c), nn.ReLU()))
            cin = c
        self.grus = nn.ModuleList(ConvGru(c) for c in chans)
        self.head = nn.Conv2d(sum(chans), 4, 1)

    def forward(self, src, r1i, r2i, r3i, r4i):
        x, states, feats = src, [], []
        for stage, gru, h in zip(self.stages, self.grus, (r1i, r2i, r3i, r4i)):
            x = stage(x)
            x = gru(x, h)
            states.append(x)
            feats.append(fn.interpolate(x, size=src.shape[2:], mode="bilinear", align_corners=False))
        out = self.head(torch.cat(feats, 1))
        return (out[:, :3], torch.sigmoid(out[:, 3:]), *states)


# -- 5. captioner in one graph -------------------------------------------------------------------

class CnnGruCaptionStep(nn.Module):
    """Show-and-tell in one step graph: the image through a small CNN, the previous word and the GRU
    state in, the next word's logits and the state out."""

    def __init__(self) -> None:
        super().__init__()
        layers, cin = [], 3
        for c in (16, 32, 32, 64):
            layers += [nn.Conv2d(cin, c, 3, stride=2, padding=1), nn.BatchNorm2d(c), nn.ReLU()]
            cin = c
        self.cnn = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, D))
        self.embed = nn.Embedding(VOCAB, D)
        self.gru = nn.GRUCell(2 * D, D)
        self.out = nn.Linear(D, VOCAB)

    def forward(self, image, prev_token, hidden):
        hidden = self.gru(torch.cat([self.embed(prev_token), self.cnn(image)], -1), hidden)
        return self.out(hidden), hidden


# -- transformers ----------------------------------------------------------------------------------

class LogitsOnly(nn.Module):
    """A causal LM without a cache: token ids (and mask) in, logits out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


class ClipText(nn.Module):
    def __init__(self, model: nn.Module, fields: tuple[str, ...]) -> None:
        super().__init__()
        self.model, self.fields = model, fields

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return tuple(getattr(out, f) for f in self.fields)


class CaptionerLogits(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values, decoder_input_ids, decoder_attention_mask):
        return self.model(pixel_values=pixel_values, decoder_input_ids=decoder_input_ids,
                          decoder_attention_mask=decoder_attention_mask, use_cache=False).logits


def hf_exports() -> None:
    import transformers as tf

    ids = torch.randint(3, VOCAB, (2, 6))
    mask = torch.ones_like(ids)
    text_axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=2, max=60)
    text_dynamic = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}

    def built(cls, config, attention: str | None = None):
        torch.manual_seed(SEED)
        if attention:
            config._attn_implementation = attention
        return cls(config).eval()

    clip = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=64, projection_dim=24)
    export(ClipText(built(tf.CLIPTextModelWithProjection, tf.CLIPTextConfig(**clip)), ("text_embeds",
                                                                                        "last_hidden_state")),
           (ids, mask), "hf_clip_text_projection.onnx", ["input_ids", "attention_mask"],
           ["text_embeds", "last_hidden_state"], text_axes)
    export_dynamo(ClipText(built(tf.CLIPTextModel, tf.CLIPTextConfig(**clip)), ("last_hidden_state", "pooler_output")),
                  (ids, mask), "hf_clip_text_dynamo.onnx", ["input_ids", "attention_mask"],
                  ["last_hidden_state", "pooler_output"], text_dynamic)
    export(ClipText(built(tf.CLIPTextModel, tf.CLIPTextConfig(**clip | dict(eos_token_id=2, num_hidden_layers=3))),
                    ("pooler_output",)),
           (ids, mask), "hf_clip_text_pooled_eos.onnx", ["input_ids", "attention_mask"], ["pooler_output"], text_axes)

    gpt2 = tf.GPT2Config(n_embd=D, n_layer=2, n_head=2, n_positions=64, vocab_size=VOCAB)
    export_dynamo(LogitsOnly(built(tf.GPT2LMHeadModel, gpt2)), (ids, mask), "hf_gpt2_dynamo.onnx",
                  ["input_ids", "attention_mask"], ["logits"], text_dynamic)
    export(LogitsOnly(built(tf.GPT2LMHeadModel, gpt2, attention="eager")), (ids, mask),
           "hf_gpt2_torchscript_eager.onnx", ["input_ids", "attention_mask"], ["logits"], text_axes)
    llama = tf.LlamaConfig(hidden_size=D, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, max_position_embeddings=64, vocab_size=VOCAB)
    export_dynamo(LogitsOnly(built(tf.LlamaForCausalLM, llama)), (ids, mask), "hf_llama_dynamo.onnx",
                  ["input_ids", "attention_mask"], ["logits"], text_dynamic)
    qwen = tf.Qwen2Config(hidden_size=D, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                          num_key_value_heads=1, max_position_embeddings=64, vocab_size=VOCAB)
    export(LogitsOnly(built(tf.Qwen2ForCausalLM, qwen, attention="sdpa")), (ids, mask),
           "hf_qwen2_torchscript_sdpa.onnx", ["input_ids", "attention_mask"], ["logits"], text_axes)

    vit = tf.ViTConfig(hidden_size=D, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=32,
                       patch_size=8)
    decoder = tf.GPT2Config(n_embd=D, n_layer=1, n_head=2, n_positions=64, vocab_size=VOCAB, add_cross_attention=True)
    captioner = tf.VisionEncoderDecoderConfig.from_encoder_decoder_configs(vit, decoder)
    pixels = torch.randn(1, 3, 32, 32)
    dec_ids = torch.randint(3, VOCAB, (1, 5))
    args = (pixels, dec_ids, torch.ones_like(dec_ids))
    names = ["pixel_values", "decoder_input_ids", "decoder_attention_mask"]
    axes = {"pixel_values": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "sequence"},
            "decoder_attention_mask": {0: "batch", 1: "sequence"}}
    dynamic = {"pixel_values": {0: batch}, "decoder_input_ids": {0: batch, 1: seq},
               "decoder_attention_mask": {0: batch, 1: seq}}
    export(CaptionerLogits(built(tf.VisionEncoderDecoderModel, captioner)), args, "hf_vit_gpt2_captioner.onnx",
           names, ["logits"], axes)
    export_dynamo(CaptionerLogits(built(tf.VisionEncoderDecoderModel, captioner)), args,
                  "hf_vit_gpt2_captioner_dynamo.onnx", names, ["logits"], dynamic)
    bert = tf.BertConfig(hidden_size=D, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         vocab_size=VOCAB, is_decoder=True, add_cross_attention=True, max_position_embeddings=64)
    deit = tf.DeiTConfig(hidden_size=D, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         image_size=32, patch_size=8)
    deit_bert = tf.VisionEncoderDecoderConfig.from_encoder_decoder_configs(deit, bert)
    export(CaptionerLogits(built(tf.VisionEncoderDecoderModel, deit_bert)), args, "hf_deit_bert_captioner.onnx",
           names, ["logits"], axes)


def torch_exports() -> None:
    b = 2
    torch.manual_seed(SEED)
    token = torch.randint(3, VOCAB, (b, 1))
    conv, ssm = torch.randn(2, b, 64, 4), torch.randn(2, b, 64, 8)
    export(MambaStepLM(stacked=True), (token, conv, ssm), "torch_mamba_step_stacked.onnx",
           ["input_ids", "conv_states", "ssm_states"], ["logits", "present_conv_states", "present_ssm_states"],
           {"input_ids": {0: "batch"}, "conv_states": {1: "batch"}, "ssm_states": {1: "batch"}})
    names_in = [f"{kind}_state.{i}" for i in range(2) for kind in ("conv", "ssm")]
    names_out = [f"{kind}_state_out.{i}" for i in range(2) for kind in ("conv", "ssm")]
    per_layer = tuple(torch.randn(b, 64, 4 if i % 2 == 0 else 8) for i in range(4))
    batch = torch.export.Dim("batch", min=1, max=64)
    export_dynamo(MambaStepLM(stacked=False), (token, *per_layer), "torch_mamba_step_per_layer_dynamo.onnx",
                  ["input_ids", *names_in], ["logits", *names_out],
                  ({0: batch}, tuple({0: batch} for _ in per_layer)))
    export(RwkvStepLM(), (torch.randint(3, VOCAB, (b,)), torch.randn(10, b, D)), "torch_rwkv_step.onnx",
           ["idx", "state"], ["logits", "new_state"], {"idx": {0: "batch"}, "state": {1: "batch"},
                                                         "new_state": {1: "batch"}})

    layers, past_len, src = 2, 3, 7
    past = []
    for _ in range(layers):
        past += [torch.randn(b, 2, past_len, D // 2), torch.randn(b, 2, past_len, D // 2),
                 torch.randn(b, 2, src, D // 2), torch.randn(b, 2, src, D // 2)]
    hf_in = [f"past_key_values.{i}.{half}.{kv}" for i in range(layers) for half in ("decoder", "encoder")
             for kv in ("key", "value")]
    hf_out = [f"present.{i}.decoder.{kv}" for i in range(layers) for kv in ("key", "value")]
    axes = {"output_sequence": {0: "batch", 1: "frames"}, "encoder_attention_mask": {0: "batch", 1: "encoder_len"},
            "speaker_embeddings": {0: "batch"}}
    axes |= {n: {0: "batch", 2: "encoder_len" if ".encoder." in n else "past_len"} for n in hf_in}
    args = (torch.randn(b, 4, MELS), torch.ones(b, src, dtype=torch.int64), torch.randn(b, 16), *past)
    export(SpeechT5StyleDecoder(), args, "torch_speecht5_decoder_with_past.onnx",
           ["output_sequence", "encoder_attention_mask", "speaker_embeddings", *hf_in],
           ["output_sequence_out", "spectrum", "prob", *hf_out], axes)
    flat_in = [f"past_{half}_{kv}_{i}" for i in range(layers) for half in ("decoder", "encoder")
               for kv in ("key", "value")]
    flat_out = [f"present_decoder_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]
    export_dynamo(SpeechT5StyleDecoder(reduction=2), args, "torch_speecht5_decoder_r2_dynamo.onnx",
                  ["output_sequence", "encoder_attention_mask", "speaker_embeddings", *flat_in],
                  ["output_sequence_out", "spectrum", "prob", *flat_out], None)
    s = 7
    tac = (torch.randn(b, MELS), torch.zeros(b, 64), torch.zeros(b, 64), torch.zeros(b, 64), torch.zeros(b, 64),
           torch.zeros(b, s), torch.zeros(b, s), torch.zeros(b, 32), torch.randn(b, s, 32), torch.randn(b, s, 16),
           torch.zeros(b, s, dtype=torch.bool))
    state_names = ["attention_hidden", "attention_cell", "decoder_hidden", "decoder_cell", "attention_weights",
                   "attention_weights_cum", "attention_context"]
    seq_axes = {n: {0: "batch", 1: "seq_len"} for n in ("attention_weights", "attention_weights_cum", "memory",
                                                        "processed_memory", "mask")}
    export(TacotronStepDecoder(), tac, "torch_tacotron2_decoder_iter.onnx",
           ["decoder_input", *state_names, "memory", "processed_memory", "mask"],
           ["decoder_output", "gate_prediction", *[f"out_{n}" for n in state_names]], seq_axes)
    export_dynamo(TacotronStepDecoder(), tac, "torch_tacotron2_decoder_iter_dynamo.onnx",
                  ["decoder_input", *state_names, "memory", "processed_memory", "mask"],
                  ["decoder_output", "gate_prediction", *[f"out_{n}" for n in state_names]], None)
    export(FastSpeechStyle(), (torch.randint(0, 80, (b, 9)),), "torch_fastspeech_nar_tts.onnx", ["phoneme_ids"],
           ["mel", "log_durations"], {"phoneme_ids": {0: "batch", 1: "phonemes"}})

    export(StreamingConformerEncoder(), (torch.randn(1, MELS, 16), torch.zeros(1, 2, 8, D), torch.zeros(1, 2, D, 3)),
           "torch_streaming_conformer_cache.onnx", ["audio_signal", "cache_last_channel", "cache_last_time"],
           ["outputs", "cache_last_channel_next", "cache_last_time_next"], {"audio_signal": {0: "batch", 2: "time"}})
    states = (torch.zeros(1, 8, 32, 32), torch.zeros(1, 16, 16, 16), torch.zeros(1, 24, 8, 8), torch.zeros(1, 32, 4, 4))
    export(VideoMattingStep(), (torch.randn(1, 3, 64, 64), *states), "torch_video_matting_states.onnx",
           ["src", "r1i", "r2i", "r3i", "r4i"], ["fgr", "pha", "r1o", "r2o", "r3o", "r4o"])
    export(CnnGruCaptionStep(), (torch.randn(b, 3, 64, 64), torch.randint(3, VOCAB, (b,)), torch.zeros(b, D)),
           "torch_cnn_gru_caption_step.onnx", ["image", "prev_token", "hidden"], ["logits", "hidden_out"],
           {"image": {0: "batch"}, "prev_token": {0: "batch"}, "hidden": {0: "batch"}})


# -- issue 28: decoder-only LMs across architectures and exporters, with and without a cache --------

LM_ARCHITECTURES = ("llama", "qwen2", "mistral", "phi", "gpt2", "gemma", "phi3")


def lm_config(arch: str):
    """A tiny random config of ``arch`` (2 layers, width 32, vocabulary 300; grouped KV heads where
    the architecture has them)."""
    import transformers as tf

    common = dict(vocab_size=VOCAB, max_position_embeddings=64, num_hidden_layers=2, num_attention_heads=2)
    if arch == "gpt2":
        return tf.GPT2Config(n_embd=D, n_layer=2, n_head=2, n_positions=64, vocab_size=VOCAB)
    if arch == "phi":
        return tf.PhiConfig(hidden_size=D, intermediate_size=64, **common)
    if arch == "phi3":  # a sliding-window cache, like Mistral's
        return tf.Phi3Config(hidden_size=D, intermediate_size=64, num_key_value_heads=1, sliding_window=8,
                             pad_token_id=0, **common)
    if arch == "gemma":
        return tf.GemmaConfig(hidden_size=D, intermediate_size=64, head_dim=16, num_key_value_heads=1, **common)
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "mistral": tf.MistralConfig}[arch]
    return cls(hidden_size=D, intermediate_size=64, num_key_value_heads=1, **common)


def lm_model(arch: str):
    import transformers as tf

    torch.manual_seed(SEED)
    return tf.AutoModelForCausalLM.from_config(lm_config(arch)).eval()


class IdsToLogits(nn.Module):
    """A causal LM called the way most users export it: token ids only, no mask input, no cache.
    ``ones_mask``: pass an all-ones mask built in the graph (the TorchScript exporter cannot trace
    transformers' packed-sequence check, ``aten::diff``, that runs when the mask is None)."""

    def __init__(self, model: nn.Module, ones_mask: bool = False) -> None:
        super().__init__()
        self.model, self.ones_mask = model, ones_mask

    def forward(self, input_ids):
        mask = torch.ones_like(input_ids) if self.ones_mask else None
        return self.model(input_ids=input_ids, attention_mask=mask, use_cache=False).logits


class LogitsWithCache(nn.Module):
    """A causal LM with a flat KV cache: ids, mask and every layer's past key and value in; logits
    and the present key and value (one token longer) out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, *past):
        from transformers import DynamicCache

        pairs = [(past[i], past[i + 1]) for i in range(0, len(past), 2)]
        cache = DynamicCache(pairs, config=self.model.config)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def issue28_lm_exports() -> None:
    """Every architecture with both exporters, without a cache (ids only) and with one."""
    ids = torch.randint(3, VOCAB, (2, 6))
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=2, max=60)
    for arch in LM_ARCHITECTURES:
        export_dynamo(IdsToLogits(lm_model(arch)), (ids,), f"hf_{arch}_dynamo_ids_only.onnx", ["input_ids"],
                      ["logits"], {"input_ids": {0: batch, 1: seq}})
        export(IdsToLogits(lm_model(arch), ones_mask=True), (ids,), f"hf_{arch}_torchscript_ids_only.onnx", ["input_ids"], ["logits"],
               {"input_ids": {0: "batch", 1: "sequence"}})
        model = lm_model(arch)
        config = model.config
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        past_len, layers = 3, config.num_hidden_layers
        past = tuple(torch.randn(2, heads, past_len, head_dim) for _ in range(2 * layers))
        step = torch.randint(3, VOCAB, (2, 1))
        mask = torch.ones(2, past_len + 1, dtype=torch.int64)
        names_in = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
        names_out = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
        axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"}}
        axes |= {n: {0: "batch", 2: "past"} for n in names_in}
        export(LogitsWithCache(model), (step, mask, *past), f"hf_{arch}_torchscript_cache.onnx",
               ["input_ids", "attention_mask", *names_in], ["logits", *names_out], axes)
        export_dynamo(LogitsWithCache(lm_model(arch)), (step, mask, *past), f"hf_{arch}_dynamo_cache.onnx",
                      ["input_ids", "attention_mask", *names_in], ["logits", *names_out], None)


# -- issue 28: classifiers over byte, nucleotide, residue and token sequences ----------------------

BYTES, CLASSES = 2048, 12


def _pool_head(width: int, classes: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, classes))


class ByteEmbedConv(nn.Module):
    """A file-type detector (Magika-style input): 2,048 raw bytes as int64, an embedding of the 256
    byte values, 1-D convs, global max pool, dense layers and a class softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, 16)
        self.conv1, self.conv2 = nn.Conv1d(16, 32, 8, stride=4), nn.Conv1d(32, 32, 4, stride=2)
        self.head = _pool_head(32, CLASSES)

    def forward(self, content):
        x = self.embed(content).transpose(1, 2)
        x = fn.relu(self.conv2(fn.relu(self.conv1(x))))
        return fn.softmax(self.head(x.amax(-1)), -1)


class ByteCastConv(nn.Module):
    """Raw bytes read as a one-channel signal: int32 [N, 2048] cast to float and scaled to [0, 1],
    strided 1-D convs, mean pool, a class softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(1, 16, 16, stride=8), nn.Conv1d(16, 32, 4, stride=2)
        self.head = _pool_head(32, CLASSES)

    def forward(self, content):
        x = (content.float() / 255.0).unsqueeze(1)
        x = fn.relu(self.conv2(fn.relu(self.conv1(x))))
        return fn.softmax(self.head(x.mean(-1)), -1)


class ByteOneHotDense(nn.Module):
    """Bytes one-hot encoded (256 values), dense layers per position, pooled, a class softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(256, 32)
        self.head = _pool_head(32, CLASSES)

    def forward(self, content):
        x = fn.gelu(self.proj(fn.one_hot(content, 256).float()))
        return fn.softmax(self.head(x.mean(1)), -1)


class DnaOneHotConv(nn.Module):
    """A Basset/DeepSEA-style regulatory-sequence classifier: nucleotides (A, C, G, T, N) one-hot,
    conv / pool stacks, a multi-label sigmoid head."""

    def __init__(self, labels: int = 8) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(5, 32, 11, padding=5), nn.Conv1d(32, 32, 7, padding=3)
        self.head = _pool_head(32, labels)

    def forward(self, sequence):
        x = fn.one_hot(sequence, 5).float().transpose(1, 2)
        x = fn.max_pool1d(fn.relu(self.conv1(x)), 4)
        x = fn.relu(self.conv2(x)).amax(-1)
        return torch.sigmoid(self.head(x))


class DnaEmbedConv(nn.Module):
    """A DNA classifier that embeds nucleotide ids (5 rows) instead of one-hot, then 1-D convs and
    a softmax over classes (promoter / enhancer / ...)."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 8)
        self.conv1, self.conv2 = nn.Conv1d(8, 32, 9, padding=4), nn.Conv1d(32, 32, 5, padding=2)
        self.head = _pool_head(32, classes)

    def forward(self, sequence):
        x = fn.relu(self.conv1(self.embed(sequence).transpose(1, 2)))
        return fn.softmax(self.head(fn.relu(self.conv2(x)).mean(-1)), -1)


class ProteinTransformer(nn.Module):
    """A protein family classifier: residue ids (25 rows: 20 amino acids, rare ones, pad), a small
    bidirectional transformer encoder, a CLS vector, a softmax over families."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.embed, self.pos = nn.Embedding(25, D), nn.Embedding(512, D)
        layer = nn.TransformerEncoderLayer(D, 2, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(D, classes)

    def forward(self, residues):
        positions = torch.arange(residues.shape[1], device=residues.device).unsqueeze(0)
        x = self.encoder(self.embed(residues) + self.pos(positions))
        return fn.softmax(self.head(x[:, 0]), -1)


class ProteinOneHotConv(nn.Module):
    """A protein localisation classifier over one-hot residues (25 values) with dilated 1-D convs."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(25, 32, 5, padding=2)
        self.conv2 = nn.Conv1d(32, 32, 3, padding=2, dilation=2)
        self.head = _pool_head(32, classes)

    def forward(self, residues):
        x = fn.relu(self.conv1(fn.one_hot(residues, 25).float().transpose(1, 2)))
        return fn.log_softmax(self.head(fn.relu(self.conv2(x)).amax(-1)), -1)


class IntentBagOfWords(nn.Module):
    """A fastText-style intent classifier: token ids, mean of their embeddings, one linear layer."""

    def __init__(self, vocab: int = 1000, intents: int = 20) -> None:
        super().__init__()
        self.embed, self.out = nn.Embedding(vocab, D), nn.Linear(D, intents)

    def forward(self, input_ids):
        return fn.softmax(self.out(self.embed(input_ids).mean(1)), -1)


class IntentGru(nn.Module):
    """An intent classifier over token ids: embedding, bidirectional GRU, last states, softmax."""

    def __init__(self, vocab: int = 1000, intents: int = 20) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, D)
        self.gru = nn.GRU(D, D, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * D, intents)

    def forward(self, input_ids):
        _, hidden = self.gru(self.embed(input_ids))
        return fn.softmax(self.out(torch.cat([hidden[0], hidden[1]], -1)), -1)


class KeywordTextCnn(nn.Module):
    """A Kim-style TextCNN keyword / spam classifier: token embeddings, parallel 1-D convs of widths
    3, 4 and 5, max over time, a softmax over classes."""

    def __init__(self, vocab: int = 1000, classes: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, D)
        self.convs = nn.ModuleList(nn.Conv1d(D, 16, k) for k in (3, 4, 5))
        self.out = nn.Linear(48, classes)

    def forward(self, tokens):
        x = self.embed(tokens).transpose(1, 2)
        return fn.softmax(self.out(torch.cat([fn.relu(c(x)).amax(-1) for c in self.convs], -1)), -1)


def issue28_sequence_exports() -> None:
    """Byte, nucleotide / residue and token-id classifiers, each kind with both exporters."""
    torch.manual_seed(SEED)
    batch = torch.export.Dim("batch", min=1, max=64)
    length = torch.export.Dim("length", min=16, max=1024)
    content = torch.randint(0, 256, (2, BYTES))
    export(ByteEmbedConv(), (content,), "torch_bytes_embed_conv_filetype.onnx", ["content"], ["probabilities"],
           {"content": {0: "batch"}})
    export_dynamo(ByteCastConv(), (content.to(torch.int32),), "torch_bytes_cast_conv_filetype_dynamo.onnx",
                  ["bytes"], ["scores"], ({0: batch},))
    export(ByteOneHotDense(), (content,), "torch_bytes_onehot_dense_filetype.onnx", ["input_bytes"], ["probs"],
           {"input_bytes": {0: "batch"}})
    dna = torch.randint(0, 5, (2, 600))
    export(DnaOneHotConv(), (dna,), "torch_dna_onehot_conv.onnx", ["sequence"], ["labels"],
           {"sequence": {0: "batch", 1: "length"}})
    export_dynamo(DnaEmbedConv(), (dna,), "torch_dna_embed_conv_dynamo.onnx", ["sequence"], ["probabilities"],
                  ({0: batch, 1: length},))
    residues = torch.randint(0, 25, (2, 120))
    export(ProteinTransformer(), (residues,), "torch_protein_transformer.onnx", ["residues"], ["family"],
           {"residues": {0: "batch", 1: "length"}})
    export_dynamo(ProteinOneHotConv(), (residues,), "torch_protein_onehot_conv_dynamo.onnx", ["residues"],
                  ["log_probs"], ({0: batch, 1: length},))
    tokens = torch.randint(1, 1000, (2, 24))
    export(IntentBagOfWords(), (tokens,), "torch_intent_bag_of_words.onnx", ["input_ids"], ["intent"],
           {"input_ids": {0: "batch", 1: "sequence"}})
    export_dynamo(IntentGru(), (tokens,), "torch_intent_gru_dynamo.onnx", ["input_ids"], ["intent"],
                  ({0: batch, 1: length},))
    export(KeywordTextCnn(), (tokens,), "torch_keyword_textcnn.onnx", ["tokens"], ["probabilities"],
           {"tokens": {0: "batch", 1: "sequence"}})
    export_dynamo(KeywordTextCnn(classes=6), (tokens,), "torch_keyword_textcnn_dynamo.onnx", ["tokens"],
                  ["probabilities"], ({0: batch, 1: length},))


def main(argv: list[str]) -> int:
    """Every export, or with ``--only NAME ...`` just those files."""
    global _ONLY
    if argv[:1] == ["--only"]:
        _ONLY = set(argv[1:])
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused eval kernel has no ONNX export
    torch_exports()
    issue28_sequence_exports()
    if _ONLY is None or any(name.startswith("hf_") for name in _ONLY):
        hf_exports()
        issue28_lm_exports()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
