"""The QNN EP's provider options and the values it accepts, checked before any process starts.

Why: the EP reads each option it knows from the session configuration and silently ignores the
rest, and most of its parsers log a warning (at a level nobody sees) and fall back to the default
for a value they do not recognise: ``htp_performance_mode=notamode`` or ``htp_performanc_mode=burst``
run a whole measurement without the setting the user asked for. ``check`` refuses both, in one
line that lists what is valid.

Source: onnxruntime-qnn, ``onnxruntime/core/providers/qnn/qnn_execution_provider.cc`` (the
``QnnEp`` constructor, ``InitQnnSerializerConfig`` and the ``Parse*`` functions: ``ParseBackendTypeName``,
``ParseProfilingLevel``, ``ParseHtpPerformanceMode``, ``ParseQnnContextPriority``,
``ParseHtpGraphFinalizationOptimizationMode``, ``ParseHtpArchitecture``, ``ParseSocModel``,
``ParseVtcmSize``, ``ParseOpPackages``, ``ParseBoolOption``, ``ResolveGenieLogLevel``) and the EP's
option reference, ``docs/execution_providers/QNN-ExecutionProvider.md`` ("EP Provider Options"). Every
key below is also a string of the installed 2.7.0 library (``libonnxruntime_providers_qnn.so``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from dashboard.errors import UserError

_INTEGER = re.compile(r"[0-9]{1,9}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Option:
    """How the EP reads one option: ``choices`` (exact strings, ``lower`` if the EP lowercases
    first), ``minimum`` for integers, otherwise a path or name; ``lists`` if it takes a comma list
    (one value per SoC of a multi-SoC context)."""

    choices: tuple[str, ...] = ()
    lower: bool = False
    minimum: int | None = None
    lists: bool = False
    hint: str = ""

    def problem(self, value: str) -> str | None:
        """Why the EP would not use ``value`` as given (None: it would)."""
        items = value.split(",") if self.lists else [value]
        for item in items:
            why = self._item_problem(item.strip() if self.lists else item)
            if why:
                return why
        return None

    def _item_problem(self, item: str) -> str | None:
        if self.choices:
            known = (item.lower() if self.lower else item) in self.choices
            return None if known else f"one of {', '.join(self.choices)}"
        if self.minimum is not None:
            if not _INTEGER.fullmatch(item) or int(item) < self.minimum:
                return f"an integer >= {self.minimum}" + (f" ({self.hint})" if self.hint else "")
            return None
        if not item or _CONTROL.search(item):
            return "a non-empty path or name without control characters"
        return None


FLAG = Option(choices=("0", "1"))
TEXT = Option()

OPTIONS: dict[str, Option] = {
    # backend
    "backend_type": Option(choices=("htp", "gpu", "cpu", "saver", "ir", "genie")),
    "backend_path": TEXT,
    "skip_qnn_version_check": FLAG,
    "genie_log_level": Option(choices=("error", "warn", "info", "verbose")),
    # target device and graph
    "soc_model": Option(minimum=0, lists=True, hint="a QNN soc_model number such as 60; --soc takes part names"),
    "htp_arch": Option(choices=("0", "68", "69", "73", "75", "79", "81"), lists=True),
    "device_id": Option(minimum=0),
    "vtcm_mb": Option(minimum=0, lists=True, hint="megabytes; 0 leaves the default"),
    "htp_graph_finalization_optimization_mode": Option(choices=("0", "1", "2", "3")),
    "enable_htp_fp16_precision": FLAG,
    "enable_htp_fp16_clamp_overflow": FLAG,
    "htp_bf16_enable": FLAG,
    "enable_htp_monolithic_lstm": FLAG,
    "enable_block_quant_weight_optimization": FLAG,
    "offload_graph_io_quantization": FLAG,
    "enable_htp_spill_fill_buffer": FLAG,
    "enable_htp_graph_splitting": FLAG,
    "num_graph_prepare_threads": Option(minimum=1),
    "op_packages": TEXT,
    # execution
    "htp_performance_mode": Option(choices=("burst", "balanced", "default", "high_performance", "high_power_saver",
                                            "low_balanced", "low_power_saver", "power_saver", "extreme_power_saver",
                                            "sustained_high_performance"), lower=True),
    "qnn_context_priority": Option(choices=("low", "normal_low", "normal", "normal_high", "high", "high_plus",
                                            "critical", "critical_plus"), lower=True),
    "rpc_control_latency": Option(minimum=0, hint="microseconds"),
    "htp_share_resource_optimization": Option(choices=("1",)),
    "enable_vtcm_backup_buffer_sharing": FLAG,
    "disable_file_mapped_weights": FLAG,
    "extended_udma": FLAG,
    "enable_htp_prepare_only": FLAG,
    # memory
    "enable_htp_shared_memory_allocator": FLAG,
    "enable_dx12_shared_memory_allocator": FLAG,
    # profiling, tracing and dumps
    "profiling_level": Option(choices=("off", "basic", "detailed", "optrace"), lower=True),
    "profiling_file_path": TEXT,
    "enable_framework_op_trace": FLAG,
    "framework_op_trace_dir": TEXT,
    "dump_json_qnn_graph": FLAG,
    "json_qnn_graph_dir": TEXT,
    "dump_qnn_ep_input_graph": FLAG,
    "dump_qnn_ep_input_graph_dir": TEXT,
    "dump_qnn_ir_dlc": FLAG,
    "dump_qnn_ir_dlc_dir": TEXT,
    "qnn_ir_backend_path": TEXT,
    "skip_backend_op_validation": FLAG,
    "qnn_saver_path": TEXT,
}


def check(options: dict[str, str]) -> None:
    """Refuse an option the EP does not know or a value it would not use, in one line."""
    for key, value in options.items():
        option = OPTIONS.get(key)
        if option is None:
            close = difflib.get_close_matches(key, OPTIONS, n=1)
            guess = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"unknown QNN provider option {key!r}{guess}: the runtime would ignore it; known: "
                            f"{', '.join(OPTIONS)}")
        if not isinstance(value, str):
            raise UserError(f"QNN provider option {key} must be a string, got {value!r}")
        why = option.problem(value)
        if why:
            raise UserError(f"QNN provider option {key}={value[:60]!r} is not valid: {why}")
    if "backend_type" in options and "backend_path" in options:
        raise UserError("QNN provider options backend_type and backend_path exclude each other: set one")
