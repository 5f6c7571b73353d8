"""The partition capability's messages of the worker protocol: its progress event (``Stage``)
and the ``partition`` command's arguments and result, registered with the protocol's one mechanism
(``dashboard.runtime.protocol``). Why here: the records are built from this capability's types
(``BackendReport``), so their owner defines them and the runtime stays below it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dashboard.intake.shapes import TensorShape
from dashboard.partition.report import BackendReport
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.protocol import Command, register_command, register_events
from dashboard.serde import Record


@dataclass
class Stage(Record):
    """A step of a partition analysis, with the fraction done."""

    stage: str
    progress: float
    backend: str | None = None
    type: Literal["stage"] = "stage"


@dataclass
class PartitionArgs(Record):
    path: str
    config: SessionConfig
    backends: list[Literal["htp", "gpu"]]
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # whole shapes of inputs with ``?`` dims
    # The client read the file and found nothing the sessions' copy must change (every node named
    # once, no input shape to declare): the worker may start the HTP session on the file itself
    # before it has read it (``partition.session``, the head start). False: it reads first.
    as_is: bool = False


@dataclass
class PartitionResult(Record):
    """What the worker measured: per-backend reports keyed by model node, tensor shapes, and how
    the graph ONNX Runtime partitions relates to the model."""

    backends: dict[str, BackendReport]
    shapes: dict[str, TensorShape]
    shape_source: str
    placement: dict[str, tuple[str, str | None]]
    optimized_nodes: int
    renamed_nodes: int
    runtime: dict[str, str | None]
    seconds: float


register_events(Stage)
register_command("partition", Command(PartitionArgs, PartitionResult, "dashboard.partition.measure:run"))
