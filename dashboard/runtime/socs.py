"""Named Snapdragon parts and the QNN ``soc_model`` / ``htp_arch`` values they compile for.

Why named parts: the QNN EP takes raw numbers (``soc_model=57``), which nobody remembers; and the
device doctor needs a part's Hexagon architecture to tell whether the installed wheel ships the
DSP library (``libQnnHtpV<arch>Skel.so``) for it. Every entry names its source:

- **ExecuTorch**: GitHub ``pytorch/executorch``, ``backends/qualcomm/serialization/qc_schema.py``
  (``QcomChipset`` and ``_soc_info_table``), commit cff6f4dd32e6.
- **LiteRT**: GitHub ``google-ai-edge/LiteRT``, ``litert/vendors/qualcomm/supported_soc.csv``
  (model, Hexagon version, soc_model) and ``litert/vendors/qualcomm/core/schema/soc_table.h``
  ("derived from the QAIRT 2.47 documentation"), commit f67457790c9c; its earlier
  ``core/schema/soc_table.cc`` (commit 5f0975fc6) maps QCS9075 and QCS8275 to the QCS9100 and
  QCS8300 models with their DSP architectures.
- **QNN SDK**: ``Qnn_SocModel_t`` in the SDK's ``include/QNN/QnnTypes.h`` (deprecated there and
  frozen at ``SM8850 = 87``), as mirrored in GitHub ``chuzcjoe/qnnx`` at commit 4d4c8dc5.
- **llama.cpp**: the SoC ids of its QNN backend (``SC8280X = 37``, ``SC8380XP = 60``), which the
  project used first.
- **Linux**: ``drivers/soc/qcom/socinfo.c`` names the parts the way ``/sys/devices/soc0/machine``
  reports them (``QCS6490``, ``QCS9075``...), which is how the doctor finds a board's entry.

``60`` is also the value this project measured HTP fp16 to finalize with on the x86_64 simulator.
Where public material gives no ``soc_model`` for a part, the entry says so and leaves it unset
(``None``): a session then gets ``htp_arch`` only, and fp16 needs ``--option soc_model=N``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.errors import UserError


@dataclass(frozen=True)
class Soc:
    key: str  # lower case of the kernel's machine name (/sys/devices/soc0/machine)
    name: str
    soc_model: int | None  # None: not published for this part
    htp_arch: int
    source: str
    windows_markers: tuple[str, ...] = ()  # substrings of the Windows processor name that identify the part
    kernel_names: tuple[str, ...] = ()  # other names /sys/devices/soc0/machine gives the part


SOCS: tuple[Soc, ...] = (
    Soc("sc8380xp", "Snapdragon X Elite / X Plus (SC8380XP)", 60, 73,
        "QNN SDK, llama.cpp, LiteRT supported_soc.csv (SC8380XP, v73, 60)", ("X1E",)),
    Soc("sc8480xp", "Snapdragon X2 Elite (SC8480XP)", 88, 81,
        "LiteRT supported_soc.csv (SC8480XP, v81, 88) and soc_table.h (QAIRT 2.47 documentation); "
        "not in the QNN SDK's frozen enum", ("X2E",)),
    Soc("sc8280x", "Snapdragon 8cx Gen 3 (SC8280X)", 37, 68, "QNN SDK and llama.cpp (37); v68 as the project had it",
        ("8cx Gen 3",), ("SC8280XP",)),
    Soc("sm8850", "Snapdragon 8 Elite Gen 5 (SM8850)", 87, 81,
        "QNN SDK (87), ExecuTorch (SM8850 = 87, HtpArch.V81), LiteRT supported_soc.csv (v81, 87)"),
    Soc("sm8750", "Snapdragon 8 Elite (SM8750)", 69, 79, "ExecuTorch"),
    Soc("sm8650", "Snapdragon 8 Gen 3 (SM8650)", 57, 75, "ExecuTorch"),
    Soc("sm8550", "Snapdragon 8 Gen 2 (SM8550)", 43, 73, "ExecuTorch"),
    Soc("sm8475", "Snapdragon 8+ Gen 1 (SM8475)", 42, 69, "ExecuTorch"),
    Soc("sm8450", "Snapdragon 8 Gen 1 (SM8450)", 36, 69, "ExecuTorch"),
    Soc("sm8350", "Snapdragon 888 (SM8350)", 30, 68, "ExecuTorch"),
    Soc("qcs6490", "QCS6490 (RB3 Gen 2, IoT)", None, 68,
        "soc_model: none published for QCS6490 (not in the QNN SDK enum, ExecuTorch or LiteRT; its sibling QCM6490 "
        "is 93 in ExecuTorch and LiteRT soc_table.h but 35 in LiteRT supported_soc.csv); v68: QCM6490 in ExecuTorch "
        "and LiteRT"),
    Soc("qcs8275", "QCS8275 (IQ-8, IoT)", 82, 75,
        "LiteRT supported_soc.csv (QCS8275, v75, 82) and soc_table.cc (as QCS8300); QNN SDK QCS8300 = 82"),
    Soc("qcs9100", "QCS9100 (IoT)", 77, 73, "ExecuTorch"),
    Soc("qcs9075", "QCS9075 (IQ-9, IoT)", 77, 73,
        "LiteRT supported_soc.csv (QCS9075, v73, 77) and soc_table.cc (as QCS9100); QNN SDK QCS9100 = 77"),
    Soc("sa8295", "SA8295P (automotive)", 39, 68, "ExecuTorch", (), ("SA8295P",)),
    Soc("sa8255", "SA8255P (automotive)", 52, 73, "ExecuTorch", (), ("SA8255P",)),
)
DEFAULT_SOC = "sc8380xp"


def resolve_soc(name: str) -> Soc:
    """A SoC by key (``sm8650``), by its model number (``57``) or by part name, case-insensitive."""
    wanted = name.strip().lower()
    for soc in SOCS:
        if wanted in (soc.key, soc.name.lower()) or (soc.soc_model is not None and wanted == str(soc.soc_model)):
            return soc
    known = ", ".join(s.key for s in SOCS)
    raise UserError(f"unknown SoC {name!r}; known: {known} (or their soc_model numbers)")


def identify_soc(machine: str | None = None, processor_name: str | None = None) -> Soc | None:
    """The part a host reports: the kernel's machine name (Linux ``/sys/devices/soc0/machine``,
    e.g. ``QCS6490``) or the Windows processor name (``Snapdragon(R) X Elite - X1E78100 - ...``)."""
    wanted = (machine or "").strip().lower()
    for soc in SOCS:
        if wanted and wanted in (soc.key, *(name.lower() for name in soc.kernel_names)):
            return soc
        if processor_name and any(marker in processor_name for marker in soc.windows_markers):
            return soc
    return None


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
