"""Import a Qualcomm AI Hub profile: a real phone's per-layer times, on the model's own nodes.

The file is what the ``qai-hub`` client writes (``ProfileJob.download_profile(filename)``, which
``json.dump``s ``_profile_pb_to_python_dict`` of ``qai_hub/client.py``, qai-hub 0.56)::

    {"execution_summary": {"estimated_inference_time": µs, "first_load_time": µs, "warm_load_time": µs,
                           "estimated_inference_peak_memory": bytes, "inference_memory_peak_range": [lo, hi],
                           "all_inference_times": [µs, ...], ...},
     "execution_detail": [{"name": str, "type": str, "compute_unit": "NPU" | "GPU" | "CPU" | "UNSPECIFIED"
                           (older clients: "COMPUTE_UNIT_NPU", ...),
                           "execution_time": µs (optional), "execution_cycles": int (optional)}, ...]}

The file does not name the device (the job does), so the device comes from ``device_name``
(``--device-name``), or from a ``"device"`` key a user added to the file. Layers are matched to
model nodes by name, after the usual renames are undone on both sides (``_token_N`` of the layout
transformation, a QNN converter's ``/`` and ``.`` turned into ``_``, an ``_output_0`` tensor
suffix). Every layer that matches no node is listed (``Profile.unmatched``), never dropped; a file
in which no layer matches the model is refused (another model's profile).

The file comes from anyone who can upload to the Profile page, so what it may cost is capped
before it is believed: ``MAX_FILE_BYTES`` before it is parsed (parsing costs ~10 times the
file in memory), ``MAX_LAYERS`` layers, ``MAX_TEXT`` characters in a layer's name or type, and
whatever an error line quotes from it (``ECHO`` characters). A real profile is far below each:
a layer is ~150 bytes of JSON, and the largest models AI Hub profiles have a few ten thousand.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from dashboard.errors import UserError
from dashboard.profile.model import BackendProfile, Figure, NodeCost, Profile, UnmatchedLayer, scope_of, with_shares

UNITS = {"NPU": "htp", "GPU": "gpu", "CPU": "cpu", "UNSPECIFIED": "unspecified"}
"""AI Hub's compute unit -> the profile's backend key. A layer with no known unit is its own
backend (never the CPU fallback: nothing says it fell back)."""
UNIT_PREFIX = "COMPUTE_UNIT_"  # older qai-hub clients write ComputeUnit's enum name (COMPUTE_UNIT_NPU)
SUMMARY_FIGURES = (("estimated_inference_time", "us"), ("first_load_time", "us"), ("warm_load_time", "us"),
                   ("estimated_inference_peak_memory", "bytes"))
MAX_FILE_BYTES = 32 << 20
MAX_LAYERS = 200_000
MAX_TEXT = 1024  # characters of a layer's name or type, and of the device's name
ECHO = 80  # characters of the file's own text (a name, a file name) quoted in an error line
_SUFFIXES = re.compile(r"(_token_\d+|_output_\d+|:\d+)+$")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def normalised(name: str) -> str:
    """A name with the usual renames undone, for matching (``/features.0/Conv_token_1`` and
    ``_features_0_Conv`` are both ``features_0_conv``)."""
    return _NOT_WORD.sub("_", _SUFFIXES.sub("", name).lower()).strip("_")


def clipped(text: object, limit: int = ECHO) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis: what an error line quotes from a file."""
    value = str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _named(where: str) -> str:
    """A file's name for an error line: its last ``ECHO`` characters (a path's end names the file)."""
    return where if len(where) <= ECHO else "…" + where[-(ECHO - 1):]


def too_large(size: int, where: str) -> UserError:
    return UserError(f"{_named(where)}: {size / (1 << 20):.0f} MB; an AI Hub profile is read up to "
                     f"{MAX_FILE_BYTES >> 20} MB (a real one is a few MB)")


