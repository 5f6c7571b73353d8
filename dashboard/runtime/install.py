"""``device install``: put the worker on a device over SSH, in a virtualenv of its own.

Why a wheel and a virtualenv, not a checkout: a board needs only the runtime subset
(``requirements-worker.txt``: onnxruntime-qnn, onnxruntime, onnx, numpy) plus this package; a
venv keeps that apart from the system Python and gives a fixed interpreter path to put in the
device URL. Steps, each one ``ssh`` run through ``Device.ssh_argv`` (the device's validated
options only, the destination after ``--``, every remote word ``shlex.quote``d: nothing typed
reaches a shell unchecked):

1. check the device's Python (3.11+, with the ``venv`` module) and where the venv will be;
2. build this project's wheel here (``build_wheel``: from a checkout, or from the installed package);
3. create the venv (``python3 -m venv``) unless it exists;
4. send the wheel and the requirements as a tar stream into a staging folder of the venv;
5. ``pip install`` the requirements and the wheel there, then remove the staging folder;
6. start the new worker once and read its greeting, so a URL is printed only when it works.

Installed = checkout: what is shipped is the package this process runs. In a checkout (the
package's parent holds ``pyproject.toml``, also an editable install) the wheel is built as
``pyproject.toml`` declares it, from a copy of the sources. From an installed wheel there are no
sources to build, so the installed distribution is packed back into a wheel: the files its
``RECORD`` lists (``importlib.metadata``), byte for byte, with a fresh ``RECORD`` and no build
backend (a device install must not need setuptools or an index here). The requirements come from
the package either way (``dashboard/runtime/requirements-worker.txt``, package data; the checkout's
top-level copy is checked identical by ``tests/test_packaging.py``).

Progress goes to ``progress`` (the CLI prints it on stderr); any failure is one ``UserError``
line quoting the device's own last words (pip's ``ERROR:`` line, ssh's reason).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import importlib.metadata
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable

from dashboard.errors import UserError
from dashboard.runtime.client import PACKAGE_PARENT
from dashboard.runtime.devices import Device

WORKER_REQUIREMENTS = Path(__file__).with_name("requirements-worker.txt")  # package data, in both layouts
DISTRIBUTION = "qnn-backend-lab"
DEFAULT_VENV = "qnn-backend-lab/venv"  # relative paths are under the device user's home
STAGING = ".install"  # inside the venv; removed after pip ran
WHEEL_FILES = ("pyproject.toml", "README.md")  # what the build reads (tests/test_packaging.py copies the same)
WHEEL_FOLDERS = ("dashboard", "samples")
MIN_PYTHON = (3, 11)  # every onnxruntime-qnn wheel (the doctor checks the same)
Progress = Callable[[str], None]

# Run on the device by its Python: version, whether venv/ensurepip exist (Debian splits them off
# into python3-venv), the venv's absolute path, and what ``uname`` would say.
_PREFLIGHT = """
import importlib.util, json, os, platform, sys
print(json.dumps({"python": list(sys.version_info[:3]), "machine": platform.machine(), "system": platform.system(),
                  "libc": list(platform.libc_ver()), "venv": os.path.abspath(os.path.expanduser(sys.argv[1])),
                  "has_venv": all(importlib.util.find_spec(m) for m in ("venv", "ensurepip"))}))
