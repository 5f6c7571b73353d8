"""The project as a package: the wheel builds, installs into a fresh environment and runs outside
the checkout (the ``qnn-lab`` command, the bundled samples, the runtime worker); the notebook
layer stays free of Streamlit and onnxruntime in the caller's process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from wheel_env import build_wheel, install_in_fresh_env

ROOT = Path(__file__).resolve().parent.parent
CHECKOUT_PACKAGES = sorted(".".join(p.parent.relative_to(ROOT).parts)
                           for p in (ROOT / "dashboard").rglob("__init__.py"))


def test_every_package_of_the_checkout_is_listed_for_the_wheel():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    assert set(CHECKOUT_PACKAGES) == set(listed) - {"dashboard.samples"}


def test_the_top_level_worker_requirements_are_the_package_s_copy():
    """One list: ``device install`` ships the package's file (package data, there installed too);
    the top-level one is for a manual ``pip install -r`` in a checkout and must say the same."""
    packaged = ROOT / "dashboard" / "runtime" / "requirements-worker.txt"
    assert (ROOT / "requirements-worker.txt").read_bytes() == packaged.read_bytes()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the checkout's sources, installed without dependencies into
    a fresh environment that sees the test environment's packages (``wheel_env``)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "dashboard").rglob("*.py")}
    assert sources <= names, sorted(sources - names)[:5]
    assert {f"dashboard/samples/{p.name}" for p in (ROOT / "samples").glob("*.onnx")} <= names
    assert "dashboard/runtime/requirements-worker.txt" in names  # what device install ships
    return install_in_fresh_env(wheel, tmp / "env")


def outside(env_dir: Path, *argv: str) -> subprocess.CompletedProcess:
    """Run in a folder far from the checkout, with nothing pointing back at it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(argv), cwd=env_dir, env=env, capture_output=True, text=True, timeout=300)


def test_the_installed_package_finds_its_samples_and_not_the_checkout(installed):
    done = outside(installed, str(installed / "bin" / "python"), "-c",
                   "import dashboard; from dashboard.intake.samples import sample_path; "
                   "print(dashboard.__file__); print(sample_path('cnn_classifier.onnx'))")
    assert done.returncode == 0, done.stderr
    package, sample = done.stdout.split()
    assert Path(package).is_relative_to(installed) and Path(sample).is_relative_to(installed)
    assert Path(sample).read_bytes() == (ROOT / "samples" / "cnn_classifier.onnx").read_bytes()


def test_the_console_script_classifies_a_bundled_sample(installed):
    sample = next(installed.rglob("dashboard/samples/cnn_classifier.onnx"))
    done = outside(installed, "qnn-lab", "classify", str(sample), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ep"]["verdict"] == data["refined"]["verdict"] == "NonGenAI"


def test_the_installed_package_starts_its_runtime_worker(installed):
    """``--optimized`` runs a CPU session in a worker process started from the installed package."""
    sample = next(installed.rglob("dashboard/samples/cnn_classifier.onnx"))
    done = outside(installed, "qnn-lab", "classify", str(sample), "--optimized", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ep_optimized"]["nodes"] > 0


def test_bad_input_through_the_console_script_is_one_line(installed):
    done = outside(installed, "qnn-lab", "classify", str(installed / "missing.onnx"))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1


def test_the_notebook_layer_imports_neither_streamlit_nor_the_runtime():
    probe = ("import sys; from dashboard import notebook as lab; model = lab.sample(); c = model.classify(); "
             "c.to_frame(); c.figure(); model.to_frame(); "
             "bad = [m for m in ('streamlit', 'onnxruntime', 'onnxruntime_qnn') if m in sys.modules]; "
             "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
