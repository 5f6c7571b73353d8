"""``python -m dashboard partition`` as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys

import partition_models as pm
import pytest
from test_devices_ssh import ssh_device, sshd  # noqa: F401 - the loopback sshd fixture

from dashboard.runtime.client import PROJECT_ROOT


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "QNN_LAB_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(PROJECT_ROOT)}


def cli(env, *args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", "partition", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=PROJECT_ROOT, timeout=timeout)


def test_json_contract_and_out_file(env, tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    out = tmp_path / "report.json"
    done = cli(env, model, "--json", "--out", out, "--backends", "htp,gpu")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert json.loads(out.read_text()) == data
    assert data["model"] == str(model)
    assert set(data["options"]) >= {"backends", "dims", "fp16", "soc", "provider_options"}
    for name in ("htp", "gpu"):
        backend = data["backends"][name]
        assert backend["status"] in ("measured", "predicted", "failed")
        assert set(backend["runtime"]) == {"onnxruntime", "onnxruntime_qnn", "qnn_sdk", "hardware"}
        assert isinstance(backend["qnn_subgraphs"], int)
        for node in backend["nodes"].values():
            assert {"op_type", "supported", "reason", "qnn_op"} <= set(node)
            assert isinstance(node["supported"], bool)
    assert data["backends"]["htp"]["nodes"]["erf0"]["supported"] is False
    if platform.machine() == "x86_64":
        assert data["backends"]["htp"]["runtime"]["hardware"] == "simulator"
    assert data["backends"]["gpu"]["runtime"]["hardware"] is None  # predicted: no hardware
    assert set(data["classes"]) >= {"both", "gpu_only", "htp_only", "neither"}
    for kind in ("intersection", "segmented"):
        for seg in data["plans"][kind]["segments"]:
            assert seg["backend"] in ("migrating", "gpu", "htp", "cpu")
            assert {"nodes", "inputs", "outputs", "boundary_bytes"} <= set(seg)


def test_text_output_names_the_refused_nodes_and_reasons(env, tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    done = cli(env, model, "--backends", "htp")
    assert done.returncode == 0, done.stderr
    assert "erf0 [Erf]: Operators of type `Erf` are not supported" in done.stdout
    assert "mod0 [Mod]: QNN Mod Op only support fmod == 0" in done.stdout
    assert "creating the HTP session" in done.stderr  # progress on stderr, not in the report
    if platform.machine() == "x86_64":
        assert "HTP: MEASURED - measured on the HTP simulator of" in done.stdout


def test_device_report_flag_imports_measured_gpu(env, tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = tmp_path / "device.json"
    assert cli(env, model, "--json", "--out", device).returncode == 0
    data = json.loads(device.read_text())
    data["backends"]["gpu"]["status"] = "measured"
    device.write_text(json.dumps(data))
    done = cli(env, model, "--json", "--device-report", device)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["backends"]["gpu"]["status"] == "measured"


@pytest.mark.parametrize("args,message", [
    (["/no/such/model.onnx"], "no such file"),
    (["{model}", "--dim", "batch=two"], "must be an integer"),
    (["{model}", "--soc", "sm0000"], "unknown SoC"),
    (["{model}", "--backends", "npu"], "unknown backend"),
    (["{model}", "--option", "novalue"], "NAME=VALUE"),
    (["{model}", "--device-report", "/no/such/report.json"], "cannot read the device report"),
    (["{model}", "--shape", "x"], "is not NAME=D1,D2"),
    (["{model}", "--shape", "x=1,two"], "every dimension must be a positive integer"),
    (["{model}", "--shape", "nope=1,16"], "no input 'nope'"),
    (["{model}", "--device", "ftp://board"], "must be 'local' or ssh://"),
    (["{model}", "--dev", "local"], "unrecognized arguments: --dev"),  # no prefix matching
    (["{model}", "--device-report", "{binary}"], "not UTF-8 text"),
    (["{model}", "--timeout", "inf"], "between 0 and"),  # overflowed the worker's deadline
    (["{model}", "--timeout", "nan"], "between 0 and"),
    (["{model}", "--timeout", "-5"], "between 0 and"),
])
def test_bad_input_is_one_error_line_and_exit_2(env, tmp_path, args, message):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    binary = tmp_path / "report.json"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    done = cli(env, *[a.format(model=model, binary=binary) for a in args])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_not_an_onnx_file(env, tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(os.urandom(200))
    done = cli(env, junk)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr


def test_optimization_level_flag_reaches_the_measurement(tmp_path):
    """--optimization-level disabled measures the file's own graph: nothing is reported as
    removed or fused by ONNX Runtime, and the options record the level."""
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    env = {**os.environ, "QNN_LAB_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "dashboard", "partition", str(model), "--backends", "htp",
                           "--optimization-level", "disabled", "--json"],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["options"]["optimization_level"] == "disabled"
    statuses = {v["status"] for v in report["backends"]["htp"]["nodes"].values()}
    assert not statuses & {"removed", "fused"}
    assert report["classes"]["removed"] == []


def test_shape_fixes_an_input_with_unnamed_dimensions(env, tmp_path):
    model = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    plain = json.loads(cli(env, model, "--json", "--backends", "htp").stdout)
    assert not any(v["supported"] for v in plain["backends"]["htp"]["nodes"].values())
    done = cli(env, model, "--shape", "x=1,16", "--backends", "htp")
    assert done.returncode == 0, done.stderr
    assert "input shapes: x=[1, 16]" in done.stdout and "claims 3/3 nodes" in done.stdout


def test_device_measures_over_ssh_and_uploads_the_model_once(env, sshd, tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    device = ssh_device(sshd)
    done = cli(env, model, "--json", "--device", device.url, "--backends", "htp")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["device"] == device.label
    assert data["backends"]["htp"]["status"] == "measured"
    assert not data["backends"]["htp"]["nodes"]["erf0"]["supported"]
    stored = sshd["root"] / "remote_models" / data["digest"] / model.name
    assert stored.read_bytes() == model.read_bytes()  # the bytes went over the protocol
    again = cli(env, model, "--device", device.url, "--backends", "htp", "--dim", "unused=2")
    assert again.returncode == 0, again.stderr
    assert "sending the model" not in again.stderr  # found on the device by digest


def test_unreachable_device_is_one_error_line(env, tmp_path):
    model = pm.save(pm.rejects_model(), tmp_path, "rejects")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = cli(env, model, "--json", "--device", f"ssh://nobody@127.0.0.1:{port}?connect_timeout=5")
    assert done.returncode == 2 and done.stderr.startswith("error: cannot reach ssh://nobody@127.0.0.1")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


HOSTILE = "erf\x1b]0;pwned\x07\u202egpj.exe\x9b"  # a terminal title sequence, a bidi override, a C1 CSI


def test_text_output_prints_hostile_names_as_escapes(env, tmp_path):
    """A refused node named with terminal control sequences is listed as text: no escape reaches
    the terminal, every output line is printable, and the name shows with its escapes."""
    model = pm.rejects_model()
    next(n for n in model.graph.node if n.name == "erf0").name = HOSTILE
    done = cli(env, pm.save(model, tmp_path, "hostile"), "--backends", "htp")
    assert done.returncode == 0, done.stderr
    assert all(line.isprintable() for line in (done.stdout + done.stderr).splitlines())
    assert "erf\\x1b]0;pwned\\x07\\u202egpj.exe\\x9b [Erf]" in done.stdout
