"""The web gate: only the person who started the dashboard can drive it.

Why at the server, not in the page script: loopback is not a login. Another user of this machine
reaches 127.0.0.1 as easily as the operator, and any web page the operator visits can drive a
loopback server whose DNS name it rebinds to 127.0.0.1 or whose websocket it opens from another
loopback port. A check inside the page script would still let Streamlit serve its websocket, file
uploads, media and component files to them. So ``app.py`` serves the dashboard as an ``st.App``
(Streamlit's public ASGI entry point) with this middleware in front of every route, HTTP and
websocket alike:

1. **Host**: each start is served under a host name of its own, ``qnn-<port>-<random>.localhost``
   (``access.session_host_name``: a browser sends a host's cookies to all its ports, so a cookie
   of 127.0.0.1 would reach every other user's server there), and under the names the operator
   allowed. The plain loopback names get only the health check and the way to that name (the
   token, or a one-time ticket for a password; no cookie is set or taken there). Any other name
   (DNS rebinding) gets ``421``, before anything else runs.
2. **Origin**: a request that carries one (every websocket a browser opens, every cross-site
   POST) must come from the very origin it is sent to, scheme and port included: a page on another
   port cannot open the websocket. A foreign origin is refused here, so Streamlit's own origin
   check, which looks the machine's external IP address up over the internet for such a request,
   never runs.
3. **Secret**: the per-start token (as Jupyter's), or the operator's fixed token or password.
   ``/?token=...`` (any page) or the sign-in form turns it into an ``HttpOnly``, ``SameSite=Strict``
   session cookie, then redirects to the same page (a path of this server only) without it;
   without the cookie only the sign-in page and the health check answer. The cookie is a random
   per-start value, never the token: it dies with the server. Netron's servers check the same
   cookie under the same name (``access.Gatekeeper``).

The gatekeeper (secrets, cookie) lives in ``dashboard.access`` so that Netron's server and the page
scripts read the same one without importing Starlette.
"""

from __future__ import annotations

import asyncio
import html
import os
import sys
from contextlib import asynccontextmanager
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from dashboard import access, platform
from dashboard.errors import UserError
from dashboard.printable import plain

LOGIN_PATH = "/_qnn_lab/sign-in"
OPEN_PATHS = ("/_stcore/health",)  # answers "ok" and nothing else: start-up checks (Streamlit's /healthz
# is no route of st.App: it would serve the app's index page, so it stays behind the gate)
MAX_FORM_BYTES = 4096
FAILED_SIGN_IN_DELAY = 1.0  # seconds; with scrypt, guessing a password is slow


