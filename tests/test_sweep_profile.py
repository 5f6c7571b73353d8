"""Profile cells of a sweep without the HTP simulator: the spec's ``profile`` analysis and its run
counts, a cell's row from a profile record (each backend's total with its unit and hardware label,
the costliest nodes), the index and ``--json`` figures, and ``sweep diff`` on profile cells with
the ``cycles-rise`` gate comparing only like with like. The real profile cell runs in
``test_sweep_simulator.py``."""

from __future__ import annotations

import pytest
from sweep_helpers import write_models, write_spec

from dashboard.errors import UserError
from dashboard.profile.model import SIMULATOR_HARDWARE, BackendProfile, NodeCost, Profile, with_shares
from dashboard.runtime.knobs import Settings
from dashboard.sweep.cells import BackendCost, Cell, CellResult, TopNode, profile_result
from dashboard.sweep.diff import CYCLES_RISE, diff_results, parse_gates, render_text
from dashboard.sweep.spec import DEFAULT_PROFILE_RUNS, load_spec
from dashboard.sweep.store import Store, run_sweep

SPEC = 'models = ["models/*.onnx"]\nsocs = ["sm8650", "sc8380xp"]\nanalyses = ["partition", "profile"]\n'


def profile(transpose: float, conv: float, *, hardware: str = SIMULATOR_HARDWARE, gpu_fails: bool = True) -> Profile:
    """A profile as the worker returns it: HTP cycles on ``hardware`` for an inserted Transpose and
    a Conv, the GPU failing as it does on this host."""
    backends = {"htp": BackendProfile(status="ok", hardware=hardware, unit="cycles", total=transpose + conv, runs=3)}
    if gpu_fails:
        backends["gpu"] = BackendProfile(status="failed", hardware="no QNN GPU on this x86_64 host", unit="us",
                                         reason="the QNN GPU backend does not initialize here")
    nodes = [NodeCost("Transpose", "Transpose", "htp", "cycles", transpose, inserted=True, serves="conv0"),
             NodeCost("conv0", "Conv", "htp", "cycles", conv)]
    return Profile(model="m.onnx", runs=3, backends=backends, nodes=with_shares(nodes, backends))


def cell(model: str = "m.onnx", runs: int = 3) -> Cell:
    return Cell(model=model, path=model, digest="d", soc="sm8650", option_set="default", analysis="profile",
                settings=Settings(soc="sm8650"), runs=runs, warmup=1)


# -- the spec ------------------------------------------------------------------------------------------
def test_profile_is_sweepable_and_its_runs_are_the_specs_and_part_of_the_key(tmp_path):
    write_models(tmp_path / "models", 1)
    spec = load_spec(write_spec(tmp_path / "spec.toml", SPEC))
    profiled = [c for c in spec.cells() if c.analysis == "profile"]
    assert len(profiled) == 2 and {c.runs for c in profiled} == {DEFAULT_PROFILE_RUNS}
    assert all(c.runs is None for c in spec.cells() if c.analysis == "partition")
    more = load_spec(write_spec(tmp_path / "more.toml", SPEC + "[profile]\nruns = 7\n"))
    again = [c for c in more.cells() if c.analysis == "profile"]
    assert {c.runs for c in again} == {7}
    assert {c.key for c in again}.isdisjoint({c.key for c in profiled})  # more runs: measured again
    assert {c.cell_id for c in again} == {c.cell_id for c in profiled}  # the same cells, for sweep diff
    same_partitions = {c.key for c in more.cells() if c.analysis == "partition"}
    assert same_partitions == {c.key for c in spec.cells() if c.analysis == "partition"}


@pytest.mark.parametrize("extra, named", [("[profile]\nruns = 0\n", "runs"), ("[profile]\nrunz = 3\n", "runz"),
                                          ("profile = 3\n", "profile must be a table"),
                                          ("[profile]\nwarmup = -1\n", "warm-up")])
def test_bad_profile_settings_are_one_error_naming_them(tmp_path, extra, named):
    write_models(tmp_path / "models", 1)
    with pytest.raises(UserError) as refused:
        load_spec(write_spec(tmp_path / "spec.toml", SPEC + extra))
    assert named in str(refused.value)


def test_the_timeline_is_still_refused_by_name(tmp_path):
    write_models(tmp_path / "models", 1)
    with pytest.raises(UserError) as refused:
        load_spec(write_spec(tmp_path / "spec.toml", SPEC.replace('"profile"]', '"timeline"]')))
    assert "cannot be swept yet" in str(refused.value) and "profile" in str(refused.value)


# -- a cell's row ------------------------------------------------------------------------------------------
def test_a_profile_cell_keeps_each_backends_total_in_its_unit_and_words_and_the_top_nodes():
    row = profile_result(cell(), profile(750.0, 250.0))
    assert row.ok and row.hardware == "simulator"
    htp = row.cost("htp")
    assert (htp.total, htp.unit, htp.hardware, htp.label) == (1000.0, "cycles", SIMULATOR_HARDWARE,
                                                             "simulated HTP cycles")
    assert row.cost("gpu").status == "failed" and any("gpu: not profiled" in n for n in row.notes)
    assert [(n.name, n.share, n.inserted) for n in row.top_nodes] == [("Transpose", 0.75, True),
                                                                      ("conv0", 0.25, False)]
    brief = row.brief()
    assert brief["runs"] == 3 and brief["backends"]["htp"]["label"] == "simulated HTP cycles"
    assert brief["backends"]["htp"]["total"] == 1000.0 and brief["top_nodes"][0]["name"] == "Transpose"
    assert "ms" not in str(brief["backends"]["htp"])  # cycles are never a time