def read_file(path: str | Path) -> dict:
    """The profile at ``path``, read up to ``MAX_FILE_BYTES`` (a larger file, or an endless one
    such as a FIFO, is refused without being read whole)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{_named(str(path))}: cannot read the AI Hub profile ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        size = Path(path).stat().st_size if Path(path).is_file() else len(data)
        raise too_large(size, str(path))
    return parse_bytes(data, str(path))


def parse_bytes(data: bytes, where: str) -> dict:
    """An AI Hub profile's JSON from its bytes (a file, an upload); ``where`` names it in errors
    (cut to ``ECHO`` characters)."""
    where = _named(where)
    if len(data) > MAX_FILE_BYTES:
        raise too_large(len(data), where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not an AI Hub profile (not UTF-8 text; download_profile writes JSON)") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise UserError(f"{where}: not an AI Hub profile (nested too deeply)") from None
    except ValueError as exc:
        raise UserError(f"{where}: not an AI Hub profile (not JSON: {exc})") from None


def _layers(data, where: str) -> tuple[dict, list[dict]]:
    if not isinstance(data, dict) or not isinstance(data.get("execution_detail"), list) \
            or not isinstance(data.get("execution_summary"), dict):
        raise UserError(f"{where}: not an AI Hub profile (needs 'execution_summary' and 'execution_detail', "
                        "as ProfileJob.download_profile writes)")
    layers = data["execution_detail"]
    if len(layers) > MAX_LAYERS:
        raise UserError(f"{where}: {len(layers)} layers; an AI Hub profile is read up to {MAX_LAYERS}")
    for i, layer in enumerate(layers):
        if isinstance(layer, dict) and isinstance(layer.get("compute_unit"), str):
            layer = layers[i] = {**layer, "compute_unit": layer["compute_unit"].removeprefix(UNIT_PREFIX)}
        if not isinstance(layer, dict) or not isinstance(layer.get("name"), str) \
                or not isinstance(layer.get("type"), str) or layer.get("compute_unit") not in UNITS:
            raise UserError(f"{where}: execution_detail[{i}] is not a layer (needs a name, a type and a compute_unit "
                            f"of {', '.join(UNITS)})")
        for key in ("name", "type"):
            if len(layer[key]) > MAX_TEXT:
                raise UserError(f"{where}: execution_detail[{i}].{key} is {len(layer[key])} characters long "
                                f"(at most {MAX_TEXT}): not an AI Hub layer")
        for key in ("execution_time", "execution_cycles"):
            value = layer.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise UserError(f"{where}: execution_detail[{i}].{key} is not a number of "
                                f"{'µs' if key == 'execution_time' else 'cycles'}")
    if not layers:
        raise UserError(f"{where}: the AI Hub profile has no layers (execution_detail is empty: "
                        "was the profile job run with profiling on?)")
    return data["execution_summary"], layers


def device_of(data: dict, given: str | None) -> str:
    """The device's name: the one given, else the file's ``device``; either cut to ``MAX_TEXT``."""
    if given:
        return clipped(given, MAX_TEXT)
    device = data.get("device")
    if isinstance(device, dict):
        device = device.get("name")
    return clipped(device, MAX_TEXT) if isinstance(device, str) and device.strip() \
        else "unknown device (pass --device-name)"


def import_profile(data, graph, where: str, device_name: str | None = None) -> Profile:
    """The imported ``Profile`` of ``graph`` (``intake.graph.ModelGraph``) from AI Hub's ``data``
    (``where`` names it in errors). One line ``UserError`` for a malformed or mismatched file."""
    where = _named(where)
    summary, layers = _layers(data, where)
    device = device_of(data, device_name)
    index: dict[str, str] = {}
    for node in graph.nodes:
        index.setdefault(normalised(node.name), node.name)
        for tensor in node.outputs:  # converters often name a layer after the tensor it produces
            index.setdefault(normalised(tensor), node.name)
    op_types = {n.name: n.op_type for n in graph.nodes}
    rows: dict[tuple[str, str], NodeCost] = {}
    unmatched: list[UnmatchedLayer] = []
    missing_time = 0
    for layer in layers:
        backend = UNITS[layer["compute_unit"]]
        value = float(layer.get("execution_time") or 0.0)
        missing_time += layer.get("execution_time") is None
        node = index.get(normalised(layer["name"]))
        if node is None:
            unmatched.append(UnmatchedLayer(layer["name"], layer["type"], layer["compute_unit"], value, "us"))
            continue
        row = rows.get((node, backend))
        if row is None:
            rows[(node, backend)] = NodeCost(name=node, op_type=op_types[node], backend=backend, unit="us",
                                             median=value, min=value, max=value, scope=scope_of(node),
                                             qnn_ops=[layer["name"]], compute_unit=layer["compute_unit"],
                                             cycles=_cycles(layer))
        else:  # several layers of one node (a node the converter split): their times add up
            row.median += value
            if _cycles(layer) is not None:
                row.cycles = (row.cycles or 0.0) + _cycles(layer)
            row.min, row.max = row.median, row.median
            row.qnn_ops.append(layer["name"])
    if not rows:
        raise UserError(f"{where}: none of its {len(layers)} layers names a node of "
                        f"{clipped(graph.file_name or Path(graph.path).name)} "
                        f"(first: {clipped(repr(layers[0]['name']))}): is it the profile of another model?")
    figures = [Figure(key, float(summary[key]), unit) for key, unit in SUMMARY_FIGURES
               if isinstance(summary.get(key), (int, float)) and not isinstance(summary.get(key), bool)
               and math.isfinite(summary[key])]
    notes = []
    if unmatched:
        notes.append(f"{len(unmatched)} of {len(layers)} layers match no node of the model (listed as unmatched)")
    if missing_time:
        notes.append(f"{missing_time} layer(s) carry no execution_time (counted as 0 µs)")
    backends = {}
    for backend in dict.fromkeys(UNITS[l["compute_unit"]] for l in layers):
        total = sum(float(l.get("execution_time") or 0.0) for l in layers if UNITS[l["compute_unit"]] == backend)
        backends[backend] = BackendProfile(status="ok", hardware=f"AI Hub, {device}", unit="us", total=total,
                                           total_min=total, total_max=total, runs=1, notes=notes)
    runs = summary.get("all_inference_times")
    return Profile(model=graph.file_name or Path(graph.path).name, runs=len(runs) if isinstance(runs, list) and runs else 1,
                   warmup=0, backends=backends, nodes=with_shares(list(rows.values()), backends),
                   unmatched=unmatched, source="imported", summary=figures,
                   data="AI Hub's own inputs (the profile job's)")


def _cycles(layer: dict) -> float | None:
    """The layer's ``execution_cycles`` (the device's own count), kept beside its µs."""
    value = layer.get("execution_cycles")
    return float(value) if value is not None else None


def import_file(path: str | Path, model_path: str | Path, device_name: str | None = None) -> Profile:
    """``import_profile`` of the file at ``path`` for the model at ``model_path``."""
    from dashboard.intake.reader import load_model

    graph = load_model(Path(model_path).expanduser())
    return import_profile(read_file(path), graph, str(path), device_name)
