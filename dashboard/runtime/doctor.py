"""The device doctor: every reason a QNN backend may not initialize on a host, checked, each with a
pass/fail line and a one-line fix.

Why: when the HTP or GPU backend cannot set up, the runtime says little ("exposes no devices", or
a session that silently runs on the CPU EP). What decides it is the host: the FastRPC device node
and user library that reach the Hexagon DSP, ``ADSP_LIBRARY_PATH`` (the EP points it at the
wheel's folder, where the DSP-side skels are, unless the user already set it), the C library and
Python the wheel was built for, the Adreno OpenCL driver for the GPU, and whether the wheel ships
a skel for the SoC's Hexagon architecture. The doctor looks at each and says which failed.

It runs in the worker (command ``doctor``) on the host being diagnosed, and imports only the
standard library: it must answer where onnxruntime itself cannot be loaded (too old a glibc, no
wheel). Checks are portable: ``ctypes.util.find_library``, ``os.access``, ``platform.libc_ver``,
``sys.version_info``; on Windows the registry names the processor (``platform.processor_name``,
where the one-platform calls live). What the checks read is gathered in a ``Host`` first, so a
test can describe another machine with real files (a fake ``/sys/devices/soc0``, a wheel folder
without a skel) and run the same checks on it.
"""

from __future__ import annotations

import ctypes.util
import importlib.metadata
import importlib.util
import os
import platform
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping

from dashboard.platform import processor_name
from dashboard.runtime.knobs import SESSION_BACKENDS
from dashboard.runtime.protocol import DoctorCheck, DoctorReport, NoArgs
from dashboard.runtime.socs import Soc, identify_soc

MIN_PYTHON = (3, 11)  # every onnxruntime-qnn 2.7.0 wheel
MIN_GLIBC = {"aarch64": (2, 34), "x86_64": (2, 35)}  # manylinux_2_34_aarch64, manylinux_2_35_x86_64
FASTRPC_NODE = "/dev/fastrpc-cdsp"
SOC0 = "/sys/devices/soc0"
_SKEL = re.compile(r"^libQnnHtpV(\d+)Skel\.so$")
_ARCH = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}
# Where the aarch64 libQnnGpu.so of onnxruntime-qnn 2.7.0 looks for OpenCL (the paths in its
# strings): fixed places, not the loader's search, so the check looks exactly there.
OPENCL_PATHS = tuple(Path(p) for p in (
    "/usr/lib/libOpenCL.so", "/usr/lib/aarch64-linux-gnu/libOpenCL.so", "/usr/lib64/libOpenCL.so",
    "/lib64/libOpenCL.so", "/usr/local/lib64/libOpenCL.so", "/usr/lib/libOpenCL.so.1",
    "/usr/lib/aarch64-linux-gnu/libOpenCL.so.1"))


@dataclass
class Host:
    """What the checks read about a host."""

    system: str  # platform.system(): Linux, Windows, Darwin; "Android" when Python says so
    machine: str  # aarch64, x86_64 or what the platform reports
    python: tuple[int, ...]
    libc: tuple[str, str]  # platform.libc_ver(): ("glibc", "2.36"), ("", "") for bionic, musl, Windows
    env: Mapping[str, str]
    wheel_dir: Path | None  # the onnxruntime_qnn package folder
    wheel_version: str | None
    fastrpc_node: Path = Path(FASTRPC_NODE)
    soc0: Path = Path(SOC0)
    processor_name: str = ""  # Windows: the registry's ProcessorNameString
    opencl_paths: tuple[Path, ...] = OPENCL_PATHS
    find_library: Callable[[str], str | None] = field(default=ctypes.util.find_library, repr=False)


def this_host() -> Host:
    """The host this process runs on."""
    system = "Android" if hasattr(sys, "getandroidapilevel") else platform.system()
    wheel_dir, version = _wheel()
    return Host(system=system, machine=_ARCH.get(platform.machine().lower(), platform.machine().lower()),
                python=tuple(sys.version_info[:3]), libc=platform.libc_ver(), env=dict(os.environ),
                wheel_dir=wheel_dir, wheel_version=version,
                processor_name=processor_name() if system == "Windows" else "")


def _wheel() -> tuple[Path | None, str | None]:
    """The installed onnxruntime_qnn folder and version, found without importing it (importing
    loads onnxruntime, which is what may be failing)."""
    spec = importlib.util.find_spec("onnxruntime_qnn")
    if spec is None or not spec.submodule_search_locations:
        return None, None
    try:
        version = importlib.metadata.version("onnxruntime-qnn")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return Path(list(spec.submodule_search_locations)[0]), version


