"""Windows on Snapdragon: the runtime side runs there, so no POSIX-only (or Windows-only) call may
appear outside ``dashboard/platform.py``; that module's pure functions are tested for both
platforms here; the worker side imports nothing the runtime-only ``requirements-worker.txt`` lacks."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard import platform

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dashboard"
PLATFORM_MODULE = PACKAGE / "platform.py"

# What breaks on one of the two platforms (absent, or with another meaning: os.kill with any signal
# terminates a Windows process; a positive exit code may be an NTSTATUS).
ONE_PLATFORM_ATTRIBUTES = {
    "os": {"pread", "pwrite", "preadv", "pwritev", "uname", "killpg", "kill", "getpgid", "setpgid", "setsid", "getsid",
           "symlink", "link", "fork", "forkpty", "openpty", "getuid", "geteuid", "getgid", "getegid", "setuid",
           "chown", "lchown", "fchown", "mkfifo", "mknod", "sysconf", "statvfs", "fstatvfs", "wait", "waitpid",
           "wait3", "wait4", "WNOHANG", "nice", "getloadavg", "sched_getaffinity", "posix_spawn", "startfile",
           "O_NOFOLLOW", "O_TEMPORARY", "O_BINARY", "O_NOINHERIT", "O_CLOEXEC", "get_blocking", "set_blocking"},
    "signal": {"SIGKILL", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE",
               "SIGSTOP", "SIGCONT", "SIGBREAK", "CTRL_C_EVENT", "CTRL_BREAK_EVENT", "Signals", "alarm", "pause",
               "setitimer", "getitimer", "pthread_kill", "pthread_sigmask", "siginterrupt", "signal"},
    "subprocess": {"CREATE_NEW_PROCESS_GROUP", "CREATE_NO_WINDOW", "DETACHED_PROCESS", "STARTUPINFO"},
}
ONE_PLATFORM_MODULES = {"fcntl", "resource", "pwd", "grp", "termios", "tty", "pty", "posix", "msvcrt", "winreg",
                        "_winapi", "winsound", "syslog", "crypt", "spwd", "nis"}
ONE_PLATFORM_KEYWORDS = {"start_new_session", "preexec_fn", "creationflags", "process_group", "pass_fds",
                         "startupinfo", "restore_signals"}
ONE_PLATFORM_METHODS = {"symlink_to", "hardlink_to"}


def one_platform_calls(source: str) -> list[str]:
    """Each use of something that exists (or behaves) on one platform only, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.attr in ONE_PLATFORM_ATTRIBUTES.get(node.value.id, ()):
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
            elif node.attr in ONE_PLATFORM_METHODS:
                found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] in ONE_PLATFORM_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module.split(".")[0] in ONE_PLATFORM_MODULES:
                found.append(f"{node.lineno}: from {module} import")
            for alias in node.names:
                if alias.name in ONE_PLATFORM_ATTRIBUTES.get(module, ()):
                    found.append(f"{node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.keyword) and node.arg in ONE_PLATFORM_KEYWORDS:
            found.append(f"{node.lineno}: {node.arg}=")
    return found


def test_no_one_platform_call_outside_the_platform_module():
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        if path != PLATFORM_MODULE:
            calls = one_platform_calls(path.read_text(encoding="utf-8"))
            if calls:
                offenders[str(path.relative_to(ROOT))] = calls
    assert not offenders, f"move these into dashboard/platform.py: {offenders}"


def test_the_scan_sees_every_kind_of_use():
    source = ("import os, fcntl\nfrom signal import SIGKILL\nimport signal\n"
              "os.killpg(1, signal.SIGKILL)\nos.pread(3, 1, 0)\nos.symlink('a', 'b')\n"
              "subprocess.Popen(['x'], start_new_session=True)\nPath('a').symlink_to('b')\n"
              "getattr(os, 'O_NOFOLLOW', 0)\n")
    found = [f.split(": ", 1)[1] for f in one_platform_calls(source)]
    assert sorted(found) == sorted(["import fcntl", "from signal import SIGKILL", "os.killpg", "signal.SIGKILL",
                                    "os.pread", "os.symlink", "start_new_session=", ".symlink_to"])
    # getattr(os, "O_NOFOLLOW", 0) is the portable spelling, and not reported


def test_the_platform_module_is_where_they_are():
    assert one_platform_calls(PLATFORM_MODULE.read_text(encoding="utf-8"))


# -- exit statuses -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("code, windows, text", [
    (-11, False, "killed by SIGSEGV"),
    (-9, False, "killed by SIGKILL"),
    (-99, False, "killed by signal 99"),
    (255, False, "exited with code 255"),
    (3221225477, True, "crashed with 0xC0000005 ACCESS_VIOLATION"),
    (-1073741819, True, "crashed with 0xC0000005 ACCESS_VIOLATION"),  # the same status read as a signed int
    (0xC00000FD, True, "crashed with 0xC00000FD STACK_OVERFLOW"),
    (0xC0000409, True, "crashed with 0xC0000409 STACK_BUFFER_OVERRUN"),
    (0xC0000135, True, "crashed with 0xC0000135 DLL_NOT_FOUND"),
    (0xC0001234, True, "crashed with 0xC0001234 (an NTSTATUS exception code)"),
    (1, True, "exited with code 1"),
    (None, False, "exit status unknown"),
])
def test_an_exit_status_is_described_as_its_platform_reports_it(code, windows, text):
    assert platform.describe_exit(code, windows=windows) == text


