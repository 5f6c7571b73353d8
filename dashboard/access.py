"""Who may drive the dashboard, and what its operator allows: one record, read once per process.

Why a record of its own: a browser is not the person at the terminal. Anything typed into a page
may come from someone else (another user of this machine, a web page that rebinds its DNS name to
127.0.0.1), so the pages refuse what runs code, loads a library or writes a path, unless the
operator, the person who started the dashboard, allowed it here. The same record says how a browser
proves it is the operator's (a per-start token, or a fixed token or password hash for a team
server) and which host names the server answers to (DNS rebinding).

Where it comes from, later winning over earlier:

1. the operator's config file, ``QNN_LAB_CONFIG`` or ``~/.config/qnn-backend-lab/server.toml``
   (TOML; refused when another user owns it or may write it: it decides what runs);
2. environment variables: ``QNN_LAB_TOKEN``, ``QNN_LAB_PASSWORD_HASH``, ``QNN_LAB_ALLOWED_HOSTS``
   (comma-separated), ``QNN_LAB_PYTHONS`` (``name=path`` items separated by ``os.pathsep``) and
   ``QNN_LAB_KNOWN_HOSTS`` (paths separated by ``os.pathsep``).

The file's shape::

    [auth]
    token = "a long random string"          # a fixed token instead of a new one per start
    password_hash = "scrypt$16384$8$1$..."  # python -m dashboard hash-password
    [server]
    allowed_hosts = ["dash.lab.example"]    # host names besides loopback the browser may use
    [devices]
    pythons = { arm64 = "C:/Python311-arm64/python.exe" }  # local?python=NAME, by name
    known_hosts = ["~/.ssh/known_hosts_lab"]                # device known_hosts= files

Nothing here imports Streamlit: the CLI, the worker client, Netron's server and the web gate all
read the same record.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from pathlib import Path

from dashboard import platform
from dashboard.errors import UserError

CONFIG_ENV = "QNN_LAB_CONFIG"
TOKEN_ENV = "QNN_LAB_TOKEN"
PASSWORD_HASH_ENV = "QNN_LAB_PASSWORD_HASH"
ALLOWED_HOSTS_ENV = "QNN_LAB_ALLOWED_HOSTS"
PYTHONS_ENV = "QNN_LAB_PYTHONS"
KNOWN_HOSTS_ENV = "QNN_LAB_KNOWN_HOSTS"
SWEEP_ROOTS_ENV = "QNN_LAB_SWEEP_ROOTS"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
MIN_TOKEN_LENGTH = 16
MAX_CONFIG_BYTES = 1 << 20
# scrypt at these costs takes ~50 ms and 16 MB: slow enough for guessing, quick for one login.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 14, 8, 1
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


@dataclass(frozen=True)
class OperatorConfig:
    """What the operator configured; empty fields mean the safe default (a new token per start,
    loopback host names only, no local interpreter or known_hosts file allowed from a page)."""

    token: str | None = None
    password_hash: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    pythons: dict[str, str] = field(default_factory=dict)
    known_hosts: tuple[str, ...] = ()
    sweep_roots: tuple[str, ...] = ()  # folders whose sweep specs and results folders a page may open
    source: str = "defaults"

    def __post_init__(self) -> None:
        if self.token is not None and (len(self.token) < MIN_TOKEN_LENGTH or not self.token.isprintable()
                                       or " " in self.token):
            raise UserError(f"the dashboard token ({self.source}) must be at least {MIN_TOKEN_LENGTH} printable "
                            "characters without spaces")
        if self.password_hash is not None:
            _parse_hash(self.password_hash, self.source)
        for host in self.allowed_hosts:
            if not host or any(c not in _NAME_CHARS and c not in ":[]*" for c in host):
                raise UserError(f"allowed host {host!r} ({self.source}) is not a host name")
        for name, path in self.pythons.items():
            if not name or any(c not in _NAME_CHARS for c in name):
                raise UserError(f"interpreter name {name!r} ({self.source}): letters, digits, '.', '_', '-'")
            if not path or not Path(path).expanduser().is_absolute():
                raise UserError(f"interpreter {name}={path!r} ({self.source}) must be an absolute path")

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host name the browser may use: loopback's, then the operator's."""
        return LOOPBACK_HOSTS + tuple(h.lower().strip("[]") for h in self.allowed_hosts)

    def host_allowed(self, host: str | None) -> bool:
        """Whether a Host header's name (port ignored) is one the dashboard answers to; ``*.x``
        entries match subdomains of x."""
        return matches_any(host_name(host), self.hosts)

    def operator_host(self, host: str | None) -> bool:
        """Whether a Host header's name is one the operator listed in ``allowed_hosts``."""
        return matches_any(host_name(host), tuple(h.lower().strip("[]") for h in self.allowed_hosts))

    def python_path(self, name: str) -> str | None:
        """The interpreter the operator listed as ``name`` (None: not listed)."""
        return self.pythons.get(name)

    def sweep_root_of(self, path: str | os.PathLike) -> str | None:
        """The operator's sweep root that holds ``path`` (symlinks resolved), or None."""
        target = Path(os.path.realpath(Path(path).expanduser()))
        for root in self.sweep_roots:
            base = Path(os.path.realpath(Path(root).expanduser()))
            if target == base or base in target.parents:
                return root
        return None

    def known_hosts_allowed(self, path: str) -> bool:
        """Whether ``path`` is one of the known_hosts files the operator allows from a page."""
        target = os.path.realpath(Path(path).expanduser())
        return any(os.path.realpath(Path(p).expanduser()) == target for p in self.known_hosts)


