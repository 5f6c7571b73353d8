"""Reading what the runtime wrote: QNN's profiling CSV and ONNX Runtime's JSON trace, as runs of rows.

Pure functions of text (no runtime, no model), so a truncated or foreign file is tested without the
simulator, and the mapping onto the model's nodes (``profile.mapping``) is kept apart.

QNN's CSV (``profiling_level=detailed``, also ``optrace``; onnxruntime-qnn 2.7), columns ``Msg
Timestamp, Message, Time, Unit of Measurement, Timing Source, Event Level, Event Identifier, ONNX
Source Ops``. Per QNN graph, once: a ``FINALIZE`` root row (µs) and its ``SUB-EVENT`` phases (Graph
Optimizations, VTCM Allocation, ...). Per graph and run, one *block*: root figures (VTCM acquire,
HVX + HMX power on, ``Accelerator (execute) time (cycles)``), one ``NODE`` row per QNN op
(``<name>:OpId_N (cycles)``, its ONNX source in the last column; ``Input OpId_2``/``Output
OpId_3`` have none), ``Accelerator (execute) time`` (µs) and the ``EXECUTE`` root ``QNN (execute)
time`` (µs) that ends the block. The file is appended to run after run, warm-up runs included.

ONNX Runtime's trace (``SessionOptions.enable_profiling``): a JSON list of Chrome-trace events; one
``model_run`` per ``run()``, and per node executed a ``Node`` event ``<node>_kernel_time`` with
``dur`` in µs and ``args.provider``/``args.op_name``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field

from dashboard.errors import UserError
from dashboard.profile.model import Figure

CSV_COLUMNS = ("Message", "Time", "Unit of Measurement", "Event Level", "Event Identifier")
ACCEL_CYCLES = "Accelerator (execute) time (cycles)"
ACCEL_US = "Accelerator (execute) time"
EXECUTE = "QNN (execute) time"
_NODE_LABEL = re.compile(r"^(?P<name>.*?)[: ]OpId_\d+ \((?:cycles|us)\)$", re.IGNORECASE)
CPU_PROVIDER = "CPUExecutionProvider"
KERNEL_SUFFIX = "_kernel_time"


class ProfileFileError(UserError):
    """A profiling file that is not what the runtime writes (a backend's status says so)."""


@dataclass
class QnnRow:
    """One ``NODE`` row: ``label`` (unique within its graph, e.g. ``Transpose:OpId_17 (cycles)``),
    the QNN op's name (``Transpose``), its ONNX source node names (layout-transformed; one QNN op
    may come from several: ``gemm_input_reshape;/MatMul/MatMulAddFusion;gemm_output_reshape``),
    its figure and unit."""

    label: str
    name: str
    sources: list[str]
    value: float
    unit: str  # "cycles" or "us"


@dataclass
class QnnBlock:
    """One graph's execution in one run."""

    rows: list[QnnRow] = field(default_factory=list)
    cycles: float | None = None  # Accelerator (execute) time (cycles)
    accel_us: float | None = None
    execute_us: float | None = None
    figures: list[Figure] = field(default_factory=list)


@dataclass
class QnnFile:
    finalize: list[list[Figure]]  # per graph: its FINALIZE total first, then the phases
    blocks: list[QnnBlock]  # complete blocks in file order
    truncated: bool = False  # the file ended inside a block (that block is dropped)


def read_qnn_csv(text: str) -> QnnFile:
    """The blocks of a QNN profiling CSV. A file without QNN's header is a ``ProfileFileError``;
    a file that stops mid-block (a crash, a full disk) keeps the complete blocks and says
    ``truncated``."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or not set(CSV_COLUMNS) <= set(reader.fieldnames):
        raise ProfileFileError("not a QNN profiling CSV (no Message/Time/Event Identifier header)")
    out = QnnFile([], [])
    block: QnnBlock | None = None
    in_finalize = False
    for row in reader:
        try:
            value = float(row["Time"])
        except (TypeError, ValueError):
            out.truncated = True  # a row cut short: nothing after it is trusted
            break
        message, level = row.get("Message") or "", row.get("Event Level") or ""
        ident, unit = (row.get("Event Identifier") or "").strip(), (row.get("Unit of Measurement") or "").upper()
        if message == "FINALIZE":
            _close_finalize(out)
            out.finalize.append([Figure("QNN finalize", value, unit.lower())])
            in_finalize = True
            continue
        if level == "SUB-EVENT" and message != "NODE":
            if in_finalize:
                out.finalize[-1].append(Figure(ident, value, unit.lower()))
            continue
        if in_finalize:
            _close_finalize(out)
        in_finalize = False
        block = block or QnnBlock()
        if message == "NODE":
            block.rows.append(_node_row(ident, row.get("ONNX Source Ops") or "", value, unit))
        elif message == "EXECUTE" or ident == EXECUTE:
            block.execute_us = value
            out.blocks.append(block)
            block = None
        elif ident == ACCEL_CYCLES:
            block.cycles = value
        elif ident == ACCEL_US:
            block.accel_us = value
        elif unit != "COUNT":
            block.figures.append(Figure(ident, value, unit.lower()))
    _close_finalize(out)
    if block is not None and (block.rows or block.cycles is not None):
        out.truncated = True
    return out


def _close_finalize(out: QnnFile) -> None:
    """Drop the last finalize group when it repeats an earlier one: QNN logs the graphs finalized
    before again when the next graph finalizes (measured: a model with two QNN graphs has three
    FINALIZE groups, the first twice), so the groups are not one per graph."""
    if len(out.finalize) > 1 and out.finalize[-1] in out.finalize[:-1]:
        out.finalize.pop()


def _node_row(ident: str, source: str, value: float, unit: str) -> QnnRow:
    match = _NODE_LABEL.match(ident)
    name = match.group("name").strip() if match else ident
    sources = [s.strip() for s in source.split(";") if s.strip()]  # measured: "a;b;c" for a row of three nodes
    return QnnRow(ident, name, sources, value, "us" if unit == "US" else "cycles")


def runs_of(blocks: list[QnnBlock], graphs: int, warmup: int) -> list[list[QnnBlock]]:
    """The timed runs: blocks grouped by run (``graphs`` blocks per ``run()``, one per QNN graph),
    the ``warmup`` first runs dropped, an incomplete last run dropped."""
    graphs = max(graphs, 1)
    whole = len(blocks) // graphs
    return [blocks[i * graphs:(i + 1) * graphs] for i in range(min(warmup, whole), whole)]


@dataclass
class KernelEvent:
    name: str  # the node's name in the graph ORT ran
    op_type: str
    provider: str
    dur_us: float


def read_ort_trace(text: str, warmup: int) -> list[list[KernelEvent]]:
    """Per timed run (the ``warmup`` first ``model_run`` events dropped), the kernel events of the
    nodes it executed. Malformed JSON is a ``ProfileFileError``."""
    try:
        events = json.loads(text)
    except ValueError as exc:
        raise ProfileFileError(f"ONNX Runtime's profile is not JSON ({exc})") from None
    if not isinstance(events, list):
        raise ProfileFileError("ONNX Runtime's profile is not a list of trace events")
    events = [e for e in events if isinstance(e, dict)]
    runs = sorted((_number(e, "ts"), _number(e, "ts") + _number(e, "dur"))
                  for e in events if e.get("name") == "model_run")
    out: list[list[KernelEvent]] = [[] for _ in runs]
    for e in events:
        name = e.get("name")
        if e.get("cat") != "Node" or not isinstance(name, str) or not name.endswith(KERNEL_SUFFIX):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        ts = _number(e, "ts")
        for i, (start, end) in enumerate(runs):
            if start <= ts <= end:
                out[i].append(KernelEvent(name[: -len(KERNEL_SUFFIX)], str(args.get("op_name", "")),
                                          str(args.get("provider", "")), _number(e, "dur")))
                break
    return out[warmup:]


def _number(event: dict, key: str) -> float:
    """A trace event's ``ts``/``dur`` (µs; 0 when absent). Anything else than a finite number is a
    ``ProfileFileError``: the CPU backend fails alone, the rest of the profile is kept."""
    value = event.get(key, 0)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise ProfileFileError(f"ONNX Runtime's profile has a {event.get('name', 'trace')!r} event whose {key} is "
                               f"not a number of µs ({str(value)[:40]!r})")
    return number
