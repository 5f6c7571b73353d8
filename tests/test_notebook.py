"""The example notebook (notebooks/explore.ipynb) executed in a real Jupyter kernel (nbclient,
ipykernel), with the real worker and the HTP simulator; then its results are checked from inside
the same kernel, and the notebook API's bad input is one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from dashboard import notebook as lab
from dashboard.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "explore.ipynb"
PROBE = """import json
print(json.dumps({
    "verdicts": [verdict.ep.verdict, verdict.refined.verdict],
    "htp": parts.record.backends["htp"].status, "gpu": parts.record.backends["gpu"].status,
    "classified": int(nodes["class"].notna().sum()), "nodes": len(parts.record.node_order),
    "plans": sorted(parts.plans_frame()["plan"].unique()),
    "strategies": list(run.to_frame()["strategy"]),
    "failed": int(run.to_frame()["failed"].sum()),
    "migrate_kinds": sorted(set(run.events_frame().query("strategy == 'migrate'")["kind"])),
    "answered": len(run.requests_frame()),
}))"""


@pytest.fixture()
def stores(tmp_path, monkeypatch):
    """Caches and stores of this test only (the kernel and its workers inherit the environment)."""
    for name in ("QNN_LAB_CACHE", "QNN_LAB_MODEL_STORE", "QNN_LAB_CONTEXT_STORE"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))


def test_the_example_notebook_runs_end_to_end(stores):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in nb.cells), "commit the notebook without outputs"
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)  # raises CellExecutionError with the cell's traceback
        probe = nbformat.v4.new_code_cell(PROBE)
        nb.cells.append(probe)
        client.execute_cell(probe, len(nb.cells) - 1)
    result = json.loads(probe.outputs[0]["text"])
    assert result["verdicts"] == ["NonGenAI", "NonGenAI"]
    assert result["htp"] == "measured" and result["gpu"] in ("measured", "predicted")
    assert result["classified"] == result["nodes"] > 0 and result["plans"] == ["intersection", "segmented"]
    assert result["strategies"] == ["fast", "migrate"] and result["failed"] == 0 and result["answered"] == 60
    assert {"session_create_start", "warmup_end", "swap", "drain_end", "session_released"} <= set(
        result["migrate_kinds"])
    figures = [o for cell in nb.cells for o in cell.get("outputs", [])
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 6  # classification, graph, plan strip, Gantt, latency, comparison


def test_notebook_api_bad_input_is_one_line(tmp_path):
    with pytest.raises(UserError) as missing:
        lab.load(tmp_path / "missing.onnx")
    assert "missing.onnx" in str(missing.value) and "\n" not in str(missing.value)
    model = lab.sample()
    with pytest.raises(UserError, match="unknown timeline option.s. turbo; known: backends, fp16"):
        model.timeline(turbo=True)
    with pytest.raises(UserError, match="unknown partition option.s. fp32"):
        model.partition(fp32=True)
    with pytest.raises(UserError, match="unknown strategy warp"):
        model.timeline(strategies=["warp"])
    with pytest.raises(UserError, match="unknown backend npu"):
        model.partition(backends=("npu",))