class Gate:
    """Pure ASGI middleware (it sees websockets as well as HTTP)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        keeper = access.gatekeeper()
        headers = _headers(scope)
        host = headers.get("host", "")
        if not keeper.host_allowed(host):
            await _refuse(scope, send, 421, "This dashboard does not answer to that host name.")
            return
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, host, _scheme(scope)):
            await _refuse(scope, send, 403, "Cross-origin requests are refused.")
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and path in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        served = keeper.serves(host)
        if served and keeper.cookie_ok(headers.get("cookie")):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await self._sign_in(keeper, scope, receive, send, None if served else _session_base(keeper, host, scope))

    async def _sign_in(self, keeper: access.Gatekeeper, scope, receive, send, hand_over: str | None) -> None:
        """The token in the URL, the sign-in form, or the sign-in page. Under a name the gate
        serves, a right secret sets the cookie; under a plain loopback name (``hand_over``: the
        session's own origin) it sends the browser there instead, with the token, or with a
        one-time ticket for a password (no cookie is ever set for a name other servers share)."""
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        path = scope.get("path", "/")
        if given is not None:
            if await _check(keeper, given):
                if hand_over:
                    await _redirect(send, hand_over + (same_origin_path(f"{path}?{urlencode(query)}") or "/"))
                    return
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                await _signed_in(send, scope, same_origin_path(path + ("?" + rest if rest else "")) or "/",
                                 keeper.cookie_header())
                return
            await asyncio.sleep(FAILED_SIGN_IN_DELAY)
            await _login_page(send, keeper, "That token is not this dashboard's.", status=403)
            return
        if path == LOGIN_PATH and scope.get("method") == "POST":
            form = await _read_form(receive)
            if form is not None and await _check(keeper, form.get("secret", "")):
                target = same_origin_path(form.get("next", "/")) or "/"
                if hand_over:
                    ticket = urlencode([("token", keeper.ticket())])
                    await _redirect(send, f"{hand_over}{target}{'&' if '?' in target else '?'}{ticket}")
                    return
                await _signed_in(send, scope, target, keeper.cookie_header())
                return
            await asyncio.sleep(FAILED_SIGN_IN_DELAY)
            await _login_page(send, keeper, "That is not this dashboard's token or password.", status=403,
                              next_path=form.get("next", "/") if form else "/")
            return
        target = path + (("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else "")
        await _login_page(send, keeper, None, status=401, next_path=target)


_checks = asyncio.Semaphore(2)


async def _check(keeper: access.Gatekeeper, secret: str) -> bool:
    """``keeper.accepts`` off the event loop (a password costs ~50 ms of scrypt) and two at a
    time, so a flood of sign-in attempts neither stalls the pages nor takes every core."""
    async with _checks:
        return await asyncio.to_thread(keeper.accepts, secret)


def same_origin(origin: str, host: str, scheme: str = "http") -> bool:
    """Whether an ``Origin`` header names the server the request was sent to: the scheme the
    request came with (``http`` unless the server, or a proxy it trusts, speaks TLS), the host and
    the port. ``null``, a malformed one and other schemes, ports or hosts are foreign."""
    try:
        parts = urlsplit(origin)
    except ValueError:  # e.g. "http://[::1" (an unclosed IPv6 bracket)
        return False
    if parts.scheme != scheme or scheme not in ("http", "https") or not parts.netloc:
        return False
    default = "443" if scheme == "https" else "80"
    netloc = parts.netloc.lower()
    sent_to = host.lower()
    if ":" not in netloc.rsplit("]", 1)[-1]:
        netloc += ":" + default
    if ":" not in sent_to.rsplit("]", 1)[-1]:
        sent_to += ":" + default
    return netloc == sent_to


def _scheme(scope) -> str:
    """The request's scheme as an origin names it: a websocket's ``ws``/``wss`` is its page's
    ``http``/``https``."""
    return {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))


_PATH_SAFE = "/?&=%:@!$'()*+,;-._~#[]"


def same_origin_path(target: str) -> str | None:
    """``target`` as a redirect that stays on this server (a path, percent-encoded to ASCII), or
    None. A browser reads ``//host`` and ``/\\host`` as another site's address and drops tabs and
    newlines from an address before it does, so a target that starts so, or holds a backslash or a
    control character, is refused (a newline would also end the ``Location`` header)."""
    if not target.startswith("/") or target[1:2] in ("/", "\\"):
        return None
    if "\\" in target or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return None
    return quote(target, safe=_PATH_SAFE)


def _headers(scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name not in found:  # the first of a repeated header, as Starlette reads it
            found[name] = value.decode("latin-1")
    return found


async def _read_form(receive) -> dict[str, str] | None:
    """The sign-in form's fields (None: too large or not a form)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES:
            return None
        if not message.get("more_body"):
            break
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except (UnicodeDecodeError, ValueError):
        return None


async def _send(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]],
                referrer: bytes = b"no-referrer") -> None:
    base = [(b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"), (b"referrer-policy", referrer),
            (b"x-frame-options", b"DENY")]
    await send({"type": "http.response.start", "status": status, "headers": base + headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(scope, send, status: int, text: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await _send(send, status, text.encode() + b"\n", [(b"content-type", b"text/plain; charset=utf-8")])


async def _redirect(send, target: str, cookie: str | None = None) -> None:
    headers = [(b"location", target.encode("latin-1", "replace"))]
    if cookie:
        headers.append((b"set-cookie", cookie.encode("latin-1")))
    await _send(send, 303, b"", headers)


async def _signed_in(send, scope, target: str, cookie: str) -> None:
    """The session cookie, and the browser on its way to ``target`` (a path of this server).

    A navigation that another site started (the hand-over from a loopback name's sign-in form is
    one: ``Sec-Fetch-Site: cross-site``) does not send a ``SameSite=Strict`` cookie on any request
    of its redirect chain, so a redirect would land on the sign-in page again. Such a browser gets a
    page that moves on by itself instead: that navigation is this server's own, cookie included."""
    if _headers(scope).get("sec-fetch-site", "none") in ("none", "same-origin"):
        await _redirect(send, target, cookie)
        return
    page = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" '
            f'content="0;url={html.escape(target)}"><title>QNN Backend Lab</title></head><body><p>Signed in: '
            f'<a href="{html.escape(target)}">continue</a>.</p></body></html>\n')
    await _send(send, 200, page.encode("utf-8"), [(b"content-type", b"text/html; charset=utf-8"),
                                                   (b"set-cookie", cookie.encode("latin-1")),
                                                   (b"content-security-policy",
                                                    b"default-src 'none'; frame-ancestors 'none'")])


def _session_base(keeper: access.Gatekeeper, host: str, scope) -> str:
    """The session's own origin as the browser reaches it: its host name, with the scheme and the
    port the request came with (an SSH tunnel may forward another local port)."""
    try:
        port = urlsplit("//" + host).port
    except ValueError:
        port = None
    return f"{_scheme(scope)}://{keeper.session_host}" + (f":{port}" if port else "")


async def _login_page(send, keeper: access.Gatekeeper, message: str | None, status: int,
                      next_path: str = "/") -> None:
    what = "token or password" if keeper.password_hash else "token"
    notice = f'<p class="error">{html.escape(message)}</p>' if message else ""
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>QNN Backend Lab: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px system-ui,sans-serif;max-width:34em;margin:4em auto;padding:0 1em;color:#222}}
input{{font:inherit;padding:.4em;width:100%;box-sizing:border-box;margin:.5em 0}}
button{{font:inherit;padding:.4em 1.2em}}.error{{color:#a00}}code{{background:#eee;padding:0 .2em}}</style>
</head><body><h1>QNN Backend Lab</h1>
<p>This dashboard runs work as the user who started it, so it answers only to them. Open the URL
with <code>?token=</code> that its terminal printed, or enter the {what} here.</p>{notice}
<form method="post" action="{LOGIN_PATH}"><label for="secret">{what.capitalize()}</label>
<input id="secret" name="secret" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{html.escape(same_origin_path(next_path) or '/')}">
<button type="submit">Sign in</button></form></body></html>
"""
    # ``same-origin``, not ``no-referrer``: under ``no-referrer`` a browser posts the form with
    # ``Origin: null``, which the gate refuses as foreign (a sandboxed frame of another site sends the
    # same), so the form never signed anyone in. Same-origin keeps the referrer on this server only.
    # ``form-action`` covers the form's redirect too: under a loopback name that is the hand-over to
    # the session's own *.localhost name, which the page must not spell out.
    await _send(send, status, page.encode("utf-8"), [(b"content-type", b"text/html; charset=utf-8"),
                                                      (b"content-security-policy",
                                                       b"default-src 'none'; style-src 'unsafe-inline'; "
                                                       b"form-action 'self' http://*.localhost:* "
                                                       b"https://*.localhost:*; frame-ancestors 'none'")],
                referrer=b"same-origin")


def unlisted_hosts(keeper: access.Gatekeeper, streamlit_hosts: list[str]) -> list[str]:
    """The names the gate serves (this start's own, the operator's) that Streamlit's
    ``server.allowedHosts`` does not cover: Streamlit would refuse their websockets."""
    listed = {h.lower().strip("[]") for h in streamlit_hosts}
    if not listed or "*" in listed:  # Streamlit's "any host"
        return []
    served = (keeper.session_host, *keeper.config.allowed_hosts)
    return [h for h in served if not access.matches_any(h.lower().strip("[]"), listed)]


@asynccontextmanager
async def lifespan(_app):
    """At start-up: make the gatekeeper and print the URL that carries the token, on the terminal
    that started the dashboard only (never in a process's command line, which other users can
    read). A bad operator config stops the server with one ``error:`` line and exit code 2."""
    import streamlit as st

    try:
        keeper = access.gatekeeper(port=int(st.get_option("server.port")))
    except UserError as exc:
        print(f"error: {plain(exc)}", file=sys.stderr, flush=True)
        os._exit(2)  # uvicorn would print a traceback for an exception raised here
    print(keeper.banner(st.get_option("server.address") or "127.0.0.1"), file=sys.stderr, flush=True)
    missing = unlisted_hosts(keeper, st.get_option("server.allowedHosts") or [])
    if missing:
        print(f"warning: server.allowedHosts lacks {', '.join(missing)}: Streamlit will refuse their websockets; "
              "add them to it as well (*.localhost covers each start's own name)", file=sys.stderr, flush=True)
    platform.relay_hangup_as_termination()
    try:
        yield
    finally:
        platform.run_exit_hooks()  # the process may end by a re-raised SIGTERM, without atexit

