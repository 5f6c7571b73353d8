"""Accuracy and quantize cells in a sweep (issue 25): the spec's [data], [accuracy] and [quantize]
tables checked up front, the data's content in the cell's key, the cells' figures equal to the
accuracy command's on the same model and data, the index columns, and ``sweep diff --fail-on
accuracy-drop=DB`` tripping on a real drop (u16 activations in the old run, u8 in the new one, on a
model whose outlier u8 breaks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accuracy_models import outlier_model, save, save_samples
from dashboard.errors import UserError
from dashboard.sweep.accuracy import AccuracyFigure, CellData, QuantizeFigure
from dashboard.sweep.cells import Cell, CellResult
from dashboard.sweep.diff import diff_results, parse_gates
from dashboard.sweep.spec import parse_spec
from dashboard.runtime.knobs import Settings


def cli(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "dashboard", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def zoo(tmp_path):
    """A spec folder with the outlier model and its samples."""
    save(outlier_model(), tmp_path, "outlier.onnx")
    (tmp_path / "data").mkdir()
    save_samples(tmp_path / "data", name="samples.npz")
    return tmp_path


def spec_of(folder: Path, **tables):
    return parse_spec({"models": ["outlier.onnx"], "socs": ["sm8650"], **tables}, folder)


# -- the spec -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tables, words", [
    ({"data": {"path": "nowhere.npz"}}, "does not exist"),
    ({"data": {"path": "data", "preset": "cinema"}}, "preset"),
    ({"data": {"path": "data", "mean": [1, 2, 3, 4]}}, "mean"),
    ({"data": {"path": "data", "layout": "CHWN"}}, "layout"),
    ({"data": {"path": "data", "limit": 0}}, "limit"),
    ({"data": {"path": "data", "colour": "RGB"}}, "colour"),
    ({"data": {"models": {"outlier.onnx": "missing"}}}, "missing"),
    ({"accuracy": {"layers": ["sideways"]}}, "layers"),
    ({"quantize": {"activations": "u4"}}, "activations"),
    ({"quantize": {"target": "loud"}}, "--target"),
    ({"quantize": {"per_channel": "yes"}}, "per_channel"),
])
def test_bad_tables_are_one_error_naming_what(zoo, tables, words):
    with pytest.raises(UserError) as caught:
        spec_of(zoo, analyses=["accuracy", "quantize"], **tables)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_cli_says_a_bad_data_table_in_one_line(zoo):
    (zoo / "spec.toml").write_text('models = ["outlier.onnx"]\nsocs = ["sm8650"]\nanalyses = ["accuracy"]\n'
                                   '[data]\npath = "data"\npreset = "cinema"\n')
    done = cli("sweep", str(zoo / "spec.toml"), "--out", str(zoo / "out"), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "preset" in done.stderr
    assert not (zoo / "out").exists()


def test_each_model_gets_its_data_and_the_data_decides_the_key(zoo):
    save(outlier_model(seed=4), zoo, "other.onnx")
    other = save_samples(zoo / "data", count=3, name="other.npz")
    spec = parse_spec({"models": ["*.onnx"], "socs": ["sm8650"], "analyses": ["accuracy", "partition"],
                       "data": {"path": "data/samples.npz", "models": {"other*": "data/other.npz"}, "limit": 4}}, zoo)
    cells = {(c.model, c.analysis): c for c in spec.cells()}
    assert cells["other.onnx", "accuracy"].data.path == str(other.resolve())
    assert cells["outlier.onnx", "accuracy"].data.path.endswith("samples.npz")
    assert cells["outlier.onnx", "accuracy"].data.limit == 4
    assert cells["outlier.onnx", "partition"].data is None  # only the cells that read data carry it
    before = cells["other.onnx", "accuracy"].key
    partition_key = cells["other.onnx", "partition"].key
    np.savez(other, **{k: v * 2 for k, v in np.load(other).items()})  # the same file name, other content
    again = {(c.model, c.analysis): c for c in spec_of_glob(zoo).cells()}
    assert again["other.onnx", "accuracy"].key != before
    assert again["other.onnx", "partition"].key == partition_key  # a partition does not read data
    assert again["other.onnx", "accuracy"].cell_id == cells["other.onnx", "accuracy"].cell_id


def spec_of_glob(zoo):
    return parse_spec({"models": ["*.onnx"], "socs": ["sm8650"], "analyses": ["accuracy", "partition"],
                       "data": {"path": "data/samples.npz", "models": {"other*": "data/other.npz"}, "limit": 4}}, zoo)


def test_no_data_is_random_inputs_and_a_recipe_decides_a_quantize_key(zoo):
    a = next(spec_of(zoo, analyses=["quantize"]).cells())
    b = next(spec_of(zoo, analyses=["quantize"], quantize={"activations": "u16"}).cells())
    assert a.data.path is None and a.data.label == "random inputs"
    assert a.key != b.key and a.cell_id == b.cell_id


# -- the diff gate (pure) -------------------------------------------------------------------------------------
def result(sqnr: float | None, status="ok", data="6 sample(s) of samples.npz", digest="d1",
           analysis="accuracy") -> CellResult:
    cell = Cell(model="m.onnx", path="m.onnx", digest="x", soc="sm8650", option_set="default", analysis=analysis,
                settings=Settings(soc="sm8650"), data=CellData("/d/samples.npz", digest))
    figure = AccuracyFigure("htp_vs_float", "float model on the HTP", "float model on the CPU EP (fp32)",
                            "HTP simulator (x86_64)", sqnr_db=sqnr)
    out = CellResult(cell=cell, status=status, accuracy=[figure] if status == "ok" else [], data=data,
                     reason=None if status == "ok" else "the HTP failed")
    if analysis == "quantize":
        out.quantized = QuantizeFigure("u8", "u8", lifted=["a"] if sqnr and sqnr > 40 else [], cycles_ratio=1.1)
    return out


@pytest.mark.parametrize("gate, old, new, tripped", [
    ("accuracy-drop=5", 40.0, 30.0, True),
    ("accuracy-drop=15", 40.0, 30.0, False),
    ("accuracy-drop", 40.0, 39.9, True),
    ("accuracy-drop=5dB", 40.0, 44.0, False),  # a rise trips nothing
    ("coverage-drop=1", 40.0, 10.0, False),  # another gate
])
def test_accuracy_drop_trips_beyond_its_db(gate, old, new, tripped):
    diff = diff_results([result(old)], [result(new)], parse_gates(gate))
    changes = [c for c in diff.changes if c.kind == "accuracy"]
    assert len(changes) == 1 and changes[0].old == old and changes[0].new == new
    assert bool(diff.tripped) is tripped
    assert "measured on other data" not in changes[0].text


def test_a_cell_that_now_fails_trips_and_other_data_is_said():
    diff = diff_results([result(40.0)], [result(None, status="failed")], parse_gates("accuracy-drop=3"))
    assert [c.gate for c in diff.changes] == ["accuracy-drop"]
    moved = diff_results([result(40.0)], [result(35.0, data="random inputs", digest="")],
                         parse_gates("accuracy-drop=3"))
    assert "measured on other data" in moved.changes[0].text and moved.tripped
    q = diff_results([result(45.0, analysis="quantize")], [result(30.0, analysis="quantize")],
                     parse_gates("accuracy-drop=3"))
    kinds = {c.kind for c in q.changes}
    assert {"accuracy", "quantized"} <= kinds


@pytest.mark.parametrize("text, words", [("accuracy-drop=-1", "between 0 and 200"),
                                         ("accuracy-drop=loud", "DB must be"),
                                         ("accuracy-drop=nan", "between")])
def test_a_bad_db_is_one_error(text, words):
    with pytest.raises(UserError, match=words):
        parse_gates(text)


# -- on the simulator -----------------------------------------------------------------------------------------
@pytest.mark.simulator
def test_an_accuracy_cell_gives_the_accuracy_commands_figures(zoo):
    from dashboard.sweep.cells import run_cell
    from dashboard.sweep.store import index_row

    spec = spec_of(zoo, analyses=["accuracy"], data={"path": "data/samples.npz"}, accuracy={"layers": ["cumulative"]})
    cell = next(spec.cells())
    row = run_cell(cell)
    assert row.ok, row.reason
    done = cli("accuracy", str(zoo / "outlier.onnx"), "--data", str(zoo / "data" / "samples.npz"), "--soc", "sm8650",
               "--layers", "cumulative", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    want = {c["key"]: min(o["overall"]["sqnr_db"] for o in c["outputs"]) for c in record["comparisons"]}
    got = {f.comparison: f.sqnr_db for f in row.accuracy}
    assert set(got) == set(want) and all(abs(got[k] - want[k]) < 1e-3 for k in want)
    assert row.data == f"6 sample(s) of {record['data']['source']}" and row.hardware == "simulator"
    flat = index_row(row, "cells/x.json")
    assert flat["acc_comparison"] == "htp_vs_float" and abs(flat["acc_sqnr_db"] - want["htp_vs_float"]) < 1e-3
    jump = record["layers"]["first_jump"]
    assert (row.first_jump is None) == (jump is None)


@pytest.mark.simulator
def test_a_sweep_of_quantize_cells_and_its_accuracy_gate(zoo):
    """Old run: u16 activations; new run: u8, which the outlier breaks. The diff gates the drop."""
    base = ('models = ["outlier.onnx"]\nsocs = ["sm8650"]\nanalyses = ["quantize"]\n'
            '[data]\npath = "data/samples.npz"\n[quantize]\nactivations = "{kind}"\n')
    for kind in ("u16", "u8"):
        (zoo / f"{kind}.toml").write_text(base.format(kind=kind))
        done = cli("sweep", str(zoo / f"{kind}.toml"), "--out", str(zoo / kind), "--json")
        assert done.returncode == 0, done.stderr
        cells = json.loads(done.stdout)["cells"]
        assert [c["status"] for c in cells] == ["ok"], cells
        q = cells[0]["quantized"]
        assert q["activations"] == kind and q["htp_claimed"] > 0 and q["cycles_ratio"] > 0
    diff = cli("sweep", "diff", str(zoo / "u16"), str(zoo / "u8"), "--json")
    assert diff.returncode == 0, diff.stderr
    drop = next(c for c in json.loads(diff.stdout)["changes"] if c["kind"] == "accuracy" and "QDQ model on the HTP vs float" in c["text"])
    assert drop["old"] - drop["new"] > 6
    gated = cli("sweep", "diff", str(zoo / "u16"), str(zoo / "u8"), "--fail-on", "accuracy-drop=3")
    assert gated.returncode == 1 and "[gate accuracy-drop]" in gated.stdout
    loose = cli("sweep", "diff", str(zoo / "u16"), str(zoo / "u8"), "--fail-on",
                f"accuracy-drop={drop['old'] - drop['new'] + 50:.0f}")
    assert loose.returncode == 0 and "gate: passed" in loose.stdout
    again = cli("sweep", str(zoo / "u8.toml"), "--out", str(zoo / "u8"), "--json")  # resumed: nothing reruns
    assert json.loads(again.stdout)["cells"][0]["elapsed_s"] == json.loads(done.stdout)["cells"][0]["elapsed_s"]


def test_the_sweep_pages_matrix_says_an_accuracy_cells_figures():
    """The matrix cell's text comes from the index row: the SQNR, the lifted tensors, the cycles
    ratio, and random inputs said."""
    from dashboard.sweep.store import index_row
    from dashboard.views.sweep import _part

    row = index_row(result(41.25, analysis="quantize"), "cells/x.json")
    row["acc_sqnr_db"] = 37.5  # the quantize cell's main comparison is the QDQ model's (none in this fixture)
    text = _part(type("Row", (), row)())
    assert text.startswith("QDQ 37.5 dB") and "1 lifted" in text and "1.10× float cycles" in text
    plain = _part(type("Row", (), index_row(result(41.25, data="random inputs"), "cells/y.json"))())
    assert plain == "fp16 41.2 dB (random inputs)"
