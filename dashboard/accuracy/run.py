"""Accuracy from the dashboard's side: check the input, read the data, run the worker, keep what it
said.

``accuracy_model`` is the one entry point of the CLI, the page, the sweep and the notebook. The
sessions run in a worker subprocess (``runtime.jobs.run_command``: the same lifecycle, timeout and
Cancel as every run), so a crash or hang of QNN is a failed report, never a dead dashboard. The
samples reach the worker as one ``.npz`` in a scratch folder (``Dataset.save``), removed afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path

from dashboard.accuracy.model import AccuracyReport, Comparison, DataInfo, HTP_DEVIATES_DB
from dashboard.accuracy.protocol import AccuracyArgs, check_layers
from dashboard.errors import UserError
from dashboard.runtime.jobs import Cancellation
from dashboard.runtime.knobs import TIMEOUTS, Settings

DEFAULT_TIMEOUT = TIMEOUTS["accuracy"]
DEFAULT_SAMPLES = 8  # random inputs when no data is given


def model_inputs(path: str | os.PathLike, settings: Settings):
    """The model's graph and its inputs with every dimension fixed (what the data must match)."""
    from dashboard.accuracy.data import input_specs
    from dashboard.intake.reader import load_model
    from dashboard.intake.shapes import check_input_shapes, resolve_dims

    graph = load_model(Path(path).expanduser())
    dims = resolve_dims(graph, settings.dims)
    check_input_shapes(graph, settings.shapes, dims)
    return graph, dims, input_specs(graph, dims, dict(settings.shapes))


def dataset_for(path: str | os.PathLike, settings: Settings, data=None, *, preprocess=None, limit: int | None = None):
    """``data`` as a ``Dataset`` against the model's inputs: a path (``data.load_data``), a
    ``Dataset`` already read, or None for random inputs (said on every figure)."""
    from dashboard.accuracy.data import Dataset, load_data, random_dataset

    graph, dims, specs = model_inputs(path, settings)
    if isinstance(data, Dataset):
        return graph, dims, data
    if data is None:
        return graph, dims, random_dataset(specs, count=limit or DEFAULT_SAMPLES)
    kwargs = {"limit": limit} if limit else {}
    return graph, dims, load_data(data, specs, preprocess, **kwargs)


def float_settings(settings: Settings, qdq_only: bool) -> tuple[Settings, list[str]]:
    """A float model runs on the HTP in fp16 (fp32 graphs rarely fit it): turned on, and said."""
    if settings.fp16 or qdq_only:
        return settings, []
    return settings.replace(fp16=True), ["the float model runs on the HTP in fp16 precision (--fp16 turned on: "
                                         f"the HTP runs float graphs in fp16), compiled for {settings.replace(fp16=True).soc}"]


def accuracy_model(model_path: str | os.PathLike, data=None, settings: Settings | None = None, *,
                   quantized: str | os.PathLike | None = None, layers=(), preprocess=None,
                   limit: int | None = None, device=None, timeout: float | None = None, on_event=None,
                   cancel: Cancellation | None = None) -> AccuracyReport:
    """The accuracy of ``model_path`` (and of its QDQ form ``quantized``) on ``data`` under
    ``settings``: per output and sample, the HTP against the CPU EP's fp32; with ``layers``
    (``cumulative``, ``layerwise``) every probed tensor's error. Bad input (an unreadable model or
    data, bad settings, a remote device) is a ``UserError``; a runtime failure is a comparison's
    ``status``/``reason``, the rest kept."""
    from dashboard.intake.digest import file_digest
    from dashboard.runtime import scratch
    from dashboard.runtime.config import SessionConfig
    from dashboard.runtime.devices import Device
    from dashboard.runtime.jobs import run_command

    settings = settings or Settings()
    layers = check_layers(list(layers))
    device = device or Device.parse("local")
    if not device.is_local:
        raise UserError("accuracy runs on this machine's worker (the HTP simulator's numerics are the HTP's own): "
                        "leave --device out")
    given = Path(model_path).expanduser()
    q_path = str(Path(quantized).expanduser().resolve()) if quantized else None
    if q_path:
        model_inputs(q_path, settings)  # an unreadable QDQ model fails here, in one line
    graph, dims, dataset = dataset_for(given, settings, data, preprocess=preprocess, limit=limit)
    from dashboard.accuracy.probes import is_qdq
    from dashboard.intake.reader import load_structure

    qdq_only = q_path is None and is_qdq(load_structure(given))
    settings, notes = float_settings(settings, qdq_only)
    config = SessionConfig.of(settings, "htp", dims=dims)
    with scratch.folder("qbl-accuracy-") as folder:
        data_path = folder / "data.npz"
        dataset.save(data_path)
        args = AccuracyArgs(path=str(given.resolve()), config=config, data=str(data_path), quantized=q_path,
                            layers=layers, input_shapes=dict(settings.shapes))
        answer = run_command(device, args.path, None, "accuracy", lambda located: args,
                             timeout=timeout or settings.timeout or DEFAULT_TIMEOUT, on_event=on_event, cancel=cancel)
    if answer.failure is not None:
        report = AccuracyReport(model=given.name, data=_data_info(dataset),
                                comparisons=[Comparison(key="worker", target="every session", reference="-",
                                                        hardware="unknown", status="failed",
                                                        reason=str(answer.failure))])
    else:
        report = answer.result
        report.data = _data_info(dataset)  # the worker saw arrays; the preprocessing and licence are here
    report.model = given.name
    report.quantized = Path(q_path).name if q_path else None
    report.digest = file_digest(str(given.resolve()))
    report.settings = settings.to_json()
    report.notes = notes + report.notes
    report.verdicts = verdicts(report)
    return report


