"""The benchmarks' speed floors decide from the medians they measure: over a floor, the benchmark
says which floor failed and exits 1 (``make bench`` then fails). The timing itself is stood in for
(``alternating``): unit tests never time anything."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from dashboard.cli import bench

ROOT = Path(__file__).resolve().parent.parent


def medians(ours_wall: float) -> dict[str, tuple[float, float]]:
    return {"bare": (1.0, 1.0), "ours": (ours_wall, 1.0)}


@pytest.fixture()
def partition_bench():
    spec = importlib.util.spec_from_file_location("partition_bench", ROOT / "benchmarks" / "partition_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("wall, met", [(1.4, True), (1.6, False)])
def test_the_classify_floor_is_on_the_wall_time_ratio(wall, met, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "alternating", lambda *args: medians(wall))
    assert bench._process_ratio("node-heavy", tmp_path / "m.onnx", 3, floor=bench.PROCESS_FLOOR) is met
    out = capsys.readouterr().out
    assert ("FAILED: classify (node-heavy) over its floor" in out) is not met
    assert f"{wall:5.2f}x" in out


@pytest.mark.parametrize("wall, code", [(1.45, 0), (1.55, 1)])
def test_the_partition_floor_fails_the_benchmark_and_names_itself(wall, code, partition_bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "alternating", lambda *args: medians(wall))
    monkeypatch.setattr(sys, "argv", ["partition_bench.py", "--floor-only"])
    assert partition_bench.main() == code
    out = capsys.readouterr().out
    for case in partition_bench.FLOOR_CASES:
        assert (f"FLOOR FAILED: a first partition run of {case.label}" in out) is bool(code)
    assert ("floor met" in out) is not code


def test_the_partition_floor_times_a_first_run_on_an_empty_cache_each_time(partition_bench, monkeypatch, tmp_path):
    """Every run gets a cache folder of its own, and the CLI command is the documented one."""
    seen = []

    def fake(bare, ours, env, runs):
        seen.extend((ours(), env()["QNN_LAB_CACHE"]) for _ in range(3))
        return medians(1.0)

    monkeypatch.setattr(bench, "alternating", fake)
    partition_bench.first_run_floor(tmp_path, runs=3)
    commands, caches = zip(*seen)
    assert len(set(caches)) == 6 and all(not Path(c).exists() for c in caches)
    assert commands[0][1:] == ["-m", "dashboard", "partition", str(partition_bench.sample_path("cnn_classifier.onnx")),
                               "--backends", "htp", "--json"]
    assert commands[3][1:] == ["-m", "dashboard", "partition", str(tmp_path / "yolov8n_like_320.onnx"),
                               "--backends", "htp", "--fp16", "--soc", "sm8750", "--json"]


def test_the_partition_floor_s_bare_script_builds_the_cli_s_session(partition_bench, monkeypatch, tmp_path):
    """The bare script of each case gets the provider options the CLI's flags give its session."""
    from dashboard.cli.partition import SETTINGS, add_arguments
    from dashboard.cli.common import Parser
    from dashboard.runtime.config import SessionConfig

    seen = []

    def fake(bare, ours, env, runs):
        seen.append((bare(), ours()))
        return medians(1.0)

    monkeypatch.setattr(bench, "alternating", fake)
    partition_bench.first_run_floor(tmp_path, runs=1)
    for bare, cli in seen:
        parser = Parser(prog="partition")
        add_arguments(parser)
        settings = SETTINGS.parse(parser.parse_args(cli[4:]))
        options = SessionConfig.of(settings, "htp").qnn_options()
        assert repr(options) in bare[2], (cli, options)


@pytest.fixture
def profile_bench():
    spec = importlib.util.spec_from_file_location("profile_bench", ROOT / "benchmarks" / "profile_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("wall, code", [(1.2, 0), (1.4, 1)])
def test_the_profile_floor_compares_the_cli_with_the_bare_script_of_the_same_runs(wall, code, profile_bench,
                                                                                   monkeypatch, capsys):
    seen = []

    def fake(bare, ours, env, runs):
        seen.extend([bare(), ours()])
        return medians(wall)

    monkeypatch.setattr(bench, "alternating", fake)
    monkeypatch.setattr(sys, "argv", ["profile_bench.py", "--runs", "7"])
    assert profile_bench.main() == code
    assert ("FAILED" in capsys.readouterr().out) == bool(code)
    assert seen[0][1].endswith("profile_bare.py") and seen[0][4] == "7"
    assert seen[1][1:5] == ["-m", "dashboard", "profile", seen[0][2]] and "7" in seen[1]


@pytest.mark.parametrize("wall, code", [(1.25, 0), (1.35, 1)])
def test_the_accuracy_floor_compares_the_cli_with_the_bare_script_of_the_same_samples(wall, code, monkeypatch,
                                                                                       capsys):
    spec = importlib.util.spec_from_file_location("accuracy_bench", ROOT / "benchmarks" / "accuracy_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen = []

    def fake(bare, ours, env, runs):
        seen.extend([bare(), ours()])
        return medians(wall)

    monkeypatch.setattr(bench, "alternating", fake)
    monkeypatch.setattr(sys, "argv", ["accuracy_bench.py", "--samples", "32"])
    assert module.main() == code
    bare, ours = seen
    assert bare[-1] == ours[ours.index("--soc") + 1] == module.SOC_MODEL and ours[2:4] == ["dashboard", "accuracy"]
    assert bare[3] == ours[ours.index("--data") + 1]  # the same samples
    assert ("FAILED: accuracy over its floor" in capsys.readouterr().out) is bool(code)
