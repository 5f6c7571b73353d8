"""Devices: where the runtime worker runs, and what it finds there.

A device is only a transport for the worker protocol (``dashboard.runtime.worker``): *local* is this
machine's Python (or another interpreter on this machine, ``local?python=PATH`` from the command
line, ``local?python=NAME`` for one the operator listed, ``access.OperatorConfig.pythons``);
``ssh://[user@]host[:port]`` runs ``python -m dashboard.runtime.worker`` on a Snapdragon board or
Windows-on-Snapdragon laptop over the user's own OpenSSH client. No port is opened on the device,
and the user's keys, agent and ``~/.ssh/config`` (host aliases) apply as for any ``ssh`` command;
``BatchMode=yes`` makes a missing key fail at once instead of waiting for a password prompt nobody
can answer. Model bytes travel over the protocol (``WorkerClient.send_model``).

Why the address is parsed so strictly: a device address is typed into a form or a ``--device``
argument, and ssh and the remote login shell both interpret text. ssh options can run commands on
*this* machine (``ProxyCommand``, ``LocalCommand``, ``KnownHostsCommand``, ``Match exec``), a user
or host starting with ``-`` is read as an option, and a remote shell runs whatever its
metacharacters say. So:

- user and host are checked against what they can legitimately be (a DNS name, an IPv4 address, a
  bracketed IPv6 address or an ssh-config alias), and the destination always follows ``--``;
- no free-form ssh option is accepted: only the few in ``QUERY_KEYS``, each validated, become
  fixed ``-o``/``-p``/``-i``/``-J`` arguments;
- ``shell=posix``: the worker's command is a POSIX ``sh`` script, its words ``shlex.quote``d, and the
  login shell gets ``sh -c <script>`` with the script quoted so that sh, bash, fish and csh/tcsh all
  pass it to ``sh`` unchanged (``login_command``): only ``sh`` interprets it, whatever the user's
  login shell (fish reads ``\\\\`` and ``\\'`` inside single quotes, csh ``!``: those go outside them);
- ``shell=windows`` (cmd.exe, OpenSSH's default on Windows): the characters cmd.exe interprets are
  refused, since it has no quoting that neutralises them all, and so are ``$`` and backticks, which
  PowerShell expands inside double quotes (when it is the login shell after all);
- ``shell=powershell`` (a Windows host whose OpenSSH default shell is PowerShell): every word in
  single quotes, ``'`` doubled, which PowerShell reads literally ($, backticks, ``;`` included); the
  typographic single quotes PowerShell also takes as quotes are refused;
- ``label`` is the whole address, query included, so a user always sees what will run.

The same checks run for the CLI, the Devices page and the Python API (``Device(...)`` validates in
``__post_init__``), and every refusal is one ``UserError`` line, before anything is started. What a
page may say is narrower than what the terminal may (``Device.parse(..., source=BROWSER)``): a page
may be someone else's (``dashboard.access``), so a local interpreter only by a name the operator
listed, and ``known_hosts`` (which ssh appends to with ``host_key=accept-new``) only a file the
operator allows. The command line takes a path for both (a known_hosts file that exists).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import time
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, quote, unquote, urlsplit

from dashboard import access
from dashboard.access import BROWSER, TERMINAL, check_origin
from dashboard.errors import UserError
from dashboard.runtime.client import WorkerClient, WorkerError, WorkerVersionError
from dashboard.runtime.protocol import ProbeArgs, ProbeResult
from dashboard.serde import Record

LOCAL = "local"
SHELLS = ("posix", "windows", "powershell")
HOST_KEY_POLICIES = ("yes", "accept-new")
# What a device URL's query may say (and the keyword arguments of ``Device.parse``): nothing else
# reaches ssh. Documented in docs/devices.md ("Attaching a Snapdragon device over SSH").
QUERY_KEYS = ("python", "workdir", "identity", "shell", "connect_timeout", "env", "host_key", "known_hosts",
              "jump")
LOCAL_QUERY_KEYS = ("python",)
# ssh options people reach for, refused by name so the message says why (they run local commands
# or read other configuration).
DANGEROUS_SSH_OPTIONS = ("ProxyCommand", "LocalCommand", "PermitLocalCommand", "KnownHostsCommand", "Match",
                         "Include", "ProxyJump", "ProxyUseFdpass", "RemoteCommand", "SecurityKeyProvider",
                         "PKCS11Provider")
MAX_CONNECT_TIMEOUT = 300

_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}$")
_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_ALIAS = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,252}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# cmd.exe interprets these even inside double quotes (% and ! expand variables), or ends the quote;
# PowerShell expands $ (``$(...)``, ``$env:X``) and backticks inside double quotes.
_CMD_SPECIAL = re.compile(r'["&|^%<>!$`\r\n]')
# PowerShell takes these typographic quotes as single quotes too: refused rather than doubled.
_PS_QUOTES = re.compile("[\u2018\u2019\u201a\u201b]")


@dataclass(frozen=True)
class Device(Record):
    """A worker transport, validated on construction (from JSON too). ``url`` is the address the
    device is keyed by; ``label`` is how it is shown (the whole address, query included)."""

    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ("label",)

    url: str = LOCAL
    host: str | None = None
    user: str | None = None
    port: int | None = None
    python: str | None = None  # the interpreter that has this package (remote default: python3)
    workdir: str | None = None  # remote checkout to run from (``python -m`` finds the package there)
    identity: str | None = None  # private key file on this machine (default: the user's agent/config)
    shell: str = "posix"  # the remote login shell: posix (Linux, Android), windows (cmd.exe) or powershell
    connect_timeout: int = 10
    env: dict[str, str] = field(default_factory=dict)  # set on the remote side (e.g. model store)
    host_key: str | None = None  # StrictHostKeyChecking: yes or accept-new (default: the user's config)
    known_hosts: str | None = None  # UserKnownHostsFile on this machine
    jump: str | None = None  # a jump host, [user@]host[:port], validated like the host

    def __post_init__(self) -> None:
        if self.is_local:
            _check_local(self)
        else:
            _check_remote(self)
        object.__setattr__(self, "url", self._canonical(encode=True))

    @property
    def is_local(self) -> bool:
        return self.host is None

    @property
    def label(self) -> str:
        """The whole address as the user should read it: nothing that will run is hidden."""
        if self.is_local and self.python is None:
            return "local (this machine)"
        return self._canonical(encode=False)

    def _canonical(self, encode: bool) -> str:
        text = (lambda v: quote(v, safe="/:\\~.-_@=")) if encode else (lambda v: v)
        query = [(key, value) for key in QUERY_KEYS for value in self._query_values(key)]
        suffix = ("?" + "&".join(f"{k}={text(v)}" for k, v in query)) if query else ""
        if self.is_local:
            return LOCAL + suffix
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{self.user + '@' if self.user else ''}{host}{f':{self.port}' if self.port else ''}{suffix}"

    def _query_values(self, key: str) -> list[str]:
        if key == "env":
            return [f"{k}={v}" for k, v in self.env.items()]
        if key == "shell":
            return [self.shell] if self.shell != "posix" else []
        if key == "connect_timeout":
            return [str(self.connect_timeout)] if self.connect_timeout != 10 else []
        value = getattr(self, key)
        return [] if value is None else [str(value)]

    @classmethod
    def parse(cls, url: str, source: str = TERMINAL, **overrides) -> "Device":
        """``local[?python=PATH|NAME]`` or ``ssh://[user@]host[:port][?key=value&...]`` with the keys
        of ``QUERY_KEYS``; keyword ``overrides`` (the same names) win over the query, except those
        left empty (None, or the field's default: what a form sends for a field nobody filled in).
        ``source``: who typed it, ``access.TERMINAL`` or ``access.BROWSER`` (every page passes it):
        what a page may say is narrower (``_origin_policy``)."""
        check_origin(source)
        defaults = {f.name: f.default_factory() if f.default_factory is not MISSING else f.default for f in fields(cls)}
        overrides = {k: v for k, v in overrides.items() if v is not None and (k not in defaults or v != defaults[k])}
        text = (url or LOCAL).strip()
        if _CONTROL.search(text):
            raise UserError("device address contains a control character (newline, tab, NUL...)")
        try:
            parts = urlsplit(text)
        except ValueError as exc:  # e.g. an invalid bracketed IPv6 address
            raise UserError(f"bad device address {text!r}: {exc}") from None
        values = _query(parts.query)
        if text == LOCAL or (parts.scheme == "" and parts.path == LOCAL):
            unknown = sorted((set(values) | set(overrides)) - set(LOCAL_QUERY_KEYS))
            if unknown:
                raise UserError(f"a local device takes only python=PATH, not {', '.join(unknown)}")
            return cls(url=LOCAL, **_origin_policy({**values, **overrides}, local=True, source=source))
        if parts.scheme != "ssh" or not parts.netloc:
            raise UserError(f"device must be 'local' or ssh://[user@]host[:port] (or local?python=PATH), got {text!r}")
        user, host, port = _split_netloc(parts.netloc)
        unknown = sorted(set(overrides) - set(QUERY_KEYS))
        if unknown:
            raise UserError(f"unknown device option(s) {', '.join(unknown)}; known: {', '.join(QUERY_KEYS)}")
        return cls(url=text, host=host, user=user, port=port,
                   **_origin_policy({**values, **overrides}, local=False, source=source))

    # -- transport -------------------------------------------------------------------------------
    def remote_command(self) -> str:
        """The worker, from ``workdir``, with ``env`` set, in the device's shell language: a POSIX
        ``sh`` script (``ssh_argv`` hands it to ``sh``), a cmd.exe or a PowerShell line."""
        python = self.python or "python3"
        if self.shell == "windows":  # every part was checked free of cmd.exe's special characters
            parts = [f'cd /d "{self.workdir}" &&' if self.workdir else ""]
            parts += [f'set "{k}={v}" &&' for k, v in self.env.items()]
            parts.append(f'"{python}" -m dashboard.runtime.worker')
            return " ".join(p for p in parts if p)
        if self.shell == "powershell":
            parts = [f"Set-Location -LiteralPath {ps_quote(self.workdir)} -ErrorAction Stop;" if self.workdir else ""]
            parts += [f"$env:{k} = {ps_quote(v)};" for k, v in self.env.items()]  # names checked: [A-Za-z_]\w*
            parts.append(f"& {ps_quote(python)} -m dashboard.runtime.worker")
            return " ".join(p for p in parts if p)
        command = ["exec", "env", *(f"{k}={v}" for k, v in self.env.items()), python, "-m", "dashboard.runtime.worker"]
        quoted = " ".join(shlex.quote(c) for c in command)
        return f"cd -- {shlex.quote(self.workdir)} && {quoted}" if self.workdir else quoted

    def login_command(self, command: str) -> str:
        """The exact text the device's login shell gets for ``command`` (in the device's shell
        language). POSIX: ``sh -c <command>``, quoted for any login shell (``portable_quote``),
        so fish or csh never interpret the script; Windows shells: ``command`` as it is."""
        return f"sh -c {portable_quote(command)}" if self.shell == "posix" else command

    def argv(self) -> list[str] | None:
        """The worker's command line (None: this machine's own Python worker)."""
        if self.is_local:
            return None if self.python is None else [self.python, "-m", "dashboard.runtime.worker"]
        return self.ssh_argv(self.remote_command())

    def ssh_argv(self, remote_command: str) -> list[str]:
        """ssh to this device running ``remote_command`` (a POSIX sh script for ``shell=posix``,
        its words quoted for sh; else a line for the Windows shell), through ``login_command``,
        with only the device's validated options; ``device install`` uses it for its other commands."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}",
                "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4",
                # Command-line options win over ~/.ssh/config: no local command, no forwarding.
                "-o", "PermitLocalCommand=no", "-o", "ClearAllForwardings=yes", "-o", "ForwardAgent=no"]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity:
            argv += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        if self.host_key:
            argv += ["-o", f"StrictHostKeyChecking={self.host_key}"]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.jump:
            argv += ["-J", self.jump]
        argv += ["--", f"{self.user}@{self.host}" if self.user else self.host, self.login_command(remote_command)]
        return argv

    def connect(self) -> WorkerClient:
        """A started worker on this device; an unreachable device is one ``UserError`` line."""
        hint = None if self.is_local else f"reinstall it with `python -m dashboard device install {self.url}`"
        client = WorkerClient(self.argv(), label=f"worker on {self.label}", remote=self.host is not None,
                              start_timeout=self.connect_timeout + 60, upgrade_hint=hint)
        try:
            return client.start()
        except WorkerVersionError:
            raise
        except WorkerError as exc:
            if self.is_local:
                raise
            raise UserError(f"cannot reach {self.label}: {_reason(exc)}") from None

    def probe(self, timeout: float = 300.0) -> "DeviceProbe":
        """OS/arch, runtime versions, which backends initialize, shared memory and SoC facts."""
        start = time.perf_counter()
        with self.connect() as worker:
            result: ProbeResult = worker.call("probe", ProbeArgs(), timeout=timeout)
        found = {f.name: getattr(result, f.name) for f in fields(ProbeResult)}
        return DeviceProbe(**found, device=self.url, label=self.label,
                           seconds=round(time.perf_counter() - start, 3))


