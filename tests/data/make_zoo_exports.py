"""Export the real architectures of the classifier zoo into ``tests/data/exports/`` (run once; the
.onnx files are committed, tiny, randomly initialised: the classifiers read structure, not weights).

torch, transformers and optimum are not project dependencies. To regenerate (pinned versions):

    python3 -m venv /work/export-venv
    /work/export-venv/bin/pip install torch==2.13.0 onnx==1.23.2 onnxscript==0.7.2 \\
        transformers==4.57.6 optimum==2.1.0 optimum-onnx==0.1.0 onnxruntime==1.32.0
    /work/export-venv/bin/python tests/data/make_zoo_exports.py [--only FILE.onnx ...]

Nothing is downloaded: every model is built from a config or a module defined here. Two sources:

- ``hf_*``: transformers models exported with optimum's ONNX exporter, the way users export them
  (Whisper / T5 / Marian encoder + decoder with and without a past, GPT-2 and Llama without a
  cache, TrOCR, wav2vec2 CTC, BERT, ResNet, SegFormer).
- ``torch_*``: architectures the hub exporters do not cover, written here after the families of
  issue 11: GRU/LSTM step decoders with a recurrent state in and out, greedy loops unrolled in the
  graph or written as real loops (ONNX Loop), seq2seq graphs over source and target tokens, CRNN+CTC recognisers, a YOLO-style detector
  and a U-Net with dynamic height and width, audio CNNs on raw waveforms and in-graph
  spectrograms, deep and channels-last ResNets, dynamically quantised LSTM / CNN (quantised with
  onnxruntime.quantization), and small heads over sentence embeddings.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

OUT = Path(__file__).resolve().parent / "exports"
OPSET = 17
SEED = 0


# -- transformers / optimum --------------------------------------------------------------------

def _optimum(model, task: str, files: dict[str, str], **kwargs) -> None:
    """Export ``model`` for ``task`` with optimum (legacy layout: separate decoder files) and keep
    ``files`` (exported name -> zoo name)."""
    from optimum.exporters.onnx import onnx_export_from_model

    with tempfile.TemporaryDirectory() as tmp:
        onnx_export_from_model(model.eval(), tmp, task=task, opset=OPSET, legacy=True, **kwargs)
        for src, dst in files.items():
            shutil.copy(Path(tmp) / src, OUT / dst)
            print(f"{dst}: {(OUT / dst).stat().st_size / 1024:.0f} KiB")


SEQ2SEQ_FILES = {"encoder_model.onnx": "encoder.onnx", "decoder_model.onnx": "decoder.onnx",
                 "decoder_with_past_model.onnx": "decoder_with_past.onnx"}


def _seq2seq_files(prefix: str) -> dict[str, str]:
    return {src: f"{prefix}_{dst}" for src, dst in SEQ2SEQ_FILES.items()}


def hf_exports() -> None:
    import transformers as tf

    torch.manual_seed(SEED)
    small = dict(vocab_size=300, pad_token_id=0, eos_token_id=2, bos_token_id=1, decoder_start_token_id=1)
    whisper = tf.WhisperConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=80,
                               max_source_positions=1500, max_target_positions=64, **small)
    _optimum(tf.WhisperForConditionalGeneration(whisper), "automatic-speech-recognition-with-past",
             _seq2seq_files("hf_whisper") | {"decoder_model_merged.onnx": "hf_whisper_decoder_merged.onnx"})
    t5 = tf.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
                     relative_attention_num_buckets=8, **small)
    _optimum(tf.T5ForConditionalGeneration(t5), "text2text-generation-with-past", _seq2seq_files("hf_t5"))
    marian = tf.MarianConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                             max_position_embeddings=64, **small)
    _optimum(tf.MarianMTModel(marian), "text2text-generation-with-past", _seq2seq_files("hf_marian"))
    gpt2 = tf.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64, vocab_size=300)
    _optimum(tf.GPT2LMHeadModel(gpt2), "text-generation", {"model.onnx": "hf_gpt2_no_cache.onnx"})
    llama = tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, max_position_embeddings=64, vocab_size=300)
    _optimum(tf.LlamaForCausalLM(llama), "text-generation", {"model.onnx": "hf_llama_no_cache.onnx"})
    vit = tf.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                       image_size=64, patch_size=16)
    trocr = tf.TrOCRConfig(d_model=32, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
                           max_position_embeddings=64, **{k: v for k, v in small.items()})
    vision2text = tf.VisionEncoderDecoderModel(
        config=tf.VisionEncoderDecoderConfig.from_encoder_decoder_configs(vit, trocr))
    vision2text.config.decoder_start_token_id, vision2text.config.pad_token_id = 1, 0
    _optimum(vision2text, "image-to-text-with-past", _seq2seq_files("hf_trocr"))
    wav2vec2 = tf.Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                 conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                 num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=32)
    _optimum(tf.Wav2Vec2ForCTC(wav2vec2), "automatic-speech-recognition", {"model.onnx": "hf_wav2vec2_ctc.onnx"})
    bert = tf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         vocab_size=300, max_position_embeddings=64)
    _optimum(tf.BertModel(bert), "feature-extraction", {"model.onnx": "hf_bert_encoder.onnx"})
    resnet = tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 32, 64], depths=[2, 2, 2, 2],
                             num_labels=10)
    _optimum(tf.ResNetForImageClassification(resnet), "image-classification", {"model.onnx": "hf_resnet18.onnx"})
    segformer = tf.SegformerConfig(hidden_sizes=[8, 16, 24, 32], decoder_hidden_size=32, depths=[1, 1, 1, 1],
                                   num_attention_heads=[1, 1, 1, 1], num_labels=4)
    _optimum(tf.SegformerForSemanticSegmentation(segformer), "semantic-segmentation",
             {"model.onnx": "hf_segformer.onnx"})


# -- hand-written architectures ----------------------------------------------------------------

VOCAB, HIDDEN, EMBED = 500, 32, 16


class GruStepDecoder(nn.Module):
    """One step of a GRU decoder: the tokens so far (only the last is read), a hidden state in and
    out, log-probabilities over the vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.gru = nn.GRU(EMBED, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, hidden):
        y, hidden = self.gru(self.embed(tokens[:, -1:]), hidden)
        return self.out(y[:, -1]).log_softmax(-1), hidden


