"""A second machine: an emulated arm64 board (Debian bookworm arm64 under qemu-user, reached over
a real sshd on 127.0.0.1; ``scripts/board/emulated.py``) running the ``manylinux_2_34_aarch64``
wheels, installed there by ``python -m dashboard device install``.

The board has no Hexagon DSP and no Adreno: the CPU EP must work, HTP and GPU must fail, and every
failure must carry the doctor's explanation (no ``/dev/fastrpc-cdsp``, no ``libcdsprpc.so``).
What only a real Snapdragon board can show (the NPU and GPU initializing, the SoC's skel loading)
is outside this test. The board is built once per machine (about 5 minutes) and cached; the
first install downloads the aarch64 wheels (about 4 minutes); cached, the tests take under a
minute. ``make test`` runs them, ``make board-test`` runs them alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dashboard.intake.samples import build_cnn_classifier
from dashboard.runtime.devices import Device

ROOT = Path(__file__).resolve().parent.parent
NO_DSP = "/dev/fastrpc-cdsp does not exist"
NO_RPC = "libcdsprpc.so is not found by the dynamic loader"
INSTALL_TIMEOUT = 2400
# The first run builds the board and downloads the wheels inside the first test's setup.
pytestmark = pytest.mark.timeout(3600)


def _emulated():
    spec = importlib.util.spec_from_file_location("emulated_board", ROOT / "scripts" / "board" / "emulated.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def cli(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The running board and the device URL ``device install`` printed for it."""
    emulated = _emulated()
    try:
        emulated.check_host()
    except emulated.BoardUnavailable as exc:
        pytest.skip(f"this host cannot run the emulated board: {exc}")
    scratch = tmp_path_factory.mktemp("board")
    with emulated.exclusive():
        built = emulated.build(log=lambda line: print(line, file=sys.stderr))
        with built.start(scratch / "sshd.log") as running:
            installed = cli("device", "install", running.url(scratch / "known_hosts"), timeout=INSTALL_TIMEOUT)
            assert installed.returncode == 0, installed.stderr[-3000:]
            yield {"url": installed.stdout.strip(), "install": installed}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("board_model") / "cnn16.onnx"
    onnx.save(build_cnn_classifier(size=16, seed=3), path)
    return path


def test_device_install_puts_the_aarch64_wheels_in_a_venv(board):
    device = Device.parse(board["url"])
    assert device.user == "lab" and device.python == "/home/lab/qnn-backend-lab/venv/bin/python"
    progress = board["install"].stderr
    assert "Linux aarch64, Python 3.11" in progress
    assert "worker answers: onnxruntime 1.32.0, onnxruntime-qnn 2.7.0" in progress and "Linux aarch64" in progress


def test_probe_cpu_works_and_htp_and_gpu_fail_with_the_doctors_reason(board):
    result = Device.parse(board["url"]).probe(timeout=600)
    assert (result.arch, result.os.split()[0], result.python[:4]) == ("aarch64", "Linux", "3.11")
    backends = result.backends
    assert backends["cpu"].ok is True
    for name in ("htp", "gpu"):
        assert backends[name].ok is False
        assert "the QNN EP exposes no devices on this host" in backends[name].error
    assert NO_DSP in backends["htp"].error and NO_RPC in backends["htp"].error
    assert "libOpenCL.so is not in /lib64, /usr/lib" in backends["gpu"].error
    assert result.shared_memory.ok is False
    assert result.soc["ep_devices"] == []  # no NPU device without the FastRPC node


def test_doctor_explains_why(board):
    done = cli("device", "doctor", board["url"], timeout=600)
    assert done.returncode == 0, done.stderr  # a report, even with failures
    lines = done.stdout.splitlines()
    assert lines[1] == "Linux aarch64 (device)"
    expected = {"PASS  Python >= 3.11": "Python 3.11", "PASS  glibc >= 2.34": "glibc 2.36",
                "PASS  onnxruntime-qnn installed": "onnxruntime-qnn 2.7.0",
                "FAIL  /dev/fastrpc-cdsp present and accessible": NO_DSP, "FAIL  libcdsprpc.so resolvable": NO_RPC,
                "FAIL  libOpenCL.so for the QNN GPU": "libOpenCL.so is not in /lib64, /usr/lib",
                "PASS  ADSP_LIBRARY_PATH unset": "unset", "WARN  SoC identified": "/sys/devices/soc0 is absent",
                "SKIP  the wheel ships the skel": "the wheel ships V68, V69, V73, V75, V79, V81"}
    for start, found in expected.items():
        line = next((line for line in lines if line.strip().startswith(start)), None)
        assert line is not None and found in line, (start, done.stdout)
    assert sum(line.strip().startswith("fix: ") for line in lines) == 4  # the three failures and the unknown SoC
    assert lines[-1].startswith(f"HTP fails: {NO_DSP}") and lines[-1].endswith("CPU: no blocker found")


def test_partition_on_the_board_reports_htp_failed_with_the_reason(board, model, tmp_path):
    done = cli("partition", str(model), "--device", board["url"], "--json", timeout=900,
               env={"QNN_LAB_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    htp, gpu = report["backends"]["htp"], report["backends"]["gpu"]
    assert htp["status"] == "failed" and not htp["nodes"]  # not "measured" with 0 nodes claimed
    assert NO_DSP in htp["error"] and NO_RPC in htp["error"]
    assert gpu["status"] == "predicted" and "libOpenCL.so is not in" in gpu["source"]
    assert htp["runtime"]["onnxruntime_qnn"] == "2.7.0"


def test_timeline_serves_on_the_cpu_and_says_why_migration_failed(board, model):
    done = cli("timeline", str(model), "--device", board["url"], "--strategies", "migrate", "--requests", "8",
               "--rate", "8", "--json", timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(done.stdout)["strategies"]["migrate"]
    failures = [e for e in run["events"] if e["kind"] == "migration_failed"]
    assert len(failures) == 1 and NO_DSP in failures[0]["detail"] and "still serving on cpu" in failures[0]["detail"]
    assert {r["backend"] for r in run["requests"]} == {"cpu"}
    assert run["metrics"]["failed"] == 0 and not any(e["kind"] == "swap" for e in run["events"])



def test_the_board_takes_devices_cells_of_a_sweep(board, model, tmp_path):
    """``sweep --devices``: the board's probe names no known SoC, so it takes every cell; its
    partition cell runs there (the HTP fails with the board's reason: a failed row), its classify
    cell is ok, and both records name the board as the node that ran them."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f'models = ["{model}"]\nsocs = ["qcs6490"]\n', encoding="utf-8")
    done = cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--devices", board["url"], "--json", timeout=1200,
               env={"QNN_LAB_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-2000:]
    cells = {c["analysis"]: c for c in json.loads(done.stdout)["cells"]}
    label = Device.parse(board["url"]).label
    assert {c["node"] for c in cells.values()} == {label} and {c["executor"] for c in cells.values()} == {"devices"}
    assert cells["classify"]["status"] == "ok"
    partition = cells["partition"]
    assert partition["status"] == "failed" and NO_DSP in partition["reason"], partition
    assert "takes the cells of the SoCs no other device is" in done.stderr
