"""The Sweep page on a sweep of 100 models × 4 SoCs × 2 analyses (800 cells): it opens from the
Parquet index alone (no per-cell record is read for the matrix), draws the matrix as one table
with every model and every column, and a rerun (a filter, a pick) reads the index no more; the
diff, which needs the records, reads them only when its tab is open.

The folder is filled through the store's own runner (``run_sweep``) with a runner that makes
each cell's result without a worker: the page reads what a real sweep writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sweep_helpers import write_models, write_spec

from dashboard import access
from dashboard.sweep.cells import CellResult, CpuNode
from dashboard.sweep.spec import load_spec
from dashboard.sweep.store import Store, run_sweep

SOCS = ("sm8650", "sc8380xp", "sm8750", "qcs9075")
MODELS = 100


def fake_cell(cell, cancel) -> CellResult:
    """A cell's result without a worker: every seventh model leaves an Erf to the CPU."""
    if cell.analysis == "classify":
        return CellResult(cell=cell, status="ok", verdicts={"ep": "NonGenAI", "refined": "NonGenAI"},
                          routes={"ep": "htp", "refined": "htp"})
    lossy = int(Path(cell.model).stem.rsplit("_", 1)[-1]) % 7 == 0
    cpu = [CpuNode("erf2", "Erf", "Operators of type `Erf` are not supported")] if lossy else []
    return CellResult(cell=cell, status="ok", htp_coverage=0.75 if lossy else 1.0, htp_claimed=3 if lossy else 4,
                      htp_nodes=4, cpu_nodes=cpu, hardware="simulator")


def build_sweep(base: Path, models: int = MODELS, socs: tuple[str, ...] = SOCS) -> Path:
    """``models`` × ``socs`` × (partition, classify) cells under ``base``: its results folder."""
    write_models(base / "models", models)
    spec = write_spec(base / "zoo.toml", f'models = ["models/*.onnx"]\nsocs = {list(socs)!r}\n'
                      'analyses = ["partition", "classify"]\n')
    out = base / "zoo.results"
    run_sweep(load_spec(spec), Store(out, create=True), run_one=fake_cell)
    return out


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """An operator's sweep root with the 800-cell run and a copy of it (a second run to diff)."""
    base = tmp_path_factory.mktemp("scale") / "sweeps"
    out = build_sweep(base)
    shutil.copytree(out, base / "pr-run")
    return base


@pytest.fixture
def counted(zoo, monkeypatch):
    """The sweep root offered to the page, with counters on the store's record reader and its
    index reader (the page calls them in this process)."""
    import dashboard.sweep.store as store

    counts = {"records": 0, "index": 0}
    read, index = store.Store.read, store.Store.index

    def counting_read(self, name):
        counts["records"] += 1
        return read(self, name)

    def counting_index(self):
        counts["index"] += 1
        return index(self)

    monkeypatch.setattr(store.Store, "read", counting_read)
    monkeypatch.setattr(store.Store, "index", counting_index)
    monkeypatch.setenv(access.SWEEP_ROOTS_ENV, str(zoo))
    access.reload()
    return counts


def nodes(block) -> int:
    """Elements and blocks drawn under ``block``."""
    children = getattr(block, "children", {}) or {}
    return 1 + sum(nodes(child) for child in children.values())


def open_results(app):
    at = app()
    at.switch_page("pages/sweep.py").run()
    assert not at.exception, at.exception
    pick = at.selectbox(key="sw_folder")
    at = pick.set_value(next(o for o in pick.options if o.endswith("zoo.results"))).run()
    assert not at.exception, at.exception
    return at


def test_the_800_cell_matrix_opens_from_the_index_alone(app, counted):
    at = open_results(app)
    table = at.dataframe[0].value
    assert table.shape == (MODELS, len(SOCS))
    assert sorted(table.columns) == sorted(f"{soc} · default" for soc in SOCS)
    assert table.loc["models/model_007.onnx", "sm8650 · default"] == "HTP 75% · 1 on CPU · NonGenAI / NonGenAI"
    assert table.loc["models/model_001.onnx", "qcs9075 · default"].startswith("HTP 100% · 0 on CPU")
    assert any("800 cells" in m.value for m in at.markdown)
    assert counted["records"] == 0, "the matrix read per-cell records"
    assert len(at.dataframe) == 1 and nodes(at.main) < 100, "the page draws per cell, not one table"


def test_a_rerun_reads_the_index_no_more(app, counted):
    at = open_results(app)
    first = counted["index"]
    assert first >= 1
    at = at.multiselect(key="sw_filter_soc").set_value(["sm8650"]).run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value.columns) == ["sm8650 · default"]
    at.run()
    assert counted["index"] == first and counted["records"] == 0


def test_a_rewritten_index_is_read_afresh(app, counted, zoo, tmp_path):
    """The cache follows the file: a sweep that rewrites the index is seen on the next rerun."""
    target = tmp_path / "sweeps"
    build_sweep(target, models=2, socs=SOCS[:1])
    counted_root = zoo / "zoo.results"
    at = open_results(app)
    first = counted["index"]
    backup = tmp_path / "index.parquet"
    shutil.copy2(counted_root / "index.parquet", backup)
    try:
        shutil.copy(target / "zoo.results" / "index.parquet", counted_root / "index.parquet")
        at.run()
        assert counted["index"] == first + 1
        assert at.dataframe[0].value.shape == (2, 1)
    finally:
        shutil.copy2(backup, counted_root / "index.parquet")


def test_the_diff_reads_the_records_only_on_its_tab(app, counted):
    at = open_results(app)
    assert counted["records"] == 0
    at.session_state["sw_tab"] = "Diff two runs"
    at.run()
    assert not at.exception, at.exception
    assert counted["records"] == 2 * MODELS * len(SOCS) * 2  # both runs' records, once each
    assert at.success and "No gate trips" in at.success[0].value
    at.run()
    assert counted["records"] == 2 * MODELS * len(SOCS) * 2  # the same pair again: not read again