class LstmAttentionStepDecoder(nn.Module):
    """Show-attend-tell / Bahdanau style step: previous word, (h, c) in and out, attention over the
    encoder outputs; the LSTMCell exports as plain MatMul/Sigmoid/Tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.cell = nn.LSTMCell(EMBED + HIDDEN, HIDDEN)
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.out = nn.Linear(2 * HIDDEN, VOCAB)

    def forward(self, prev_word, h, c, encoder_out):
        weights = torch.softmax((encoder_out @ self.query(h).unsqueeze(-1)).squeeze(-1), -1)
        context = (weights.unsqueeze(-1) * encoder_out).sum(1)
        h, c = self.cell(torch.cat([self.embed(prev_word), context], -1), (h, c))
        return self.out(torch.cat([h, context], -1)), h, c


class GreedyGruTranslator(nn.Module):
    """A whole greedy translation in one graph: GRU encoder, then ``steps`` decoder steps where each
    ArgMax is fed back into the embedding Gather."""

    def __init__(self, steps: int = 6) -> None:
        super().__init__()
        self.steps = steps
        self.src_embed = nn.Embedding(VOCAB, EMBED)
        self.encoder = nn.GRU(EMBED, HIDDEN, batch_first=True)
        self.tgt_embed = nn.Embedding(VOCAB, EMBED)
        self.cell = nn.GRUCell(EMBED, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, source):
        _, h = self.encoder(self.src_embed(source))
        h = h[0]
        token = torch.ones(source.shape[0], dtype=torch.long)
        tokens = []
        for _ in range(self.steps):
            h = self.cell(self.tgt_embed(token), h)
            token = self.out(h).argmax(-1)
            tokens.append(token)
        return torch.stack(tokens, 1)


class GreedyCaptioner(nn.Module):
    """Image captioning unrolled: a small CNN encodes the image, an LSTMCell emits ``steps`` words,
    each ArgMax fed back into the word embedding."""

    def __init__(self, steps: int = 5) -> None:
        super().__init__()
        self.steps = steps
        self.cnn = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, HIDDEN, 3, 2, 1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.cell = nn.LSTMCell(EMBED, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, image):
        h = self.cnn(image)
        c = torch.zeros_like(h)
        word = torch.zeros(image.shape[0], dtype=torch.long)
        words = []
        for _ in range(self.steps):
            h, c = self.cell(self.embed(word), (h, c))
            word = self.out(h).argmax(-1)
            words.append(word)
        return torch.stack(words, 1)


class _GruCell(nn.Module):
    """A GRU cell written out: TorchScript cannot export ``nn.GRUCell``'s optional-state branch."""

    def __init__(self, inputs: int, hidden: int) -> None:
        super().__init__()
        self.x = nn.Linear(inputs, 3 * hidden)
        self.h = nn.Linear(hidden, 3 * hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xr, xz, xn = self.x(x).chunk(3, -1)
        hr, hz, hn = self.h(h).chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        return (1 - z) * torch.tanh(xn + r * hn) + z * h


class GruGreedyLoop(nn.Module):
    """Greedy translation as a real loop (scripted, so it exports as ONNX Loops): a GRU encoder
    over the source tokens, then ``max_length`` decoder steps carried by a Loop, each step's ArgMax
    embedded by the next iteration."""

    def __init__(self) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, EMBED)
        self.encoder = _GruCell(EMBED, HIDDEN)
        self.tgt_embed = nn.Embedding(VOCAB, EMBED)
        self.decoder = _GruCell(EMBED, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, source: torch.Tensor, h: torch.Tensor, bos: torch.Tensor,
                max_length: torch.Tensor) -> torch.Tensor:
        x = self.src_embed(source)
        for i in range(x.shape[1]):
            h = self.encoder(x[:, i], h)
        token = bos
        tokens = bos.unsqueeze(1)
        for step in range(int(max_length)):
            h = self.decoder(self.tgt_embed(token), h)
            token = self.out(h).argmax(-1)
            tokens = torch.cat([tokens, token.unsqueeze(1)], 1)
        return tokens


