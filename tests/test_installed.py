"""Installed = checkout: the wheel, installed into a fresh virtualenv outside the checkout, runs
a partition in its local worker, installs the worker on a device over SSH (the loopback sshd of
``test_devices_ssh``) and partitions on that device. Nothing points back at the checkout: the
commands run from a folder outside it with ``PYTHONPATH`` unset, and the package they import is
the venv's."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from wheel_env import build_wheel, install_in_fresh_env
from test_devices_ssh import sshd  # noqa: F401 - the loopback sshd fixture

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel installed into a fresh venv (``wheel_env``): the project from the wheel only."""
    tmp = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(tmp)
    assert "dashboard/runtime/requirements-worker.txt" in zipfile.ZipFile(wheel).namelist()
    return install_in_fresh_env(wheel, tmp / "env")


def run(env_dir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m dashboard ARGS`` of the venv, from a folder outside the checkout, without
    ``PYTHONPATH``, with a cache of its own."""
    folder = env_dir.parent / "elsewhere"
    folder.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["QNN_LAB_CACHE"] = str(env_dir.parent / "cache")
    return subprocess.run([str(env_dir / "bin" / "python"), "-m", "dashboard", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)


def sample(env_dir: Path) -> Path:
    return next(env_dir.rglob("dashboard/samples/cnn_classifier.onnx"))


def test_the_venv_imports_the_installed_package(installed):
    done = run(installed, "--help")
    assert done.returncode == 0, done.stderr
    probe = subprocess.run([str(installed / "bin" / "python"), "-c", "import dashboard; print(dashboard.__file__)"],
                           cwd=installed.parent, capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert Path(probe.stdout.strip()).is_relative_to(installed), probe.stdout + probe.stderr


def test_a_partition_runs_in_the_installed_local_worker(installed):
    """The worker is found through the package's parent (site-packages) and runs in the cache's
    ``worker`` folder, not in site-packages."""
    done = run(installed, "partition", str(sample(installed)), "--backends", "htp", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["backends"]["htp"]["status"] == "measured"
    assert (installed.parent / "cache" / "worker").is_dir()


def test_device_install_and_a_remote_partition_from_the_installed_wheel(installed, sshd):  # noqa: F811
    """The installed package packs itself into a wheel for the device; the URL printed runs the
    device's venv, and a partition through it measures there."""
    device_venv = installed.parent / "device-home" / "lab-venv"
    stores = (f"&env=QNN_LAB_MODEL_STORE={quote(str(sshd['root'] / 'installed_models'))}"
              f"&env=QNN_LAB_CONTEXT_STORE={quote(str(sshd['root'] / 'installed_contexts'))}")
    url = (f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}?python={installed / 'bin' / 'python'}"
           f"&identity={sshd['key']}&host_key=accept-new&known_hosts={sshd['root'] / 'known_hosts'}{stores}")
    done = run(installed, "device", "install", url, "--venv", str(device_venv), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "packing the installed qnn-backend-lab" in done.stderr
    assert "worker answers: onnxruntime 1.32.0, onnxruntime-qnn 2.7.0" in done.stderr
    installed_url = done.stdout.strip()
    assert f"python={device_venv}/bin/python" in installed_url
    shipped = list((device_venv / "lib").glob("python3.*/site-packages/dashboard/runtime/worker.py"))
    assert shipped and shipped[0].read_bytes() == (ROOT / "dashboard" / "runtime" / "worker.py").read_bytes()

    remote = run(installed, "partition", str(sample(installed)), "--device", installed_url, "--backends", "htp",
                 "--json")
    assert remote.returncode == 0, remote.stderr[-3000:]
    data = json.loads(remote.stdout)
    assert data["backends"]["htp"]["status"] == "measured"
    assert (sshd["root"] / "installed_models" / data["digest"] / "cnn_classifier.onnx").is_file()


def test_a_local_worker_runs_in_a_folder_of_the_cache_not_beside_the_package(tmp_path, monkeypatch):
    """``python -m`` puts the working directory first on ``sys.path``: it is this user's cache
    folder, made on first use; a cache that cannot be made falls back to the package's parent."""
    from dashboard.runtime.client import PACKAGE_PARENT, worker_cwd

    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    assert worker_cwd() == tmp_path / "cache" / "worker" and (tmp_path / "cache" / "worker").is_dir()
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "file"))
    assert worker_cwd() == PACKAGE_PARENT
