"""Sweeps on the HTP simulator: partition cells in real runtime workers. A worker killed in the
middle of a cell is that cell's failed row while the sweep completes; ``sweep diff`` trips on a
model changed to lose HTP coverage and passes on an unchanged run; ``--json`` carries partition
cells' coverage and the nodes left to the CPU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from sweep_helpers import chain_model, write_models, write_spec

from deadlines import DEADLINE, wait_until
from fake_workers import MARK, gone_within, interruptible, processes_with_env, worker_mark  # noqa: F401 - a fixture

from dashboard.cli.main import main
from dashboard.runtime.jobs import Cancellation
from dashboard.sweep.cells import run_cell
from dashboard.sweep.spec import load_spec
from dashboard.sweep.store import Store, run_sweep

PARTITION_SPEC = 'models = ["models/*.onnx"]\nsocs = ["sm8650"]\nanalyses = ["partition"]\n'


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """No partition report from an earlier run answers a cell: every cell runs its worker."""
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


def test_a_worker_killed_mid_cell_is_one_failed_row_and_the_sweep_completes(tmp_path):
    write_models(tmp_path / "models", 3)
    spec = load_spec(write_spec(tmp_path / "spec.toml", PARTITION_SPEC))
    victim, killed = "models/model_001.onnx", []

    def run_one(cell, cancel):
        """The real cell, with a Cancellation of its own so the test can find its worker's pid."""
        mine = Cancellation()

        def progress(c, event):
            if c.model == victim and getattr(event, "backend", None) == "htp" and not killed:
                for pid in mine.pids:  # the worker is compiling the cell's HTP session now
                    os.killpg(pid, signal.SIGKILL)
                    killed.append(pid)

        return run_cell(cell, mine, progress=progress, use_cache=False)

    progress = run_sweep(spec, Store(tmp_path / "out", create=True), run_one=run_one, jobs=2)
    assert killed, "the victim's worker was never seen running"
    results = {r.cell.model: r for r in Store(tmp_path / "out").results()}
    assert progress.done == 3 and len(results) == 3
    assert not results[victim].ok and "SIGKILL" in results[victim].reason
    for name, result in results.items():
        if name != victim:
            assert result.ok and result.htp_coverage == 1.0 and result.hardware == "simulator", result
    assert json.loads((tmp_path / "out" / "sweep.json").read_text())["complete"]


def _zoo(folder, erf: bool):
    """Two models; with ``erf``, model_000 gains an Erf the HTP refuses (same name, new content)."""
    write_models(folder / "models", 2)
    if erf:
        onnx.save(chain_model(("Add", "Mul", "Erf", "Tanh", "Sub"), seed=0), folder / "models" / "model_000.onnx")
    return write_spec(folder / "spec.toml", PARTITION_SPEC)


def test_diff_trips_on_a_model_that_lost_htp_coverage_and_passes_on_an_unchanged_run(tmp_path, capsys):
    old, new = _zoo(tmp_path / "release", erf=False), _zoo(tmp_path / "pr", erf=True)
    runs = {}
    for name, spec in (("old", old), ("again", old), ("new", new)):
        out = tmp_path / f"out-{name}"
        assert main(["sweep", str(spec), "--out", str(out), "--jobs", "2", "--json", "--force"]) == 0
        runs[name] = json.loads(capsys.readouterr().out)
        runs[name]["out"] = str(out)
    cells = {c["model"]: c for c in runs["new"]["cells"]}
    assert set(cells) == {"models/model_000.onnx", "models/model_001.onnx"}
    changed = cells["models/model_000.onnx"]
    assert changed["status"] == "ok" and changed["analysis"] == "partition" and changed["hardware"] == "simulator"
    assert changed["htp_coverage"] < 1.0 and [n["op_type"] for n in changed["cpu_nodes"]] == ["Erf"]
    assert cells["models/model_001.onnx"]["htp_coverage"] == 1.0 and cells["models/model_001.onnx"]["cpu_nodes"] == []

    gates = ["--fail-on", "coverage-drop=1,new-fallback,verdict-change"]
    assert main(["sweep", "diff", runs["old"]["out"], runs["again"]["out"], *gates]) == 0
    assert "gate: passed" in capsys.readouterr().out
    assert main(["sweep", "diff", runs["old"]["out"], runs["new"]["out"], *gates]) == 1
    text = capsys.readouterr().out
    assert "models/model_000.onnx" in text and "erf2 [Erf]" in text and "TRIPPED" in text
    assert "models/model_001.onnx" not in text  # unchanged models are not listed
    assert main(["sweep", "diff", runs["old"]["out"], runs["new"]["out"], "--json", *gates]) == 1
    diff = json.loads(capsys.readouterr().out)
    assert diff["tripped_gates"] == {"coverage-drop": 1, "new-fallback": 1}
    assert main(["sweep", "diff", runs["old"]["out"], runs["new"]["out"]]) == 0  # no gate set: reported only
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