# -- the checks -----------------------------------------------------------------------------------------
ALL = list(SESSION_BACKENDS)


def check(name: str, title: str, ok: bool | None, detail: str, fix: str, backends: list[str]) -> DoctorCheck:
    """``ok`` True: pass; False: fail with ``fix``; None: could not be decided (skip)."""
    status = "pass" if ok else "skip" if ok is None else "fail"
    return DoctorCheck(name, title, status, detail, fix if ok is False else None, backends)


def python_check(host: Host) -> DoctorCheck:
    version = ".".join(map(str, host.python))
    ok = host.python[:2] >= MIN_PYTHON
    return check("python", "Python >= 3.11 (every onnxruntime-qnn wheel)", ok,
                 f"Python {version}" if ok else f"Python {version} is older than 3.11",
                 "install Python 3.11 or newer (Debian 12 and Ubuntu 24.04 ship it) and re-run `device install`",
                 ALL)


def glibc_check(host: Host) -> DoctorCheck:
    need = MIN_GLIBC.get(host.machine, (2, 34))
    title = f"glibc >= {need[0]}.{need[1]} (the manylinux wheel for {host.machine})"
    name, version = host.libc
    if name != "glibc":
        return check("glibc", title, False, "the C library is not glibc (Android's bionic or musl)",
                     "use a glibc Linux on the board (Debian 12, Ubuntu 22.04 or newer, Qualcomm Linux)", ALL)
    found = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    ok = found >= need
    return check("glibc", title, ok, f"glibc {version}" if ok else f"glibc {version} is older than {need[0]}.{need[1]}",
                 "upgrade the board's OS to one with a newer glibc (Debian 12, Ubuntu 22.04 or newer)", ALL)


def wheel_check(host: Host) -> DoctorCheck:
    ok = host.wheel_dir is not None
    return check("wheel", "onnxruntime-qnn installed", ok,
                 f"onnxruntime-qnn {host.wheel_version or '?'} in {host.wheel_dir}" if ok
                 else "onnxruntime-qnn is not installed for this Python",
                 "run `python -m dashboard device install URL` from the dashboard's machine "
                 "(or pip install -r requirements-worker.txt here)", ALL)


def fastrpc_check(host: Host) -> DoctorCheck:
    node = host.fastrpc_node
    title = f"{node} present and accessible (FastRPC to the Hexagon DSP)"
    if not node.exists():
        return check("fastrpc", title, False,
                     f"{node} does not exist (no FastRPC driver for the DSP; the EP then exposes no NPU device)",
                     "boot a kernel with the fastrpc driver and the CDSP firmware (the board vendor's or Qualcomm "
                     "Linux image); `ls /dev/fastrpc-*` shows what is there", ["htp"])
    if not os.access(node, os.R_OK | os.W_OK):
        info = node.stat()
        return check("fastrpc", title, False,
                     f"{node} is not readable and writable by this user (mode {info.st_mode & 0o777:o}, "
                     f"group id {info.st_gid})",
                     f"add the user to the group owning {node} (or a udev rule granting it rw), then log in again",
                     ["htp"])
    return check("fastrpc", title, True, f"{node} (read-write)", "", ["htp"])


def library_check(host: Host, name: str, library: str, title: str, fix: str, backends: list[str]) -> DoctorCheck:
    """Is ``library`` (``cdsprpc``; ``OpenCL`` on Windows) found by the dynamic loader? The HTP stub
    loads ``libcdsprpc.so`` by that name, so finding only ``libcdsprpc.so.1`` is a warning."""
    wanted = _file_name(host, library)
    # find_library takes "cdsprpc" on Linux (lib prefix and .so added) and the DLL's stem on Windows
    found = host.find_library(Path(wanted).stem if host.system == "Windows" else library)
    if not found:
        return check(name, title, False, f"{wanted} is not found by the dynamic loader", fix, backends)
    if host.system != "Windows" and Path(found).name != wanted:
        return DoctorCheck(name, title, "warn", f"only {found} is found, and the runtime loads {wanted} by name",
                           f"add the {wanted} symlink next to {found} (ldconfig's cache lists it then)", backends)
    return check(name, title, True, f"{wanted}: {found}", "", backends)


def _file_name(host: Host, library: str) -> str:
    if host.system == "Windows":
        return f"{library}.dll" if library == "OpenCL" else f"lib{library}.dll"
    return f"lib{library}.so"


