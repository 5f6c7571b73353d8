"""Devices: URL parsing, and the SSH transport against a real OpenSSH server on 127.0.0.1.

The server is Debian's ``/usr/sbin/sshd`` started by the test with temporary host and user keys;
the client is the system ``ssh`` in batch mode. Over it runs the same worker as locally, including
the model upload over the protocol.
"""

from __future__ import annotations

import getpass
import os
import platform
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

import onnx
import pytest
from deadlines import DEADLINE, wait_until
from fake_workers import alive

from dashboard import __version__
from dashboard.errors import UserError
from dashboard.intake.digest import file_digest
from dashboard.intake.samples import build_cnn_classifier
from dashboard.runtime.client import PROJECT_ROOT
from dashboard.runtime.devices import Device
from dashboard.runtime.protocol import PROTOCOL_VERSION, Upload
from dashboard.timeline.model import TimelineOptions
from dashboard.timeline.remote import run_on_device

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=60)
    return path


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real sshd on a free port of 127.0.0.1 that accepts one temporary key for this user."""
    if not Path(SSHD).exists():
        if os.geteuid() == 0:
            pytest.fail(f"{SSHD} is missing; run `make system-deps` (scripts/install_system_deps.sh)")
        pytest.skip("openssh-server is not installed and installing it needs root")
    root = tmp_path_factory.mktemp("sshd")
    host_key = keygen(root / "host_key")
    user_key = keygen(root / "user_key")
    (root / "authorized_keys").write_text((root / "user_key.pub").read_text())
    (root / "known_hosts").write_text("")  # a device's known_hosts must exist (ssh appends with accept-new)
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    port = free_port()
    config = root / "sshd_config"
    config.write_text("\n".join([
        "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", "PubkeyAuthentication yes",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
        "StrictModes no", "UsePAM no", "X11Forwarding no", "AllowTcpForwarding no", "PrintMotd no",
        "LogLevel ERROR", ""]))
    log = open(root / "sshd.log", "wb")
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config), "-p", str(port)], stdout=log, stderr=log)
    def listening() -> bool:
        if server.poll() is not None:
            pytest.fail(f"sshd exited: {(root / 'sshd.log').read_text()}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, "sshd listening", interval=0.1)
    yield {"port": port, "key": user_key, "root": root}
    server.terminate()
    server.wait(timeout=10)
    log.close()


def ssh_device(sshd, *, key: Path | None = None, port: int | None = None) -> Device:
    """This checkout's worker over SSH, with its own model and context stores."""
    url = f"ssh://{getpass.getuser()}@127.0.0.1:{port or sshd['port']}"
    return Device.parse(url, identity=str(key or sshd["key"]), python=sys.executable, workdir=str(PROJECT_ROOT),
                        connect_timeout=10,
                        env={"QNN_LAB_MODEL_STORE": str(sshd["root"] / "remote_models"),
                             "QNN_LAB_CONTEXT_STORE": str(sshd["root"] / "remote_contexts")},
                        host_key="accept-new", known_hosts=str(sshd["root"] / "known_hosts"))


def test_probe_over_ssh_reports_the_device(sshd):
    device = ssh_device(sshd)
    result = device.probe()
    assert result.label == device.label
    assert result.label.startswith(f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}?python=")
    assert result.onnxruntime_qnn and result.qnn_sdk.startswith("2.")
    assert result.backends["htp"].ok is True
    assert result.backends["cpu"].ok is True
    if result.arch == "x86_64":
        assert result.backends["gpu"].ok is False
        assert result.shared_memory.ok is False and "rpcmem" in result.shared_memory.reason