def test_ctrl_c_stops_the_workers_keeps_the_finished_cells_and_the_next_run_does_the_rest(tmp_path, worker_mark):
    write_models(tmp_path / "models", 6)
    spec, out = write_spec(tmp_path / "spec.toml", PARTITION_SPEC), tmp_path / "out"
    command = [sys.executable, "-m", "dashboard", "sweep", str(spec), "--out", str(out), "--jobs", "2"]
    cli = subprocess.Popen(command, cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        workers: list[int] = []
        wait_until(lambda: len(list((out / "cells").glob("*.json"))) >= 1 if (out / "cells").is_dir() else False,
                   "the first cell's record")
        workers += [p for p in processes_with_env(MARK, worker_mark) if p != cli.pid]
        cli.send_signal(signal.SIGINT)
        _, stderr = cli.communicate(timeout=DEADLINE)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130 and stderr.strip().splitlines()[-1] == "error: interrupted", stderr
    assert "Traceback" not in stderr and all(gone_within(pid, 5) for pid in workers)
    # Every record written is whole and ok; the index lists them (all, or all but one whose row the
    # interruption came before: the record is written first, and it is what the next run trusts).
    finished = [Store(out).read(f"cells/{p.name}") for p in (out / "cells").glob("*.json")]
    assert 1 <= len(finished) < 6 and all(r is not None and r.ok for r in finished)
    assert len(finished) - 1 <= len(list(Store(out).results())) <= len(finished)
    again = subprocess.run([*command, "--json"], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                           text=True, timeout=DEADLINE)  # a command reaps its workers before it exits
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["reused"], summary["ran"], len(summary["cells"])) == (len(finished), 6 - len(finished), 6)


PROFILE_SPEC = 'models = ["models/*.onnx"]\nsocs = ["sm8650"]\nanalyses = ["profile"]\n[profile]\nruns = {runs}\n'


def test_a_profile_cell_carries_simulated_htp_cycles_and_the_top_nodes_of_the_profile_command(tmp_path, capsys):
    """A real profile cell in the runtime worker: its HTP total is labelled simulated HTP cycles
    (never a time), its top node is the ``profile`` capability's own on the same settings, the
    index carries the same figures, and a resumed sweep reuses the cell until its runs change."""
    from dashboard.profile.model import SIMULATOR_HARDWARE
    from dashboard.profile.run import profile_model
    from dashboard.runtime.knobs import Settings

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "models").mkdir()
    shutil.copy(root / "samples" / "cnn_classifier.onnx", tmp_path / "models" / "cnn.onnx")
    spec = write_spec(tmp_path / "spec.toml", PROFILE_SPEC.format(runs=2))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1", "--json"]) == 0
    captured = capsys.readouterr()
    [cell] = json.loads(captured.out)["cells"]
    assert cell["status"] == "ok" and cell["analysis"] == "profile" and cell["runs"] == 2, cell
    htp = cell["backends"]["htp"]
    assert (htp["status"], htp["unit"], htp["hardware"], htp["label"]) == ("ok", "cycles", SIMULATOR_HARDWARE,
                                                                          "simulated HTP cycles")
    assert htp["total"] > 0 and "simulated HTP cycles" in captured.err
    top = [n for n in cell["top_nodes"] if n["backend"] == "htp"]
    assert top and all(0 < n["share"] <= 1 for n in top) and sum(n["share"] for n in top) <= 1 + 1e-6
    assert [n["median"] for n in top] == sorted((n["median"] for n in top), reverse=True)
    direct = profile_model(tmp_path / "models" / "cnn.onnx", Settings(soc="sm8650"), runs=2)
    assert top[0]["name"] == direct.top(1, backend="htp")[0].name
    row = Store(out).index().iloc[0]
    assert (row["htp_total"], row["htp_label"], row["top_node"]) == (htp["total"], htp["label"], top[0]["name"])
    assert main(["sweep", str(spec), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ran"] == 0
    write_spec(spec, PROFILE_SPEC.format(runs=3))
    assert main(["sweep", str(spec), "--out", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["ran"] == 1 and again["cells"][0]["runs"] == 3


def test_a_worker_killed_mid_profile_cell_is_one_failed_row_and_the_other_profiles_stand(tmp_path):
    write_models(tmp_path / "models", 2)
    spec = load_spec(write_spec(tmp_path / "spec.toml", PROFILE_SPEC.format(runs=1)))
    victim, killed = "models/model_001.onnx", []

    def run_one(cell, cancel):
        mine = Cancellation()

        def progress(c, event):
            if c.model == victim and not killed:
                for pid in mine.pids:  # the profile's worker has started its session
                    os.killpg(pid, signal.SIGKILL)
                    killed.append(pid)

        return run_cell(cell, mine, progress=progress)

    progress = run_sweep(spec, Store(tmp_path / "out", create=True), run_one=run_one, jobs=1)
    assert killed, "the victim's worker was never seen running"
    results = {r.cell.model: r for r in Store(tmp_path / "out").results()}
    assert progress.done == 2 and not results[victim].ok and "SIGKILL" in results[victim].reason
    survivor = results["models/model_000.onnx"]
    assert survivor.ok and survivor.cost("htp").label == "simulated HTP cycles" and survivor.cost("htp").total > 0
