"""Worker stand-ins for the tests of the client's defences: processes that greet as a worker does
(or as an older one does) and then misbehave in one precise way. Real processes, real pipes."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from dashboard import __version__
from dashboard.runtime.protocol import PROTOCOL_VERSION

MARK = "QNN_LAB_CANCEL_MARK"
# The worker stops itself before it greets: only a Cancel that covers a worker's start ends it early.
STOPS_BEFORE_GREETING = "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n"


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


def interruptible() -> None:
    """``preexec_fn`` of a command a test interrupts with SIGINT: Ctrl-C's default action, as in a
    terminal. A process started with SIGINT ignored (the tests run under ``nohup ... &``, a CI
    runner) passes that on to its children, and Python then installs no KeyboardInterrupt handler:
    the SIGINT the test sends would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: it runs nothing)."""
    status = Path(f"/proc/{pid}/status")
    try:
        state = next(line for line in status.read_text().splitlines() if line.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return False
    return "zombie" not in state


def stopped(pid: int) -> bool:
    """Whether ``pid`` is a process stopped by a signal (SIGSTOP)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return any(line.startswith("State:") and "stopped" in line for line in status.splitlines())


@pytest.fixture
def worker_mark(tmp_path, monkeypatch) -> Iterator[str]:
    """A private cache, and a fresh value of ``MARK`` that every worker the test starts inherits;
    the test fails when one of them outlives it."""
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    yield mark
    assert not processes_with_env(MARK, mark), "a process outlived its test"


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


# A ``timeline`` handler for ``patched_worker``: serves every strategy's requests at once, with no
# session and no compile (milliseconds instead of the simulator's seconds), emitting the events a
# real run does. After ``HOLD_AFTER`` answers it creates the file ``HELD`` (the test's sign that it
# holds) and waits until the file ``GATE`` exists (forever if it never does: a run that only Cancel
# ends; the worker exits when its stdin closes).
FAKE_TIMELINE = """
import os, time
from dashboard.timeline.model import Event, Request, StrategyRun, TimelineRun
from dashboard.timeline.protocol import Setup, Status, StrategyEnd, StrategyStart, TimelineRequest

def handler(args, emit):
    options, answered, runs = args.options, 0, {}
    emit(Status('fake worker: serving'))
    emit(Setup({'backend': 'cpu', 'label': 'CPU EP (fake)'}, {'backend': 'htp', 'label': 'QNN HTP (fake)'}))
    for name in options.strategies:
        backends = {'fast': 'cpu'}
        emit(StrategyStart(name, backends))
        run = StrategyRun(name, backends, events=[Event(0.0, 'serve_start', 'cpu')],
                          expected_requests=options.requests)
        for i in range(options.requests):
            if answered == HOLD_AFTER:
                open(HELD, 'w').close()
                while not os.path.exists(GATE):
                    time.sleep(0.05)
            request = Request(i, i * 0.01, i * 0.01, i * 0.01 + 0.004, 'cpu', True)
            run.requests.append(request)
            emit(TimelineRequest(name, request))
            answered += 1
        emit(StrategyEnd(name, run.metrics))
        runs[name] = run
    return TimelineRun(device={}, model=args.model, options=options.to_json(),
                       workload={'requests': options.requests, 'rate': options.rate,
                                 'concurrency': options.concurrency, 'inputs': 'fake'},
                       strategies=runs, fast={'backend': 'cpu', 'label': 'CPU EP (fake)'},
                       target={'backend': 'htp', 'label': 'QNN HTP (fake)'}, runtime={'hardware': 'fake'})
"""


def held(gate: Path) -> Path:
    """The file a ``fake_timeline_code`` worker creates once it holds before ``gate``."""
    return gate.with_name(gate.name + ".held")


def fake_timeline_code(gate: Path, hold_after: int = -1) -> str:
    """Python source of a worker whose ``timeline`` command is ``FAKE_TIMELINE``, holding after
    ``hold_after`` answers until ``gate`` exists (-1: never holds); ``held(gate)`` exists once it
    holds."""
    handler = f"HOLD_AFTER = {hold_after}\nGATE = {str(gate)!r}\nHELD = {str(held(gate))!r}\n" + FAKE_TIMELINE
    return patched_worker(handler, "timeline")[2]