class DecoderGreedyLoop(nn.Module):
    """``generate()`` of a one-layer causal transformer written as a loop (scripted): each
    iteration re-reads every token so far (no cache), masks future positions with ``triu`` and
    appends the ArgMax of the last position."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(64, HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))
        self.out = nn.Linear(HIDDEN, VOCAB)
        self.scale = HIDDEN ** -0.5

    def forward(self, input_ids: torch.Tensor, max_new_tokens: torch.Tensor) -> torch.Tensor:
        tokens = input_ids
        for step in range(int(max_new_tokens)):
            n = tokens.shape[1]
            x = self.embed(tokens) + self.pos(torch.arange(n).unsqueeze(0))
            q, k, v = self.qkv(x).chunk(3, -1)
            mask = torch.triu(torch.full((n, n), float("-inf")), 1)
            x = self.norm(x + self.proj(torch.softmax(q @ k.transpose(1, 2) * self.scale + mask, -1) @ v))
            x = x + self.mlp(x)
            tokens = torch.cat([tokens, self.out(x[:, -1]).argmax(-1, keepdim=True)], 1)
        return tokens


class GruSeq2Seq(nn.Module):
    """A full seq2seq forward (teacher forcing) over source and target-so-far tokens, no mask."""

    def __init__(self) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, EMBED)
        self.tgt_embed = nn.Embedding(VOCAB, EMBED)
        self.encoder = nn.GRU(EMBED, HIDDEN, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * HIDDEN, HIDDEN)
        self.decoder = nn.GRU(EMBED, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, src_tokens, prev_output_tokens):
        memory, h = self.encoder(self.src_embed(src_tokens))
        h0 = torch.tanh(self.bridge(torch.cat([h[0], h[1]], -1))).unsqueeze(0)
        y, _ = self.decoder(self.tgt_embed(prev_output_tokens), h0)
        return self.out(y)


class TransformerSeq2Seq(nn.Module):
    """nn.Transformer over source ids and target-so-far ids; the causal mask comes in as an input
    (as fairseq-style exports often do), so no triangle is built in the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, HIDDEN)
        self.tgt_embed = nn.Embedding(VOCAB, HIDDEN)
        self.transformer = nn.Transformer(HIDDEN, 2, 1, 1, 64, batch_first=True)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, src_ids, tgt_ids, tgt_mask):
        y = self.transformer(self.src_embed(src_ids), self.tgt_embed(tgt_ids), tgt_mask=tgt_mask)
        return self.out(y)


