"""The partition analysis against Qualcomm's own on-device results (issue 16).

``qai-hub-models`` ships, per model, ``perf.yaml``: what AI Hub measured on real Snapdragon
devices, among it ``layer_counts`` ``{total, npu, gpu, cpu}`` per device, precision and runtime.
The facts this test uses are ``tests/data/aihub/published.json``, extracted from the pinned wheel
by ``scripts/aihub_published.py`` with their provenance (package, version, wheel digest, file and
field); the package itself is not installed. ``tests/data/aihub/`` holds models with the structure
of AI Hub's (``scripts/export_aihub_models.py``: the torchvision architectures its model classes
wrap, at its input shapes), weight-stripped; each is refilled with constant data and analysed on the HTP
simulator at fp16 (AI Hub's ``float`` precision runs fp16 on the HTP) for the SoC of the device,
and the report must agree with the device on two things: whether anything falls back to the CPU,
and the CPU share (within ``SHARE_TOLERANCE``; the device counts compiled layers, the report counts
the model's nodes, so only the share is compared).

The SoC -> device match comes from the package too (its ``devices_and_chipsets.yaml``: the chipset
with the SoC's ``soc_model`` and Hexagon version, and its reference device). CI runs the committed set on
SM8750 (Galaxy S25); a larger run (docs/partitions.md, "Partition truth"):

    QNN_LAB_AIHUB_SOCS=sm8750,sm8650,sc8380xp QNN_LAB_AIHUB_DIR=/tmp/aihub pytest tests/test_aihub_truth.py
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from dashboard.partition.analysis import PartitionOptions, analyze
from dashboard.partition.report import REMOVED, BackendReport
from dashboard.runtime.socs import resolve_soc

COMMITTED = Path(__file__).resolve().parent / "data" / "aihub"
SOCS = [s.strip() for s in os.environ.get("QNN_LAB_AIHUB_SOCS", "sm8750").split(",") if s.strip()]
EXTRA = os.environ.get("QNN_LAB_AIHUB_DIR")
MODELS = sorted({p.stem: p for d in (COMMITTED, *([Path(EXTRA)] if EXTRA else [])) for p in d.glob("*.onnx")}.items())
RUNTIME, PRECISION = "onnx", "float"  # ONNX Runtime with the QNN EP; float weights and activations
SHARE_TOLERANCE = 0.05
REFILL = 0.01


PUBLISHED = COMMITTED / "published.json"
EXTRACTOR = COMMITTED.parents[2] / "scripts" / "aihub_published.py"  # what wrote PUBLISHED


def published() -> dict:
    """AI Hub's published results, as extracted from the pinned ``qai-hub-models`` wheel."""
    return json.loads(PUBLISHED.read_text())


def reference_devices(soc_key: str) -> list[str]:
    """AI Hub's reference devices of the chipsets compiled for ``soc_key``'s soc_model and Hexagon
    arch, the chipset that names the SoC among its aliases first (several parts share a soc_model)."""
    soc = resolve_soc(soc_key)
    chipsets = published()["chipsets"]["entries"]  # devices_and_chipsets.yaml, in its order
    matching = [c for c in chipsets.values() if c.get("soc_model") == soc.soc_model
                and c.get("htp_version") == soc.htp_arch and c.get("reference_device")]
    matching.sort(key=lambda c: not any(a.split("-")[0] == soc.key for a in c.get("aliases", ())))
    assert matching, f"no AI Hub chipset with soc_model {soc.soc_model} and v{soc.htp_arch} ({soc_key})"
    return [c["reference_device"] for c in matching]


@dataclass(frozen=True)
class Fallback:
    """How much of a model runs on the CPU: ``cpu`` of ``total`` (layers on a device, nodes here)."""

    cpu: int
    total: int

    @property
    def share(self) -> float:
        return self.cpu / max(self.total, 1)


