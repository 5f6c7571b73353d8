"""``--data`` on partition, profile and timeline (issue 25): the data's shapes fix a dynamic input
for the partition, the profile's timed runs and the timeline's requests take the samples in turn,
every record says what it ran on (``random inputs`` without data), and bad data is one line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from accuracy_models import outlier_model, save, save_samples


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "dashboard", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def dynamic(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "dyn.onnx")
    return tmp_path


@pytest.mark.simulator
def test_partition_takes_the_datas_shapes(dynamic):
    np.savez(dynamic / "d.npz", x=np.random.default_rng(0).random((4, 3, 32, 48), dtype=np.float32))
    done = cli("partition", str(dynamic / "dyn.onnx"), "--data", str(dynamic / "d.npz"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dims"]["h"] == 32 and report["dims"]["w"] == 48 and report["dims"]["batch"] == 1
    assert any("the data's shape" in n for n in report["notes"])
    plain = json.loads(cli("partition", str(dynamic / "dyn.onnx"), "--json").stdout)
    assert (plain["dims"]["h"], plain["dims"]["w"]) != (32, 48)  # without data: the defaults


@pytest.mark.parametrize("command", ["partition", "profile", "timeline"])
def test_bad_data_is_one_line_before_any_session(dynamic, command):
    np.savez(dynamic / "bad.npz", x=np.zeros((4, 5, 32, 48), np.float32))
    np.savez(dynamic / "other.npz", z=np.zeros((1, 3, 8, 8), np.float32), q=np.zeros(3, np.float32))
    for data, words in (("bad.npz", "axis 1"), ("missing.npz", "no such file"), ("other.npz", "no array named")):
        done = cli(command, str(dynamic / "dyn.onnx"), "--data", str(dynamic / data), timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert words in done.stderr.strip().splitlines()[-1]


def test_profile_runs_take_the_samples_in_turn(tmp_path, monkeypatch):
    """The worker's side, with the session replaced by a recorder: run i takes sample i mod N."""
    from dashboard.accuracy.data import Dataset
    from dashboard.profile import measure
    from dashboard.profile.protocol import ProfileArgs
    from dashboard.runtime import qnn
    from dashboard.runtime.config import SessionConfig
    from dashboard.runtime.knobs import Settings

    samples = [{"x": np.full((1, 2), i, np.float32)} for i in range(3)]
    Dataset("d", ["a", "b", "c"], samples).save(tmp_path / "d.npz")
    config = SessionConfig.of(Settings(), "htp", dims={})
    args = ProfileArgs("m.onnx", config, ["htp"], {}, 4, 1, data=str(tmp_path / "d.npz"))
    loaded = measure._samples(args)
    seen = []

    class Session:
        def run(self, _, feeds):
            seen.append(float(feeds["x"][0, 0]))

        def end_profiling(self):
            return ""

    class Handle:
        session = Session()

    monkeypatch.setattr(qnn, "create_session", lambda *a, **k: Handle())
    prepared = type("P", (), {"session_config": {}, "session_input": "m.onnx"})()
    measure.profiled_session(prepared, config.replace(backend="cpu"), tmp_path / "w", 4, 1, samples=loaded)
    assert seen == [0.0, 1.0, 2.0, 0.0, 1.0]


@pytest.mark.simulator
def test_profile_and_timeline_say_what_they_ran_on(tmp_path):
    path = save(outlier_model(), tmp_path, "outlier.onnx")
    data = save_samples(tmp_path, count=3)
    done = cli("profile", str(path), "--runs", "1", "--data", str(data), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"].startswith("3 sample(s) of ")
    plain = cli("profile", str(path), "--runs", "1", "--json")
    assert json.loads(plain.stdout)["data"] == "random inputs"
    timeline = cli("timeline", str(path), "--requests", "4", "--after-swap", "0", "--strategies", "fast",
                   "--data", str(data), "--json")
    assert timeline.returncode == 0, timeline.stderr
    workload = json.loads(timeline.stdout)["workload"]
    assert workload["input_sets"] == 3 and workload["inputs"].startswith("3 sample(s)")
