"""Extract Qualcomm AI Hub's published on-device results, the facts ``tests/test_aihub_truth.py``
compares the partition analysis with, from the pinned ``qai-hub-models`` wheel into a small file
the project owns: ``tests/data/aihub/published.json`` (checked in).

The wheel is downloaded with ``pip download --no-deps`` into a temporary folder (or given with
``--wheel``) and read as the zip file it is: nothing is installed, nothing of the package is
imported. Taken from it, each with the file and field it comes from:

- ``qai_hub_models/devices_and_chipsets.yaml``: for every chipset with a reference device, its
  ``soc_model``, ``htp_version``, ``aliases`` and ``reference_device`` (how a SoC finds its phone
  or laptop);
- ``qai_hub_models/models/<id>/perf.yaml`` of each architecture ``scripts/export_aihub_models.py``
  knows: the ``job_status`` and ``layer_counts`` (``{total, npu, gpu, cpu}``) that AI Hub measured,
  per device, for precision ``float`` on runtime ``onnx`` (ONNX Runtime with the QNN EP).

    .venv/bin/python scripts/aihub_published.py                 # downloads the pinned wheel
    .venv/bin/python scripts/aihub_published.py --wheel qai_hub_models-0.65.0-py3-none-any.whl

Needs PyYAML (requirements-dev.txt) and pip; to move to a newer release, change ``VERSION``, run
the script and the test, and commit the new file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from export_aihub_models import ARCHITECTURES  # noqa: E402 - the model ids of the truth check

PACKAGE, VERSION = "qai-hub-models", "0.65.0"
OUT = ROOT / "tests" / "data" / "aihub" / "published.json"
PRECISION, RUNTIME = "float", "onnx"  # what tests/test_aihub_truth.py compares with
CHIPSETS_FILE = "qai_hub_models/devices_and_chipsets.yaml"
CHIPSET_FIELDS = ("soc_model", "htp_version", "aliases", "reference_device")
RESULT_FIELDS = ("job_status", "layer_counts")


def download(folder: Path) -> Path:
    """The pinned wheel, downloaded (not installed) into ``folder``."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                    f"{PACKAGE}=={VERSION}", "-d", str(folder)], check=True)
    [wheel] = folder.glob("qai_hub_models-*.whl")
    return wheel


def chipsets(wheel: zipfile.ZipFile) -> dict:
    data = yaml.safe_load(wheel.read(CHIPSETS_FILE))["chipsets"]
    return {key: {field: chipset[field] for field in CHIPSET_FIELDS if field in chipset}
            for key, chipset in data.items() if chipset.get("reference_device")}  # in the file's order


def model_results(wheel: zipfile.ZipFile, model_id: str) -> dict:
    path = f"qai_hub_models/models/{model_id}/perf.yaml"
    components = yaml.safe_load(wheel.read(path))["precisions"][PRECISION]["components"]
    if len(components) != 1:
        raise SystemExit(f"{path}: several components {list(components)}; the truth check compares one")
    [(component, entry)] = components.items()
    devices = {device: {field: runtimes[RUNTIME][field] for field in RESULT_FIELDS if field in runtimes[RUNTIME]}
               for device, runtimes in entry["performance_metrics"].items() if RUNTIME in runtimes}
    return {"file": path, "component": component,
            "field": f"precisions.{PRECISION}.components.{component}.performance_metrics.<device>.{RUNTIME}."
                     f"{{{','.join(RESULT_FIELDS)}}}",
            "devices": dict(sorted(devices.items()))}


def extract(wheel_path: Path) -> dict:
    with zipfile.ZipFile(wheel_path) as wheel:
        return {
            "source": {"package": PACKAGE, "version": VERSION, "wheel": wheel_path.name,
                       "sha256": hashlib.sha256(wheel_path.read_bytes()).hexdigest(),
                       "extracted_by": "scripts/aihub_published.py", "precision": PRECISION, "runtime": RUNTIME},
            "chipsets": {"file": CHIPSETS_FILE, "field": f"chipsets.<key>.{{{','.join(CHIPSET_FIELDS)}}}",
                         "entries": chipsets(wheel)},
            "models": {model_id: model_results(wheel, model_id) for model_id in sorted(ARCHITECTURES)},
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help=f"a downloaded {PACKAGE} {VERSION} wheel (default: download it)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the file to write (default: {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        wheel = args.wheel or download(Path(folder))
        if not wheel.name.startswith(f"qai_hub_models-{VERSION}-"):
            parser.error(f"{wheel.name} is not {PACKAGE} {VERSION}")
        data = extract(wheel)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{args.out}: {len(data['chipsets']['entries'])} chipsets, {len(data['models'])} models "
          f"from {data['source']['wheel']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