def on_device(model_id: str, devices: list[str]) -> tuple[str, Fallback]:
    """What AI Hub measured: the ``layer_counts`` of the model's (single) component on the first of
    ``devices`` it was measured on."""
    results = published()["models"]
    assert model_id in results, f"{model_id}: not extracted from AI Hub's package (scripts/aihub_published.py)"
    metrics = results[model_id]["devices"]  # perf.yaml: precisions.float.components.<the one>.performance_metrics
    device = next((d for d in devices if d in metrics), None)
    assert device is not None, f"{model_id}: no {RUNTIME} result on {devices}"
    entry = metrics[device]  # <device>.onnx
    assert entry["job_status"] == "Passed", entry
    counts = entry["layer_counts"]
    return device, Fallback(counts.get("cpu", 0), counts["total"])


def in_report(htp: BackendReport) -> Fallback:
    """What the report says: the nodes the HTP leaves to the CPU, of those that run at all."""
    running = [v for v in htp.nodes.values() if v.status != REMOVED]
    return Fallback(sum(not v.supported for v in running), len(running))


def refilled(path: Path, directory: Path) -> Path:
    """The committed copy with every stripped float tensor given constant data, so a session loads it."""
    model = onnx.load(path)
    for tensor in model.graph.initializer:
        if tensor.data_type == TensorProto.FLOAT and not tensor.raw_data and not tensor.float_data:
            tensor.raw_data = np.full(tuple(tensor.dims), REFILL, np.float32).tobytes() if math.prod(tensor.dims) else b""
    out = directory / path.name
    onnx.save(model, out)
    return out


def test_the_committed_set_covers_five_architectures_with_mobilenet_v3():
    data = published()
    source = data["source"]
    pinned = re.search(r'^PACKAGE, VERSION = "([^"]+)", "([^"]+)"$', EXTRACTOR.read_text(), re.M).groups()
    assert (source["package"], source["version"]) == pinned  # the results of the release the script pins
    assert (source["precision"], source["runtime"]) == (PRECISION, RUNTIME)
    assert len(source["sha256"]) == 64 and source["wheel"].startswith(f"qai_hub_models-{pinned[1]}-")
    names = {p.stem for p in COMMITTED.glob("*.onnx")}
    assert len(names) >= 5 and {"mobilenet_v3_small", "mobilenet_v3_large"} <= names
    for name in names:  # each is an AI Hub model id with on-device results in the pinned package
        model = data["models"].get(name)
        assert model and model["file"] == f"qai_hub_models/models/{name}/perf.yaml" and model["devices"], name


def test_each_soc_is_matched_to_its_reference_phone_or_laptop():
    assert reference_devices("sm8750")[0] == "Samsung Galaxy S25"  # SM8750-AC, soc_model 69, v79
    assert reference_devices("sm8650")[0] == "Samsung Galaxy S24"
    assert reference_devices("sc8380xp")[0] == "Snapdragon X Elite CRD"  # before the parts sharing soc_model 60


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("model_id,path", MODELS, ids=[m for m, _ in MODELS])
def test_cpu_fallback_agrees_with_ai_hubs_devices(tmp_path, monkeypatch, soc, model_id, path):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    device, truth = on_device(model_id, reference_devices(soc))
    report = analyze(refilled(path, tmp_path), PartitionOptions(backends=("htp",), fp16=True, soc=soc), use_cache=False)
    htp = report.backends["htp"]
    assert htp.status == "measured", (htp.error, htp.suggestion)
    ours = in_report(htp)
    refused = {n: v.reason for n, v in htp.nodes.items() if not v.supported and v.status != REMOVED}
    where = f"{model_id} on {device} ({soc}): AI Hub {truth}, report {ours}; refused {list(refused.items())[:5]}"
    assert (ours.cpu > 0) == (truth.cpu > 0), where
    assert abs(ours.share - truth.share) <= SHARE_TOLERANCE, where