def test_a_profile_whose_qnn_backends_all_failed_is_a_failed_row_with_their_reasons():
    crashed = Profile(model="m.onnx", runs=3, backends={
        "htp": BackendProfile(status="failed", hardware="unknown", unit="cycles", reason="the worker crashed"),
        "cpu": BackendProfile(status="ok", hardware="x86_64 CPU", unit="us", total=12.0)})
    row = profile_result(cell(), crashed)
    assert row.status == "failed" and "htp: the worker crashed" in row.reason


def fake(totals: dict[str, float], hardware: str = SIMULATOR_HARDWARE):
    """A runner without workers: profile cells get ``totals[model]`` cycles (3/4 on the Transpose)."""
    def run_one(c, cancel):
        if c.analysis == "partition":
            return CellResult(cell=c, status="ok", htp_coverage=1.0, htp_claimed=4, htp_nodes=4, hardware="simulator")
        total = totals[c.model]
        return profile_result(c, profile(total * 0.75, total * 0.25, hardware=hardware))
    return run_one


def test_the_index_has_the_profile_figures_with_their_unit_and_hardware(tmp_path):
    write_models(tmp_path / "models", 2)
    spec = load_spec(write_spec(tmp_path / "spec.toml", SPEC))
    store = Store(tmp_path / "out", create=True)
    run_sweep(spec, store, run_one=fake({"models/model_000.onnx": 1000.0, "models/model_001.onnx": 4000.0}))
    frame = store.index()
    rows = frame[frame["analysis"] == "profile"].set_index(["model", "soc"])
    row = rows.loc[("models/model_001.onnx", "sm8650")]
    assert (row["htp_total"], row["htp_unit"], row["htp_label"]) == (4000.0, "cycles", "simulated HTP cycles")
    assert row["htp_hardware"] == SIMULATOR_HARDWARE and row["profile_runs"] == DEFAULT_PROFILE_RUNS
    assert (row["top_node"], row["top_node_share"]) == ("Transpose", 0.75)
    assert row["top_nodes"].startswith("htp Transpose 75.0%")
    assert frame[frame["analysis"] == "partition"]["htp_total"].isna().all()
    assert [r.cost("htp").total for r in store.results() if r.cell.analysis == "profile"].count(4000.0) == 2


# -- sweep diff ----------------------------------------------------------------------------------------------
def side(total: float, hardware: str = SIMULATOR_HARDWARE, top: str = "Transpose", model: str = "m.onnx",
         second: str = "relu0"):
    label = "simulated HTP cycles" if hardware == SIMULATOR_HARDWARE else f"HTP cycles on {hardware}"
    return CellResult(cell=cell(model), status="ok", hardware="simulator",
                      costs=[BackendCost("htp", "ok", "cycles", hardware, label, total)],
                      top_nodes=[TopNode(top, "Transpose", "htp", "cycles", total * 0.6, 0.6),
                                 TopNode(second, "Relu", "htp", "cycles", total * 0.3, 0.3)])


def test_diff_reports_profile_changes_and_cycles_rise_gates_only_like_with_like():
    old = [side(1000.0, model="a.onnx"), side(1000.0, model="b.onnx"), side(1000.0, model="c.onnx")]
    new = [side(1200.0, model="a.onnx", top="conv0"), side(1050.0, model="b.onnx"),
           side(5000.0, hardware="SM8650", model="c.onnx")]
    diff = diff_results(old, new, parse_gates("cycles-rise=10"))
    by_model = {}
    for change in diff.changes:
        by_model.setdefault(change.model, []).append(change)
    assert [c.kind for c in by_model["a.onnx"]] == ["cost", "top-node"]
    assert by_model["a.onnx"][0].gate == CYCLES_RISE and "+20.0%" in by_model["a.onnx"][0].text
    assert "simulated HTP cycles" in by_model["a.onnx"][0].text
    assert "Transpose" in by_model["a.onnx"][1].text and "conv0" in by_model["a.onnx"][1].text
    assert by_model["b.onnx"][0].kind == "cost" and by_model["b.onnx"][0].gate is None  # +5% < 10%
    assert by_model["c.onnx"][0].kind == "cost-incomparable" and by_model["c.onnx"][0].gate is None
    assert diff.tripped_gates == {CYCLES_RISE: 1}
    text = "\n".join(render_text(diff))
    assert "a.onnx" in text and "not comparable" in text and "gate: TRIPPED" in text
    ungated = diff_results(old, new)
    assert not ungated.tripped and len(ungated.changes) == len(diff.changes)  # informative without a gate


def test_two_near_equal_nodes_swapping_first_place_is_not_reported():
    swapped = diff_results([side(1000.0, top="/layer.0/Softmax", second="/layer.1/Softmax")],
                           [side(1000.0, top="/layer.1/Softmax", second="/layer.0/Softmax")])
    assert not swapped.changes


def test_a_profile_cell_that_now_fails_trips_cycles_rise_and_nothing_else_does():
    failed = CellResult.failure(cell(), "the worker crashed")
    assert [c.kind for c in diff_results([side(1000.0)], [failed], parse_gates("cycles-rise")).tripped] == \
        ["now-failed"]
    assert not diff_results([side(1000.0)], [failed], parse_gates("coverage-drop,verdict-change")).tripped
    assert not diff_results([side(1000.0)], [side(1000.0)], parse_gates("cycles-rise=0")).changes


@pytest.mark.parametrize("gates", ["cycles-rise=abc", "cycles-rise=-5", "cycles-rise=nan"])
def test_bad_cycles_rise_is_one_error(gates):
    with pytest.raises(UserError) as refused:
        parse_gates(gates)
    assert "cycles-rise" in str(refused.value)