def cdsprpc_check(host: Host) -> DoctorCheck:
    windows = host.system == "Windows"
    title = f"{_file_name(host, 'cdsprpc')} resolvable (the DSP's RPC library)"
    return library_check(host, "cdsprpc", "cdsprpc", title,
                         "install or update the Snapdragon NPU driver (Windows Update or the device maker)" if windows
                         else "install the board's FastRPC user library (libcdsprpc.so, from the vendor image or "
                              "Qualcomm Linux) or add its folder to LD_LIBRARY_PATH", ["htp"])


def opencl_check(host: Host) -> DoctorCheck:
    if host.system == "Windows":
        return library_check(host, "opencl", "OpenCL", "OpenCL.dll for the QNN GPU (Adreno OpenCL)",
                             "install or update the Adreno graphics driver", ["gpu"])
    title = "libOpenCL.so for the QNN GPU (Adreno OpenCL, where QnnGpu looks for it)"
    found = next((p for p in host.opencl_paths if p.exists()), None)
    return check("opencl", title, found is not None, f"libOpenCL.so: {found}" if found
                 else f"libOpenCL.so is not in {', '.join(sorted({str(p.parent) for p in host.opencl_paths}))}",
                 "install the board's Adreno OpenCL driver (libOpenCL.so from the vendor image; an ICD loader "
                 "without the Adreno ICD is not enough)", ["gpu"])


def adsp_check(host: Host) -> DoctorCheck:
    value = host.env.get("ADSP_LIBRARY_PATH")
    title = "ADSP_LIBRARY_PATH unset or the wheel's folder (where the DSP loads skels from)"
    if value is None:
        return check("adsp_library_path", title, True, "unset: the EP sets it to the wheel's folder", "", ["htp"])
    wheel = str(host.wheel_dir) if host.wheel_dir else None
    entries = [e for e in re.split(r"[;]", value) if e]
    if wheel is not None and wheel in entries:
        return check("adsp_library_path", title, True, f"includes the wheel's folder {wheel}", "", ["htp"])
    return check("adsp_library_path", title, False,
                 f"ADSP_LIBRARY_PATH is set to {value!r}, not the wheel's folder (the EP keeps it, so the DSP "
                 "looks for the wheel's skels elsewhere)",
                 f"unset ADSP_LIBRARY_PATH for the worker (or put {wheel or 'the wheel folder'} first in it)", ["htp"])


def soc_facts(soc0: Path = Path(SOC0)) -> dict[str, str]:
    """The kernel's SoC identity (Linux/Android ``/sys/devices/soc0``), empty where absent."""
    facts = {}
    for key in ("machine", "family", "soc_id", "revision"):
        try:
            facts[key] = (soc0 / key).read_text(encoding="utf-8").strip()
        except OSError:
            pass
    return facts


def soc_check(host: Host) -> tuple[DoctorCheck, Soc | None]:
    title = "SoC identified (its Hexagon architecture decides the skel)"
    if host.system == "Windows":
        soc = identify_soc(processor_name=host.processor_name)
        seen = host.processor_name or "no processor name in the registry"
    else:
        facts = soc_facts(host.soc0)
        soc = identify_soc(machine=facts.get("machine"))
        seen = ", ".join(f"{k} {v}" for k, v in facts.items()) or f"{host.soc0} is absent (not a Qualcomm kernel?)"
    if soc is not None:
        return check("soc", title, True, f"{soc.name}: Hexagon V{soc.htp_arch} ({seen})", "", ["htp"]), soc
    return DoctorCheck("soc", title, "warn", f"not a part this project knows: {seen}",
                       "compare the SoC with `dashboard/runtime/socs.py`; pass --soc/--option soc_model for it",
                       ["htp"]), None


def skel_check(host: Host, soc: Soc | None) -> DoctorCheck:
    shipped = wheel_skels(host.wheel_dir)
    title = "the wheel ships the skel for the SoC's Hexagon architecture"
    listed = ", ".join(f"V{a}" for a in shipped) or "none"
    if soc is None or host.wheel_dir is None:
        return check("skel", title, None, f"cannot tell without {'the SoC' if soc is None else 'the wheel'}; the "
                     f"wheel ships {listed}", "", ["htp"])
    ok = soc.htp_arch in shipped
    return check("skel", title, ok, f"libQnnHtpV{soc.htp_arch}Skel.so for {soc.name}" if ok
                 else f"no skel for Hexagon V{soc.htp_arch} ({soc.name}): the wheel ships {listed}",
                 "this onnxruntime-qnn cannot run the HTP on this SoC; use a release whose wheel ships "
                 f"libQnnHtpV{soc.htp_arch}Skel.so", ["htp"])


def wheel_skels(folder: Path | None) -> list[int]:
    """Hexagon architectures the wheel ships a DSP-side skel for."""
    if folder is None or not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _SKEL.match(p.name)))