class Crnn(nn.Module):
    """CRNN text recogniser: conv stack over a text line, a recurrent layer along the width, a
    per-time-step distribution over ``classes`` characters (CTC, no feedback)."""

    def __init__(self, classes: int = 5000, cell: str = "lstm") -> None:
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d((8, 1)))
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(32, HIDDEN, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * HIDDEN, classes)

    def forward(self, image):
        f = self.cnn(image).squeeze(2).transpose(1, 2)
        y, _ = self.rnn(f)
        return self.fc(y).log_softmax(-1)


class ConvCtc(nn.Module):
    """A fully convolutional speech recogniser (Jasper/QuartzNet-like) on 64 log-mel bins: 1-D convs
    over time, a per-frame softmax over characters, no recurrence and no feedback."""

    def __init__(self, classes: int = 1024) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(64, 64, 11, 2, 5), nn.BatchNorm1d(64), nn.ReLU(),
                                 nn.Conv1d(64, 64, 11, 1, 5), nn.BatchNorm1d(64), nn.ReLU(),
                                 nn.Conv1d(64, classes, 1))

    def forward(self, audio_signal):
        return self.net(audio_signal).transpose(1, 2).softmax(-1)


def _cbs(cin: int, cout: int, stride: int = 1) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class YoloStyle(nn.Module):
    """A YOLO-style detector: CSP-ish backbone, an upsampling neck, two detection heads; height and
    width are dynamic."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.c2, self.c3, self.c4 = _cbs(3, 8, 2), _cbs(8, 16, 2), _cbs(16, 32, 2), _cbs(32, 64, 2)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.fuse = _cbs(96, 32)
        self.head_small, self.head_large = nn.Conv2d(32, 3 * 9, 1), nn.Conv2d(64, 3 * 9, 1)

    def forward(self, images):
        p3 = self.c3(self.c2(self.stem(images)))
        p4 = self.c4(p3)
        n3 = self.fuse(torch.cat([self.up(p4), p3], 1))
        outs = [h(x).flatten(2) for h, x in ((self.head_small, n3), (self.head_large, p4))]
        return torch.cat(outs, 2).transpose(1, 2).sigmoid()


class UNet(nn.Module):
    """A small U-Net denoiser / segmenter: output has the input's shape, which must not look like a
    KV cache."""

    def __init__(self) -> None:
        super().__init__()
        self.down1, self.down2 = _cbs(3, 16), _cbs(16, 32, 2)
        self.up = nn.ConvTranspose2d(32, 16, 2, 2)
        self.out = nn.Conv2d(32, 3, 1)

    def forward(self, image):
        d1 = self.down1(image)
        return self.out(torch.cat([self.up(self.down2(d1)), d1], 1))


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


class ResNet(nn.Module):
    """ResNet-18-shaped (2-2-2-2 basic blocks), narrow. ``channels_last`` takes NHWC uint8-range
    pixels and normalises them in the graph (Transpose, Sub, Div) before the stem, the way mobile
    exports ship."""

    def __init__(self, channels_last: bool = False) -> None:
        super().__init__()
        self.channels_last = channels_last
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        widths, blocks, cin = (8, 16, 32, 64), [], 16
        for i, w in enumerate(widths):
            blocks += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
            cin = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, 100)
        self.register_buffer("mean", torch.tensor([123.7, 116.3, 103.5]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([58.4, 57.1, 57.4]).view(1, 3, 1, 1))

    def forward(self, x):
        if self.channels_last:
            x = (x.permute(0, 3, 1, 2) - self.mean) / self.std
        x = self.blocks(self.stem(x))
        return self.fc(x.mean((2, 3)))


class WaveformCnn(nn.Module):
    """M5-style keyword / sound classifier on raw audio: a strided Conv1d front end (stride 4,
    kernel 80) over ``[batch, samples]`` or ``[batch, samples, 1]``."""

    def __init__(self, trailing_channel: bool = False) -> None:
        super().__init__()
        self.trailing_channel = trailing_channel
        self.net = nn.Sequential(nn.Conv1d(1, 16, 80, 4), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(4),
                                 nn.Conv1d(16, 32, 3), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(4))
        self.fc = nn.Linear(32, 12)

    def forward(self, waveform):
        x = waveform.transpose(1, 2) if self.trailing_channel else waveform.unsqueeze(1)
        return self.fc(self.net(x).mean(-1))


class StftClassifier(nn.Module):
    """Spectrogram computed in the graph (STFT, magnitude, mel projection, log) then a conv."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(256))
        self.mel = nn.Linear(129, 40, bias=False)
        self.conv = nn.Conv1d(40, 32, 3)
        self.fc = nn.Linear(32, 8)

    def forward(self, audio):
        spec = torch.stft(audio, 256, 128, window=self.window, return_complex=False, center=False)
        power = spec.pow(2).sum(-1).transpose(1, 2)
        mel = torch.log(self.mel(power) + 1e-6).transpose(1, 2)
        return self.fc(torch.relu(self.conv(mel)).mean(-1))


