"""Devices: URL parsing, and the SSH transport against a real OpenSSH server on 127.0.0.1.

The server is Debian's ``/usr/sbin/sshd`` started by the test with temporary host and user keys;
the client is the system ``ssh`` in batch mode. Over it runs the same worker as locally, including
the model upload over the protocol.
"""

from __future__ import annotations

import getpass
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

from dashboard.devices import Device
from dashboard.errors import UserError
from dashboard.model_io import file_digest
from dashboard.samples import build_cnn_classifier
from dashboard.timeline import TimelineOptions, run_on_device
from dashboard.worker_client import PROJECT_ROOT

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
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
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"sshd exited: {(root / 'sshd.log').read_text()}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
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
                        ssh_options=("StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"))


def test_probe_over_ssh_reports_the_device(sshd):
    device = ssh_device(sshd)
    result = device.probe()
    assert result["label"] == f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}"
    assert result["onnxruntime_qnn"] and result["qnn_sdk"].startswith("2.")
    assert result["backends"]["htp"]["ok"] is True
    assert result["backends"]["cpu"]["ok"] is True
    if result["arch"] == "x86_64":
        assert result["backends"]["gpu"]["ok"] is False
        assert result["shared_memory"]["ok"] is False and "rpcmem" in result["shared_memory"]["reason"]


def test_timeline_over_ssh_uploads_the_model_and_migrates(sshd, tmp_path):
    model = tmp_path / "uploaded_cnn.onnx"
    onnx.save(build_cnn_classifier(size=32, seed=7), model)
    digest = file_digest(model)
    uploads = []
    options = TimelineOptions(strategies=["migrate"], fp16=True, soc="sc8380xp", requests=90, rate=30.0)
    result = run_on_device(ssh_device(sshd), str(model), options, timeout=300,
                           on_event=lambda e: uploads.append(e) if e.get("type") == "upload" else None)
    stored = sshd["root"] / "remote_models" / digest / model.name
    assert result.device["model_path"] == str(stored)
    assert stored.read_bytes() == model.read_bytes()  # the bytes went over the protocol
    assert uploads and uploads[-1]["sent"] == uploads[-1]["total"] == model.stat().st_size
    run = result.strategies["migrate"]
    assert any(e.kind == "swap" for e in run.events)
    assert run.metrics["failed"] == 0 and run.metrics["lost"] == 0
    assert set(run.metrics["served"]) == {"cpu", "htp"}

    uploads.clear()  # a second run finds the model on the device by digest
    again = run_on_device(ssh_device(sshd), str(model), TimelineOptions(strategies=["fast"], requests=3), timeout=300,
                          on_event=lambda e: uploads.append(e) if e.get("type") == "upload" else None)
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


def test_device_urls():
    local = Device.parse("local")
    assert local.is_local and local.argv() is None
    board = Device.parse("ssh://me@board:2222?python=/opt/lab/bin/python&workdir=/opt/my lab"
                         "&env=A=1&option=Compression=yes")
    assert (board.user, board.host, board.port, board.python) == ("me", "board", 2222, "/opt/lab/bin/python")
    argv = board.argv()
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[argv.index("-p") + 1] == "2222"
    assert "Compression=yes" in argv and argv[-3:-1] == ["me@board", "--"]
    assert shlex.split(argv[-1]) == ["cd", "/opt/my lab", "&&", "exec", "env", "A=1", "/opt/lab/bin/python",
                                     "-m", "dashboard.worker"]
    alias = Device.parse("ssh://myboard")  # user and port from ~/.ssh/config
    assert alias.argv()[-3] == "myboard" and "-p" not in alias.argv()
    windows = Device.parse("ssh://me@laptop?shell=windows&workdir=C:\\lab&python=C:\\lab\\.venv\\Scripts\\python.exe")
    assert windows.remote_command() == 'cd /d "C:\\lab" && "C:\\lab\\.venv\\Scripts\\python.exe" -m dashboard.worker'


@pytest.mark.parametrize("url, message", [
    ("tcp://board", "must be 'local' or ssh://"),
    ("ssh://", "must be 'local' or ssh://"),
    ("ssh://me@board:99999", "bad port"),
    ("ssh://me@board?turbo=1", "unknown device option 'turbo'"),
    ("ssh://me@board?shell=fish", "shell must be one of"),
    ("ssh://me@board?connect_timeout=soon", "must be an integer"),
])
def test_bad_device_urls(url, message):
    with pytest.raises(UserError, match=message):
        Device.parse(url)
