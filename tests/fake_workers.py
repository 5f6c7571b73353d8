"""Worker stand-ins for the tests of the client's defences: processes that greet as a worker does
(or as an older one does) and then misbehave in one precise way. Real processes, real pipes."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from dashboard import __version__
from dashboard.runtime.protocol import PROTOCOL_VERSION


def fake_worker(body: str, *, protocol: int = PROTOCOL_VERSION, version: str | None = __version__) -> list[str]:
    """argv of a Python process that greets (with its own pid) as a worker of ``protocol`` and
    ``version`` does (``None``: a greeting without a version, as before protocol 3), then runs
    ``body`` (``json``, ``os``, ``sys`` and ``time`` imported)."""
    hello = {"protocol": protocol, **({"version": version} if version is not None else {})}
    prelude = (f"import json, os, sys, time\n"
               f"print(json.dumps({{'hello': dict({hello!r}, pid=os.getpid())}}), flush=True)\n")
    return [sys.executable, "-c", prelude + body]


def patched_worker(handler_source: str, command: str = "partition") -> list[str]:
    """argv of the real worker with ``command`` run by ``handler(args, emit)`` defined in
    ``handler_source`` (module ``__main__``)."""
    return [sys.executable, "-c", "import time, dashboard.runtime.protocol as m, dashboard.runtime.worker as w\n"
            + handler_source
            + f"\nm.COMMANDS[{command!r}] = m.COMMANDS[{command!r}]._replace(handler='__main__:handler')\n"
            + "w.serve()"]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: it runs nothing)."""
    status = Path(f"/proc/{pid}/status")
    try:
        state = next(line for line in status.read_text().splitlines() if line.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return False
    return "zombie" not in state


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` stops running within ``seconds`` (a killed process takes a moment to exit
    on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def processes_with_env(name: str, value: str) -> list[int]:
    """Pids of this user's processes whose environment has ``name=value`` (how a test finds the
    workers a command it started has spawned, without trusting that command to say)."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0") and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