def simulator_checks(host: Host) -> list[DoctorCheck]:
    return [
        DoctorCheck("simulator", "HTP simulator", "info",
                    f"this {host.machine} host runs HTP graphs on QNN's HTP simulator: real compilation, slow "
                    "execution; no DSP, FastRPC or skel is involved", None, ["htp"]),
        check("gpu", "a QNN GPU (Adreno)", False, f"no QNN GPU on an {host.machine} host (it needs an Adreno GPU)",
              "measure the GPU on a Snapdragon device (`device install URL`, then --device); here GPU figures are "
              "predicted", ["gpu"]),
    ]


def device_checks(host: Host) -> list[DoctorCheck]:
    checks = [fastrpc_check(host)] if host.system != "Windows" else []
    checks += [cdsprpc_check(host), adsp_check(host), opencl_check(host)]
    soc, part = soc_check(host)
    return checks + [soc, skel_check(host, part)]


def platform_mode(host: Host) -> str:
    """device (a Snapdragon), simulator (x86_64) or unsupported (no wheel for this platform)."""
    if host.system in ("Linux", "Windows") and host.machine == "aarch64":
        return "device"
    if host.system == "Windows" and host.machine == "x86_64" and "Snapdragon" in host.processor_name:
        return "device"  # x64 Python emulated on Windows on Snapdragon: the wheel's arm64ec libraries
    if host.system in ("Linux", "Windows") and host.machine == "x86_64":
        return "simulator"
    return "unsupported"


def diagnose(host: Host | None = None) -> DoctorReport:
    """Every check for ``host`` (default: this one)."""
    host = host or this_host()
    mode = platform_mode(host)
    checks = [python_check(host)]
    if host.system in ("Linux", "Android"):
        checks.append(glibc_check(host))
    if mode == "unsupported":
        checks.append(check("platform", "a platform onnxruntime-qnn has a wheel for", False,
                            f"no onnxruntime-qnn wheel for {host.system} {host.machine}",
                            "run the worker on Linux aarch64 (glibc 2.34+), Windows on Snapdragon, or x86_64 for "
                            "the HTP simulator", ALL))
        return DoctorReport(mode, f"{host.system} {host.machine}", summarize(mode, checks), checks)
    checks.append(wheel_check(host))
    checks += simulator_checks(host) if mode == "simulator" else device_checks(host)
    return DoctorReport(mode, f"{host.system} {host.machine}", summarize(mode, checks), checks)


def failing(checks: list[DoctorCheck], backend: str) -> list[DoctorCheck]:
    return [c for c in checks if c.status == "fail" and backend in c.backends]


def summarize(mode: str, checks: list[DoctorCheck]) -> str:
    """One line: per backend, whether the checks let it initialize, and why not."""
    parts = []
    for backend in ALL:
        reasons = failing(checks, backend)
        if reasons:
            parts.append(f"{backend.upper()} fails: {'; '.join(c.detail for c in reasons)}")
        elif backend == "htp" and mode == "simulator":
            parts.append("HTP: HTP simulator")
        else:
            parts.append(f"{backend.upper()}: no blocker found")
    return " · ".join(parts)


@lru_cache(maxsize=1)
def _this_report() -> DoctorReport:
    return diagnose()


def explain(backend: str) -> str:
    """Why ``backend`` cannot initialize on this host, by the doctor ("" when no check failed): the
    runtime appends it to its own failure message, so every page and command that shows a backend
    failure shows the cause."""
    reasons = failing(_this_report().checks, backend)
    if not reasons:
        return ""
    return "; the device doctor finds: " + "; ".join(c.detail for c in reasons)


def run(args: NoArgs, emit) -> DoctorReport:
    """Worker handler of ``doctor``."""
    return diagnose()


# -- the dashboard's side ------------------------------------------------------------------------------
SYMBOLS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "info": "INFO"}


def ask(device, timeout: float = 120.0) -> DoctorReport:
    """The doctor's report from ``device``'s worker (an unreachable device is one ``UserError``)."""
    with device.connect() as worker:
        return worker.call("doctor", timeout=timeout)


def report_lines(report: DoctorReport) -> list[str]:
    """The report as the CLI prints it: a pass/fail line per check, the fix under each failure."""
    lines = [f"{report.platform} ({'HTP simulator' if report.mode == 'simulator' else report.mode})"]
    for item in report.checks:
        lines.append(f"  {SYMBOLS[item.status]}  {item.title}: {item.detail}")
        if item.fix:
            lines.append(f"        fix: {item.fix}")
    lines.append(report.summary)
    return lines
