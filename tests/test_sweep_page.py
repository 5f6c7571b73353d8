"""The Sweep page under AppTest: it offers only the folders and specs the command line or the
operator's sweep roots name, draws the matrix from a results folder (coverage, CPU nodes,
verdicts, a profiled cell's simulated HTP cycles labelled as such), filters it, shows the diff of
two runs with its gates, opens a cell on the Partitions page with the cell's SoC, dims and shapes
(the model's shared settings, which the address bar carries), and runs a spec as a background
job into the spec's own folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import onnx
from sweep_helpers import fake_profile, two_input_model, write_models, write_spec
from streamlit.testing.v1 import AppTest

from dashboard import access
from dashboard.errors import UserError
from dashboard.sweep.cells import CellResult, CpuNode
from dashboard.sweep.spec import load_spec
from dashboard.sweep.store import Store, run_sweep
from dashboard.views.sweep import offered, results_folder

SPEC = 'models = ["models/*.onnx"]\nsocs = ["sm8650", "sc8380xp"]\n'


def fake(coverage: dict[str, float]):
    """A runner without workers: partition cells get ``coverage`` per model, one Erf on the CPU
    below 1.0; classify cells a verdict; profile cells 12.7M simulated HTP cycles."""

    def run_one(cell, cancel):
        if cell.analysis == "profile":
            return fake_profile(cell, 12_700_000.0)
        if cell.analysis == "classify":
            return CellResult(cell=cell, status="ok", verdicts={"ep": "NonGenAI", "refined": "NonGenAI"},
                              routes={"ep": "htp", "refined": "htp"})
        share = coverage[cell.model]
        cpu = [] if share == 1.0 else [CpuNode("erf2", "Erf", "Operators of type `Erf` are not supported")]
        return CellResult(cell=cell, status="ok", htp_coverage=share, htp_claimed=int(share * 4), htp_nodes=4,
                          cpu_nodes=cpu, hardware="simulator")

    return run_one


def two_runs(base: Path) -> Path:
    """``base`` as an operator's sweep root: a spec, its results, and a second run (``pr-run``)
    where model 1 lost coverage. Shared with the browser test."""
    write_models(base / "models", 2)
    spec = write_spec(base / "zoo.toml", SPEC)
    run_sweep(load_spec(spec), Store(results_folder(spec), create=True),
              run_one=fake({"models/model_000.onnx": 1.0, "models/model_001.onnx": 1.0}))
    run_sweep(load_spec(spec), Store(base / "pr-run", create=True),
              run_one=fake({"models/model_000.onnx": 1.0, "models/model_001.onnx": 0.75}))
    return base


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An operator's sweep root with a spec, its results, and a second run where model 1 lost coverage."""
    base = two_runs(tmp_path / "sweeps")
    monkeypatch.setenv(access.SWEEP_ROOTS_ENV, str(base))
    access.reload()
    return base


def page(app, tab: str | None = None) -> AppTest:
    """The Sweep page, on ``tab`` when given (only the open tab runs)."""
    at = app()
    at.switch_page("pages/sweep.py").run()
    assert not at.exception, at.exception
    if tab is not None:
        at.session_state["sw_tab"] = tab
        at.run()
        assert not at.exception, at.exception
    return at


def test_only_the_command_lines_and_the_operators_folders_are_offered(tmp_path, root):
    elsewhere = tmp_path / "elsewhere"
    write_models(elsewhere / "models", 1)
    other = write_spec(elsewhere / "other.toml", SPEC)
    found = offered([])
    assert set(found.folders.values()) == {results_folder(root / "zoo.toml"), root / "pr-run"}
    assert set(found.specs.values()) == {root / "zoo.toml"}
    with_cli = offered(["--sweep", str(other)])
    assert other in with_cli.specs.values()  # the terminal named it


def test_a_specs_results_folder_is_offered_by_its_name_on_disk(tmp_path):
    """Issue 27, item 6: a spec given on the command line had its results offered as
    ``zoo.toml.results`` while the folder is ``zoo.results``."""
    base = two_runs(tmp_path / "sweeps")
    spec = base / "zoo.toml"
    found = offered(["--sweep", str(spec)])
    [name] = [n for n, path in found.folders.items() if path == results_folder(spec)]
    assert name == f"{results_folder(spec)} (command line)" and results_folder(spec).is_dir()
    assert results_folder(spec).name == "zoo.results"


