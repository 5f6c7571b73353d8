"""Devices: where the runtime worker runs, and what it finds there.

A device is only a transport for the worker protocol (``dashboard.worker``): *local* is this
machine's Python; ``ssh://[user@]host[:port]`` runs ``python -m dashboard.worker`` on a Snapdragon
board or Windows-on-Snapdragon laptop over the user's own OpenSSH client. No port is opened on
the device, and the user's keys, agent and ``~/.ssh/config`` (host aliases, jump hosts) apply as
for any ``ssh`` command; ``BatchMode=yes`` makes a missing key fail at once instead of waiting for
a password prompt nobody can answer. Model bytes travel over the protocol
(``WorkerClient.send_model``), so nothing has to be copied to the device by hand.

Options for a remote device can ride in the URL's query, so the one ``--device`` argument of
the CLI can say everything::

    ssh://me@board:2222?python=/opt/lab/.venv/bin/python&workdir=/opt/lab&identity=~/.ssh/board
"""

from __future__ import annotations

import shlex
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from .errors import UserError
from .worker_client import WorkerClient, WorkerError

LOCAL = "local"
SHELLS = ("posix", "windows")
_QUERY_KEYS = ("python", "workdir", "identity", "shell", "connect_timeout", "env", "option")


@dataclass(frozen=True)
class Device:
    """A worker transport. ``url`` is what the user typed and how the device is named."""

    url: str = LOCAL
    host: str | None = None
    user: str | None = None
    port: int | None = None
    python: str = "python3"  # the remote interpreter that has this package installed
    workdir: str | None = None  # remote checkout to run from (``python -m`` finds the package there)
    identity: str | None = None  # private key file (default: the user's agent and config)
    shell: str = "posix"  # the remote login shell: posix (Linux, Android) or windows (cmd.exe)
    connect_timeout: int = 10
    env: dict[str, str] = field(default_factory=dict)  # set on the remote side (e.g. model store)
    ssh_options: tuple[str, ...] = ()  # extra ``-o KEY=VALUE`` for ssh

    @property
    def is_local(self) -> bool:
        return self.host is None

    @property
    def label(self) -> str:
        if self.is_local:
            return "local (this machine)"
        port = f":{self.port}" if self.port else ""
        return f"ssh://{self.user + '@' if self.user else ''}{self.host}{port}"

    @classmethod
    def parse(cls, url: str, **overrides) -> "Device":
        """``local`` or ``ssh://[user@]host[:port][?python=..&workdir=..&identity=..]``; keyword
        ``overrides`` (python, workdir, identity, shell, connect_timeout, env, ssh_options) win."""
        text = (url or LOCAL).strip()
        if text == LOCAL:
            return cls(url=LOCAL, **overrides)
        parts = urlsplit(text)
        if parts.scheme != "ssh" or not parts.hostname:
            raise UserError(f"device must be 'local' or ssh://[user@]host[:port], got {text!r}")
        try:
            port = parts.port
        except ValueError:
            raise UserError(f"bad port in device {text!r}") from None
        values: dict = {}
        for key, items in parse_qs(parts.query, keep_blank_values=False).items():
            if key not in _QUERY_KEYS:
                raise UserError(f"unknown device option {key!r}; known: {', '.join(_QUERY_KEYS)}")
            if key == "env":
                values["env"] = dict(_pair(item, "env") for item in items)
            elif key == "option":
                values["ssh_options"] = tuple(items)
            elif key == "connect_timeout":
                values[key] = _int(items[-1], key)
            else:
                values[key] = items[-1]
        values.update(overrides)
        device = cls(url=text, host=parts.hostname, user=unquote(parts.username) if parts.username else None,
                     port=port, **values)
        if device.shell not in SHELLS:
            raise UserError(f"device shell must be one of {', '.join(SHELLS)}, got {device.shell!r}")
        if device.connect_timeout <= 0:
            raise UserError("connect_timeout must be a positive number of seconds")
        return device

    # -- transport -------------------------------------------------------------------------------
    def remote_command(self) -> str:
        """What the remote login shell runs: the worker, from ``workdir``, with ``env`` set."""
        if self.shell == "windows":
            parts = [f'cd /d "{self.workdir}" &&' if self.workdir else ""]
            parts += [f'set "{k}={v}" &&' for k, v in self.env.items()]
            parts.append(f'"{self.python}" -m dashboard.worker')
            return " ".join(p for p in parts if p)
        command = ["exec", "env", *(f"{k}={v}" for k, v in self.env.items()),
                   self.python, "-m", "dashboard.worker"]
        quoted = " ".join(shlex.quote(c) for c in command)
        return f"cd {shlex.quote(self.workdir)} && {quoted}" if self.workdir else quoted

    def argv(self) -> list[str] | None:
        """The worker's command line (None: this machine's own Python worker)."""
        if self.is_local:
            return None
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}",
                "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity:
            argv += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        for option in self.ssh_options:
            argv += ["-o", option]
        argv += [f"{self.user}@{self.host}" if self.user else self.host, "--", self.remote_command()]
        return argv

    def connect(self) -> WorkerClient:
        """A started worker on this device; an unreachable device is one ``UserError`` line."""
        client = WorkerClient(self.argv(), label=f"worker on {self.label}", remote=not self.is_local,
                              start_timeout=self.connect_timeout + 60)
        try:
            return client.start()
        except WorkerError as exc:
            if self.is_local:
                raise
            raise UserError(f"cannot reach {self.label}: {_reason(exc)}") from None

    def probe(self, timeout: float = 300.0) -> dict:
        """OS/arch, runtime versions, which backends initialize, shared memory and SoC facts."""
        start = time.perf_counter()
        with self.connect() as worker:
            result = worker.call("probe", {"backends": ["htp", "gpu", "cpu"]}, timeout=timeout)
        return {"device": self.url, "label": self.label, **result,
                "soc": result.get("soc"), "seconds": round(time.perf_counter() - start, 3)}

    def to_json(self) -> dict:
        data = asdict(self)
        data["label"] = self.label
        return data


def _reason(exc: WorkerError) -> str:
    """ssh's own last words (e.g. 'Connection refused', 'Permission denied (publickey)')."""
    text = str(exc)
    marker = "last output: "
    return text.split(marker, 1)[1].strip() if marker in text else text


def _pair(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"device {what} must be KEY=VALUE, got {text!r}")
    return key, value


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"device option {what} must be an integer, got {text!r}") from None