@dataclass
class DeviceProbe(ProbeResult):
    """What a device's worker found (``ProbeResult``: the host and runtime versions, each backend's
    ``BackendProbe``, the shared-memory allocator, SoC facts), for which device (``device`` is its
    URL, ``label`` how it is shown) and how long the probe took. Its JSON is the worker's reply
    with those three keys added."""

    device: str = LOCAL
    label: str = ""
    seconds: float = 0.0

    def initializes(self, backend: str) -> bool | None:
        """Whether ``backend`` initializes on the device (None: it was not probed)."""
        probe = self.backends.get(backend)
        return None if probe is None else probe.ok


# -- quoting ---------------------------------------------------------------------------------------
def portable_quote(text: str) -> str:
    """``text`` as one word that sh, bash, zsh, fish and csh/tcsh all read back unchanged (no
    newline: refused before). Single quotes for everything but ``'``, ``\\`` (fish interprets both
    inside single quotes) and ``!`` (csh's history expansion happens inside them, even for
    ``tcsh -c``); those three are backslash-escaped outside quotes, which every one of these
    shells reads as the character itself."""
    parts = re.split(r"(['\\!])", text)
    return "".join("\\" + part if part in ("'", "\\", "!") else f"'{part}'" for part in parts if part) or "''"


def ps_quote(text: str) -> str:
    """``text`` as one PowerShell word: single quotes (no expansion of $ or backticks inside),
    ``'`` doubled; the typographic single quotes PowerShell also accepts were refused before."""
    return "'" + text.replace("'", "''") + "'"


