"""The project's wheel, built and installed into a fresh virtualenv, for the tests that check the
package works installed (``test_packaging``, ``test_installed``).

The wheel is built without build isolation from a copy of the checkout's sources (nothing is
downloaded) and installed without dependencies; the environment sees the test environment's
packages through a path line in a ``.pth`` file, so onnxruntime-qnn and the rest are not
installed again, while the project itself comes from the wheel only."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_wheel(folder: Path) -> Path:
    """The project's wheel, built in ``folder``."""
    source = folder / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("dashboard", "samples"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(folder / "dist")], check=True, capture_output=True, timeout=300)
    return next((folder / "dist").glob("qnn_backend_lab-*.whl"))


def install_in_fresh_env(wheel: Path, env_dir: Path) -> Path:
    """A new virtualenv at ``env_dir`` with ``wheel`` installed; returns ``env_dir``."""
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=300).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "test_environment.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    return env_dir