def test_timeline_over_ssh_uploads_the_model_and_migrates(sshd, tmp_path):
    model = tmp_path / "uploaded_cnn.onnx"
    onnx.save(build_cnn_classifier(size=32, seed=7), model)
    digest = file_digest(model)
    uploads = []
    options = TimelineOptions(strategies=["migrate"], fp16=True, soc="sc8380xp", requests=90, rate=30.0)
    result = run_on_device(ssh_device(sshd), str(model), options, timeout=300,
                           on_event=lambda e: uploads.append(e) if isinstance(e, Upload) else None)
    stored = sshd["root"] / "remote_models" / digest / model.name
    assert result.device["model_path"] == str(stored)
    assert stored.read_bytes() == model.read_bytes()  # the bytes went over the protocol
    assert uploads and uploads[-1].sent == uploads[-1].total == model.stat().st_size
    run = result.strategies["migrate"]
    assert any(e.kind == "swap" for e in run.events)
    assert run.metrics["failed"] == 0 and run.metrics["lost"] == 0
    assert set(run.metrics["served"]) == {"cpu", "htp"}

    uploads.clear()  # a second run finds the model on the device by digest
    again = run_on_device(ssh_device(sshd), str(model), TimelineOptions(strategies=["fast"], requests=3), timeout=300,
                          on_event=lambda e: uploads.append(e) if isinstance(e, Upload) else None)
    assert not uploads and again.strategies["fast"].metrics["failed"] == 0


def test_unreachable_device_is_one_line(sshd):
    closed = free_port()
    with pytest.raises(UserError) as info:
        ssh_device(sshd, port=closed).probe()
    message = str(info.value)
    assert message.startswith(f"cannot reach ssh://{getpass.getuser()}@127.0.0.1:{closed}")
    assert "Connection refused" in message and "\n" not in message


def test_wrong_key_is_refused_without_prompting(sshd, tmp_path):
    stranger = keygen(tmp_path / "stranger")
    started = time.monotonic()
    with pytest.raises(UserError, match=r"Permission denied \(publickey"):
        ssh_device(sshd, key=stranger).probe()
    assert time.monotonic() - started < 30  # BatchMode: no password prompt to wait on


def test_device_urls(tmp_path):
    local = Device.parse("local")
    assert local.is_local and local.argv() is None and local.label == "local (this machine)"
    board = Device.parse("ssh://me@board:2222?python=/opt/lab/bin/python&workdir=/opt/my lab&env=A=1"
                         "&host_key=accept-new")
    assert (board.user, board.host, board.port, board.python) == ("me", "board", 2222, "/opt/lab/bin/python")
    argv = board.argv()
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[argv.index("-p") + 1] == "2222"
    assert "StrictHostKeyChecking=accept-new" in argv and "PermitLocalCommand=no" in argv
    assert argv[-3:-1] == ["--", "me@board"]
    login = shlex.split(argv[-1])  # the login shell (whichever it is) only hands the script to sh
    assert login[:2] == ["sh", "-c"] and len(login) == 3
    assert shlex.split(login[2]) == ["cd", "--", "/opt/my lab", "&&", "exec", "env", "A=1", "/opt/lab/bin/python",
                                     "-m", "dashboard.runtime.worker"]
    # The label is the whole address: everything that will run is visible.
    assert board.label == ("ssh://me@board:2222?python=/opt/lab/bin/python&workdir=/opt/my lab&env=A=1"
                           "&host_key=accept-new")
    assert Device.parse(board.url) == board  # the key it is stored under parses back to the same device
    alias = Device.parse("ssh://myboard")  # user and port from ~/.ssh/config
    assert alias.argv()[-2:-1] == ["myboard"] and "-p" not in alias.argv()
    windows = Device.parse("ssh://me@laptop?shell=windows&workdir=C:\\lab&python=C:\\lab\\.venv\\Scripts\\python.exe")
    assert windows.remote_command() == 'cd /d "C:\\lab" && "C:\\lab\\.venv\\Scripts\\python.exe" -m dashboard.runtime.worker'
    v6 = Device.parse("ssh://me@[fe80::1]:22")
    assert v6.host == "fe80::1" and v6.argv()[-2] == "me@fe80::1"
    key = tmp_path / "id"
    key.write_text("k")
    jumped = Device.parse(f"ssh://me@10.0.0.5?jump=gw@bastion.example.com:2200&identity={key}")
    assert jumped.argv()[jumped.argv().index("-J") + 1] == "gw@bastion.example.com:2200"
    assert jumped.argv()[jumped.argv().index("-i") + 1] == str(key)