def matches_any(name: str, hosts) -> bool:
    """Whether a host name is one of ``hosts`` (``*.x`` matches the subdomains of x), as Streamlit's
    ``server.allowedHosts`` matches too."""
    return bool(name) and any(allowed == name or (allowed.startswith("*.") and name.endswith(allowed[1:]))
                              for allowed in hosts)


def host_name(host: str | None) -> str:
    """The name part of a Host header, lower case, brackets and port removed ('' if malformed)."""
    text = (host or "").strip().lower()
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        return name if bracket and (not rest or rest[1:].isdigit() and rest[0] == ":") else ""
    name, colon, port = text.partition(":")
    if colon and not port.isdigit():
        return ""
    return name


# -- the record, once per process -------------------------------------------------------------------
_lock = threading.Lock()
_current: OperatorConfig | None = None


def operator() -> OperatorConfig:
    """The operator's configuration, read on first use (a bad file is one ``UserError``)."""
    global _current
    with _lock:
        if _current is None:
            _current = load()
        return _current


def reload() -> OperatorConfig:
    """Read the configuration again (tests, and a server told its file changed)."""
    global _current
    with _lock:
        _current = None
    return operator()


def config_path(environ: dict | None = None) -> Path:
    environ = os.environ if environ is None else environ
    given = environ.get(CONFIG_ENV)
    return Path(given).expanduser() if given else Path.home() / ".config" / "qnn-backend-lab" / "server.toml"


def load(environ: dict | None = None) -> OperatorConfig:
    """The file's settings, then the environment's on top."""
    environ = os.environ if environ is None else environ
    path = config_path(environ)
    values = _read_file(path, explicit=CONFIG_ENV in environ)
    sources = [str(path)] if values else []
    env_values = _from_env(environ)
    if env_values:
        sources.append("environment")
    values.update(env_values)
    return OperatorConfig(**values, source=" + ".join(sources) or "defaults")


def _read_file(path: Path, explicit: bool) -> dict:
    try:
        info = path.stat()
    except FileNotFoundError:
        if explicit:
            raise UserError(f"{CONFIG_ENV}={path}: no such file") from None
        return {}
    except OSError as exc:
        raise UserError(f"cannot read the dashboard's config {path}: {exc.strerror}") from None
    why = platform.foreign_owner(info) or platform.writable_by_others(info)
    if why:
        raise UserError(f"refusing the dashboard's config {path}: it {why}, and it decides what the dashboard "
                        "runs (make it yours, mode 0600)")
    if info.st_size > MAX_CONFIG_BYTES or not path.is_file():
        raise UserError(f"the dashboard's config {path} is not a small regular file")
    import tomllib  # here, not at the top: every runtime worker imports this module (7 ms of a first session)

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"cannot read the dashboard's config {path}: {exc}") from None
    return _from_file(data, path)


_FILE_KEYS = {"auth": {"token": "token", "password_hash": "password_hash"},
              "server": {"allowed_hosts": "allowed_hosts"},
              "devices": {"pythons": "pythons", "known_hosts": "known_hosts"},
              "sweeps": {"roots": "sweep_roots"}}


def _from_file(data: dict, path: Path) -> dict:
    values: dict = {}
    for section, body in data.items():
        keys = _FILE_KEYS.get(section)
        if keys is None or not isinstance(body, dict):
            raise UserError(f"{path}: unknown section [{section}]; known: {', '.join(_FILE_KEYS)}")
        for key, value in body.items():
            if key not in keys:
                raise UserError(f"{path}: unknown key {section}.{key}; known: {', '.join(keys)}")
            values[keys[key]] = _typed(key, value, path)
    return values


