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

Options that run code or write files (``Option.kind``, ``Option.writes``), checked by where they
come from (``check(options, origin=...)``):

- ``library``: a shared library the worker loads (``backend_path``, ``qnn_ir_backend_path``,
  ``qnn_saver_path``, the paths in ``op_packages``): its constructor runs as the dashboard's user,
  and a plain 0644 file is enough;
- ``output file`` / ``output dir``: where the EP writes (``profiling_file_path``, which also gets a
  ``<stem>_qnn.log`` beside it; ``json_qnn_graph_dir``, ``framework_op_trace_dir``,
  ``dump_qnn_ep_input_graph_dir``, ``dump_qnn_ir_dlc_dir``): it appends to or creates any file
  the user may write;
- ``writes``: values that make the EP write files without a path, into the worker's working
  directory (``dump_json_qnn_graph=1`` writes ``<graph>.json``, ``dump_qnn_ir_dlc=1`` a ``.dlc``,
  ``enable_framework_op_trace=1`` ``qnn_op_trace.json``, ``dump_qnn_ep_input_graph=1`` a JSON dump,
  ``backend_type=saver`` a ``saver_output/`` folder and ``ir`` a ``.dlc``; seen in an HTP simulator
  session of each value, tests/test_origin_settings.py). ``profiling_level`` without
  ``profiling_file_path`` writes nothing: the EP refuses the session ("Need to specify a CSV file via
  provider option profiling_file_path if ETW not enabled").

From a page (``BROWSER``) all of these are refused, with one line naming the command line: a page
may be someone else's (``dashboard.access``). They are refused, not confined to the job's scratch
folder, because that folder is made inside the worker for each job (``partition.measure``,
``timeline.runner``) after the options are fixed, and a local worker's working directory is one
folder shared by every job (``<QNN_LAB_CACHE>/worker``, ``runtime.client.worker_cwd``): there is no
per-job folder a page's value could be confined to. Where the
project sets them itself (the op trace of a partition, the timeline's QNN profile), it points them
into the job's scratch folder. From the command line (``TERMINAL``) they are kept, with checks: a
library must be an absolute path to an existing regular file; an output file an absolute path
that is not an existing non-regular file or a symlink, in an existing folder; an output dir an
absolute path to a directory or one creatable in an existing folder (absolute, since the worker
does not run in the caller's directory). For a remote device the paths are on the device: they are
not checked here, and ``check`` returns a note saying so.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from dataclasses import dataclass

from dashboard.access import BROWSER, TERMINAL, check_origin
from dashboard.errors import UserError

_INTEGER = re.compile(r"[0-9]{1,9}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Option:
    """How the EP reads one option: ``choices`` (exact strings, ``lower`` if the EP lowercases
    first), ``minimum`` for integers, otherwise a path or name; ``lists`` if it takes a comma list
    (one value per SoC of a multi-SoC context). ``kind``: what a path-taking option's value names
    (``LIBRARY``, ``LIBRARIES``, ``OUTPUT_FILE``, ``OUTPUT_DIR``); ``writes``: the values that make the
    EP write files in its working directory. Both decide what a page may set (``check``)."""

    choices: tuple[str, ...] = ()
    lower: bool = False
    minimum: int | None = None
    lists: bool = False
    hint: str = ""
    kind: str = ""
    writes: tuple[str, ...] = ()

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


LIBRARY, LIBRARIES, OUTPUT_FILE, OUTPUT_DIR = "library", "op packages", "output file", "output dir"
FLAG = Option(choices=("0", "1"))
WRITING_FLAG = Option(choices=("0", "1"), writes=("1",))

OPTIONS: dict[str, Option] = {
    # backend
    "backend_type": Option(choices=("htp", "gpu", "cpu", "saver", "ir", "genie"), writes=("saver", "ir")),
    "backend_path": Option(kind=LIBRARY),
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
    "op_packages": Option(kind=LIBRARIES),
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
    "profiling_file_path": Option(kind=OUTPUT_FILE),
    "enable_framework_op_trace": WRITING_FLAG,
    "framework_op_trace_dir": Option(kind=OUTPUT_DIR),
    "dump_json_qnn_graph": WRITING_FLAG,
    "json_qnn_graph_dir": Option(kind=OUTPUT_DIR),
    "dump_qnn_ep_input_graph": WRITING_FLAG,
    "dump_qnn_ep_input_graph_dir": Option(kind=OUTPUT_DIR),
    "dump_qnn_ir_dlc": WRITING_FLAG,
    "dump_qnn_ir_dlc_dir": Option(kind=OUTPUT_DIR),
    "qnn_ir_backend_path": Option(kind=LIBRARY),
    "skip_backend_op_validation": FLAG,
    "qnn_saver_path": Option(kind=LIBRARY),
}


def check(options: dict[str, str], origin: str | None = None, remote: str | None = None) -> list[str]:
    """Refuse an option the EP does not know or a value it would not use, in one line; with an
    ``origin`` (``access.BROWSER`` or ``TERMINAL``), also what that origin may not set or a path
    that fails its checks. ``remote``: the label of the remote device the options run on (their
    paths are on it, so not checked here). Returns notes for the user (paths not checked)."""
    for key, value in options.items():
        _check_value(key, value)
    if "backend_type" in options and "backend_path" in options:
        raise UserError("QNN provider options backend_type and backend_path exclude each other: set one")
    if origin is None:
        return []
    check_origin(origin)
    notes = []
    for key, value in options.items():
        note = _check_origin(key, value, OPTIONS[key], origin, remote)
        if note:
            notes.append(note)
    return notes


def _check_value(key: str, value) -> None:
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


_WHAT = {LIBRARY: "names a library the worker would load (its code runs as the dashboard's user)",
         LIBRARIES: "names libraries the worker would load (their code runs as the dashboard's user)",
         OUTPUT_FILE: "names a file the runtime would write", OUTPUT_DIR: "names a folder the runtime would write into"}


def _check_origin(key: str, value: str, option: Option, origin: str, remote: str | None) -> str | None:
    """One option against what ``origin`` may set: refused from a page when it loads or writes
    anything; from the terminal its paths checked (or, on a remote device, a note)."""
    lowered = value.lower() if option.lower else value
    if origin == BROWSER and (option.kind or lowered in option.writes):
        what = _WHAT.get(option.kind, "makes the runtime write files in the worker's working directory")
        raise UserError(f"QNN provider option {key}={value[:60]!r} {what}: a page may not set it, since a page "
                        f"may be someone else's; set it on the command line (--option {key}=...)")
    if origin != TERMINAL or not option.kind:
        return None
    if remote:
        return f"{key}={value!r} is a path on {remote}: not checked here"
    paths = _package_paths(key, value) if option.kind == LIBRARIES else [value]
    for path in paths:
        why = _PATH_CHECKS[LIBRARY if option.kind == LIBRARIES else option.kind](path)
        if why:
            raise UserError(f"QNN provider option {key}={value[:60]!r}: {why}")
    return None


def _package_paths(key: str, value: str) -> list[str]:
    """The library paths of ``op_packages``: ``OpType:Path:Interface[:Target]``, comma-separated."""
    paths = []
    for package in (p for p in value.split(",") if p):
        fields = package.split(":")
        if not 3 <= len(fields) <= 4 or not all(fields[:3]):
            raise UserError(f"QNN provider option {key}: {package[:60]!r} is not OpType:Path:Interface[:Target]")
        paths.append(fields[1])
    return paths


def _library_problem(path: str) -> str | None:
    if not os.path.isabs(path):
        return "give an absolute path (the worker does not run in this directory)"
    return None if os.path.isfile(path) else f"{path} is not an existing regular file"


def _output_file_problem(path: str) -> str | None:
    if not os.path.isabs(path):
        return "give an absolute path (the worker does not run in this directory)"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return f"cannot check {path}: {exc.strerror}"
    if info is not None and not stat.S_ISREG(info.st_mode):
        return f"{path} exists and is not a regular file (a symlink, folder, FIFO or device)"
    return None if os.path.isdir(os.path.dirname(path)) else f"the folder of {path} does not exist"


def _output_dir_problem(path: str) -> str | None:
    if not os.path.isabs(path):
        return "give an absolute path (the worker does not run in this directory)"
    if os.path.isdir(path):
        return None
    if os.path.lexists(path):
        return f"{path} exists and is not a folder"
    parent = os.path.dirname(os.path.normpath(path))
    return None if os.path.isdir(parent) else f"{path} is not a folder, and its parent folder does not exist"


_PATH_CHECKS = {LIBRARY: _library_problem, OUTPUT_FILE: _output_file_problem, OUTPUT_DIR: _output_dir_problem}