# -- where an address comes from ------------------------------------------------------------------
def _origin_policy(values: dict, local: bool, source: str) -> dict:
    """What ``source`` may say, applied to the parsed query and overrides: a local ``python``
    names an interpreter the operator listed (from a page: only such a name; from the terminal:
    a name or a path), and a page's ``known_hosts`` must be a file the operator allows."""
    python = values.get("python")
    if local and python is not None:
        values["python"] = _local_python(python, source)
    if source == BROWSER and values.get("known_hosts") is not None:
        _check_allowed_known_hosts(values["known_hosts"])
    return values


def _local_python(name: str, source: str) -> str:
    listed = access.operator().python_path(name)
    if listed is not None:
        return listed
    if source == BROWSER:
        names = ", ".join(access.operator().pythons) or "none listed"
        raise UserError(f"a page runs only an interpreter the operator listed, by name ({names}), not {name[:80]!r}; "
                        f"the operator lists one in {access.PYTHONS_ENV}=NAME=PATH or [devices] pythons in "
                        f"{access.config_path()} (the command line takes a path)")
    return name


def _check_allowed_known_hosts(path: str) -> None:
    allowed = access.operator().known_hosts
    if not access.operator().known_hosts_allowed(path) or not Path(path).expanduser().is_file():
        raise UserError(f"a page may use only a known_hosts file the operator allows and that exists "
                        f"({', '.join(allowed) or 'none allowed'}), not {path[:80]!r}; the operator allows one in "
                        f"{access.KNOWN_HOSTS_ENV} or [devices] known_hosts in {access.config_path()}")


