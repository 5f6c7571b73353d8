"""``python -m dashboard profile`` on the HTP simulator, as a user runs it (a real child process):
the readable table says what its figures are, ``--json`` has the documented shape, ``--csv`` writes
the node table."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "cnn_classifier.onnx"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", "profile", str(SAMPLE), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


def test_json_has_the_documented_shape_and_csv_the_node_table(tmp_path):
    done = cli("--runs", "2", "--fp16", "--soc", "60", "--json", "--csv", str(tmp_path / "nodes.csv"))
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert data["runs"] == 2
    htp, gpu = data["backends"]["htp"], data["backends"]["gpu"]
    for backend in (htp, gpu):
        assert {"status", "hardware", "unit", "total"} <= set(backend)
    assert htp["status"] == "ok" and htp["unit"] == "cycles" and htp["hardware"] == "HTP simulator (x86_64)"
    assert gpu["status"] == "failed" and gpu["reason"]
    nodes = data["nodes"]
    assert nodes and all({"name", "op_type", "backend", "unit", "median", "share"} <= set(n) for n in nodes)
    inserted = [n for n in nodes if n["inserted"]]
    assert inserted and all(n["serves"] for n in inserted)
    with open(tmp_path / "nodes.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["name"] for r in rows} == {n["name"] for n in nodes}


def test_the_table_says_simulated_cycles_and_never_turns_them_into_time():
    done = cli("--runs", "1", "--backends", "htp")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "HTP: simulated HTP cycles" in out and "top nodes" in out and "op types:" in out and "blocks:" in out
    for line in out.splitlines():
        if "cycles" in line and "µs" in line:
            assert "simulator" in line  # a µs figure next to cycles is the simulator's host time, said so
        assert " ms" not in line


def test_the_report_command_adds_the_profile_section(tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "dashboard", "report", str(SAMPLE), "--out", str(out), "--no-timeline",
                           "--backends", "htp", "--profile-runs", "1"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    section = out.read_text().split("<section id='profile'>")[1].split("</section>")[0]
    assert "simulated HTP cycles" in section and "Transpose" in section and "Simulated cycles are not time" in section


def test_two_setting_sets_compare_per_node_and_op_type(tmp_path):
    first = cli("--runs", "2", "--backends", "htp", "--json")
    assert first.returncode == 0, first.stderr[-2000:]
    (tmp_path / "fp32.json").write_text(first.stdout)
    second = cli("--runs", "2", "--backends", "htp", "--fp16", "--soc", "60", "--json", "--against",
                 str(tmp_path / "fp32.json"))
    assert second.returncode == 0, second.stderr[-2000:]
    now = json.loads(second.stdout)
    compared = now["compared"]["htp"]
    assert compared["a"] == compared["b"] == "simulated HTP cycles"
    names = {r["name"] for r in compared["name"]}
    assert "Transpose" in names and "/features.0/features.0/Conv" in names
    assert all(r["ratio"] is None or r["ratio"] >= 0 for r in compared["name"])
    then = {n["name"]: n for n in json.loads(first.stdout)["nodes"] if n["backend"] == "htp"}
    later = {n["name"]: n for n in now["nodes"] if n["backend"] == "htp"}
    transpose = next(r for r in compared["name"] if r["name"] == "Transpose")
    assert transpose["a_share"] == pytest.approx(then["Transpose"]["share"])
    assert transpose["b_share"] == pytest.approx(later["Transpose"]["share"])
    for row in compared["name"]:
        assert row["share_change"] == pytest.approx(row["b_share"] - row["a_share"])
        if row["a"] is not None and row["b"] is not None and row["a"]:
            assert row["ratio"] == pytest.approx(row["b"] / row["a"])  # the same simulator: figures divide
    assert {r["op_type"] for r in compared["op_type"]} >= {"Transpose", "Relu"}
