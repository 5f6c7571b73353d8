"""Only the person who started the dashboard can drive it: the operator's record
(``dashboard.access``) and the web gate (``dashboard.views.gate``), tried as an attacker would on
a real server: without the token, from another OS user, from a rebound DNS name, from a page on
another loopback port, with a foreign Origin (which must not make Streamlit look the machine's
external IP up over the internet)."""

from __future__ import annotations

import base64
import contextlib
import html
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from e2e_helpers import ROOT, free_port, launch_chromium, require_chromium, running_app, stop_process

from dashboard import access
from dashboard.errors import UserError
from dashboard.views.gate import same_origin, same_origin_path

PASSWORD = "correct horse battery staple"
SAMPLE = "samples/cnn_classifier.onnx"


# -- the operator's record --------------------------------------------------------------------------
def private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_the_config_file_and_the_environment_make_one_record(tmp_path):
    config = private_file(tmp_path / "server.toml", '[auth]\ntoken = "file-token-0123456789"\n'
                          '[server]\nallowed_hosts = ["dash.lab.example"]\n'
                          '[devices]\npythons = { arm64 = "/opt/py/bin/python3" }\nknown_hosts = ["/x/kh"]\n')
    record = access.load({access.CONFIG_ENV: str(config)})
    assert record.token == "file-token-0123456789"
    assert record.python_path("arm64") == "/opt/py/bin/python3" and record.python_path("x86") is None
    assert record.host_allowed("dash.lab.example:8501") and record.host_allowed("[::1]:8501")
    assert not record.host_allowed("evil.example:8501") and not record.host_allowed("127.0.0.1:x")
    over = access.load({access.CONFIG_ENV: str(config), access.TOKEN_ENV: "env-token-0123456789",
                        access.ALLOWED_HOSTS_ENV: "*.corp.example"})
    assert over.token == "env-token-0123456789" and over.host_allowed("a.corp.example")
    assert not over.host_allowed("dash.lab.example") and "environment" in over.source


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_config_others_may_write_is_refused(tmp_path, mode):
    config = private_file(tmp_path / "server.toml", '[auth]\ntoken = "file-token-0123456789"\n', mode)
    with pytest.raises(UserError, match="writable by others"):
        access.load({access.CONFIG_ENV: str(config)})


@pytest.mark.parametrize("text, match", [
    ('[auth]\ntoken = "short"\n', "at least 16"),
    ('[auth]\npassword_hash = "plain"\n', "scrypt"),
    ('[auth]\nbackend_path = "/tmp/x.so"\n', "unknown key"),
    ('[extras]\nx = 1\n', "unknown section"),
    ('[devices]\npythons = { arm64 = "relative/python" }\n', "absolute path"),
    ('[server]\nallowed_hosts = ["evil host"]\n', "not a host name"),
    ("[auth\n", "cannot read"),
])
def test_a_bad_config_is_one_line(tmp_path, text, match):
    config = private_file(tmp_path / "server.toml", text)
    with pytest.raises(UserError, match=match) as caught:
        access.load({access.CONFIG_ENV: str(config)})
    assert "\n" not in str(caught.value)


def test_an_explicit_config_that_is_missing_is_an_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        access.load({access.CONFIG_ENV: str(tmp_path / "absent.toml")})


def test_password_hashes_verify_and_differ_by_salt():
    first, second = access.hash_password(PASSWORD), access.hash_password(PASSWORD)
    assert first != second and first.startswith("scrypt$")
    assert access.password_matches(PASSWORD, first) and access.password_matches(PASSWORD, second)
    assert not access.password_matches(PASSWORD + "!", first) and not access.password_matches("", first)