class LinearSpectrogramLstm(nn.Module):
    """Speech enhancement / VAD on stacked linear spectrogram frames ``[batch, T, 257]`` (not mel)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(257, 64, 3, padding=1)
        self.lstm = nn.LSTM(64, HIDDEN, batch_first=True)
        self.mask = nn.Linear(HIDDEN, 257)

    def forward(self, spectrogram):
        x = torch.relu(self.conv(spectrogram.transpose(1, 2))).transpose(1, 2)
        y, _ = self.lstm(x)
        return torch.sigmoid(self.mask(y)) * spectrogram


class LstmKeywordSpotter(nn.Module):
    """A keyword spotter on 40 log-mel frames; dynamically quantised later (DynamicQuantizeLSTM)."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(40, 64, num_layers=2, batch_first=True)
        self.fc = nn.Linear(64, 12)

    def forward(self, mel):
        y, _ = self.lstm(mel)
        return self.fc(y[:, -1])


class GruTagger(nn.Module):
    """A sequence tagger over dense features, dynamically quantised later (GRU weights stay float, the
    linear layers become MatMulInteger)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(24, 48)
        self.lstm = nn.LSTM(48, 48, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(96, 9)

    def forward(self, features):
        y, _ = self.lstm(torch.relu(self.proj(features)))
        return self.fc(y)


class LayerNormHead(nn.Module):
    """A classifier over a sentence embedding: Gemm, a hand-written LayerNorm, Gemm, Softmax."""

    def __init__(self, dim: int = 384, classes: int = 7) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 64), nn.Linear(64, classes)
        self.gamma, self.beta = nn.Parameter(torch.ones(64)), nn.Parameter(torch.zeros(64))

    def forward(self, embeddings):
        x = self.fc1(embeddings)
        mu = x.mean(-1, keepdim=True)
        x = (x - mu) / torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + 1e-5) * self.gamma + self.beta
        return self.fc2(torch.relu(x)).softmax(-1)


class NormalizingHead(nn.Module):
    """A similarity head over an embedding with an optional L2 normalisation chosen at run time (an
    If in the graph)."""

    def __init__(self, dim: int = 768) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, 128, bias=False)

    def forward(self, sentence_embedding, normalize):
        x = self.proj(sentence_embedding)
        if normalize:
            x = x / torch.sqrt((x * x).sum(-1, keepdim=True))
        return x


_ONLY: set[str] | None = None  # ``--only``: the files to write this run


def _export(model: nn.Module, args: tuple, name: str, inputs: list[str], outputs: list[str],
            axes: dict[str, dict[int, str]] | None = None) -> Path:
    """Legacy TorchScript exporter (what most models in the wild were made with); a scripted
    module's loops become ONNX Loops."""
    path = OUT / name
    torch.manual_seed(SEED)
    if _ONLY is not None and name not in _ONLY:  # skipped alike, so the files written stay the same
        return path
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)
    print(f"{name}: {path.stat().st_size / 1024:.0f} KiB")
    return path