# -- files -----------------------------------------------------------------------------------------------
def test_the_capture_file_reads_without_moving_the_writer():
    """What ``os.pread`` did for the native log capture: read what was written while the writer
    keeps appending at its own offset."""
    writer, reader = platform.open_twice()
    try:
        os.write(writer, b"first line\n")
        assert platform.read_at(reader, 0, 11) == b"first line\n"
        os.write(writer, b"second\n")  # lands after the first, not over it
        assert platform.read_at(reader, 11, 7) == b"second\n"
        assert platform.read_at(reader, 0, 100) == b"first line\nsecond\n"
    finally:
        os.close(writer)
        os.close(reader)


def test_the_capture_file_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    writer, reader = platform.open_twice()
    os.close(writer)
    os.close(reader)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "O_TMPFILE"), reason="Linux's unnamed files only")
def test_the_capture_file_never_has_a_name_a_sudden_exit_could_leave(tmp_path, monkeypatch):
    """A worker ends at any instant (its watchdog's ``os._exit``, a SIGKILL): had the file a name
    between its creation and its unlinking, an exit in between would leave it in the temp folder.
    Checked at every ``os.open`` the call makes: the folder stays empty throughout."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert tempfile.gettempdir() == str(tmp_path)  # (its own probe of the folder opens a file too)
    real_open, seen = os.open, []

    def checking_open(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        return fd

    monkeypatch.setattr(os, "open", checking_open)
    writer, reader = platform.open_twice()
    monkeypatch.setattr(os, "open", real_open)
    try:
        os.write(writer, b"line\n")
        assert platform.read_at(reader, 0, 5) == b"line\n"
    finally:
        os.close(writer)
        os.close(reader)
    assert seen == [[], []]


def test_native_log_capture_still_sees_the_runtime_s_own_message():
    from dashboard.runtime.qnn import captured_native_log

    with captured_native_log() as lines:
        os.write(2, b"2026-01-01 [E:onnxruntime:, session.cc:1] QNN said no\n")
    assert lines == ["QNN said no"]


def test_discarded_weights_go_nowhere_where_the_platform_allows(tmp_path):
    target = tmp_path / "optimized.onnx.data"
    if platform.discard_into(str(target)):
        target.write_bytes(b"x" * 1000)
        assert os.path.realpath(target) == os.devnull
    else:
        assert not target.exists()


# -- the worker side's dependencies ------------------------------------------------------------------------
WORKER_MODULES = ["dashboard.runtime.worker", "dashboard.runtime.qnn", "dashboard.partition.measure",
                  "dashboard.timeline.runner", "dashboard.runtime.protocol",
                  "dashboard.partition.protocol", "dashboard.timeline.protocol"]
BLOCKER = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is not in requirements-worker.txt")
sys.meta_path.insert(0, Refuse())
import importlib
for module in {modules!r}:
    importlib.import_module(module)
print("imported")
"""


def requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[=<>!~\[ ]", line)[0].lower().replace("-", "_"))
    return names


def test_the_worker_side_imports_only_the_runtime_requirements():
    """``requirements-worker.txt`` is what a native ARM64 Python on Windows can install (no
    pyarrow wheel there, so no Streamlit): the worker side must import without the rest."""
    dashboard_only = requirement_names(ROOT / "requirements.txt") - requirement_names(ROOT / "requirements-worker.txt")
    assert {"streamlit", "pandas", "plotly", "netron"} <= dashboard_only
    script = BLOCKER.format(blocked=sorted(dashboard_only | {"pyarrow"}), modules=WORKER_MODULES)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.strip() == "imported", done.stderr[-2000:]


def test_worker_requirements_pin_what_the_dashboard_pins():
    def pins(path: Path) -> dict[str, str]:
        lines = path.read_text().splitlines()
        return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))

    worker, dashboard = pins(ROOT / "requirements-worker.txt"), pins(ROOT / "requirements.txt")
    assert set(worker) == {"onnxruntime-qnn", "onnxruntime", "onnx", "numpy"}
    assert all(dashboard[name] == version for name, version in worker.items())