"""


def check_venv_path(venv: str) -> str:
    """A venv path for the device: relative (under its home) or absolute; no control characters,
    no leading ``-``, no ``..``; ``~/`` means the home."""
    text = venv.strip()
    if text.startswith("~/"):
        text = text[2:]
    parts = PurePosixPath(text).parts
    if not text or text.startswith("-") or re.search(r"[\x00-\x1f\x7f]", text) or ".." in parts:
        raise UserError(f"bad --venv {venv!r} (a path on the device, without '..', control characters or a "
                        "leading '-')")
    return text


# -- the wheel ------------------------------------------------------------------------------------------
def build_wheel(out_dir: Path, progress: Progress = lambda line: None) -> Path:
    """The wheel of the package this process runs, in ``out_dir``: built from the checkout it
    sits in, or packed from its installed files (see the module's docstring)."""
    if (PACKAGE_PARENT / "pyproject.toml").is_file():
        return _build_checkout_wheel(out_dir, progress)
    return _pack_installed_wheel(out_dir, progress)


def _build_checkout_wheel(out_dir: Path, progress: Progress) -> Path:
    """``pip wheel --no-deps`` of the checkout: the ``dashboard`` package as ``pyproject.toml``
    declares it, dependencies left to ``requirements-worker.txt``. Built from a copy of the
    sources, so the checkout gets no ``build/`` or ``*.egg-info`` folder."""
    progress(f"building the wheel of {PACKAGE_PARENT}")
    with tempfile.TemporaryDirectory(prefix="qnn-lab-wheel-") as scratch:
        source = Path(scratch)
        for name in WHEEL_FILES:
            shutil.copy(PACKAGE_PARENT / name, source / name)
        for name in WHEEL_FOLDERS:
            shutil.copytree(PACKAGE_PARENT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                               "--disable-pip-version-check", "-w", str(out_dir), str(source)],
                              capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise UserError(f"cannot build the wheel: {_last_line(done.stderr + done.stdout)}")
    wheels = sorted(out_dir.glob("qnn_backend_lab-*.whl"))
    if not wheels:
        raise UserError(f"pip wheel wrote no qnn_backend_lab wheel into {out_dir}")
    return wheels[-1]


def _pack_installed_wheel(out_dir: Path, progress: Progress) -> Path:
    """The installed distribution packed back into a ``py3-none-any`` wheel (see ``_wheel_files``)
    with a ``RECORD`` of their hashes. Refused if the distribution found is not the package running."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise UserError(f"{PACKAGE_PARENT / 'dashboard'} is neither in a checkout nor an installed "
                        f"{DISTRIBUTION}") from None
    if Path(dist.locate_file("dashboard/__init__.py")).resolve() != PACKAGE_PARENT / "dashboard" / "__init__.py":
        raise UserError(f"the installed {DISTRIBUTION} at {dist.locate_file('')} is not the package running "
                        f"({PACKAGE_PARENT / 'dashboard'})")
    progress(f"packing the installed {DISTRIBUTION} {dist.version} of {PACKAGE_PARENT}")
    info, files = _wheel_files(dist)
    wheel = out_dir / f"{DISTRIBUTION.replace('-', '_')}-{dist.version}-py3-none-any.whl"
    record = []
    try:
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in files:
                data = Path(dist.locate_file(file)).read_bytes()
                archive.writestr(file.as_posix(), data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(f"{file.as_posix()},sha256={digest},{len(data)}")
            record.append(f"{info}/RECORD,,")
            archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    except OSError as exc:
        raise UserError(f"cannot pack the installed {DISTRIBUTION}: {exc}") from None
    return wheel


def _wheel_files(dist: importlib.metadata.Distribution) -> tuple[str, list]:
    """Its ``.dist-info`` folder and the files its ``RECORD`` lists under ``dashboard/`` and that
    folder, without ``__pycache__`` and what pip wrote at install time (the console script is
    made again from ``entry_points.txt`` on the device)."""
    listed = list(dist.files or ())
    info = next((f.parts[0] for f in listed if f.parts[0].endswith(".dist-info")), None)
    if info is None:
        raise UserError(f"the installed {DISTRIBUTION} lists no files (no RECORD); reinstall it with pip")
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    return info, [f for f in listed if (f.parts[0] == "dashboard" and "__pycache__" not in f.parts)
                  or (f.parts[0] == info and f.name not in skip)]


def _bundle(wheel: Path, requirements: Path) -> bytes:
    """The wheel and the requirements as one tar stream (one ssh round trip)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in (wheel, requirements):
            tar.add(path, arcname=path.name)
    return buffer.getvalue()


# -- the device -----------------------------------------------------------------------------------------
def install(device: Device, venv: str = DEFAULT_VENV, *, progress: Progress = lambda line: None,
            timeout: float = 1800.0) -> Device:
    """Install the worker into ``venv`` on ``device``; return the device whose URL runs it."""
    if device.is_local:
        raise UserError("device install takes an ssh:// device (this machine runs the worker from this package)")
    if device.shell != "posix":
        raise UserError("device install supports POSIX devices (Linux boards); for Windows on Snapdragon see the "
                        "README")
    venv = check_venv_path(venv)
    if not WORKER_REQUIREMENTS.is_file():
        raise UserError(f"{WORKER_REQUIREMENTS} is missing")
    progress(f"[1/6] checking Python on {device.label}")
    facts = _preflight(device, venv)
    target = facts["venv"]
    python = f"{target}/bin/python"
    progress(f"        {facts['system']} {facts['machine']}, Python {'.'.join(map(str, facts['python']))}; "
             f"venv {target}")
    with tempfile.TemporaryDirectory(prefix="qnn-lab-install-") as scratch:
        progress("[2/6] building this project's wheel")
        wheel = build_wheel(Path(scratch), progress)
        progress("[3/6] creating the virtualenv (once)")
        base = shlex.quote(device.python or "python3")
        _ssh(device, f"test -x {shlex.quote(python)} || {base} -m venv -- {shlex.quote(target)}", "python3 -m venv",
             progress, timeout)
        staging = f"{target}/{STAGING}"
        progress(f"[4/6] copying {wheel.name} and {WORKER_REQUIREMENTS.name}")
        try:
            _ssh(device, f"rm -rf -- {shlex.quote(staging)} && mkdir -p -- {shlex.quote(staging)} && "
                         f"tar -x -C {shlex.quote(staging)} -f -", "copying", progress, timeout,
                 stdin=_bundle(wheel, WORKER_REQUIREMENTS))
        except UserError:
            with contextlib.suppress(UserError):  # the copy's failure is the one to report
                _ssh(device, f"rm -rf -- {shlex.quote(staging)}", "cleaning up", progress, 60)
            raise
        progress("[5/6] pip install on the device (the first time downloads onnxruntime-qnn)")
        _ssh(device, _pip_command(device, python, staging, wheel.name), "pip install", progress, timeout)
    installed = dataclasses.replace(device, python=python, workdir=None)
    progress("[6/6] starting the installed worker")
    with installed.connect() as worker:
        hello = worker.call("hello", timeout=300)
    progress(f"        worker answers: onnxruntime {hello.onnxruntime}, onnxruntime-qnn {hello.onnxruntime_qnn}, "
             f"QNN SDK {hello.qnn_sdk} on {hello.os} {hello.arch}")
    return installed


def _pip_command(device: Device, python: str, staging: str, wheel: str) -> str:
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in device.env.items())
    pip = f"env {env} {shlex.quote(python)} -m pip" if env else f"{shlex.quote(python)} -m pip"
    flags = "--disable-pip-version-check --no-input --progress-bar off"
    requirements = shlex.quote(f"{staging}/{WORKER_REQUIREMENTS.name}")
    return (f"{pip} install {flags} -r {requirements} && "
            f"{pip} install {flags} --no-deps --force-reinstall {shlex.quote(f'{staging}/{wheel}')}; "
            f"status=$?; rm -rf -- {shlex.quote(staging)}; exit $status")