def _quantize(source: Path, name: str) -> None:
    """Dynamic (weight int8, activation quantised at run time) quantisation, as mobile users do."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if _ONLY is not None and name not in _ONLY:
        return
    quantize_dynamic(source, OUT / name, weight_type=QuantType.QInt8)
    print(f"{name}: {(OUT / name).stat().st_size / 1024:.0f} KiB")


def torch_exports() -> None:
    b, t, s = 2, 5, 7
    ids = lambda *shape: torch.randint(3, VOCAB, shape)  # noqa: E731
    _export(GruStepDecoder(), (ids(b, t), torch.zeros(1, b, HIDDEN)), "torch_gru_step_decoder.onnx",
            ["tokens", "hidden"], ["log_probs", "hidden_out"],
            {"tokens": {0: "batch", 1: "steps"}, "hidden": {1: "batch"}})
    _export(LstmAttentionStepDecoder(), (ids(b), torch.zeros(b, HIDDEN), torch.zeros(b, HIDDEN),
                                         torch.randn(b, s, HIDDEN)),
            "torch_lstm_attention_step_decoder.onnx", ["prev_word", "h", "c", "encoder_out"],
            ["scores", "h_out", "c_out"], {"prev_word": {0: "batch"}, "encoder_out": {0: "batch", 1: "src_len"}})
    _export(GreedyGruTranslator(), (ids(b, s),), "torch_greedy_gru_translator.onnx", ["source"], ["translation"],
            {"source": {0: "batch", 1: "src_len"}})
    _export(GreedyCaptioner(), (torch.randn(1, 3, 64, 64),), "torch_greedy_captioner.onnx", ["image"], ["caption"],
            {"image": {0: "batch"}})
    _export(torch.jit.script(GruGreedyLoop()), (ids(b, s), torch.zeros(b, HIDDEN), torch.ones(b, dtype=torch.long),
                                               torch.tensor(5)), "torch_gru_greedy_loop.onnx",
            ["source", "h0", "bos", "max_length"], ["translation"],
            {"source": {0: "batch", 1: "src_len"}, "h0": {0: "batch"}, "bos": {0: "batch"}})
    _export(torch.jit.script(DecoderGreedyLoop()), (ids(b, 4), torch.tensor(3)), "torch_decoder_greedy_loop.onnx",
            ["input_ids", "max_new_tokens"], ["sequences"], {"input_ids": {0: "batch", 1: "sequence_length"}})
    _export(GruSeq2Seq(), (ids(b, s), ids(b, t)), "torch_gru_seq2seq.onnx", ["src_tokens", "prev_output_tokens"],
            ["logits"], {"src_tokens": {0: "batch", 1: "src_len"}, "prev_output_tokens": {0: "batch", 1: "tgt_len"}})
    _export(TransformerSeq2Seq(), (ids(b, s), ids(b, t), nn.Transformer.generate_square_subsequent_mask(t)),
            "torch_transformer_seq2seq.onnx", ["src_ids", "tgt_ids", "tgt_mask"], ["logits"],
            {"src_ids": {0: "batch", 1: "src_len"}, "tgt_ids": {0: "batch", 1: "tgt_len"},
             "tgt_mask": {0: "tgt_len", 1: "tgt_len"}})
    _export(Crnn(), (torch.randn(1, 1, 32, 100),), "torch_crnn_ctc.onnx", ["image"], ["log_probs"],
            {"image": {0: "batch", 3: "width"}})
    _export(Crnn(classes=97, cell="gru"), (torch.randn(1, 1, 32, 128),), "torch_crnn_gru_ctc.onnx", ["x"], ["y"],
            {"x": {0: "n", 3: "w"}})
    _export(ConvCtc(), (torch.randn(1, 64, 200),), "torch_conv_ctc_asr.onnx", ["audio_signal"], ["probs"],
            {"audio_signal": {0: "batch", 2: "time"}})
    _export(YoloStyle(), (torch.randn(1, 3, 64, 64),), "torch_yolo_dynamic_hw.onnx", ["images"], ["detections"],
            {"images": {0: "batch", 2: "height", 3: "width"}})
    _export(UNet(), (torch.randn(1, 3, 64, 64),), "torch_unet_same_shape.onnx", ["input"], ["output"],
            {"input": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch", 2: "height", 3: "width"}})
    _export(ResNet(), (torch.randn(1, 3, 64, 64),), "torch_resnet18_symbolic.onnx", ["pixel_values"], ["logits"],
            {"pixel_values": {0: "batch", 2: "height", 3: "width"}})
    _export(ResNet(channels_last=True), (torch.rand(1, 64, 64, 3) * 255,), "torch_resnet18_nhwc.onnx",
            ["image_nhwc"], ["logits"], {"image_nhwc": {0: "batch", 1: "height", 2: "width"}})
    _export(WaveformCnn(), (torch.randn(2, 16000),), "torch_m5_waveform.onnx", ["waveform"], ["logits"],
            {"waveform": {0: "batch", 1: "samples"}})
    _export(WaveformCnn(trailing_channel=True), (torch.randn(2, 16000, 1),), "torch_m5_waveform_trailing.onnx",
            ["audio"], ["logits"], {"audio": {0: "batch", 1: "samples"}})
    _export(StftClassifier(), (torch.randn(2, 4000),), "torch_stft_classifier.onnx", ["audio"], ["logits"],
            {"audio": {0: "batch", 1: "samples"}})
    _export(LinearSpectrogramLstm(), (torch.randn(1, 50, 257),), "torch_linear_spectrogram_lstm.onnx",
            ["spectrogram"], ["enhanced"], {"spectrogram": {0: "batch", 1: "frames"}})
    with tempfile.TemporaryDirectory() as tmp:
        global OUT
        final, OUT = OUT, Path(tmp)
        kws = _export(LstmKeywordSpotter(), (torch.randn(1, 49, 40),), "kws.onnx", ["mel"], ["logits"],
                      {"mel": {0: "batch", 1: "frames"}})
        tagger = _export(GruTagger(), (torch.randn(1, 20, 24),), "tagger.onnx", ["features"], ["tags"],
                         {"features": {0: "batch", 1: "steps"}})
        cnn = _export(ResNet(), (torch.randn(1, 3, 64, 64),), "cnn.onnx", ["input"], ["logits"],
                      {"input": {0: "batch", 2: "height", 3: "width"}})
        OUT = final
        _quantize(kws, "torch_lstm_kws_dynamic_int8.onnx")
        _quantize(tagger, "torch_lstm_tagger_dynamic_int8.onnx")
        _quantize(cnn, "torch_resnet18_dynamic_int8.onnx")
    _export(LayerNormHead(), (torch.randn(2, 384),), "torch_embedding_layernorm_head.onnx", ["embeddings"],
            ["probabilities"], {"embeddings": {0: "batch"}})
    _export(torch.jit.script(NormalizingHead()), (torch.randn(2, 768), torch.tensor(True)),
            "torch_embedding_if_head.onnx", ["sentence_embedding", "normalize"], ["projected"],
            {"sentence_embedding": {0: "batch"}})


def main(argv: list[str]) -> int:
    """Every export, or with ``--only NAME ...`` just those files (the others stay as committed)."""
    global _ONLY
    if argv[:1] == ["--only"]:
        _ONLY = set(argv[1:])
    OUT.mkdir(exist_ok=True)
    torch.manual_seed(SEED)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused eval kernel has no ONNX export
    torch_exports()
    if _ONLY is None:
        hf_exports()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