def _typed(key: str, value, where) -> object:
    if key in ("token", "password_hash"):
        if not isinstance(value, str):
            raise UserError(f"{where}: {key} must be a string")
        return value
    if key == "pythons":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise UserError(f"{where}: pythons must be a table of name = \"path\"")
        return dict(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _from_env(environ) -> dict:
    values: dict = {}
    if environ.get(TOKEN_ENV):
        values["token"] = environ[TOKEN_ENV]
    if environ.get(PASSWORD_HASH_ENV):
        values["password_hash"] = environ[PASSWORD_HASH_ENV]
    if environ.get(ALLOWED_HOSTS_ENV):
        values["allowed_hosts"] = tuple(h.strip() for h in environ[ALLOWED_HOSTS_ENV].split(",") if h.strip())
    if environ.get(PYTHONS_ENV):
        pairs = {}
        for item in environ[PYTHONS_ENV].split(os.pathsep):
            name, sep, path = item.partition("=")
            if not sep:
                raise UserError(f"{PYTHONS_ENV}: {item!r} is not name=path")
            pairs[name.strip()] = path.strip()
        values["pythons"] = pairs
    if environ.get(KNOWN_HOSTS_ENV):
        values["known_hosts"] = tuple(p for p in environ[KNOWN_HOSTS_ENV].split(os.pathsep) if p)
    if environ.get(SWEEP_ROOTS_ENV):
        values["sweep_roots"] = tuple(p for p in environ[SWEEP_ROOTS_ENV].split(os.pathsep) if p)
    return values


# -- secrets ----------------------------------------------------------------------------------------
def new_token() -> str:
    """A per-start token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so the time taken says nothing about the token."""
    return bool(given) and hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def hash_password(password: str, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$hash`` (base64), for ``password_hash`` in the config."""
    if not password:
        raise UserError("the password is empty")
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    b64 = lambda b: base64.urlsafe_b64encode(b).decode("ascii").rstrip("=")  # noqa: E731
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${b64(salt)}${b64(digest)}"


def password_matches(password: str | None, stored: str) -> bool:
    if not password:
        return False
    n, r, p, salt, digest = _parse_hash(stored, "config")
    given = hashlib.scrypt(password.encode("utf-8", "replace"), salt=salt, n=n, r=r, p=p, dklen=len(digest),
                           maxmem=256 * 1024 * 1024)
    return hmac.compare_digest(given, digest)


def _parse_hash(stored: str, where: str) -> tuple[int, int, int, bytes, bytes]:
    parts = stored.split("$")
    try:
        if len(parts) != 6 or parts[0] != "scrypt":
            raise ValueError
        n, r, p = (int(x) for x in parts[1:4])
        salt, digest = (base64.urlsafe_b64decode(x + "=" * (-len(x) % 4)) for x in parts[4:6])
        if n < 2 or n & (n - 1) or n > 1 << 20 or not 1 <= r <= 32 or not 1 <= p <= 16 or len(digest) < 16:
            raise ValueError
    except ValueError:
        raise UserError(f"password_hash ({where}) is not a scrypt$N$r$p$salt$hash string "
                        "(make one with `python -m dashboard hash-password`)") from None
    return n, r, p, salt, digest


# -- the gatekeeper of a running dashboard ------------------------------------------------------------
TICKET_SECONDS = 120.0  # a password sign-in's hand-over to the session's own host name


def session_host_name(port: int) -> str:
    """A host name of this start's own, ``qnn-<port>-<80 random bits>.localhost``.

    Why: a browser sends a host's cookies to every port of that host, so a session cookie set for
    127.0.0.1 reaches any listener another user runs on another port of 127.0.0.1. Browsers
    resolve every ``*.localhost`` name to loopback themselves (RFC 6761; Chromium and Firefox never
    ask DNS) and keep cookies per host name, so under a name nobody else knows the cookie goes to
    this dashboard's ports only. The name is as secret as the token: only the printed URL and a
    signed-in browser carry it."""
    return f"qnn-{port}-{secrets.token_hex(10)}.localhost"


@dataclass(frozen=True)
class Gatekeeper:
    """What a browser must show to drive this dashboard process: the token (per start, or the
    operator's) or the operator's password, then the per-start session cookie the gate hands out,
    under this start's own host name (or a name the operator allowed)."""

    config: OperatorConfig
    token: str | None  # None: only the operator's password signs in
    generated: bool
    port: int
    cookie_value: str
    session_host: str = ""
    _tickets: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def cookie_name(self) -> str:
        """Per port: two dashboards on one machine must not overwrite each other's."""
        return f"qnn-lab-{self.port}"

    @property
    def password_hash(self) -> str | None:
        return self.config.password_hash

    def serves(self, host: str | None) -> bool:
        """Whether a request under this Host gets the dashboard (and the cookie): this start's own
        name, or one the operator listed. A plain loopback name (``127.0.0.1``, ``localhost``)
        only leads a browser that shows the secret to the own name: every other user's server on
        another port of that name would receive a cookie set there."""
        name = host_name(host)
        return bool(name) and (name == self.session_host or self.config.operator_host(name))

    def host_allowed(self, host: str | None) -> bool:
        """Whether the gate answers this Host at all (the rest gets 421: DNS rebinding)."""
        return self.serves(host) or self.config.host_allowed(host)

    def accepts(self, secret: str | None) -> bool:
        """Whether ``secret`` is the token, the password or a live hand-over ticket (each compared
        in constant time; a ticket works once)."""
        if not secret or len(secret) > 1024:
            return False
        if self.token is not None and token_matches(secret, self.token):
            return True
        if self._redeem(secret):
            return True
        return self.password_hash is not None and password_matches(secret, self.password_hash)

    def ticket(self) -> str:
        """A one-time secret that signs a browser in once, within ``TICKET_SECONDS``: what a password
        typed under a loopback name hands to the session's own name (a cookie cannot be set for
        another host, and the password must not travel in a URL)."""
        value = secrets.token_urlsafe(32)
        now = time.monotonic()
        with _lock:
            for old in [t for t, until in self._tickets.items() if until < now]:
                del self._tickets[old]
            self._tickets[value] = now + TICKET_SECONDS
        return value

    def _redeem(self, secret: str) -> bool:
        with _lock:
            found = next((t for t in self._tickets if token_matches(secret, t)), None)
            until = self._tickets.pop(found, 0.0) if found else 0.0
        return until >= time.monotonic()

    def cookie_ok(self, header: str | None) -> bool:
        """Whether a ``Cookie`` request header carries this gate's session cookie (a malformed
        header carries none)."""
        jar = SimpleCookie()
        try:
            jar.load(header or "")
        except CookieError:
            return False
        morsel = jar.get(self.cookie_name)
        return morsel is not None and token_matches(morsel.value, self.cookie_value)

    def cookie_header(self) -> str:
        """A session cookie (no expiry: it ends with the browser session, and with the server,
        whose per-start value it is), unreadable by scripts, never sent cross-site, and (no
        ``Domain``) sent to the host name it was set under only."""
        return f"{self.cookie_name}={self.cookie_value}; Path=/; HttpOnly; SameSite=Strict"

    def url(self, address: str) -> str:
        """The URL that signs the operator's browser in (the token in its query), under this
        start's own host name when the dashboard listens on loopback or everywhere."""
        loopback = address in ("", "0.0.0.0", "::") or address in LOOPBACK_HOSTS
        host = self.session_host if loopback and self.session_host else address
        host = f"[{host}]" if ":" in host else host
        query = f"?token={self.token}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"

    def banner(self, address: str) -> str:
        """What the terminal that started the dashboard shows."""
        if self.token is None:
            how = f"sign in with the password configured in {self.config.source}"
        elif self.generated:
            how = "the token is new at each start; only this terminal shows it"
        else:
            how = f"the token is the one configured in {self.config.source}"
        return f"\n  QNN Backend Lab: open {self.url(address)}\n  ({how})\n"


_keeper: Gatekeeper | None = None


def gatekeeper(port: int = 0) -> Gatekeeper:
    """This process's gatekeeper, made on first call (by the web gate at start-up, which knows
    the port); a bad operator config is one ``UserError``."""
    global _keeper
    config = operator()
    with _lock:
        if _keeper is None:
            token = config.token or (None if config.password_hash else new_token())
            _keeper = Gatekeeper(config, token, generated=config.token is None and token is not None, port=port,
                                 cookie_value=secrets.token_urlsafe(32), session_host=session_host_name(port))
        return _keeper


def active_gatekeeper() -> Gatekeeper | None:
    """The gatekeeper if this process serves the dashboard through its gate, else None (the CLI,
    a notebook, a test driving a page script directly)."""
    return _keeper


def browser_host_allowed(host: str | None) -> bool:
    """Whether a browser that reached the dashboard under ``host`` may be sent to it again (a
    viewer's URL): behind the gate, a name it serves; else any name the dashboard answers to."""
    keeper = _keeper
    return keeper.serves(host) if keeper is not None else operator().host_allowed(host)


# -- where a setting comes from ---------------------------------------------------------------------
# A page's text may come from anyone who reached the server; the command line's from the person at
# the terminal. Options that run code or write files are checked by this origin
# (``runtime.qnn_options.check``, ``runtime.devices.Device.parse``).
BROWSER, TERMINAL = "browser", "terminal"


def check_origin(origin: str) -> str:
    """``origin`` if it is one of ``BROWSER`` and ``TERMINAL`` (a typo must not mean "trusted")."""
    if origin not in (BROWSER, TERMINAL):
        raise ValueError(f"origin must be {BROWSER!r} or {TERMINAL!r}, got {origin!r}")
    return origin
