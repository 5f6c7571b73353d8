"""Named Snapdragon parts and the QNN ``soc_model`` / ``htp_arch`` values they compile for.

Why named parts: the QNN EP takes raw numbers (``soc_model=57``), which nobody remembers. Values
from ExecuTorch's Qualcomm backend schema (``backends/qualcomm/serialization/qc_schema.py``,
``QcomChipset`` and its SoC info table) and, for the Snapdragon X parts, the SoC ids used by
llama.cpp's QNN backend (``SC8280X = 37``, ``SC8380XP = 60``). ``60`` is also the value this
project measured HTP fp16 to finalize with on the x86_64 simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.errors import UserError


@dataclass(frozen=True)
class Soc:
    key: str
    name: str
    soc_model: int
    htp_arch: int


SOCS: tuple[Soc, ...] = (
    Soc("sc8380xp", "Snapdragon X Elite / X Plus (SC8380XP)", 60, 73),
    Soc("sc8280x", "Snapdragon 8cx Gen 3 (SC8280X)", 37, 68),
    Soc("sm8750", "Snapdragon 8 Elite (SM8750)", 69, 79),
    Soc("sm8650", "Snapdragon 8 Gen 3 (SM8650)", 57, 75),
    Soc("sm8550", "Snapdragon 8 Gen 2 (SM8550)", 43, 73),
    Soc("sm8475", "Snapdragon 8+ Gen 1 (SM8475)", 42, 69),
    Soc("sm8450", "Snapdragon 8 Gen 1 (SM8450)", 36, 69),
    Soc("sm8350", "Snapdragon 888 (SM8350)", 30, 68),
    Soc("qcs9100", "QCS9100 (IoT)", 77, 73),
    Soc("sa8295", "SA8295P (automotive)", 39, 68),
    Soc("sa8255", "SA8255P (automotive)", 52, 73),
)
DEFAULT_SOC = "sc8380xp"


def resolve_soc(name: str) -> Soc:
    """A SoC by key (``sm8650``), by its model number (``57``) or by part name, case-insensitive."""
    wanted = name.strip().lower()
    for soc in SOCS:
        if wanted in (soc.key, str(soc.soc_model), soc.name.lower()):
            return soc
    known = ", ".join(s.key for s in SOCS)
    raise UserError(f"unknown SoC {name!r}; known: {known} (or their soc_model numbers)")


def soc_for(soc: str | None, fp16: bool) -> str | None:
    """The SoC key a configuration compiles for: the one asked for, else the default when fp16 is
    on (the runtime refuses ``enable_htp_fp16_precision`` without a ``soc_model``), else none."""
    if soc:
        return resolve_soc(soc).key
    return DEFAULT_SOC if fp16 else None


# What figures were measured on (``runtime.qnn.hardware``, decided by the worker that measured),
# in the words pages, CLI text and reports use: simulator figures are never shown as NPU figures.
HARDWARE_LABELS = {"simulator": "HTP simulator (x86_64)", "npu": "NPU (Hexagon HTP)", "gpu": "Adreno GPU",
                   "cpu": "CPU", "unknown": "unidentified hardware"}
SIMULATOR_NOTE = ("the HTP simulator runs QNN's real compiler but emulates the NPU on this x86_64 CPU: its "
                  "latencies are many times an NPU's and say nothing about NPU speed")


def hardware_label(hardware: str | None) -> str:
    """``"simulator"`` -> ``"HTP simulator (x86_64)"``; None (a prediction) -> ``"no hardware (predicted)"``."""
    return "no hardware (predicted)" if hardware is None else HARDWARE_LABELS.get(hardware, hardware)