# -- validation ------------------------------------------------------------------------------------
def _query(query: str) -> dict:
    """The query's keys, each checked against ``QUERY_KEYS`` (``option=`` is refused by name)."""
    values: dict = {}
    for key, items in parse_qs(query, keep_blank_values=True).items():
        if key == "option" or key.lower() in (o.lower() for o in DANGEROUS_SSH_OPTIONS):
            raise UserError(f"free-form ssh options are not accepted ({key}={items[-1]!r}); a device takes "
                            f"only {', '.join(QUERY_KEYS)}")
        if key not in QUERY_KEYS:
            raise UserError(f"unknown device option {key!r}; known: {', '.join(QUERY_KEYS)}")
        if key == "env":
            values["env"] = dict(_pair(item) for item in items)
        elif key == "connect_timeout":
            values[key] = _int(items[-1], key)
        else:
            values[key] = items[-1]
    return values


def _split_netloc(netloc: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` with each part checked (``urlsplit`` alone accepts almost anything)."""
    user, sep, hostport = netloc.rpartition("@")
    user = unquote(user) if sep else None
    if hostport.startswith("["):
        host, bracket, rest = hostport[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise UserError(f"bad IPv6 address in device address: {netloc!r}")
        port_text = rest[1:] if rest else None
        _check_ipv6(host)
    else:
        host, colon, port_text = hostport.partition(":")
        port_text = port_text if colon else None
        check_host(host)
    if user is not None:
        check_user(user)
    return user, host, _port(port_text)


def check_user(user: str) -> None:
    if not _USER.match(user):
        raise UserError(f"bad user name in device address: {user!r} (letters, digits, '.', '_' and '-', "
                        "not starting with '-')")


def check_host(host: str) -> None:
    """A DNS name, an IPv4 address or an ssh-config alias: nothing ssh or a shell would read as an
    option or a metacharacter."""
    if not host:
        raise UserError("device address has no host")
    if host.startswith("-") or not _ALIAS.match(host):
        raise UserError(f"bad host in device address: {host!r} (a DNS name, an IPv4 address, a bracketed "
                        "IPv6 address or an ssh-config alias)")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise UserError(f"bad IPv4 address in device address: {host!r}") from None
    elif "." in host and not all(_LABEL.match(label) for label in host.rstrip(".").split(".")):
        raise UserError(f"bad host name in device address: {host!r}")


def _check_ipv6(host: str) -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise UserError(f"bad IPv6 address in device address: [{host}]") from None


def _port(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise UserError(f"bad port in device address: {text!r} (1-65535)")
    return int(text)


def _check_jump(jump: str) -> None:
    user, host, _ = _split_netloc(jump)
    if not host:
        raise UserError(f"bad jump host {jump!r}")


def _check_local(device: Device) -> None:
    if any(v is not None for v in (device.user, device.port, device.workdir, device.identity, device.host_key,
                                   device.known_hosts, device.jump)) or device.env or device.shell != "posix":
        raise UserError("a local device takes only python=PATH")
    if device.python is not None:
        path = Path(device.python).expanduser()
        _check_text("python", device.python)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UserError(f"local interpreter {device.python!r} is not an executable file on this machine")


def _check_remote(device: Device) -> None:
    if ":" in device.host:
        _check_ipv6(device.host)
    else:
        check_host(device.host)
    if device.user is not None:
        check_user(device.user)
    if device.port is not None and not (isinstance(device.port, int) and 1 <= device.port <= 65535):
        raise UserError(f"bad port {device.port!r} (1-65535)")
    if device.shell not in SHELLS:
        raise UserError(f"device shell must be one of {', '.join(SHELLS)}, got {device.shell!r}")
    if not isinstance(device.connect_timeout, int) or not 1 <= device.connect_timeout <= MAX_CONNECT_TIMEOUT:
        raise UserError(f"connect_timeout must be 1 to {MAX_CONNECT_TIMEOUT} seconds, got {device.connect_timeout!r}")
    if device.host_key is not None and device.host_key not in HOST_KEY_POLICIES:
        raise UserError(f"host_key must be one of {', '.join(HOST_KEY_POLICIES)}, got {device.host_key!r}")
    if device.jump is not None:
        _check_jump(device.jump)
    for what in ("identity", "known_hosts"):  # known_hosts too: ssh may append to it (accept-new)
        _check_local_file(what, getattr(device, what))
    for key in device.env:
        if not _ENV_NAME.match(key):
            raise UserError(f"bad environment variable name {key!r} for the device")
    for what, value in (("python", device.python), ("workdir", device.workdir),
                        *((f"env {k}", v) for k, v in device.env.items())):
        if value is None:
            continue
        _check_text(what, value)
        if device.shell == "windows" and _CMD_SPECIAL.search(value):
            raise UserError(f"device {what} {value!r} holds a character cmd.exe or PowerShell would interpret "
                            '(one of " & | ^ % < > ! $ `); refusing it for a Windows device (shell=powershell '
                            "quotes them)")
        if device.shell == "powershell" and _PS_QUOTES.search(value):
            raise UserError(f"device {what} {value!r} holds a typographic quote PowerShell reads as a quote; "
                            "refusing it")


def _check_text(what: str, value: str) -> None:
    if not value or _CONTROL.search(value) or value.startswith("-"):
        raise UserError(f"bad device {what} {value!r} (empty, a control character, or a leading '-')")


def _check_local_file(what: str, value: str | None) -> None:
    """An existing regular file on this machine (a FIFO or device would hang or feed ssh)."""
    if value is None:
        return
    _check_text(what, value)
    if not Path(value).expanduser().is_file():
        raise UserError(f"device {what} {value!r} is not a file on this machine")


def _reason(exc: WorkerError) -> str:
    """ssh's own last words (e.g. 'Connection refused', 'Permission denied (publickey)')."""
    text = str(exc)
    marker = "last output: "
    return text.split(marker, 1)[1].strip() if marker in text else text


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"device env must be KEY=VALUE, got {text!r}")
    return key, value


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"device option {what} must be an integer, got {text!r}") from None
