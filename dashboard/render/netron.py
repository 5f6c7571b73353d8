"""Netron servers for the Overview page's embedded graph view (no Streamlit).

The page shows Netron's own web UI (the files of the pinned ``netron`` package) served by a small
HTTP server per model, started on first use and reused on every re-render; the least recently
used one is stopped once more than ``MAX_SERVERS`` models have been viewed.

Security: a server listens on loopback only (127.0.0.1, whatever interface the dashboard listens
on) and answers only under ``/<token>/``, a random per-server token that only the page's URL
carries; any other path, a missing or a wrong token, is refused with 404. It also answers only to
a ``Host`` the dashboard answers to (loopback names and the operator's, ``dashboard.access``), so a
web page that rebinds its DNS name to 127.0.0.1 gets nothing; and, when the dashboard runs behind
its sign-in gate, only to a browser that carries the gate's session cookie (cookies go to every
port of a host, so the browser that signed in to the dashboard sends it here too). So nothing but
this machine can reach it, and on this machine only the operator's browser, once handed the URL. From
another machine, the user forwards its port over SSH beside the dashboard's (``tunnel_command``).
Netron needs the model's bytes in the browser, so it cannot be fed through the dashboard's own
websocket the way the Model Explorer view is.

Why not ``netron.serve``: in netron 9.3.3 every server in a process shares one handler class
whose ``content`` it overwrites, so a second model makes the first model's port serve the second
(two users, or two tabs, would see each other's model); its ``/data/`` route serves any file in the
model's folder; its page asks the user's browser for cookie consent (after a lookup on ipinfo.io)
and sends Google Analytics telemetry; and it stops showing models ("Please update") 180 days after
the build date in its page. This server answers only Netron's UI files and the one model (a
read-only memory map, so multi-GB files are paged in lazily, not copied), presents the UI as an
unpackaged build (no telemetry, no expiry), pre-answers the consent prompt, keeps Netron's focus
calls from scrolling the dashboard page, and never puts a model-derived name into HTML.
"""

from __future__ import annotations

import http.server
import mmap
import re
import secrets
import socketserver
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import netron

from dashboard import access

MAX_SERVERS = 4
LOOPBACK = "127.0.0.1"
NETRON_UI = Path(netron.__file__).resolve().parent
MODEL_FILE = "model.onnx"  # the name Netron sees: fixed, so no model-derived text reaches its page
UI_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css",
            ".json": "application/json", ".png": "image/png", ".ico": "image/x-icon"}
_NETRON_META = re.compile(r'<meta name="(?:version|date)" content="[^"]*">\s*')
# Netron focuses its graph when a model opens, which scrolls the embedding dashboard page to the
# frame; served as a same-origin script (Netron's CSP allows only those) ahead of Netron's own.
FOCUS_SCRIPT = "qnn-lab-focus.js"
_FOCUS_JS = b"""(() => {
  for (const type of [HTMLElement, SVGElement]) {
    const focus = type.prototype.focus;
    type.prototype.focus = function (options) {
      focus.call(this, Object.assign({ preventScroll: true }, options));
    };
  }
})();
"""


