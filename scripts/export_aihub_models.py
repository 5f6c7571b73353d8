"""Export ONNX models with the structure of Qualcomm AI Hub's, for the on-device truth check
(``tests/test_aihub_truth.py``), and write weight-stripped copies to ``tests/data/aihub/`` (committed).

AI Hub's vision classifiers (``qai_hub_models/models/<id>/model.py`` of the pinned
``qai-hub-models``) wrap a torchvision architecture in ``ImagenetClassifier``: one input
``image_tensor`` [1, 3, 224, 224] in [0, 1], normalized inside the network with torchvision's
mean and std (``normalize_image_torchvision``), one output ``class_logits``. AI Hub receives the
model as a ``torch.export`` program (``PytorchWorkbenchModel.serialize`` writes a ``.pt2``) and
converts it on its side; the closest public path is ``torch.export.export`` followed by the
dynamo ONNX exporter on that program, which is what this script does (opset 18, the exporter's
default). Weights are ``weights=None`` (random): partitioning depends on structure, not values.

The committed copies keep every node, attribute and initializer header; float tensors over 64
elements lose their data (as the classifier zoo's large tensors do, ``scripts/fetch_zoo_models.py``),
and the test refills them with constant data before a session loads them: tens of KiB each.

    /work/torch-venv/bin/python scripts/export_aihub_models.py            # the committed set
    /work/torch-venv/bin/python scripts/export_aihub_models.py --all      # every architecture below
    /work/torch-venv/bin/python scripts/export_aihub_models.py --out DIR mobilenet_v3_large

Needs torch and torchvision (not project dependencies); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "aihub"
sys.path.insert(0, str(Path(__file__).resolve().parent))

# AI Hub model id -> (torchvision builder, keyword arguments of the builder, transform_input), as in
# qai_hub_models/models/<id>/model.py of qai-hub-models 0.65.0.
ARCHITECTURES = {
    "mobilenet_v3_small": ("mobilenet_v3_small", {}, False),
    "mobilenet_v3_large": ("mobilenet_v3_large", {}, False),
    "squeezenet1_1": ("squeezenet1_1", {}, False),
    "mnasnet05": ("mnasnet0_5", {}, False),
    "shufflenet_v2": ("shufflenet_v2_x0_5", {}, False),
    "resnet18": ("resnet18", {}, False),
    "mobilenet_v2": ("mobilenet_v2", {}, False),
    "googlenet": ("googlenet", {"transform_input": False, "aux_logits": False, "init_weights": True}, True),
    "efficientnet_b0": ("efficientnet_b0", {}, False),
    "regnet": ("regnet_x_3_2gf", {}, False),
}
COMMITTED = ("mobilenet_v3_small", "mobilenet_v3_large", "squeezenet1_1", "mnasnet05", "shufflenet_v2", "resnet18",
             "mobilenet_v2")
INPUT_DIM = 224  # qai_hub_models.utils.image_processing.IMAGENET_DIM


def wrapped(model_id: str):
    """The torchvision network inside AI Hub's ``ImagenetClassifier.forward``."""
    import torch
    import torchvision.models as tv_models

    builder, kwargs, transform_input = ARCHITECTURES[model_id]
    net = getattr(tv_models, builder)(weights=None, **kwargs)

    class ImagenetClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, image_tensor):
            if transform_input:  # AI Hub's combined normalize + transform: 2x - 1
                image_tensor = image_tensor * 2 - 1
            else:
                mean = torch.Tensor([0.485, 0.456, 0.406]).reshape(1, -1, 1, 1)
                std = torch.Tensor([[0.229, 0.224, 0.225]]).reshape(1, -1, 1, 1)
                image_tensor = (image_tensor - mean) / std
            return self.net(image_tensor)

    return ImagenetClassifier().eval()


STRIP_OVER = 64  # elements: float tensors larger than this keep only their header
KEPT_NODE_METADATA = ("namespace",)  # the module path a node came from (the graph views group by it)


def strip_float_weights(proto) -> int:
    """Drop the data of every float initializer over ``STRIP_OVER`` elements (Conv and Gemm weights,
    BatchNorm statistics) and mark the model; integer tensors (shapes, axes) and scalars stay, since
    the graph's meaning needs them. Returns the bytes dropped."""
    import math

    from fetch_zoo_models import STRIPPED_KEY
    from onnx import TensorProto

    dropped = 0
    for tensor in proto.graph.initializer:
        if tensor.data_type == TensorProto.FLOAT and math.prod(tensor.dims) > STRIP_OVER:
            dropped += len(tensor.raw_data) + 4 * len(tensor.float_data)
            tensor.ClearField("raw_data")
            tensor.ClearField("float_data")
    for node in proto.graph.node:  # the exporter's per-node stack traces name this machine's paths
        kept = [(p.key, p.value) for p in node.metadata_props if p.key in KEPT_NODE_METADATA]
        node.ClearField("metadata_props")
        for key, value in kept:
            node.metadata_props.add(key=key, value=value)
    entry = proto.metadata_props.add()
    entry.key, entry.value = STRIPPED_KEY, f"float tensors over {STRIP_OVER} elements keep only their header"
    return dropped


def export(model_id: str, out: Path) -> Path:
    import onnx
    import torch

    model = wrapped(model_id)
    example = (torch.rand(1, 3, INPUT_DIM, INPUT_DIM),)
    with torch.no_grad():
        program = torch.export.export(model, example)
        onnx_program = torch.onnx.export(program, example, input_names=["image_tensor"],
                                         output_names=["class_logits"], dynamo=True)
    proto = onnx_program.model_proto
    proto.doc_string = f"{model_id}: AI Hub's structure (torchvision, weights=None), exported by {Path(__file__).name}"
    strip_float_weights(proto)
    path = out / f"{model_id}.onnx"
    onnx.save(proto, path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help=f"AI Hub model ids (default: {', '.join(COMMITTED)})")
    parser.add_argument("--all", action="store_true", help="every architecture this script knows")
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (default tests/data/aihub)")
    args = parser.parse_args(argv)
    ids = list(ARCHITECTURES) if args.all else args.ids or list(COMMITTED)
    unknown = [i for i in ids if i not in ARCHITECTURES]
    if unknown:
        parser.error(f"unknown model id(s) {', '.join(unknown)}; known: {', '.join(ARCHITECTURES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for model_id in ids:
        path = export(model_id, args.out)
        print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