@pytest.mark.parametrize("url, message", [
    ("tcp://board", "must be 'local'"),
    ("ssh://", "must be 'local' or ssh://"),
    ("ssh://me@board:99999", "bad port"),
    ("ssh://me@board:22x", "bad port"),
    ("ssh://me@board?turbo=1", "unknown device option 'turbo'"),
    ("ssh://me@board?shell=fish", "shell must be one of"),
    ("ssh://me@board?connect_timeout=soon", "must be an integer"),
    ("ssh://me@board?connect_timeout=0", "connect_timeout must be"),
    ("ssh://me@board?host_key=no", "host_key must be one of"),
    ("ssh://me@board?identity=/nonexistent/key", "not a file on this machine"),
    ("ssh://me@[not-v6]", "bad (IPv6|device address)"),
    ("ssh://me@999.1.1.1", "bad IPv4"),
    ("local?python=/nonexistent/python", "not an executable file"),
    ("ssh://me@board?host_key=accept-new&known_hosts=/tmp", "known_hosts '/tmp' is not a file"),
    ("ssh://me@board?known_hosts=/nonexistent-qnn-lab/known_hosts", "is not a file on this machine"),
    ("local?workdir=/tmp", "a local device takes only python"),
])
def test_bad_device_urls(url, message):
    with pytest.raises(UserError, match=message):
        Device.parse(url)


MARKER = "qnn-lab-pwned"

# Addresses that, before the strict parser, ran a command on the dashboard's own machine (ssh
# options), put an option where ssh expects the destination, or a command into the remote shell.
HOSTILE_ADDRESSES = [
    "ssh://me@127.0.0.1?option=ProxyCommand=touch {marker}",
    "ssh://me@127.0.0.1?option=PermitLocalCommand=yes&option=LocalCommand=touch {marker}",
    "ssh://me@127.0.0.1?ProxyCommand=touch {marker}",
    "ssh://me@127.0.0.1?option=KnownHostsCommand=touch {marker}",
    "ssh://me@127.0.0.1?option=Match=exec touch {marker}",
    "ssh://me@127.0.0.1?option=Include=/tmp/evil",
    "ssh://me@127.0.0.1?jump=-oProxyCommand=touch%20{marker}",
    "ssh://-oProxyCommand=touch%20{marker}@127.0.0.1",
    "ssh://me@-oProxyCommand=touch%20{marker}",
    "ssh://me@host;touch%20{marker}",
    "ssh://me@$(touch%20{marker})",
    "ssh://me@`touch%20{marker}`",
    "ssh://m%20e@127.0.0.1",
    "ssh://me@127.0.0.1%0Atouch",
    "ssh://me@127.0.0.1?python=-c",
    "ssh://me@127.0.0.1?env=A;B=1",
    "ssh://me@127.0.0.1?workdir=/tmp%0Atouch {marker}",
    "ssh://me@laptop?shell=windows&workdir=C:\\x\" %26 calc %26 \"",
    "ssh://me@laptop?shell=windows&python=py.exe|calc",
    "ssh://me@laptop?shell=windows&env=A=%25PATH%25",
    "ssh://me@laptop?shell=windows&workdir=C:\\x^&calc",
    "ssh://me@laptop?shell=windows&python=a>b",
    "ssh://me@laptop?shell=windows&python=a!b",
    "ssh://me@laptop?shell=windows&python=$(touch {marker})",  # PowerShell expands $( ) inside double quotes
    "ssh://me@laptop?shell=windows&workdir=C:\\`touch {marker}`",
]


@pytest.mark.parametrize("template", HOSTILE_ADDRESSES)
def test_hostile_device_addresses_are_refused_before_anything_runs(template, tmp_path):
    marker = tmp_path / MARKER
    with pytest.raises(UserError) as info:
        Device.parse(template.format(marker=marker)).probe(timeout=10)
    assert "\n" not in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("template", HOSTILE_ADDRESSES[:3] + HOSTILE_ADDRESSES[7:9])