def _data_info(dataset) -> DataInfo:
    return DataInfo(source=dataset.source, count=len(dataset), names=list(dataset.names), random=dataset.random,
                    licence=dataset.licence, description=dataset.describe(),
                    preprocess=dataset.preprocess.to_json() if dataset.preprocess else None)


def verdicts(report: AccuracyReport) -> list[str]:
    """What a model engineer reads first: each comparison's worst output, and ORT's own rule for a
    QDQ model (the HTP as accurate as the CPU EP on the same model), said as which one deviates."""
    label = report.data.label
    lines = []
    for c in report.comparisons:
        if not c.ok:
            lines.append(f"{c.target} vs {c.reference}: FAILED: {c.reason}")
            continue
        worst = c.worst_sqnr()
        if worst is not None:
            lines.append(f"{c.target} vs {c.reference}: worst output SQNR {worst:.1f} dB on {c.hardware} ({label})")
    htp, cpu = report.comparison("qdq_htp_vs_float"), report.comparison("qdq_cpu_vs_float")
    if htp and cpu and htp.ok and cpu.ok and htp.worst_sqnr() is not None and cpu.worst_sqnr() is not None:
        gap = cpu.worst_sqnr() - htp.worst_sqnr()
        if gap > HTP_DEVIATES_DB:
            lines.append(f"the HTP deviates: on the same QDQ model it is {gap:.1f} dB less accurate against float than "
                         f"the CPU EP ({label}): the HTP's kernels, not the quantization, lose that much")
        else:
            lines.append(f"the HTP is as accurate as the CPU EP on the same QDQ model (within {HTP_DEVIATES_DB:g} dB, "
                         f"{label}): the error is the quantization's, not the HTP's")
    layers = report.layers
    if layers is not None and layers.ok and layers.first_jump:
        row = layers.row(layers.first_jump)
        lines.append(f"the error first jumps at {row.node} [{row.op_type}] (tensor {row.tensor})"
                     + (f": {row.why}" if row.why else ""))
    if layers is not None and layers.ok and layers.worst and layers.worst != layers.first_jump:
        row = layers.row(layers.worst)
        own = row.layerwise if row.layerwise is not None else row.cumulative
        lines.append(f"the worst layer on its own is {row.node} [{row.op_type}] ({own:.1f} dB)"
                     + (f": {row.why}" if row.why else ""))
    return lines


def settings_for_data(path: str | os.PathLike, settings: Settings, data, preprocess=None) -> tuple[Settings, list[str]]:
    """``settings`` with the inputs' open dimensions fixed by ``data``'s arrays (an .npz/.npy: the
    sample's shape, read from the headers): a named dimension (``batch``, ``h``) takes the data's
    value unless ``--dim`` gave one, an input with an unnamed open dimension takes the sample's whole
    shape unless ``--shape`` gave one. Then the data is checked against the inputs so fixed (one
    sample read: a misfit is one line before any compile). The notes say what the data fixed."""
    from dashboard.accuracy.data import array_shapes, sample_shape
    from dashboard.intake.reader import load_model

    graph = load_model(Path(path).expanduser())
    headers = array_shapes(data)
    if set(headers) == {""} and len(graph.inputs) == 1:
        headers = {graph.inputs[0].name: headers[""]}
    dims, shapes, notes = dict(settings.dims), dict(settings.shapes), []
    for tensor in graph.inputs:
        declared = tuple(tensor.shape or ())
        if tensor.name in shapes or tensor.name not in headers or all(isinstance(d, int) and d >= 0 for d in declared):
            continue
        sample = sample_shape(str(data), tensor, tuple(headers[tensor.name]))
        if sample is None:
            continue
        if any(not isinstance(d, (int, str)) or (isinstance(d, int) and d < 0) for d in declared):
            shapes[tensor.name] = sample
            notes.append(f"input {tensor.name!r} {tensor.shape_text()} fixed to {list(sample)} by the data")
            continue
        for name, value in zip(declared, sample):
            if isinstance(name, str) and name not in settings.dims:
                if dims.setdefault(name, value) != value:
                    raise UserError(f"{data}: dimension {name!r} is {dims[name]} in one input and {value} in "
                                    f"{tensor.name!r}")
        notes.append(f"input {tensor.name!r} {tensor.shape_text()} at {list(sample)}: the data's shape")
    changed = dims != dict(settings.dims) or shapes != dict(settings.shapes)
    fixed = settings.replace(dims=dims, shapes=shapes) if changed else settings
    dataset_for(path, fixed, data, preprocess=preprocess, limit=1)
    return fixed, notes