def test_the_matrix_shows_coverage_cpu_nodes_and_verdicts_and_filters(app, root):
    at = page(app)
    at.selectbox(key="sw_folder").set_value(next(o for o in at.selectbox(key="sw_folder").options
                                                 if o.endswith("pr-run"))).run()
    table = at.dataframe[0].value
    assert list(table.columns) == ["sc8380xp · default", "sm8650 · default"]
    assert table.loc["models/model_001.onnx", "sm8650 · default"] == "HTP 75% · 1 on CPU · NonGenAI / NonGenAI"
    assert table.loc["models/model_000.onnx", "sm8650 · default"].startswith("HTP 100% · 0 on CPU")
    assert any("measured on HTP simulator" in m.value for m in at.markdown)
    at.multiselect(key="sw_filter_soc").set_value(["sm8650"]).run()
    assert list(at.dataframe[0].value.columns) == ["sm8650 · default"]
    assert {"Download CSV", "Download Parquet"} <= {b.label for b in at.get("download_button")}


def test_the_diff_names_the_model_that_lost_coverage_and_trips(app, root):
    at = page(app, "Diff two runs")
    names = at.selectbox(key="sw_diff_old").options
    at.selectbox(key="sw_diff_old").set_value(next(n for n in names if n.endswith("zoo.results")))
    at.selectbox(key="sw_diff_new").set_value(next(n for n in names if n.endswith("pr-run"))).run()
    assert at.error and "trip a gate" in at.error[0].value
    assert "models/model_001.onnx" in at.code[0].value


def test_a_cell_opens_on_the_partitions_page_with_its_soc(app, root):
    at = page(app)
    picks = at.selectbox(key="sw_open_pick").options
    at.selectbox(key="sw_open_pick").set_value(next(p for p in picks if "model_001" in p and "sm8650" in p))
    at.button(key="sw_open").click().run()
    assert not at.exception, at.exception
    soc = [s for s in at.selectbox if s.key and s.key.startswith("pt_soc_")]
    assert soc and soc[0].value == "sm8650"


def test_a_spec_runs_as_a_job_into_its_own_folder(app, root, monkeypatch):
    import shutil

    import dashboard.sweep.store as store
    from deadlines import wait_until

    real = store.run_sweep
    runner = fake({"models/model_000.onnx": 1.0, "models/model_001.onnx": 0.5})
    monkeypatch.setattr(store, "run_sweep", lambda spec, where, **kw: real(spec, where, **{**kw, "run_one": runner}))
    out = results_folder(root / "zoo.toml")
    shutil.rmtree(out)
    at = page(app, "Run a spec")
    next(b for b in at.button if b.label == "Run the sweep").click().run()
    assert not at.exception, at.exception
    wait_until(lambda: (out / "index.parquet").is_file() and '"complete": true' in (out / "sweep.json").read_text(),
               "the page's sweep filled the spec's results folder")
    assert {r.htp_coverage for r in Store(out).results() if r.cell.analysis == "partition"} == {1.0, 0.5}


def test_a_spec_whose_options_load_a_library_is_refused_from_the_page(tmp_path, root):
    from dashboard.views.sweep import sweep_work

    spec = write_spec(root / "lib.toml", SPEC + '[option_sets.custom]\nprovider_options = { backend_path = "'
                      f'{tmp_path / "libQnnHtp.so"}" }}\n')
    (tmp_path / "libQnnHtp.so").write_bytes(b"\x7fELF")
    with pytest.raises(UserError) as refused:
        sweep_work(spec, 1)
    assert "backend_path" in str(refused.value) and "a page may not set it" in str(refused.value)
    assert not results_folder(spec).exists()


PROFILED = ('models = ["models/*.onnx"]\nsocs = ["sm8650", "sc8380xp"]\nanalyses = ["partition", "profile"]\n'
            '[option_sets.b2]\ndims = { batch = 2 }\nshapes = { y = [2, 8] }\n')


