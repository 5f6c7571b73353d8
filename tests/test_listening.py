"""The dashboard listens on loopback only, by default (``.streamlit/config.toml``): checked on a
running server with ``ss``, and by connecting to the machine's other addresses."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess

import pytest
from e2e_helpers import running_app


def listening(pid: int) -> list[str]:
    """Local addresses of the TCP sockets process ``pid`` listens on (``ss -ltnp``)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True, timeout=60).stdout
    return [line.split()[3] for line in out.splitlines() if re.search(rf"pid={pid}\b", line)]


def other_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=60).stdout
    found = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
    return [a for a in found if not a.startswith("127.")]


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
def test_the_dashboard_listens_on_loopback_only():
    with running_app("--model", "samples/cnn_classifier.onnx") as app:
        addresses = listening(app.process.pid)
        assert addresses, "the server listens somewhere"
        assert all(a.rsplit(":", 1)[0] in ("127.0.0.1", "[::1]") for a in addresses), addresses
        assert all(a.endswith(f":{app.port}") for a in addresses)
        for address in other_addresses():
            with socket.socket() as sock:
                sock.settimeout(2)
                assert sock.connect_ex((address, app.port)) != 0, f"reachable on {address}"
