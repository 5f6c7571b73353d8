"""``python -m dashboard device install`` and ``device doctor`` from the command line.

Bad input is one ``error:`` line with exit code 2 before anything is built or started; the wheel
holds the worker; and a real install over SSH (the sshd on 127.0.0.1 of ``test_devices_ssh``)
creates a virtualenv, installs the wheel and ``requirements-worker.txt`` into it with pip, and
prints a device URL whose worker runs from that venv alone (no checkout, no PYTHONPATH). The same
install onto an arm64 userland is in ``tests/test_board.py``.
"""

from __future__ import annotations

import getpass
import json
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_devices_ssh import free_port, sshd  # noqa: F401 - the real sshd fixture

from dashboard.runtime.devices import Device
from dashboard.runtime.install import build_wheel
from dashboard.runtime.protocol import DoctorReport

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dashboard", "device", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def assert_one_error_line(done: subprocess.CompletedProcess, message: str, progress: bool = False) -> None:
    """Exit 2 and one ``error:`` line, last on stderr; before it only progress lines ("[1/6] ...")
    when the command got as far as starting."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1], done.stderr
    assert all(line.startswith(("[", "  ")) for line in lines[:-1]) if progress else len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("args, message", [
    (("install", "local"), "device install takes an ssh:// device"),
    (("install", "ssh://me@laptop?shell=windows"), "supports POSIX devices"),
    (("install", "ssh://me@board", "--venv", "../../etc"), "bad --venv '../../etc'"),
    (("install", "ssh://me@board", "--venv=-rf"), "bad --venv '-rf'"),
    (("install", "ssh://me@-oProxyCommand=touch%20x"), "bad host in device address"),
    (("install", "ssh://me@board?option=ProxyCommand=touch%20x"), "free-form ssh options are not accepted"),
    (("install",), "the following arguments are required: device"),
    (("doctor", "ftp://board"), "device must be 'local' or ssh://"),
    (("doctor", "local?workdir=/tmp"), "a local device takes only python=PATH"),
    (("cure", "local"), "invalid choice: 'cure'"),
])
def test_bad_input_is_one_line_before_anything_runs(args, message):
    assert_one_error_line(cli(*args), message)


def test_an_unreachable_device_is_one_line():
    url = f"ssh://{getpass.getuser()}@127.0.0.1:{free_port()}?connect_timeout=5"
    install = cli("install", url)
    assert_one_error_line(install, "cannot reach ssh://", progress=True)
    assert "Connection refused" in install.stderr
    assert_one_error_line(cli("doctor", url), "cannot reach ssh://")


def test_the_wheel_holds_the_worker(tmp_path):
    before = set(ROOT.iterdir())
    wheel = build_wheel(tmp_path)
    assert set(ROOT.iterdir()) == before  # built from a copy: no build/ or *.egg-info left in the checkout
    assert wheel.name.startswith("qnn_backend_lab-") and wheel.name.endswith("-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("runtime/worker.py", "runtime/doctor.py", "runtime/qnn.py", "runtime/protocol.py",
                   "partition/measure.py", "partition/protocol.py", "timeline/runner.py", "timeline/protocol.py"):
        assert f"dashboard/{module}" in names, module
    assert not any(n.startswith(("tests/", "pages/", "scripts/")) or "__pycache__" in n for n in names)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="this host is not x86_64")
def test_this_host_says_htp_simulator_through_the_cli():
    done = cli("doctor", timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "device doctor for local (this machine)"
    assert lines[1] == "Linux x86_64 (HTP simulator)"
    assert any(line.startswith("  PASS  Python >= 3.11") for line in lines)
    assert any(line.startswith("  INFO  HTP simulator:") for line in lines)
    assert any(line.startswith("  FAIL  a QNN GPU (Adreno): no QNN GPU on an x86_64 host") for line in lines)
    assert lines[-1].startswith("HTP: HTP simulator · GPU fails: ")
    as_json = cli("doctor", "local", "--json", timeout=300)
    data = json.loads(as_json.stdout)
    assert data["device"] == "local" and data["mode"] == "simulator"
    assert DoctorReport.from_json({k: v for k, v in data.items() if k not in ("device", "label")}).checks


def test_install_over_ssh_gives_a_url_whose_worker_runs_from_the_venv(sshd, tmp_path):  # noqa: F811
    venv = tmp_path / "device-home" / "lab-venv"
    (tmp_path / "known_hosts").write_text("")  # must exist: ssh appends the new host's key to it
    base = (f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}?python={sys.executable}&identity={sshd['key']}"
            f"&host_key=accept-new&known_hosts={tmp_path / 'known_hosts'}")
    done = cli("install", base, "--venv", str(venv), timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    url = done.stdout.strip()
    assert "\n" not in url
    device = Device.parse(url)
    assert device.python == f"{venv}/bin/python" and device.workdir is None and device.identity == str(sshd["key"])
    steps = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [s[:5] for s in steps] == ["[1/6]", "[2/6]", "[3/6]", "[4/6]", "[5/6]", "[6/6]"]
    assert "worker answers: onnxruntime 1.32.0, onnxruntime-qnn 2.7.0" in done.stderr
    assert not (venv / ".install").exists()  # the staging folder is gone
    site = list((venv / "lib").glob("python3.*/site-packages/dashboard/runtime/worker.py"))
    assert site, "the worker module is not installed in the venv"
    assert not list((venv / "lib").glob("python3.*/site-packages/streamlit"))  # the runtime subset only

    doctor = cli("doctor", url, timeout=300)
    assert doctor.returncode == 0, doctor.stderr
    assert doctor.stdout.splitlines()[0] == f"device doctor for {device.label}"
    assert f"onnxruntime-qnn 2.7.0 in {venv}/lib" in doctor.stdout

    again = cli("install", base, "--venv", str(venv), timeout=1200)  # re-running upgrades in place
    assert again.returncode == 0 and again.stdout.strip() == url
