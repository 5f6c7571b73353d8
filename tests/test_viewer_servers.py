"""Netron's viewer servers follow the rules for every server the dashboard starts: loopback only,
a per-server token in the URL (anything without it is refused), one model per server, and the
least recently used server stopped once more than ``MAX_SERVERS`` models were viewed."""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request

import onnx
import pytest

from dashboard.intake.digest import file_digest
from dashboard.intake.samples import sample_path
from dashboard.render import netron as netron_view


@pytest.fixture
def models(tmp_path):
    """``MAX_SERVERS + 1`` distinct model files (same graph, different doc strings)."""
    paths = []
    for i in range(netron_view.MAX_SERVERS + 1):
        model = onnx.load(sample_path("cnn_classifier.onnx"))
        model.doc_string = f"variant {i}"
        paths.append(tmp_path / f"m{i}.onnx")
        onnx.save(model, paths[-1])
    yield paths
    netron_view.stop_all()


def get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.read()


def refused(port: int, path: str) -> int:
    with pytest.raises(urllib.error.HTTPError) as error:
        get(port, path)
    return error.value.code


def listening_addresses(port: int) -> set[str]:
    """Local addresses listening on ``port``, as the kernel reports them (``ss -ltn``)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return {re.sub(r":\d+$", "", line.split()[3]) for line in out.splitlines() if line.strip()}


def test_netron_listens_on_loopback_only(models):
    server = netron_view.serve(str(models[0]), file_digest(models[0]))
    assert server.address == ("127.0.0.1", server.port)
    assert listening_addresses(server.port) == {"127.0.0.1"}


def test_netron_refuses_requests_without_the_token(models):
    server = netron_view.serve(str(models[0]), file_digest(models[0]))
    token = server.path.strip("/")
    assert len(token) >= 32
    assert get(server.port, f"{server.path}data/model.onnx") == models[0].read_bytes()
    last = "y" if token.endswith("x") else "x"  # a token one character off, whatever its last one
    near = [f"/{token[:-1]}{last}/data/model.onnx", f"/x{token}/data/model.onnx"]
    if token.upper() != token:
        near.append(f"/{token.upper()}/")
    for path in ("/", "/index.html", "/data/model.onnx", "/index.js", *near):
        assert refused(server.port, path) == 404, path
    for bad in ("data/m1.onnx", "../conftest.py", "__init__.py", "server.py", "%2e%2e/netron.py"):
        assert refused(server.port, f"{server.path}{bad}") == 404, bad


def test_two_models_on_two_servers_never_cross(models):
    first, second = (netron_view.serve(str(p), file_digest(p)) for p in models[:2])
    assert first.port != second.port and first.path != second.path
    assert get(first.port, f"{first.path}data/model.onnx") == models[0].read_bytes()
    assert get(second.port, f"{second.path}data/model.onnx") == models[1].read_bytes()
    assert refused(first.port, f"{second.path}data/model.onnx") == 404  # a token opens its own server only
    assert refused(second.port, f"{first.path}data/model.onnx") == 404


def test_each_model_gets_its_own_server_and_the_oldest_is_stopped(models):
    servers = [netron_view.serve(str(p), file_digest(p)) for p in models]
    assert len({s.port for s in servers}) == len(servers)
    for server, path in zip(servers[1:], models[1:]):
        assert get(server.port, f"{server.path}data/model.onnx") == path.read_bytes()
    with pytest.raises(OSError):  # the least recently used one was stopped
        get(servers[0].port, servers[0].path)
    assert not listening_addresses(servers[0].port)
    again = netron_view.serve(str(models[-1]), file_digest(models[-1]))
    assert (again.port, again.path) == (servers[-1].port, servers[-1].path)


def test_tunnel_command_names_the_port_and_the_server():
    assert netron_view.tunnel_command(40123, "http://lab.example:8501/") == "ssh -N -L 40123:127.0.0.1:40123 lab.example"
    assert netron_view.tunnel_command(40123, "http://localhost:8501/") == "ssh -N -L 40123:127.0.0.1:40123 SERVER"