def _index_html() -> bytes:
    """Netron's page, told to open ``data/model.onnx`` (relative: under the token) as an
    unpackaged build (version 0.0.0: no telemetry) with no build date (no "please update" expiry)."""
    page = (NETRON_UI / "index.html").read_text(encoding="utf-8")
    meta = ('<meta name="type" content="Python">\n<meta name="version" content="0.0.0">\n'
            f'<meta name="file" content="data/{MODEL_FILE}">\n<script src="{FOCUS_SCRIPT}"></script>\n')
    page, count = _NETRON_META.subn("", page)
    if count == 0:
        raise RuntimeError(f"unexpected Netron page layout in {NETRON_UI / 'index.html'}")
    return page.replace("<title>", meta + "<title>", 1).encode("utf-8")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _ModelServer

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        prefix = f"/{self.server.token}/"
        path = urlsplit(self.path).path
        if not secrets.compare_digest(path[:len(prefix)].encode(), prefix.encode()) or not self._admitted():
            self.send_error(404)  # no token, or a wrong one: nothing says a server is here
            return
        path = "/" + path[len(prefix):]
        if path in ("/", "/index.html"):
            # Netron asks for consent before anything else unless this cookie is set.
            self._send(self.server.index_html, UI_TYPES[".html"],
                       {"Set-Cookie": f"consent=1; Path={prefix}; SameSite=Lax", "Cache-Control": "no-store"})
        elif path == f"/{FOCUS_SCRIPT}":
            self._send(_FOCUS_JS, UI_TYPES[".js"], {})
        elif path == f"/data/{MODEL_FILE}":
            self._send(self.server.model, "application/octet-stream", {"Cache-Control": "no-store"})
        else:
            name = path.lstrip("/")
            file = NETRON_UI / name
            if "/" in name or name.startswith(".") or file.suffix not in UI_TYPES or not file.is_file():
                self.send_error(404)
                return
            self._send(file.read_bytes(), UI_TYPES[file.suffix], {})

    def _admitted(self) -> bool:
        """Behind the gate, a host name the gate serves (this start's own, whose cookie the browser
        sends to this port too, or the operator's) and the gate's session cookie; without a gate,
        a Host the dashboard answers to."""
        keeper = access.active_gatekeeper()
        if keeper is None:
            return access.operator().host_allowed(self.headers.get("Host"))
        return keeper.serves(self.headers.get("Host")) and keeper.cookie_ok(self.headers.get("Cookie"))

    def _send(self, body, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the browser navigated away mid-download

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        pass


class _ModelServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, model: mmap.mmap, index_html: bytes) -> None:
        self.model = model
        self.index_html = index_html
        self.token = secrets.token_urlsafe(24)
        super().__init__((LOOPBACK, 0), _Handler)


@dataclass
class NetronServer:
    """A running Netron server for one model (by digest)."""

    digest: str
    port: int
    _server: _ModelServer
    _thread: threading.Thread

    @property
    def path(self) -> str:
        """The page's path: it carries the token, and every other URL of the server hangs off it."""
        return f"/{self._server.token}/"

    @property
    def address(self) -> tuple[str, int]:
        return self._server.server_address[:2]

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._server.model.close()


_servers: OrderedDict[str, NetronServer] = OrderedDict()
_lock = threading.Lock()


def serve(path: str, digest: str) -> NetronServer:
    """The Netron server for the model at ``path`` (started once per digest, then reused).
    Raises ``OSError`` when the file cannot be mapped or no port can be bound."""
    with _lock:
        server = _servers.get(digest)
        if server is not None and server.alive:
            _servers.move_to_end(digest)
            return server
        if server is not None:
            _servers.pop(digest).stop()
        with open(path, "rb") as handle:
            model = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            http_server = _ModelServer(model, _index_html())
        except BaseException:
            model.close()
            raise
        thread = threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.5},
                                  name=f"netron-{digest[:8]}", daemon=True)
        thread.start()
        server = NetronServer(digest, http_server.server_address[1], http_server, thread)
        _servers[digest] = server
        while len(_servers) > MAX_SERVERS:
            _servers.popitem(last=False)[1].stop()
        return server


def stop_all() -> None:
    """Stop every Netron server this process started."""
    with _lock:
        while _servers:
            _servers.popitem()[1].stop()


def browser_url(server: NetronServer, page_url: str | None, host_header: str | None = None) -> str:
    """Netron's URL as the user's browser reaches it: the host the browser used for the dashboard
    (``st.context.url``, else the request's Host header; on this machine, or through an SSH tunnel
    that forwards Netron's port too, that host reaches the loopback server), Netron's port and the
    token path. IPv6 loopback maps to 127.0.0.1, the address the server listens on."""
    host = urlsplit(page_url).hostname if page_url else None
    if not host and host_header:
        host = urlsplit("//" + host_header).hostname
    keeper = access.active_gatekeeper()
    fallback = keeper.session_host if keeper is not None else "localhost"
    host = host if host and access.browser_host_allowed(host if ":" not in host else f"[{host}]") else fallback
    if host == "::1":
        host = LOOPBACK
    elif ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"http://{host}:{server.port}{server.path}"


def tunnel_command(port: int, page_url: str | None) -> str:
    """The extra SSH port forward that brings this Netron server to another machine's browser
    (added to the one that forwards the dashboard's port)."""
    host = urlsplit(page_url).hostname if page_url else None
    loopback = host in ("localhost", LOOPBACK, "::1") or (host or "").endswith(".localhost")
    target = host if host and not loopback else "SERVER"
    return f"ssh -N -L {port}:{LOOPBACK}:{port} {target}"