def test_hash_password_command(tmp_path):
    run = subprocess.run([sys.executable, "-m", "dashboard", "hash-password"], input=PASSWORD + "\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr
    assert access.password_matches(PASSWORD, run.stdout.strip())
    short = subprocess.run([sys.executable, "-m", "dashboard", "hash-password"], input="abc\n",
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert short.returncode == 2 and short.stderr.count("\n") == 1 and "Traceback" not in short.stderr


@pytest.mark.parametrize("origin, host, same", [
    ("http://127.0.0.1:8501", "127.0.0.1:8501", True),
    ("http://localhost", "localhost:80", True),
    ("http://127.0.0.1:9999", "127.0.0.1:8501", False),
    ("http://evil.example:8501", "127.0.0.1:8501", False),
    ("https://127.0.0.1:8501", "127.0.0.1:8501", False),  # the scheme counts: this server speaks http
    ("null", "127.0.0.1:8501", False),
    ("file://", "127.0.0.1:8501", False),
    ("http://[::1", "[::1]:8501", False),  # malformed: refused, never a server error
    ("http://127.0.0.1:8501\x00", "127.0.0.1:8501", False),
])
def test_same_origin(origin, host, same):
    assert same_origin(origin, host) is same


def test_same_origin_is_the_schemes_too():
    """Behind TLS (the server's own, or a proxy's ``X-Forwarded-Proto`` that uvicorn trusts) only an
    ``https`` origin is this server's, and the default port follows the scheme."""
    assert same_origin("https://dash.lab.example", "dash.lab.example", "https")
    assert same_origin("https://dash.lab.example:443", "dash.lab.example", "https")
    assert not same_origin("http://dash.lab.example", "dash.lab.example", "https")
    assert not same_origin("http://dash.lab.example:443", "dash.lab.example:443", "https")
    assert not same_origin("ws://127.0.0.1:8501", "127.0.0.1:8501")


@pytest.mark.parametrize("target, kept", [
    ("/partitions?model=sample:a.onnx&fp16=off", "/partitions?model=sample:a.onnx&fp16=off"),
    ("/", "/"), ("/a b/é", "/a%20b/%C3%A9"),  # a header stays ASCII
    ("//evil.example/?token=T", None), ("/\\evil.example?token=T", None), ("/x\\y", None),
    ("/\t/evil.example", None), ("/devices\r\nSet-Cookie: x=1", None), ("/\x7f", None),
    ("https://evil.example/", None), ("evil", None), ("", None),
])
def test_a_redirect_stays_on_this_server(target, kept):
    assert same_origin_path(target) == kept


def test_the_start_names_what_server_allowed_hosts_lacks():
    """Streamlit refuses a websocket whose Host its ``server.allowedHosts`` lacks: the project's
    config covers each start's own name with ``*.localhost``, and a narrower list is named."""
    import tomllib

    from dashboard.views.gate import unlisted_hosts

    keeper = access.Gatekeeper(access.OperatorConfig(allowed_hosts=("dash.lab.example",)), "t" * 20, False, 8501,
                               "c", session_host=access.session_host_name(8501))
    shipped = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]["allowedHosts"]
    assert unlisted_hosts(keeper, shipped) == ["dash.lab.example"]
    assert unlisted_hosts(keeper, [*shipped, "dash.lab.example"]) == [] and unlisted_hosts(keeper, ["*"]) == []
    assert unlisted_hosts(keeper, ["localhost", "127.0.0.1"]) == [keeper.session_host, "dash.lab.example"]


# -- a real server ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gated():
    """One dashboard with a token and a password, shared by this module's server tests."""
    env = {"QNN_LAB_TOKEN": secrets.token_urlsafe(24), "QNN_LAB_PASSWORD_HASH": access.hash_password(PASSWORD)}
    with running_app("--model", SAMPLE, env=env) as app:
        yield app


def request(app, path: str, headers: dict | None = None, method: str = "GET", body: bytes | None = None):
    """One request to the app (no redirect following), under its own host name unless ``headers``
    name another: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Host": own_host(app), **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def own_host(app) -> str:
    return f"{app.session_host}:{app.port}"


def own_origin(app) -> str:
    return f"http://{app.session_host}:{app.port}"


def sign_in(app) -> str:
    """The session cookie the gate hands out for the token: ``name=value``."""
    status, headers, _ = request(app, f"/?token={app.token}")
    assert status == 303, status
    return headers["set-cookie"].split(";", 1)[0]


def test_without_the_token_nothing_is_served(gated):
    for path in ("/", "/overview", "/_stcore/host-config", "/static/", "/component/x/index.html", "/media/x.png",
                 "/_stcore/upload_file/x/y"):
        status, headers, body = request(gated, path)
        assert status == 401, (path, status)
        assert b"stApp" not in body and b"<script" not in body.lower(), path
    assert request(gated, "/_stcore/health")[0] == 200  # start-up checks: "ok" and nothing else


def test_only_the_health_check_is_open(gated):
    """``/healthz`` is no route of the app: Streamlit would answer it with its index page."""
    status, _, body = request(gated, "/_stcore/health")
    assert status == 200 and body.strip() == b"ok"
    for path in ("/healthz", "/_stcore/health/", "/_stcore/healthz", "/_stcore/script-health-check"):
        status, _, body = request(gated, path)
        assert status == 401 and b"<script" not in body.lower(), (path, status)


@pytest.mark.parametrize("path", ["//evil.example/?token={token}", "/\\evil.example?token={token}",
                                  "/%2F%2Fevil.example/?token={token}", "/%5Cevil.example/?token={token}",
                                  "/%09/evil.example/?token={token}"])
def test_the_token_never_sends_the_browser_off_site(gated, path):
    status, headers, _ = request(gated, path.format(token=gated.token))
    assert status == 303 and headers["location"] == "/", headers.get("location")
    assert "HttpOnly" in headers["set-cookie"]


@pytest.mark.parametrize("target", ["//evil.example/", "/\\evil.example", "/devices\nSet-Cookie: x=1",
                                    "/devices\r\n", "/\t/evil.example", "http://evil.example/"])
def test_the_sign_in_forms_next_stays_on_this_server(gated, target):
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": own_origin(gated)}
    form = urlencode({"secret": PASSWORD, "next": target}).encode()
    status, reply, _ = request(gated, "/_qnn_lab/sign-in", headers, "POST", form)
    assert status == 303 and reply["location"] == "/", reply.get("location")
    status, _, body = request(gated, "/x", {"Cookie": reply["set-cookie"].split(";", 1)[0]})
    assert status == 200  # signed in all the same
    assert "Traceback" not in gated.log_text()


def test_the_token_becomes_a_private_session_cookie(gated):
    status, headers, _ = request(gated, f"/classifier?token={gated.token}&x=1")
    assert status == 303 and headers["location"] == "/classifier?x=1"  # the token leaves the URL
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and gated.token not in cookie
    status, _, body = request(gated, "/", {"Cookie": cookie.split(";", 1)[0]})
    assert status == 200 and b"<script" in body.lower()  # Streamlit's own page now
    assert request(gated, "/", {"Cookie": "qnn-lab-%d=forged" % gated.port})[0] == 401
    off_by_one = gated.token[:-1] + ("y" if gated.token.endswith("x") else "x")
    assert request(gated, f"/?token={off_by_one}")[0] == 403


def test_the_sign_in_form_takes_the_password(gated):
    form = lambda secret: f"secret={secret}&next=/devices".encode()  # noqa: E731
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": own_origin(gated)}
    status, reply, _ = request(gated, "/_qnn_lab/sign-in", headers, "POST", form(PASSWORD.replace(" ", "+")))
    assert status == 303 and reply["location"] == "/devices" and "HttpOnly" in reply["set-cookie"]
    assert request(gated, "/_qnn_lab/sign-in", headers, "POST", form("wrong"))[0] == 403
    # A form posted from another site, or sent to another site after sign-in, gets nothing.
    assert request(gated, "/_qnn_lab/sign-in", {**headers, "Origin": "http://evil.example"}, "POST",
                   form(PASSWORD.replace(" ", "+")))[0] == 403
    evil_next = f"secret={PASSWORD.replace(' ', '+')}&next=//evil.example/".encode()
    assert request(gated, "/_qnn_lab/sign-in", headers, "POST", evil_next)[1]["location"] == "/"


LINK = "/partitions?model=sample:text_encoder.onnx&fp16=off&dim.sequence_length=64"


def _link_params(location: str) -> tuple[str, list[tuple[str, str]]]:
    parts = urlsplit(location)
    assert not parts.scheme and not parts.netloc, location  # a path on this server, never another site
    return parts.path, parse_qsl(parts.query, keep_blank_values=True)


def test_signing_in_keeps_the_links_page_and_its_parameters(gated):
    """A signed-out user opens a link with a model and its settings: the sign-in page carries it,
    and both the password form and the token land on that page with those parameters (and the
    form's target stays a path on this server)."""
    status, page_headers, body = request(gated, LINK)
    assert status == 401
    # a browser posts a form from a page under ``no-referrer`` with ``Origin: null``, which the gate refuses
    assert page_headers["referrer-policy"] != "no-referrer"
    [carried] = re.findall(r'name="next" value="([^"]*)"', body.decode())
    assert html.unescape(carried) == LINK
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": own_origin(gated)}
    form = urlencode({"secret": PASSWORD, "next": html.unescape(carried)}).encode()  # what a browser posts
    status, reply, _ = request(gated, "/_qnn_lab/sign-in", headers, "POST", form)
    assert status == 303 and _link_params(reply["location"]) == _link_params(LINK)
    cookie = reply["set-cookie"].split(";", 1)[0]
    assert request(gated, reply["location"], {"Cookie": cookie})[0] == 200
    status, reply, _ = request(gated, f"{LINK}&token={gated.token}")
    assert status == 303 and _link_params(reply["location"]) == _link_params(LINK)
    for foreign in ("https://evil.example/partitions?fp16=off", "//evil.example/partitions?fp16=off",
                    "/\\evil.example/partitions"):
        form = urlencode({"secret": PASSWORD, "next": foreign}).encode()
        assert request(gated, "/_qnn_lab/sign-in", headers, "POST", form)[1]["location"] == "/", foreign


def test_signing_in_from_a_link_in_a_browser_opens_its_page_with_its_settings(gated):
    """The same in Chromium: the link, the sign-in page, the password, then the Partitions page
    with the link's sample and settings (fp16 off, a sequence of 64) in its fields and its address
    bar. (Before, the browser posted the form with ``Origin: null`` and the gate refused it.)"""
    require_chromium()
    from playwright.sync_api import sync_playwright

    from e2e_helpers import wait_for_idle

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{gated.url.rstrip('/')}{LINK}")
            page.fill("#secret", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/partitions\?"), timeout=60_000)
            wait_for_idle(page)
            landed = urlsplit(page.url)
            assert landed.hostname == gated.session_host, page.url  # through the hand-over to its own name
            path, query = _link_params(f"{landed.path}?{landed.query}")
            assert path == "/partitions" and ("model", "sample:text_encoder.onnx") in query, page.url
            assert ("fp16", "off") in query and ("dim.sequence_length", "64") in query, page.url
            assert page.get_by_role("heading", name="Partitions").count()
            assert not page.get_by_role("switch", name="HTP fp16 precision").is_checked()
            assert page.get_by_label("sequence_length", exact=True).input_value() == "64"
        finally:
            browser.close()


@pytest.mark.parametrize("headers", [
    {"Origin": "http://[::1"}, {"Host": "[::1"}, {"Host": "127.0.0.1:99999x"}, {"Cookie": 'qnn-lab-1="\\'},
    {"Cookie": "x" * 6000},
])
def test_malformed_headers_are_refused_not_a_server_error(gated, headers):
    status, _, _ = request(gated, "/", headers)
    assert status in (400, 401, 403, 421), status
    assert "Traceback" not in gated.log_text()


def test_a_rebound_host_name_gets_nothing_even_with_the_token(gated):
    cookie = sign_in(gated)
    for headers in ({"Host": f"evil.example:{gated.port}", "Cookie": cookie}, {"Host": "evil.example"}):
        status, _, body = request(gated, f"/?token={gated.token}", headers)
        assert status == 421 and gated.token.encode() not in body


def websocket_status(port: int, headers: dict[str, str]) -> int:
    """The HTTP status of a websocket handshake to Streamlit's stream (101: opened)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET /_stcore/stream HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: streamlit",
             *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        reply = sock.recv(4096).decode("latin-1")
    return int(reply.split(" ", 2)[1])


def test_websockets_need_the_cookie_and_the_very_origin(gated):
    cookie = sign_in(gated)
    own = {"Host": own_host(gated), "Origin": own_origin(gated)}
    assert websocket_status(gated.port, {**own, "Cookie": cookie}) == 101
    assert websocket_status(gated.port, own) == 403  # no cookie
    other_port = {**own, "Origin": f"http://{gated.session_host}:{gated.port + 1}", "Cookie": cookie}
    assert websocket_status(gated.port, other_port) == 403  # a page on another loopback port
    assert websocket_status(gated.port, {**own, "Origin": "http://evil.example", "Cookie": cookie}) == 403
    https = {**own, "Origin": f"https://{gated.session_host}:{gated.port}", "Cookie": cookie}
    assert websocket_status(gated.port, https) == 403  # another scheme is another origin
    assert websocket_status(gated.port, {**own, "Host": "evil.example", "Origin": "http://evil.example",
                                         "Cookie": cookie}) == 403


def test_a_plain_loopback_name_only_leads_to_the_dashboards_own_name(gated):
    """Under 127.0.0.1 or localhost (names every server on the machine shares, with their cookies)
    the gate sets no cookie and takes none: the token, or a password that becomes a one-time
    ticket, sends the browser to this start's own name, and nothing else says that name."""
    own = gated.session_host
    assert re.fullmatch(rf"qnn-{gated.port}-[0-9a-f]{{20}}\.localhost", own)
    assert f"open http://{own}:{gated.port}/?token=" in gated.log_text()  # the printed URL
    for name in ("127.0.0.1", "localhost", "[::1]"):
        plain = {"Host": f"{name}:{gated.port}"}
        status, headers, _ = request(gated, f"/classifier?token={gated.token}&x=1", plain)
        assert status == 303 and "set-cookie" not in headers, (name, status)
        assert headers["location"] == f"http://{own}:{gated.port}/classifier?token={gated.token}&x=1"
        status, headers, body = request(gated, "/", plain)
        assert status == 401 and own.encode() not in body and "set-cookie" not in headers
        status, _, body = request(gated, f"/?token={gated.token}x", plain)
        assert status == 403 and own.encode() not in body
        assert request(gated, "/_stcore/health", plain)[0] == 200
    cookie = sign_in(gated)
    status, _, body = request(gated, "/", {"Host": f"127.0.0.1:{gated.port}", "Cookie": cookie})
    assert status == 401 and b"<script" not in body.lower()  # the cookie counts under the own name only
    # The password typed under 127.0.0.1: a one-time ticket to the own name, not a cookie.
    form = urlencode({"secret": PASSWORD, "next": "/devices?x=1"}).encode()
    plain = {"Host": f"127.0.0.1:{gated.port}", "Origin": f"http://127.0.0.1:{gated.port}",
             "Content-Type": "application/x-www-form-urlencoded"}
    status, headers, _ = request(gated, "/_qnn_lab/sign-in", plain, "POST", form)
    assert status == 303 and "set-cookie" not in headers
    target = urlsplit(headers["location"])
    assert (target.hostname, target.port, target.path) == (own, gated.port, "/devices")
    ticket = dict(parse_qsl(target.query))["token"]
    assert ticket not in (gated.token, PASSWORD) and dict(parse_qsl(target.query))["x"] == "1"
    status, headers, _ = request(gated, f"{target.path}?{target.query}")
    assert status == 303 and headers["location"] == "/devices?x=1" and "HttpOnly" in headers["set-cookie"]
    assert request(gated, f"/?token={ticket}")[0] == 403  # once only


RECORDER_SCRIPT = r"""
import http.server, json, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print(json.dumps([self.headers.get("Host"), self.headers.get("Cookie") or ""]), flush=True)
        body = b"<!doctype html><p>another server</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class _Recorder:
    """An HTTP server that another user of this machine runs on another loopback port (a second OS
    user when the test may make one, else a second process): it answers every request and records
    the Host and Cookie headers it was sent, one line each, before it answers."""

    def __init__(self, user: str | None) -> None:
        python = "/usr/bin/python3" if user and Path("/usr/bin/python3").exists() else sys.executable
        command = [python, "-c", RECORDER_SCRIPT]
        if user:
            command = ["runuser", "-u", user, "--", *command]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd="/")
        self.port = int(self.process.stdout.readline())

    def close(self) -> list[tuple[str, str]]:
        """Stop it: what it was sent, (Host, Cookie) per request."""
        stop_process(self.process)
        return [tuple(json.loads(line)) for line in self.process.stdout.read().splitlines() if line]


@contextlib.contextmanager
def second_os_user() -> Iterator[str | None]:
    """A second OS user made for the block and removed after it, or None where this test may not
    make one (root, useradd and runuser needed). Its name is new each time: two test runs at once
    on one machine must not remove each other's user."""
    if os.name == "nt" or os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        yield None
        return
    name = f"qbl-x{uuid.uuid4().hex[:10]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True, capture_output=True,
                   timeout=60)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)


@pytest.fixture
def other_user():
    """A second OS user when this test may make one, else None (a second process stands in)."""
    with second_os_user() as name:
        yield name


def test_a_signed_in_browser_sends_the_session_cookie_to_no_other_server(gated, other_user):
    """Chromium opens the printed URL's way in (the token under 127.0.0.1, as before), lands on the
    dashboard under its own ``*.localhost`` name (Chromium resolves it to loopback itself) and
    draws it; then it visits another user's server on another port of 127.0.0.1 and of localhost,
    which records what it is sent: no session cookie. The cookie itself, presented under another
    host name or from another origin, opens no websocket. (Before, the cookie was 127.0.0.1's, so
    every port of 127.0.0.1 received it, and with it the websocket.)"""
    require_chromium()
    from playwright.sync_api import sync_playwright

    own = gated.session_host
    other = _Recorder(other_user)
    seen: list[tuple[str, str]] = []
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                context = browser.new_context()
                page = context.new_page()
                gated.open(page)
                page.wait_for_selector('[data-testid="stApp"]', timeout=90_000)
                assert urlsplit(page.url).hostname == own, page.url
                [session] = [c for c in context.cookies() if c["name"] == f"qnn-lab-{gated.port}"]
                assert session["domain"] == own and session["httpOnly"] and session["sameSite"] == "Strict"
                for name in ("127.0.0.1", "localhost"):
                    page.goto(f"http://{name}:{other.port}/page")
                    page.get_by_text("another server").wait_for()
                # The recorder does see cookies: under the dashboard's own name (which only the
                # operator's browser knows) the browser sends it to every port, as to Netron's.
                page.goto(f"http://{own}:{other.port}/control")
                page.get_by_text("another server").wait_for()
            finally:
                browser.close()
    finally:
        seen = other.close()
    by_host = {host.rsplit(":", 1)[0]: cookie for host, cookie in seen}
    assert set(by_host) >= {"127.0.0.1", "localhost", own}, seen
    assert "qnn-lab-" not in by_host["127.0.0.1"] and "qnn-lab-" not in by_host["localhost"], seen
    assert session["value"] in by_host[own]  # the control
    cookie = f"{session['name']}={session['value']}"
    own_ws = {"Host": own_host(gated), "Origin": own_origin(gated), "Cookie": cookie}
    assert websocket_status(gated.port, own_ws) == 101
    for name in ("127.0.0.1", "localhost"):
        elsewhere = {"Host": f"{name}:{gated.port}", "Origin": f"http://{name}:{gated.port}", "Cookie": cookie}
        assert websocket_status(gated.port, elsewhere) == 403, name
    for origin in (f"http://127.0.0.1:{other.port}", f"http://{own}:{other.port}", f"http://localhost:{gated.port}"):
        assert websocket_status(gated.port, {**own_ws, "Origin": origin}) == 403, origin


class _Listener:
    """A TCP listener on loopback that counts who connects (an HTTP proxy nobody should use)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.requests.append(conn.recv(1024))
                except OSError:
                    self.requests.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def test_a_foreign_origin_makes_no_outside_request(tmp_path):
    """Streamlit's own origin check looks the machine's external IP up (checkip.amazonaws.com) for
    an origin it does not know; the gate refuses such a request before that check runs. The
    server's outside requests go to a proxy of the test's (``HTTP_PROXY``), which counts them."""
    listener = _Listener()
    try:
        proxy = f"http://127.0.0.1:{listener.port}"
        probe = subprocess.run([sys.executable, "-c", "import requests; requests.get('http://example.invalid/', "
                                "timeout=3)"], env={**os.environ, "HTTP_PROXY": proxy, "NO_PROXY": ""},
                               capture_output=True, timeout=60)
        deadline = time.monotonic() + 10
        while not listener.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listener.requests, f"the counting proxy saw nothing: {probe.stderr[-300:]!r}"  # it does count
        listener.requests.clear()
        env = {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy, "NO_PROXY": ""}
        with running_app("--model", SAMPLE, env=env) as app:
            cookie = sign_in(app)
            for origin in ("http://evil.example", f"http://{app.session_host}:{app.port + 1}", "http://10.1.2.3:8501"):
                headers = {"Host": own_host(app), "Origin": origin, "Cookie": cookie}
                assert websocket_status(app.port, headers) == 403
                assert request(app, "/_stcore/host-config", headers)[0] == 403
            time.sleep(2)  # Streamlit's lookup would have started by now (it times out after 1 s)
        assert listener.requests == []
    finally:
        listener.close()


def test_no_page_makes_the_browser_request_anything_outside(tmp_path):
    """Every page, opened in Chromium as a user would (from the sidebar links), with each request
    that leaves this machine refused and counted: the pages' icons, fonts and the tab's icon
    come from the app (a ``:material/...:`` page icon made one fetch from fonts.gstatic.com per
    page). The tab icon's address is checked too, for browsers that load it later or not at all."""
    from playwright.sync_api import sync_playwright

    from e2e_helpers import open_page, wait_for_idle
    from dashboard.views.frame import PAGES

    require_chromium()
    outside: list[str] = []
    own: list[str] = []  # the dashboard's own host name, once it has started

    def route(handler_route):
        url = handler_route.request.url
        if url.startswith(("data:", "blob:", "about:")) or urlsplit(url).hostname in ("127.0.0.1", *own):
            handler_route.continue_()
        else:
            outside.append(url)
            handler_route.abort()

    with running_app("--model", SAMPLE) as app, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page()
            own.append(app.session_host)
            page.route("**/*", route)
            app.open(page)
            wait_for_idle(page)
            icons = {}
            for spec in PAGES:
                open_page(page, spec.title)
                icons[spec.title] = page.evaluate(
                    "[...document.querySelectorAll(\"link[rel~='icon']\")].map(link => link.href)")
        finally:
            browser.close()
    assert outside == []
    assert len(icons) == len(PAGES) and all(icons.values()), icons
    for title, hrefs in icons.items():
        assert all(href.startswith("data:") or urlsplit(href).hostname in own for href in hrefs), (title, hrefs)


# -- another user of this machine ---------------------------------------------------------------------
INTRUDER_SCRIPT = r"""
import http.client, json, os, socket, sys
port, pid = int(sys.argv[1]), int(sys.argv[2])
found = {}
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
conn.request("GET", "/")
reply = conn.getresponse()
found["page"] = [reply.status, "stApp" in reply.read().decode("utf-8", "replace")]
sock = socket.create_connection(("127.0.0.1", port), timeout=30)
sock.sendall(("GET /_stcore/stream HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
              "Sec-WebSocket-Protocol: streamlit\r\n\r\n" % port).encode())
found["websocket"] = int(sock.recv(1024).split(b" ")[1])
for name in ("environ", "cmdline"):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as handle:
            found[name] = handle.read().decode("latin-1")
    except OSError as exc:
        found[name] = "refused: " + type(exc).__name__
print(json.dumps(found))
"""


@pytest.fixture
def intruder():
    """A second OS user, made for the test and removed after it."""
    with second_os_user() as name:
        if name is None:
            pytest.skip("creating a second OS user needs root, useradd and runuser")
        yield name


def test_another_os_user_gets_no_page_and_runs_nothing(tmp_path, intruder):
    """Without ``QNN_LAB_TOKEN``, as ``make run`` starts it: the token exists only in the server's
    memory and its terminal, so another user cannot read it from the process either."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "QNN_LAB_TOKEN"}
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
               "--server.fileWatcherType", "none", "--", "--model", SAMPLE]
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 90
        while "token=" not in log.read_text(errors="replace"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.3)
        token = log.read_text(errors="replace").split("token=", 1)[1].split()[0]
        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        run = subprocess.run(["runuser", "-u", intruder, "--", python, "-c", INTRUDER_SCRIPT, str(port),
                              str(server.pid)], capture_output=True, text=True, timeout=120, cwd="/")
        assert run.returncode == 0, run.stderr
        found = json.loads(run.stdout)
        assert found["page"] == [401, False]
        assert found["websocket"] == 403
        assert found["environ"].startswith("refused")
        assert token not in found["cmdline"]
    finally:
        stop_process(server, grace=20)


# -- in a browser ----------------------------------------------------------------------------------
EVIL_PAGE = """<!doctype html><script>
window.result = new Promise(done => {
  const ws = new WebSocket("ws://%(host)s:%(port)d/_stcore/stream", "streamlit");
  ws.onopen = () => done("opened");
  ws.onerror = () => done("refused");
});
window.fetched = fetch("http://%(host)s:%(port)d/", {credentials: "include"})
  .then(r => r.text()).then(t => "read " + t.length, e => "blocked");
</script>"""


def test_a_page_on_another_loopback_port_cannot_drive_a_signed_in_dashboard(gated, tmp_path):
    """The operator's own browser, signed in: a page served from another loopback port (another
    user's server, a dev server) opens the websocket (that is how the Netron URL and everything
    else travel) and reads the dashboard's page, with the operator's cookie sent along."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    # the worst case: a page that knows the dashboard's own host name (it has no way to learn it)
    (tmp_path / "index.html").write_text(EVIL_PAGE % {"host": gated.session_host, "port": gated.port})
    evil_port = free_port()
    evil = subprocess.Popen([sys.executable, "-m", "http.server", str(evil_port), "--bind", "127.0.0.1"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page()
                gated.open(page)
                page.wait_for_selector('[data-testid="stApp"]', timeout=90_000)
                deadline = time.monotonic() + 30
                while True:
                    try:
                        page.goto(f"http://127.0.0.1:{evil_port}/", timeout=10_000)
                        break
                    except Exception:  # noqa: BLE001 - the page server is still starting
                        assert time.monotonic() < deadline, "the other port's page server did not start"
                        time.sleep(0.3)
                assert page.evaluate("window.result") == "refused"
                assert page.evaluate("window.fetched") == "blocked"
            finally:
                browser.close()
    finally:
        stop_process(evil)


def test_dns_rebinding_in_a_browser_gets_nothing(gated):
    """A host name that resolves to 127.0.0.1 (Chromium's resolver told so): the page answers 421,
    even to the token."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch_chromium(pw, extra_args=["--host-resolver-rules=MAP evil.example 127.0.0.1"])
        try:
            page = browser.new_page()
            response = page.goto(f"http://evil.example:{gated.port}/?token={gated.token}")
            assert response.status == 421
            assert "stApp" not in page.content()
        finally:
            browser.close()


def test_a_page_served_without_the_gate_refuses_to_draw(tmp_path):
    """``streamlit run pages/overview.py`` bypasses app.py and so the gate: the page says so and
    draws nothing else (no model, no picker)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    port = free_port()
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "streamlit", "run", str(ROOT / "pages" / "overview.py"), "--server.port",
               str(port), "--server.fileWatcherType", "none", "--", "--model", SAMPLE]
    with open(log, "wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while b"URL" not in log.read_bytes():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.3)
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page()
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_text("served without the dashboard's sign-in gate").wait_for(timeout=90_000)
                assert page.get_by_text("CNN image classifier").count() == 0
            finally:
                browser.close()
    finally:
        stop_process(server, grace=20)