def test_hostile_device_address_through_the_cli(template, tmp_path):
    marker = tmp_path / MARKER
    model = tmp_path / "cnn.onnx"
    onnx.save(build_cnn_classifier(size=32, seed=7), model)
    done = subprocess.run([sys.executable, "-m", "dashboard", "timeline", str(model), "--device",
                           template.format(marker=marker), "--requests", "1", "--strategies", "fast"],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not marker.exists()


def test_python_api_validates_too():
    with pytest.raises(UserError, match="bad host"):
        Device(host="-oProxyCommand=x")
    with pytest.raises(UserError, match="cmd.exe"):
        Device(host="laptop", shell="windows", workdir='C:\\x" & calc & "')
    with pytest.raises(UserError, match="unknown device option"):
        Device.parse("ssh://me@board", ssh_options=("ProxyCommand=x",))


# -- a worker that dies at start: ssh's (or the remote shell's) own words --------------------------------
def test_an_unresolvable_host_is_ssh_s_own_message(sshd):
    with pytest.raises(UserError) as info:
        Device.parse(f"ssh://{getpass.getuser()}@nonexistent.invalid", connect_timeout=5).probe()
    assert str(info.value) == (f"cannot reach ssh://{getpass.getuser()}@nonexistent.invalid?connect_timeout=5: "
                               "ssh: Could not resolve hostname nonexistent.invalid: Name or service not known")


def test_a_changed_host_key_is_refused_with_ssh_s_reason(sshd, tmp_path):
    key_type, key = (keygen(tmp_path / "impostor").with_suffix(".pub")).read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd['port']} {key_type} {key}\n")  # another key than the server's
    device = Device.parse(ssh_device(sshd).url, identity=str(sshd["key"]), host_key="yes", known_hosts=str(known))
    with pytest.raises(UserError, match=r": Host key verification failed\.$"):
        device.probe()


def test_a_missing_remote_python_is_named(sshd):
    device = Device.parse(ssh_device(sshd).url, identity=str(sshd["key"]), python="/nonexistent/python3",
                          host_key="accept-new", known_hosts=str(sshd["root"] / "known_hosts"))
    with pytest.raises(UserError, match=r": env: .?/nonexistent/python3.?: No such file or directory$"):
        device.probe()


def test_a_remote_python_without_this_package_is_named(sshd, tmp_path):
    # a fresh virtualenv: the test's own interpreter may have this project installed (CI installs it)
    venv.create(tmp_path / "bare", with_pip=False)
    bare = tmp_path / "bare" / "bin" / "python"
    device = Device.parse(ssh_device(sshd).url, identity=str(sshd["key"]), python=str(bare),
                          workdir=str(tmp_path), host_key="accept-new", known_hosts=str(sshd["root"] / "known_hosts"))
    with pytest.raises(UserError, match=r"No module named 'dashboard'\)?$"):
        device.probe()


# -- the remote worker's lifecycle ---------------------------------------------------------------------------
def remote_python(tmp_path: Path, program: str) -> str:
    """An executable standing in for the remote interpreter: it runs ``program`` (in the project
    folder, so ``dashboard`` imports) whatever the arguments."""
    script = tmp_path / "python-stand-in"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c {shlex.quote(program)}\n")
    script.chmod(0o755)
    return str(script)


HANGING_PROBE = ("import time, dashboard.runtime.protocol as m, dashboard.runtime.worker as w\n"
                 "def handler(args, emit):\n    emit(m.Probing('htp'))\n    time.sleep(600)\n"
                 "m.COMMANDS['probe'] = m.COMMANDS['probe']._replace(handler='__main__:handler')\nw.serve()\n")


def hanging_device(sshd, tmp_path) -> Device:
    return Device.parse(ssh_device(sshd).url, identity=str(sshd["key"]), python=remote_python(tmp_path, HANGING_PROBE),
                        workdir=str(PROJECT_ROOT), host_key="accept-new", known_hosts=str(sshd["root"] / "known_hosts"))


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_a_remote_worker_that_hangs_does_not_survive_the_client_s_timeout(sshd, tmp_path):
    from dashboard.runtime.client import WorkerTimeout

    worker = hanging_device(sshd, tmp_path).connect()
    remote_pid, ssh_pid = worker.hello.pid, worker.pid
    assert alive(remote_pid) and remote_pid != ssh_pid
    with pytest.raises(WorkerTimeout, match="did not finish 'probe' within 2 s and was stopped"):
        worker.call("probe", timeout=2)
    assert gone_within(remote_pid, DEADLINE) and not alive(ssh_pid)


