"""The accuracy capability's messages of the worker protocol: the ``accuracy`` command's arguments
and its result (the ``AccuracyReport`` record), registered with the protocol's one mechanism
(``dashboard.runtime.protocol``). Progress reuses the partition's ``Stage`` event, so every front end
that shows a partition's progress shows this one's."""

from __future__ import annotations

from dataclasses import dataclass, field

from dashboard.accuracy.model import LAYER_MODES, AccuracyReport
from dashboard.errors import UserError
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.protocol import Command, register_command
from dashboard.serde import Record


@dataclass
class AccuracyArgs(Record):
    """``path``: the model (float, or QDQ with no float beside it); ``quantized``: its QDQ form, if
    any; ``config``: the HTP session's (a QDQ model runs on it without fp16); ``data``: the samples
    as ``accuracy.data.Dataset.save`` wrote them; ``layers``: the layer modes to run."""

    path: str
    config: SessionConfig
    data: str
    quantized: str | None = None
    layers: list[str] = field(default_factory=list)
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_layers(self.layers)


def check_layers(layers) -> list[str]:
    bad = [m for m in layers if m not in LAYER_MODES]
    if bad:
        raise UserError(f"layer modes are {', '.join(LAYER_MODES)}; got {', '.join(map(str, bad))}")
    return list(dict.fromkeys(layers))


ACTIVATIONS = ("u8", "u16")
WEIGHTS = ("u8", "s8", "u16", "int4")
CALIBRATION = ("minmax", "entropy", "percentile")
LIFTS = ("u16", "s16")


@dataclass
class QuantizeArgs(Record):
    """``path``: the float model; ``data``: the calibration samples (``Dataset.save``); ``out``: the
    QDQ model to write; ``lifted``: tensors given another activation type than ``activations``."""

    path: str
    data: str
    out: str
    activations: str = "u8"
    weights: str = "u8"
    per_channel: bool = False
    calibration: str = "minmax"
    lifted: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("activations", self.activations, ACTIVATIONS)
        check_choice("weights", self.weights, WEIGHTS)
        check_choice("calibration", self.calibration, CALIBRATION)
        for tensor, kind in self.lifted.items():
            check_choice(f"the type of {tensor!r}", kind, LIFTS)


@dataclass
class QuantizeBuild(Record):
    """What the ``quantize`` command wrote: the QDQ model, what ORT left in float ([node, op type]),
    and what the recipe did (the preprocessing, the metadata work-around)."""

    out: str
    left_float: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_choice(what: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UserError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


register_command("accuracy", Command(AccuracyArgs, AccuracyReport, "dashboard.accuracy.measure:run"))
register_command("quantize", Command(QuantizeArgs, QuantizeBuild, "dashboard.accuracy.build:run"))
