"""Build the bundled data sets of the sample models (``samples/data/``), each with its licence.

Why real data: an accuracy figure on random inputs says little about photos or sentences, and the
samples are what a first-time user measures. Why so small: they ship in the repository.

- ``images/`` (the CNN and the ViT classifiers): 12 public-domain / CC0 photos from scikit-image's
  wheel (``skimage/data``), centre-cropped to a square and resized to 224x224 (JPEG quality 85; the
  RGBA horse as PNG). ``python scripts/make_sample_data.py --skimage-wheel scikit_image-*.whl``
  after ``pip download --no-deps scikit-image==0.26.0``.
- ``text_encoder/``: public-domain sentences, tokenised by a word-level vocabulary built from them
  (``vocab.txt``; ids 0-3 are [PAD] [UNK] [CLS] [SEP]) into ``input_ids``/``attention_mask``/
  ``token_type_ids`` of length 128.
- ``audio_encoder/``: spoken sentences synthesised by espeak-ng (``apt-get install espeak-ng``),
  resampled to 16 kHz and turned into Whisper-style log-mel features with numpy: 80 mel bins,
  25 ms Hann window, 10 ms hop, padded to 30 s = 3000 frames, ``(max(log10, peak-8) + 4) / 4``;
  stored as float16 (the loader casts to the input's float32).

Deterministic for the same inputs (the wheel, the espeak-ng version).
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tempfile
import wave
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "samples" / "data"

# (file in skimage/data, licence as scikit-image's data docstrings state it)
IMAGES = [
    ("astronaut.png", "Eileen Collins, NASA Great Images database; no known copyright restrictions, public domain"),
    ("camera.png", "Lav Varshney; CC0"),
    ("chelsea.png", "Stefan van der Walt; CC0"),
    ("coffee.png", "Rachel Michetti; CC0"),
    ("rocket.jpg", "SpaceX Photos; released into the public domain by SpaceX"),
    ("hubble_deep_field.jpg", "NASA / HubbleSite; public domain"),
    ("retina.jpg", "Wikimedia Commons, Fundus photograph of normal left eye; CC0 1.0"),
    ("coins.png", "Brooklyn Museum Collection; no known copyright restrictions"),
    ("horse.png", "Andreas Preuss (marauder), openclipart; CC0"),
    ("brick.png", "CC0Textures Bricks25; CC0"),
    ("grass.png", "linolafett, DeviantArt Grass-01; CC0"),
    ("clock_motion.png", "Stefan van der Walt; released into the public domain by the photographer"),
]
SIDE = 224

# Public domain: the United States Declaration of Independence (1776) and Lewis Carroll,
# "Alice's Adventures in Wonderland" (1865), chapter I.
SENTENCES = [
    "We hold these truths to be self-evident, that all men are created equal.",
    "Prudence, indeed, will dictate that Governments long established should not be changed for light and "
    "transient causes.",
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do.",
    "So she was considering in her own mind whether the pleasure of making a daisy-chain would be worth the "
    "trouble of getting up and picking the daisies.",
    "There was nothing so very remarkable in that; nor did Alice think it so very much out of the way to hear "
    "the Rabbit say to itself, Oh dear! Oh dear! I shall be late!",
    "Down, down, down. Would the fall never come to an end?",
    ("Either the well was very deep, or she fell very slowly.", "She had plenty of time as she went down to "
                                                               "look about her."),
    ("The rabbit-hole went straight on like a tunnel for some way.", "Then it dipped suddenly down."),
]
SEQUENCE = 128
SPOKEN = SENTENCES[0], SENTENCES[2], SENTENCES[5]
RATE, N_FFT, HOP, MELS, FRAMES = 16000, 400, 160, 80, 3000


def images(wheel: Path) -> None:
    from PIL import Image

    out = OUT / "images"
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    with zipfile.ZipFile(wheel) as archive:
        for i, (name, licence) in enumerate(IMAGES):
            with Image.open(io.BytesIO(archive.read(f"skimage/data/{name}"))) as image:
                image.load()
                side = min(image.size)
                left, top = (image.width - side) // 2, (image.height - side) // 2
                small = image.crop((left, top, left + side, top + side)).resize((SIDE, SIDE), Image.Resampling.LANCZOS)
            stem = f"{i:02d}_{Path(name).stem}"
            if small.mode == "RGBA":
                target = out / f"{stem}.png"
                small.save(target, optimize=True)
            else:
                target = out / f"{stem}.jpg"
                small.save(target, quality=85, optimize=True)
            lines.append(f"- {target.name} (from skimage/data/{name}, {image.mode}): {licence}")
    (out / "LICENCE.txt").write_text(
        "Sample images for the CNN and ViT sample classifiers.\n\n"
        f"Source: scikit-image {wheel.name.split('-')[1]} (the wheel's skimage/data folder, "
        "https://scikit-image.org), whose data docstrings state each image's licence below.\n"
        f"Done here: centre-cropped to a square and resized to {SIDE}x{SIDE} (Lanczos); JPEG quality 85, "
        "the RGBA silhouette kept as PNG (scripts/make_sample_data.py).\n"
        "Every image is public domain or CC0 (no copyright restrictions).\n\n" + "\n".join(lines) + "\n",
        encoding="utf-8")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:-[a-z]+)*|[^\sa-z]", text.lower())


def text() -> None:
    out = OUT / "text_encoder"
    out.mkdir(parents=True, exist_ok=True)
    pairs = [s if isinstance(s, tuple) else (s,) for s in SENTENCES]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + sorted({w for p in pairs for s in p for w in words(s)})
    index = {w: i for i, w in enumerate(vocab)}
    ids, mask, types = (np.zeros((len(pairs), 1, SEQUENCE), np.int64) for _ in range(3))
    for row, pair in enumerate(pairs):
        tokens, kinds = [2], [0]
        for part, segment in enumerate(pair):
            piece = [index[w] for w in words(segment)] + [3]
            tokens += piece
            kinds += [part] * len(piece)
        ids[row, 0, :len(tokens)], mask[row, 0, :len(tokens)], types[row, 0, :len(tokens)] = tokens, 1, kinds
    np.savez_compressed(out / "sentences.npz", input_ids=ids, attention_mask=mask, token_type_ids=types)
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (out / "LICENCE.txt").write_text(
        "Sample sentences for the text encoder sample (BERT-like: input_ids, attention_mask, token_type_ids).\n\n"
        "Source: the United States Declaration of Independence (1776) and Lewis Carroll, \"Alice's Adventures in "
        "Wonderland\" (1865), chapter I. Both are in the public domain.\n"
        f"Done here: {len(pairs)} samples (two of them sentence pairs, token_type_ids 1 on the second), tokenised "
        f"by a word-level vocabulary of {len(vocab)} entries built from the sentences themselves (vocab.txt; "
        "[PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3), padded to 128 tokens (scripts/make_sample_data.py).\n"
        "The sample model's weights are random: the ids exercise real token statistics, not a trained vocabulary.\n",
        encoding="utf-8")


def mel_filters() -> np.ndarray:
    """Slaney-style mel filterbank (as librosa's default and Whisper's), (80, 201)."""
    def to_mel(f):
        f = np.asarray(f, np.float64)
        return np.where(f < 1000, f / (200 / 3), 15 + np.log(np.maximum(f, 1e-9) / 1000) / (np.log(6.4) / 27))

    def to_hz(m):
        return np.where(m < 15, m * (200 / 3), 1000 * np.exp((m - 15) * (np.log(6.4) / 27)))

    freqs = np.linspace(0, RATE / 2, N_FFT // 2 + 1)
    points = to_hz(np.linspace(to_mel(0), to_mel(RATE / 2), MELS + 2))
    lower = (freqs[None] - points[:-2, None]) / (points[1:-1] - points[:-2])[:, None]
    upper = (points[2:, None] - freqs[None]) / (points[2:] - points[1:-1])[:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2 / (points[2:] - points[:-2]))[:, None]


def log_mel(audio: np.ndarray) -> np.ndarray:
    audio = np.pad(audio.astype(np.float64), (0, RATE * 30 - len(audio)))
    padded = np.pad(audio, N_FFT // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP][:FRAMES]
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2
    spec = np.log10(np.maximum(mel_filters() @ power.T, 1e-10))
    return ((np.maximum(spec, spec.max() - 8) + 4) / 4).astype(np.float32)


def resample(audio: np.ndarray, rate: int) -> np.ndarray:
    """Band-limited resampling to 16 kHz by the FFT (numpy only)."""
    m = int(round(len(audio) * RATE / rate))
    spectrum = np.fft.rfft(audio)
    out = np.zeros(m // 2 + 1, complex)
    n = min(len(out), len(spectrum))
    out[:n] = spectrum[:n]
    return np.fft.irfft(out, m) * (m / len(audio))


def audio() -> None:
    sys.path.insert(0, str(ROOT))
    from dashboard.accuracy.data import InputSpec, load_data

    out = OUT / "audio_encoder"
    out.mkdir(parents=True, exist_ok=True)
    said = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True).stdout
    version = said.split("Data at")[0].strip()  # not the host's data folder
    features = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, sentence in enumerate(SPOKEN):
            wav = Path(tmp) / f"{i}.wav"
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(wav), sentence], check=True)
            with wave.open(str(wav)) as w:
                rate, length = w.getframerate(), w.getnframes()
            spec = InputSpec("audio", (1, length), "float32")  # the project's own WAV reader
            samples = load_data(wav, [spec]).samples[0]["audio"][0]
            features.append(log_mel(resample(samples, rate))[None])
    np.savez_compressed(out / "speech.npz", input_features=np.stack(features).astype(np.float16))
    (out / "LICENCE.txt").write_text(
        "Sample log-mel features for the audio encoder sample (input_features [1, 80, 3000]).\n\n"
        f"Source: generated by this project with {version} (voice en-us, 150 words per minute) speaking "
        f"{len(SPOKEN)} public-domain sentences (the US Declaration of Independence, 1776; Lewis Carroll, \"Alice's "
        "Adventures in Wonderland\", 1865):\n" + "".join(f"- {s}\n" for s in SPOKEN) +
        "Licence: generated by this project; the same licence as the project. espeak-ng's output carries no "
        "further restriction.\n"
        "Done here: resampled from espeak-ng's 22050 Hz to 16 kHz (FFT), padded to 30 s, Whisper-style log-mel "
        "features computed with numpy (80 Slaney mel bins, 400-sample Hann window, hop 160, 3000 frames, "
        "(max(log10 mel, peak - 8) + 4) / 4), stored as float16 (scripts/make_sample_data.py).\n",
        encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skimage-wheel", type=Path, required=True, help="scikit-image's wheel (pip download)")
    args = parser.parse_args()
    images(args.skimage_wheel)
    text()
    audio()
    for path in sorted(OUT.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size:8d}  {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