def _preflight(device: Device, venv: str) -> dict:
    python = device.python or "python3"
    out = _ssh(device, f"{shlex.quote(python)} -c {shlex.quote(_PREFLIGHT)} {shlex.quote(venv)}", "checking Python",
               lambda line: None, 120)
    try:
        facts = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError(f"{device.label}: {python} did not answer as Python does: {_last_line(out)}") from None
    version = tuple(facts["python"])
    if version[:2] < MIN_PYTHON:
        raise UserError(f"{device.label}: {python} is Python {'.'.join(map(str, version))}; onnxruntime-qnn needs "
                        "3.11 or newer (give another interpreter with ?python=PATH)")
    if not facts["has_venv"]:
        raise UserError(f"{device.label}: {python} has no venv/ensurepip module (Debian and Ubuntu: "
                        "sudo apt install python3-venv)")
    return facts


def _ssh(device: Device, command: str, what: str, progress: Progress, timeout: float,
         stdin: bytes | None = None) -> str:
    """Run ``command`` on the device; its output lines go to ``progress``; the output is returned.
    A non-zero exit is a ``UserError`` with the most telling line (ssh's 255 means unreachable)."""
    proc = subprocess.Popen(device.ssh_argv(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        if stdin is not None:
            text = proc.communicate(stdin, timeout=timeout)[0].decode("utf-8", "replace")
        else:
            text = _stream(proc, progress, timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise UserError(f"{what} on {device.label} did not finish within {timeout:.0f} s and was stopped") from None
    if proc.returncode == 255:
        raise UserError(f"cannot reach {device.label}: {_last_line(text)}")
    if proc.returncode != 0:
        raise UserError(f"{what} failed on {device.label}: {_last_line(text)}")
    return text


def _stream(proc: subprocess.Popen, progress: Progress, timeout: float) -> str:
    """Forward the remote command's lines as they come (pip takes minutes on a board)."""
    lines: list[str] = []

    def pump() -> None:
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            lines.append(line)
            if line.strip():
                progress(f"        {line}")

    proc.stdin.close()
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    proc.wait(timeout=timeout)
    reader.join(timeout=10)
    return "\n".join(lines)


def _last_line(text: str) -> str:
    """pip's ERROR line if there is one, else the last non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["(no output)"])[-1][:400]
