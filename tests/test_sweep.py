"""Sweeps without the HTP simulator: the spec's checks, the store (resume, corrupt records, the
index), the local executor's failure handling, ``--json`` on classify cells, ``sweep diff`` as a
pure function, and memory that stays flat over 400 cells."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from sweep_helpers import write_models, write_spec

from dashboard.cli.main import main
from dashboard.runtime.jobs import Cancellation
from dashboard.sweep import store as store_module
from dashboard.sweep.cells import Cell, CellResult, CpuNode, run_cell
from dashboard.sweep.diff import Gates, diff_results, parse_gates, render_text
from dashboard.sweep.executors import run_local
from dashboard.sweep.spec import load_spec
from dashboard.sweep.store import COLUMNS, Store, run_sweep

ROOT = Path(__file__).resolve().parent.parent
CLASSIFY_SPEC = 'models = ["models/*.onnx"]\nsocs = ["sm8650", "sc8380xp"]\nanalyses = ["classify"]\n'


@pytest.fixture
def zoo(tmp_path) -> Path:
    """Three tiny models and a classify-only spec over two SoCs beside them: 6 cells."""
    write_models(tmp_path / "models", 3)
    return write_spec(tmp_path / "spec.toml", CLASSIFY_SPEC)


def counting(calls: list):
    """A ``run_one`` that runs the real cell and counts it (thread-safe: list.append)."""
    def run_one(cell, cancel):
        calls.append(cell.label)
        return run_cell(cell, cancel)
    return run_one


# -- the spec ------------------------------------------------------------------------------------------
BAD_SPECS = [
    ('models = ["models/missing.onnx"]\nsocs = ["sm8650"]\n', "models/missing.onnx"),
    ('models = ["nowhere/*.onnx"]\nsocs = ["sm8650"]\n', "nowhere/*.onnx"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650", "sm9999"]\n', "sm9999"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"]\n[option_sets.x]\nprovider_options = {htp_perf_mode = "burst"}\n',
     "htp_perf_mode"),
    ('models = ["models/*.onnx"]\nsocs = ["qcs6490"]\n[option_sets.half]\nfp16 = true\n', "qcs6490"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"]\n[option_sets.x]\ndims = {batch = -1}\n', "batch"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"]\n[option_sets.x]\nfp61 = true\n', "fp61"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"]\n[option_sets.x]\nsoc = "sm8550"\n', "socs list"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"]\nanalyses = ["classify", "benchmark"]\n', "benchmark"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"]\n[option_sets.x]\noptimization_level = "max"\n', "max"),
    ('models = ["models/*.onnx"]\nsocs = ["sm8650"\n', "not valid TOML"),
    ('socs = ["sm8650"]\n', "names no models"),
]


@pytest.mark.parametrize("text, named", BAD_SPECS)
def test_a_bad_spec_is_one_error_line_naming_it_before_anything_runs(tmp_path, capsys, text, named):
    write_models(tmp_path / "models", 1)
    spec = write_spec(tmp_path / "spec.toml", text)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and named in err[0], err
    assert not out.exists()  # nothing ran, nothing was written


def test_the_command_exits_2_with_one_line_and_no_traceback(tmp_path):
    spec = write_spec(tmp_path / "spec.toml", 'models = ["gone.onnx"]\nsocs = ["sm8650"]\n')
    done = subprocess.run([sys.executable, "-m", "dashboard", "sweep", str(spec), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "gone.onnx" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_models_are_named_relative_to_the_spec_and_sets_become_settings(tmp_path):
    write_models(tmp_path / "zoo" / "vision", 2)
    spec = load_spec(write_spec(tmp_path / "specs" / "release.toml", (
        'models = ["../zoo/**/*.onnx", "../zoo/vision/model_000.onnx"]\nsocs = ["57", "sc8380xp"]\n'
        '[option_sets.default]\n[option_sets.half]\nfp16 = true\ndims = {batch = 1}\n'
        'provider_options = {htp_graph_finalization_optimization_mode = 3}\n')))
    # Outside the spec's folder: named by absolute path; the glob's match and the path given are one model.
    assert [m.name for m in spec.models] == [(tmp_path / "zoo" / "vision" / f"model_00{i}.onnx").as_posix()
                                             for i in range(2)]
    assert spec.socs == ["sm8650", "sc8380xp"]  # a soc_model number resolves to its key
    assert spec.cell_count == 2 * 2 * 2 * 2
    half = spec.settings("half", "sm8650")
    assert half.fp16 and half.soc == "sm8650" and half.dims == {"batch": 1}
    assert half.provider_options == {"htp_graph_finalization_optimization_mode": "3"}
    cells = list(spec.cells())
    assert len(cells) == spec.cell_count and len({c.cell_id for c in cells}) == spec.cell_count


def test_a_model_inside_the_spec_folder_is_named_by_its_relative_path(zoo):
    spec = load_spec(zoo)
    assert [m.name for m in spec.models] == ["models/model_000.onnx", "models/model_001.onnx",
                                             "models/model_002.onnx"]
    assert spec.option_sets == {"default": {}} and spec.analyses == ["classify"]


def test_the_key_follows_the_models_content_and_the_id_does_not(zoo):
    spec = load_spec(zoo)
    before = next(spec.cells())
    write_models(zoo.parent / "models", 1, ops=("Add", "Erf"))  # model_000 rewritten with other content
    after = next(spec.cells())
    assert after.cell_id == before.cell_id and after.key != before.key and after.digest != before.digest


# -- running and the store -------------------------------------------------------------------------------
def test_a_resumed_sweep_reruns_nothing_and_force_reruns_everything(zoo, tmp_path):
    spec, out = load_spec(zoo), tmp_path / "out"
    first: list = []
    progress = run_sweep(spec, Store(out, create=True), run_one=counting(first), jobs=2)
    assert len(first) == 6 and progress.ran == 6 and progress.reused == 0
    records = {p.name: p.read_bytes() for p in (out / "cells").iterdir()}
    again: list = []
    progress = run_sweep(spec, Store(out, create=True), run_one=counting(again), jobs=2)
    assert again == [] and progress.reused == 6 and progress.done == 6
    assert {p.name: p.read_bytes() for p in (out / "cells").iterdir()} == records  # untouched
    assert len(pd.read_parquet(out / "index.parquet")) == 6
    forced: list = []
    run_sweep(spec, Store(out, create=True), run_one=counting(forced), jobs=2, force=True)
    assert sorted(forced) == sorted(first)


def test_a_changed_model_reruns_only_its_own_cells(zoo, tmp_path):
    spec, out = load_spec(zoo), tmp_path / "out"
    run_sweep(spec, Store(out, create=True), jobs=1)
    write_models(zoo.parent / "models", 1, ops=("Add", "Erf"))
    calls: list = []
    run_sweep(load_spec(zoo), Store(out, create=True), run_one=counting(calls), jobs=1)
    assert sorted(calls) == [f"models/model_000.onnx · {soc} · default · classify" for soc in ("sc8380xp", "sm8650")]


def test_a_corrupt_record_is_a_failed_row_with_a_note_and_is_rerun(zoo, tmp_path):
    spec, out = load_spec(zoo), tmp_path / "out"
    run_sweep(spec, Store(out, create=True), jobs=1)
    victim = sorted((out / "cells").iterdir())[0]
    victim.write_text('{"cell": {"model": 3}, "status": "maybe"}')
    store = Store(out)
    results = list(store.results())
    failed = [r for r in results if not r.ok]
    assert len(results) == 6 and len(failed) == 1 and "corrupt" in failed[0].reason
    assert store.notes and victim.name in " ".join(store.notes) + failed[0].reason
    calls: list = []
    run_sweep(spec, Store(out, create=True), run_one=counting(calls), jobs=1)
    assert len(calls) == 1 and all(r.ok for r in Store(out).results())


def test_without_an_index_the_records_are_read_and_garbage_is_skipped(zoo, tmp_path):
    spec, out = load_spec(zoo), tmp_path / "out"
    run_sweep(spec, Store(out, create=True), jobs=1)
    (out / "index.parquet").unlink()
    (out / "cells" / "garbage.json").write_bytes(b"\xff\x00 not json")
    store = Store(out)
    assert len(list(store.results())) == 6 and any("garbage.json" in n for n in store.notes)
    assert len(store.index()) == 6


def test_the_index_has_the_documented_columns_and_a_row_per_cell(zoo, tmp_path):
    out = tmp_path / "out"
    run_sweep(load_spec(zoo), Store(out, create=True), jobs=2)
    table = pd.read_parquet(out / "index.parquet")
    assert list(table.columns) == [name for name, _, _ in COLUMNS]
    assert set(table["status"]) == {"ok"} and set(table["soc"]) == {"sm8650", "sc8380xp"}
    assert set(table["verdict_ep"]) <= {"GenAI", "NonGenAI", "Unknown"} and table["verdict_ep"].notna().all()
    assert table["htp_coverage"].isna().all()  # classify cells measure no coverage
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["complete"] and manifest["cells"] == 6 and manifest["ran"] == 6


def test_a_cell_whose_runner_raises_is_one_failed_row_and_the_rest_complete(zoo, tmp_path):
    spec, out = load_spec(zoo), tmp_path / "out"
    victim = "models/model_001.onnx"

    def run_one(cell, cancel):
        if cell.model == victim and cell.soc == "sm8650":
            raise RuntimeError("the node vanished")
        return run_cell(cell, cancel)

    progress = run_sweep(spec, Store(out, create=True), run_one=run_one, jobs=2)
    results = list(Store(out).results())
    assert progress.done == 6 and len(results) == 6
    failed = [r for r in results if not r.ok]
    assert [(r.cell.model, r.cell.soc) for r in failed] == [(victim, "sm8650")]
    assert "the node vanished" in failed[0].reason


def test_a_model_that_does_not_read_is_a_failed_cell_not_a_failed_sweep(zoo, tmp_path):
    (zoo.parent / "models" / "model_001.onnx").write_bytes(b"this is not onnx")
    out = tmp_path / "out"
    run_sweep(load_spec(zoo), Store(out, create=True), jobs=2)
    results = list(Store(out).results())
    assert len(results) == 6
    assert {r.cell.model for r in results if not r.ok} == {"models/model_001.onnx"}
    assert all(r.reason and "model_001" in r.reason for r in results if not r.ok)


def test_the_local_executor_takes_only_jobs_cells_at_a_time(zoo):
    spec = load_spec(zoo)
    lock, running, most, returned, ahead = threading.Lock(), [0], [0], [0], []

    def cells():
        for i, cell in enumerate(spec.cells()):
            with lock:
                ahead.append(i - returned[0])  # cells taken and not finished when this one is taken
            yield cell

    def run_one(cell, cancel):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        result = CellResult(cell=cell, status="ok")
        with lock:
            running[0] -= 1
            returned[0] += 1
        return result

    results = list(run_local(cells(), run_one, jobs=2, cancel=Cancellation()))
    assert len(results) == 6 and most[0] <= 2 and max(ahead) <= 2, (most, ahead)


# -- --json ------------------------------------------------------------------------------------------------
def test_json_lists_every_cell_with_its_verdicts(zoo, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", str(zoo), "--out", str(out), "--jobs", "2", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["total"] == 6 and data["ran"] == 6 and len(data["cells"]) == 6
    for cell in data["cells"]:
        assert {"model", "soc", "option_set", "analysis", "status"} <= set(cell)
        assert cell["analysis"] == "classify" and cell["status"] == "ok"
        assert set(cell["verdicts"]) == {"ep", "refined"} and set(cell["routes"]) == {"ep", "refined"}
    assert {c["model"] for c in data["cells"]} == {f"models/model_00{i}.onnx" for i in range(3)}
    assert "6/6" in captured.err and "ETA" in captured.err  # progress on stderr, stdout one object
    assert main(["sweep", str(zoo), "--out", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    def order(cells):  # the index lists cells as they finished
        return sorted(cells, key=lambda c: (c["model"], c["soc"], c["option_set"], c["analysis"]))

    assert again["ran"] == 0 and again["reused"] == 6 and order(again["cells"]) == order(data["cells"])


@pytest.mark.parametrize("flag, value, named", [
    ("--ray", " ", "--ray needs the cluster's address"),
    ("--devices", "telnet://127.0.0.1", "telnet://127.0.0.1"),
    ("--devices", "ssh://127.0.0.1:notaport", "notaport"),
    ("--devices", "local,local", "twice"),
])
def test_an_executor_address_refused_before_any_network_is_one_error_line_and_nothing_is_written(
        zoo, tmp_path, capsys, flag, value, named):
    """A bad ``--ray``/``--devices`` address is refused as it is read (no name resolved, no
    connection tried; the unreachable cluster and device are their own modules' tests)."""
    out = tmp_path / "out"
    assert main(["sweep", str(zoo), "--out", str(out), flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and named in err[0], err
    assert not (out / "cells").exists() or not any((out / "cells").iterdir())


# -- sweep diff (the pure function; the simulator test trips it on a real model) ----------------------------
def result(model: str, coverage: float | None = None, cpu: tuple[str, ...] = (), verdict: str | None = None,
           status: str = "ok") -> CellResult:
    from dashboard.runtime.knobs import Settings

    analysis = "classify" if verdict else "partition"
    cell = Cell(model=model, path=model, digest="d", soc="sm8650", option_set="default", analysis=analysis,
                settings=Settings(soc="sm8650"))
    return CellResult(cell=cell, status=status, reason=None if status == "ok" else "boom", htp_coverage=coverage,
                      cpu_nodes=[CpuNode(n, "Erf") for n in cpu], verdicts={"ep": verdict} if verdict else {})


def test_diff_names_what_changed_and_the_gates_decide():
    old = [result("a.onnx", 1.0), result("b.onnx", 0.9, ("erf0",)), result("c.onnx", verdict="NonGenAI"),
           result("gone.onnx", 1.0)]
    new = [result("a.onnx", 0.8, ("erf3",)), result("b.onnx", 0.9, ("erf0",)), result("c.onnx", verdict="GenAI"),
           result("added.onnx", 1.0)]
    diff = diff_results(old, new, parse_gates("coverage-drop=5,new-fallback,verdict-change"))
    assert diff.matched == 3
    assert {(c.model, c.kind, c.gate) for c in diff.changes} == {
        ("a.onnx", "coverage", "coverage-drop"), ("a.onnx", "fallback-new", "new-fallback"),
        ("c.onnx", "verdict", "verdict-change"), ("gone.onnx", "removed", "missing-cell"),
        ("added.onnx", "added", None)}
    text = "\n".join(render_text(diff))
    assert "a.onnx" in text and "erf3" in text and "TRIPPED" in text and "b.onnx" not in text
    loose = diff_results(old[:3], new, parse_gates("coverage-drop=25"))
    assert not loose.tripped  # a 20-point drop is within 25 points
    assert not diff_results(old, new).tripped  # no gate asked for: a missing cell is reported, not gated
    assert not diff_results(old, old, parse_gates("coverage-drop=0,new-fallback,verdict-change")).tripped


def test_a_cell_that_now_fails_trips_the_coverage_gate():
    diff = diff_results([result("a.onnx", 1.0)], [result("a.onnx", status="failed")], Gates(coverage_drop=1.0))
    assert [c.kind for c in diff.tripped] == ["now-failed"]


def test_a_partition_cell_that_now_fails_trips_the_fallback_gate_too():
    """A compile that now fails leaves every node to the CPU: ``new-fallback`` alone must see it."""
    diff = diff_results([result("a.onnx", 1.0)], [result("a.onnx", status="failed")], Gates(new_fallback=True))
    assert [(c.kind, c.gate) for c in diff.tripped] == [("now-failed", "new-fallback")]


def test_a_cell_the_new_sweep_lacks_trips_any_gate():
    """An unfinished sweep (or a model renamed away) must not pass a gate by measuring less."""
    old = [result("a.onnx", 1.0), result("b.onnx", 1.0)]
    for gates in ("new-fallback", "verdict-change", "coverage-drop=5", "cycles-rise=10"):
        diff = diff_results(old, old[:1], parse_gates(gates))
        assert [(c.model, c.kind, c.gate) for c in diff.tripped] == [("b.onnx", "removed", "missing-cell")], gates


@pytest.mark.parametrize("gates", ["coverage-drop=abc", "coverage-drop=200", "speed", "new-fallback=3"])
def test_bad_gates_and_folders_are_exit_2(tmp_path, capsys, gates, zoo):
    out = tmp_path / "out"
    run_sweep(load_spec(zoo), Store(out, create=True), jobs=1)
    assert main(["sweep", "diff", str(out), str(out), "--fail-on", gates]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["sweep", "diff", str(out), str(tmp_path / "nowhere")]) == 2
    assert main(["sweep", "diff", str(out)]) == 2
    assert main(["sweep", "diff", str(out), str(out)]) == 0


# -- scale ----------------------------------------------------------------------------------------------------
def _measure(spec, out: Path, marks: tuple[int, ...] = ()) -> tuple[int, dict[int, int]]:
    """The traced peak of a sweep, and the memory still held (after a collection) when the cells
    in ``marks`` are done."""
    held: dict[int, int] = {}

    def sample(progress) -> None:
        if progress.done in marks:
            gc.collect()
            held[progress.done] = tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        run_sweep(spec, Store(out, create=True), jobs=2, on_progress=sample)
        return tracemalloc.get_traced_memory()[1], held
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_over_100_models_by_4_socs(tmp_path, monkeypatch):
    """400 classify cells (real models, real classifiers, real store): the memory held after cell
    100 and after cell 400 is the same (keeping each result once written would add about 1 KB a
    cell, some 300 KB here), and the peak is about that of 40 cells. ROW_GROUP is lowered so the
    index's buffer of rows is as small in the large sweep as in the small one."""
    monkeypatch.setattr(store_module, "ROW_GROUP", 16)
    write_models(tmp_path / "models", 100)
    socs = 'socs = ["sm8650", "sc8380xp", "sm8550", "qcs9075"]\nanalyses = ["classify"]\n'
    small = load_spec(write_spec(tmp_path / "small.toml", 'models = ["models/model_00*.onnx"]\n' + socs))
    large = load_spec(write_spec(tmp_path / "large.toml", 'models = ["models/*.onnx"]\n' + socs))
    assert (small.cell_count, large.cell_count) == (40, 400)
    _measure(large, tmp_path / "warm")  # imports and first-use caches (a verdict per model), outside the measurement
    small_peak, _ = _measure(small, tmp_path / "small")
    large_peak, held = _measure(large, tmp_path / "large", marks=(100, 400))
    assert len(Store(tmp_path / "large").index()) == 400
    assert held[400] - held[100] < 64 << 10, held
    assert large_peak < small_peak * 1.3 + (256 << 10), (small_peak, large_peak)


def test_an_interrupted_sweep_keeps_what_finished_and_the_next_run_does_the_rest(zoo, tmp_path):
    spec, out = load_spec(zoo), tmp_path / "out"
    calls: list = []

    def interrupted(cell, cancel):
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the fourth cell runs
        calls.append(cell.label)
        return run_cell(cell, cancel)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, Store(out, create=True), run_one=interrupted, jobs=1)
    assert len(list(Store(out).results())) == 3  # the index was written on the way out
    assert not json.loads((out / "sweep.json").read_text())["complete"]
    rest: list = []
    progress = run_sweep(spec, Store(out, create=True), run_one=counting(rest), jobs=1)
    assert len(rest) == 3 and not set(rest) & set(calls) and progress.reused == 3 and progress.done == 6


def test_the_sweeps_manual_documents_every_index_column_and_the_gates():
    manual = (ROOT / "docs" / "sweeps.md").read_text(encoding="utf-8")  # the README's Sweeps section, moved
    section = manual[manual.index("## Sweeps"):]
    rows = [line.split("|")[1].strip().strip("`") for line in section.splitlines()
            if line.startswith("| `") and line.count("|") == 4]
    assert [name for name, _, _ in COLUMNS] == [r for r in rows if r in {n for n, _, _ in COLUMNS}]
    assert {name for name, _, _ in COLUMNS} <= set(rows)
    for gate in ("coverage-drop=PCT", "new-fallback", "verdict-change", "cycles-rise=PCT", "accuracy-drop=DB"):
        assert f"| `{gate}` |" in section


def test_a_record_newer_than_the_index_is_read_with_a_note(zoo, tmp_path):
    """A sweep killed outright (SIGKILL: no ``finally``) leaves records its index does not know."""
    import dataclasses

    out = tmp_path / "out"
    run_sweep(load_spec(zoo), Store(out, create=True), jobs=1)
    store = Store(out)
    first = next(store.results())
    newer = dataclasses.replace(first, cell=dataclasses.replace(first.cell, digest="0" * 32), notes=["newer"])
    store.write(newer)
    reread = Store(out)
    results = list(reread.results())
    assert len(results) == 6 and [r.notes for r in results if r.cell.cell_id == first.cell.cell_id] == [["newer"]]
    assert any("newer than index.parquet" in n for n in reread.notes)


def test_a_damaged_index_is_a_note_and_the_records_are_read(zoo, tmp_path):
    out = tmp_path / "out"
    run_sweep(load_spec(zoo), Store(out, create=True), jobs=1)
    (out / "index.parquet").write_bytes(b"PAR1 not really")
    store = Store(out)
    assert len(list(store.results())) == 6 and len(store.index()) == 6
    assert any("index.parquet: unreadable" in n for n in store.notes)


def test_two_sweeps_into_one_folder_at_once_is_one_error(zoo, tmp_path):
    import os

    from dashboard import platform
    from dashboard.errors import UserError

    out = tmp_path / "out"
    store = Store(out, create=True)
    fd = os.open(out / ".lock", os.O_RDWR | os.O_CREAT)  # held as a running sweep holds it
    try:
        assert platform.try_lock_exclusive(fd)
        with pytest.raises(UserError, match="another sweep is writing into this folder"):
            run_sweep(load_spec(zoo), store, jobs=1)
        assert not (out / "index.parquet").exists()
    finally:
        os.close(fd)
    assert run_sweep(load_spec(zoo), store, jobs=1).done == 6


def test_a_model_that_cannot_be_opened_is_failed_cells_and_runs_again_once_it_can(zoo, tmp_path):
    spec = load_spec(zoo)
    (zoo.parent / "models" / "model_002.onnx").unlink()  # gone after the spec was read
    out = tmp_path / "out"
    assert run_sweep(spec, Store(out, create=True), jobs=2).done == 6
    failed = [r for r in Store(out).results() if not r.ok]
    assert {r.cell.model for r in failed} == {"models/model_002.onnx"} and len(failed) == 2
    write_models(zoo.parent / "models", 3)  # readable again
    calls: list = []
    run_sweep(load_spec(zoo), Store(out, create=True), run_one=counting(calls), jobs=2)
    assert len(calls) == 2 and all(r.ok for r in Store(out).results())