def test_a_remote_worker_exits_when_its_ssh_connection_drops(sshd, tmp_path):
    worker = hanging_device(sshd, tmp_path).connect()
    remote_pid, ssh_pid = worker.hello.pid, worker.pid
    probing, failures = threading.Event(), []

    def call() -> None:
        try:
            worker.call("probe", timeout=120, on_event=lambda event: probing.set())
        except UserError as exc:
            failures.append(str(exc))

    waiting = threading.Thread(target=call)
    waiting.start()
    assert probing.wait(DEADLINE), "the remote probe never started"
    os.kill(ssh_pid, signal.SIGKILL)  # the connection drops; nobody closes the remote worker's stdin
    assert gone_within(remote_pid, DEADLINE)
    waiting.join(DEADLINE)
    assert failures and "died during 'probe' (killed by SIGKILL)" in failures[0]


def test_a_remote_worker_of_another_protocol_is_refused_with_the_way_to_fix_it(sshd, tmp_path):
    from dashboard.runtime.client import WorkerVersionError

    old = "import json, sys\nprint(json.dumps({'hello': {'protocol': 2, 'pid': 1}}), flush=True)\nsys.stdin.read()\n"
    device = Device.parse(ssh_device(sshd).url, identity=str(sshd["key"]), python=remote_python(tmp_path, old),
                          host_key="accept-new", known_hosts=str(sshd["root"] / "known_hosts"))
    with pytest.raises(WorkerVersionError) as info:
        device.probe()
    assert str(info.value) == (f"the worker on {device.label} runs qnn-backend-lab of an older release (protocol 2); "
                               f"this dashboard ({__version__}) needs protocol {PROTOCOL_VERSION}: reinstall it with "
                               f"`python -m dashboard device install {device.url}`")


# -- another interpreter on this machine ---------------------------------------------------------------------
def test_a_local_interpreter_device_runs_the_worker_from_this_checkout(tmp_path, monkeypatch):
    """``local?python=PATH``: the worker in another Python (here a second virtual environment
    that shares this one's packages but not its path), finding this package through PYTHONPATH."""
    import venv

    monkeypatch.chdir(tmp_path)  # nothing here to import `dashboard` from by accident
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(tmp_path / "arm64-venv")
    python = tmp_path / "arm64-venv" / "bin" / "python"
    site = next(p for p in sys.path if p.endswith("site-packages"))
    (tmp_path / "arm64-venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
     / "runtime-only.pth").write_text(site + "\n")
    device = Device.parse(f"local?python={python}")
    assert device.argv() == [str(python), "-m", "dashboard.runtime.worker"]
    result = device.probe()
    assert result.label == f"local?python={python}"
    assert result.python == platform.python_version() and result.backends["htp"].ok is True


def test_a_local_interpreter_device_can_be_added_on_the_devices_page_by_its_listed_name(monkeypatch):
    """A page names an interpreter the operator listed (a raw path is refused: test_origin_settings)."""
    from streamlit.testing.v1 import AppTest

    from dashboard import access

    monkeypatch.setenv(access.PYTHONS_ENV, f"arm64={sys.executable}")
    access.reload()
    try:
        at = AppTest.from_file(str(PROJECT_ROOT / "app.py"), default_timeout=60).switch_page("pages/devices.py").run()
        next(t for t in at.text_input if t.label == "Device").set_value("local?python=arm64")
        next(b for b in at.button if b.label == "Add device").click().run()
    finally:
        monkeypatch.undo()
        access.reload()
    assert not at.exception and not at.error
    assert f"local?python={sys.executable}" in at.session_state["devices"]


def test_a_profile_over_ssh_sends_the_model_and_maps_its_rows(sshd, tmp_path):
    from dashboard.profile.run import profile_model
    from dashboard.runtime.knobs import Settings

    model = tmp_path / "profiled_cnn.onnx"
    onnx.save(build_cnn_classifier(size=32, seed=11), model)
    profile = profile_model(model, Settings(backends=("htp",), fp16=True, soc="60"), runs=2, device=ssh_device(sshd))
    assert (sshd["root"] / "remote_models" / file_digest(model) / model.name).is_file()  # sent by digest
    htp = profile.backends["htp"]
    assert htp.ok and htp.runs == 2 and profile.digest == file_digest(model)
    assert any(n.inserted for n in profile.backend_nodes("htp")) and profile.backend_nodes("htp")[0].unit == "cycles"