@pytest.fixture
def profiled(tmp_path, monkeypatch):
    """A sweep root whose one model has a named and an unnamed dimension, swept with partition and
    profile cells under a setting set that fixes both."""
    base = tmp_path / "sweeps"
    (base / "models").mkdir(parents=True)
    onnx.save(two_input_model(), base / "models" / "two.onnx")
    spec = write_spec(base / "zoo.toml", PROFILED)
    run_sweep(load_spec(spec), Store(results_folder(spec), create=True), run_one=fake({"models/two.onnx": 0.5}))
    monkeypatch.setenv(access.SWEEP_ROOTS_ENV, str(base))
    access.reload()
    return base


def test_a_profiled_cell_shows_its_simulated_cycles_labelled_as_such(app, profiled):
    at = page(app)
    text = at.dataframe[0].value.loc["models/two.onnx", "sm8650 · b2"]
    assert text == "HTP 50% · 1 on CPU · 12.7M simulated HTP cycles · top Transpose 75%"
    assert any("never a time" in c.value for c in at.caption)
    assert not any(word in text for word in (" ms", " µs", " s "))


def test_a_cell_opens_on_the_partitions_page_with_its_dims_and_shapes(app, profiled):
    at = page(app)
    picks = at.selectbox(key="sw_open_pick").options
    at.selectbox(key="sw_open_pick").set_value(next(p for p in picks if "sc8380xp" in p)).run()
    at.button(key="sw_open").click().run()
    assert not at.exception, at.exception
    widgets = {w.key: w for w in [*at.number_input, *at.text_input, *at.selectbox] if w.key}
    batch = next(w for k, w in widgets.items() if k.startswith("pt_dim_") and k.endswith("_batch"))
    shape = next(w for k, w in widgets.items() if k.startswith("pt_shape_") and k.endswith("_y"))
    soc = next(w for k, w in widgets.items() if k.startswith("pt_soc_"))
    assert (batch.value, shape.value.replace(" ", ""), soc.value) == (2, "2,8", "sc8380xp")
    assert at.query_params.get("dim.batch") in ("2", ["2"]) and at.query_params.get("soc") in ("sc8380xp",
                                                                                              ["sc8380xp"])


# -- where a page's run writes (issue 29) -----------------------------------------------------------------
def _plant_symlink(out: Path, outside: Path) -> None:
    out.symlink_to(outside, target_is_directory=True)


def _plant_foreign_folder(out: Path, outside: Path) -> None:
    out.mkdir()
    import os

    os.chown(out, 65534, 65534)


@pytest.mark.parametrize("plant, why", [(_plant_symlink, "is a symlink"),
                                         (_plant_foreign_folder, "belongs to uid 65534")])
def test_a_results_folder_planted_in_the_sweep_root_is_refused_and_nothing_is_written_through(
        tmp_path, root, plant, why):
    """Someone who may write in the operator's sweep root plants ``<spec>.results``: a symlink to a
    folder elsewhere, or a folder of their own. The page refuses to run into it, in one line,
    before the job starts, and writes nothing there."""
    from dashboard.views.sweep import sweep_work

    spec = write_spec(root / "planted.toml", SPEC)
    outside = tmp_path / "outside"
    outside.mkdir()
    plant(results_folder(spec), outside)
    with pytest.raises(UserError) as refused:
        sweep_work(spec, 1)
    assert why in str(refused.value) and "refusing to write the sweep's results there" in str(refused.value)
    assert list(outside.iterdir()) == []
    assert not any(results_folder(spec).iterdir()) if results_folder(spec).is_dir() else True


def test_a_symlink_planted_after_the_check_is_refused_when_the_job_makes_the_folder(tmp_path, root):
    from dashboard.runtime.jobs import Cancellation
    from dashboard.views.sweep import sweep_work

    spec = write_spec(root / "late.toml", SPEC)
    work = sweep_work(spec, 1)  # checked: nothing there yet
    outside = tmp_path / "outside"
    outside.mkdir()
    results_folder(spec).symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError, match="is a symlink"):
        work(lambda event: None, Cancellation())
    assert list(outside.iterdir()) == []
