"""The worker protocol's records live with their owners (``dashboard.runtime.protocol`` for the
envelope and the device's messages, ``partition.protocol`` and ``timeline.protocol`` for theirs)
and still form one protocol: one registry of commands and events, filled by each owner, found by
a worker or client that imported none of the capabilities, and light to read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.runtime import protocol
from dashboard.runtime.protocol import Command, Record, SchemaError, event_from_json, register_events
from dashboard.serde import dumps, load

ROOT = Path(__file__).resolve().parent.parent
NOTHING_HEAVY = "import sys; assert 'numpy' not in sys.modules and 'onnx' not in sys.modules, sorted(sys.modules)"


def run_fresh(code: str) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter of this checkout, so that nothing imported by the tests counts."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_importing_the_protocol_imports_neither_numpy_nor_onnx():
    done = run_fresh(f"import dashboard.runtime.protocol\n{NOTHING_HEAVY}")
    assert done.returncode == 0, done.stderr


def test_decoding_a_probe_reply_and_its_events_imports_neither_numpy_nor_onnx():
    """What a client reads from ``device probe``: the greeting, a ``probing`` event and the reply."""
    code = ("from dashboard.runtime.protocol import (COMMANDS, WorkerHello, WorkerProgress, WorkerReply,\n"
            "                                        event_from_json)\n"
            "from dashboard.serde import load, loads\n"
            "hello = load(WorkerHello, {'protocol': 3, 'pid': 1, 'version': 'x'}, 'greeting')\n"
            "progress = loads(WorkerProgress, '{\"id\": 1, \"event\": {\"type\": \"probing\", \"backend\": \"htp\"}}')\n"
            "assert event_from_json(progress.event).backend == 'htp'\n"
            "reply = loads(WorkerReply, '" + _probe_reply() + "')\n"
            "result = load(COMMANDS['probe'].result, reply.result, 'probe result')\n"
            "assert result.backends['htp'].ok and result.shared_memory.reason == 'no'\n"
            f"{NOTHING_HEAVY}")
    done = run_fresh(code)
    assert done.returncode == 0, done.stderr


def _probe_reply() -> str:
    result = protocol.ProbeResult("host", "Linux", "aarch64", "3.12", "1.22", "1.22", "2.3",
                                  backends={"htp": protocol.BackendProbe(True, None, 0.5)},
                                  shared_memory=protocol.SharedMemoryProbe(False, "no"))
    return dumps(protocol.WorkerReply(1, True, result=result.to_json()))


def test_a_fresh_process_finds_the_capabilities_commands_and_events_without_importing_them():
    """A worker is asked ``partition`` before anything imported ``dashboard.partition``: the
    registry imports the owners named in ``CAPABILITY_PROTOCOLS`` and answers."""
    code = ("import sys\nfrom dashboard.runtime.protocol import COMMANDS, event_from_json\n"
            "assert 'dashboard.partition.protocol' not in sys.modules\n"
            "assert COMMANDS['partition'].handler == 'dashboard.partition.measure:run'\n"
            "assert COMMANDS['timeline'].handler == 'dashboard.timeline.runner:run_worker'\n"
            "assert type(event_from_json({'type': 'status', 'message': 'x'})).__module__ == 'dashboard.timeline.protocol'\n"
            "assert type(event_from_json({'type': 'stage', 'stage': 's', 'progress': 0.5})).__name__ == 'Stage'\n")
    done = run_fresh(code)
    assert done.returncode == 0, done.stderr


def test_a_command_is_found_with_its_own_capability_s_records_only():
    """A worker decodes its first request while it imports the runtime: a ``partition`` request
    must not wait for the timeline's, profile's and accuracy's records as well."""
    code = ("import sys\nfrom dashboard.runtime.protocol import CAPABILITY_PROTOCOLS, COMMANDS\n"
            "assert CAPABILITY_PROTOCOLS[0] == 'dashboard.partition.protocol'\n"
            "COMMANDS['partition']\n"
            "assert [m for m in CAPABILITY_PROTOCOLS if m in sys.modules] == ['dashboard.partition.protocol']\n"
            "COMMANDS['accuracy']\n"
            "assert all(m in sys.modules for m in CAPABILITY_PROTOCOLS)\n"
            "try:\n    COMMANDS['format_disk']\nexcept KeyError:\n    pass\nelse:\n    raise SystemExit('found')\n")
    done = run_fresh(code)
    assert done.returncode == 0, done.stderr


def test_every_command_and_event_is_registered_by_its_owner():
    names = ("hello", "probe", "doctor", "put_model", "has_model", "crash", "ort_view", "partition", "timeline")
    owners = {name: protocol.COMMANDS[name].args.__module__ for name in names}
    assert owners["partition"] == "dashboard.partition.protocol"
    assert owners["timeline"] == "dashboard.timeline.protocol"
    assert {owners[c] for c in names[:7]} == {"dashboard.runtime.protocol"}
    assert protocol.EVENT_TYPES["upload"] is protocol.Upload
    assert protocol.EVENT_TYPES["stage"].__module__ == "dashboard.partition.protocol"


def test_an_unknown_command_or_event_is_refused():
    with pytest.raises(KeyError):
        protocol.COMMANDS["format_disk"]
    for data in ({"type": "nope"}, {"type": ["stage"]}, {}, "stage", None):
        with pytest.raises(SchemaError, match="unknown type"):
            event_from_json(data)


def test_a_second_owner_of_an_event_tag_is_refused():
    from dataclasses import dataclass
    from typing import Literal

    @dataclass
    class Stage(Record):
        type: Literal["stage"] = "stage"

    with pytest.raises(ValueError, match="'stage' is registered by dashboard.partition.protocol and"):
        register_events(Stage)
    assert protocol.EVENT_TYPES["stage"].__module__ == "dashboard.partition.protocol"


def test_a_partition_reply_decodes_through_the_registry():
    """The client checks a reply against ``COMMANDS[cmd].result``: the partition record, whoever
    owns it, is what comes back."""
    command: Command = protocol.COMMANDS["partition"]
    data = {"backends": {}, "shapes": {}, "shape_source": "onnx", "placement": {}, "optimized_nodes": 0,
            "renamed_nodes": 0, "runtime": {}, "seconds": 1.0}
    assert load(command.result, data, "partition result").shape_source == "onnx"
    with pytest.raises(SchemaError):
        load(command.result, {**data, "seconds": "soon"}, "partition result")
