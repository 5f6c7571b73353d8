"""Quantize & accuracy page: does the HTP still give the right answer on the user's data, in which
form of the model, which layer breaks it, and what a quantized model costs (issue 25).

What it reads and runs:

- **the model** picked in the sidebar, as on every page;
- **the data**: an uploaded ``.npz`` or ``.zip`` of images (``st.file_uploader``, capped in size;
  its bytes go to ``accuracy.data.load_upload`` in memory: nothing from the browser is written to or
  read from a path), the bundled sample's data set with its licence (``data.bundled``), or random
  inputs, which every figure then says beside it ("random inputs");
- **the preprocessing** of images, prefilled from the model and the preset (``preprocess_for``),
  shown in its fields and recorded with every result;
- **the settings**: the model's settings shared by every page (``views.settings``), here the SoC,
  the optimization level, the provider options, the dimensions and the timeout;
- **the mode**: *Accuracy* (the float model on the HTP in fp16 against the CPU EP's fp32, and its
  QDQ form on the HTP, on the CPU EP and against float when one is given: quantized first by this
  page, or one quantized earlier in the session) or *Quantize* (``accuracy.quantize.quantize_model``:
  ORT's QNN recipe, the mixed-precision search with a target, each step's SQNR and simulated HTP
  cycles, the HTP's coverage of the integer path). The QDQ model is written into a scratch folder
  of the server (``runtime.scratch``) owned by the job, read back into the session and removed;
- **layer by layer** (cumulative and layerwise), when ticked.

A run is the page's background job (``views.jobs``, as the Profile page's): its step, the time
elapsed, Cancel, and it keeps running while the user is on another page; the finished result is
collected by whichever page of the session is drawn next. Bad data or settings are one
``st.error`` line and nothing else is lost: the results of earlier runs stay.

The results: the verdicts, the per-output table (``AccuracyReport.frame``) and chart, the worst
samples, the layer chart and table (``layer_frame``), the partition notes; for a quantization the
steps (``QuantizeResult.steps_frame``), what ORT left in float, the coverage and its blockers; the
downloads (the QDQ model, the overrides JSON, the samples, a script that rebuilds the QDQ model with
``get_qnn_qdq_config``/``quantize`` and compares outputs outside the dashboard, the report JSON),
each made when clicked. Every figure measured on the simulator says "HTP simulator".
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from dashboard.errors import UserError
from dashboard.intake.graph import ModelGraph
from dashboard.render import accuracy_figures as figures
from dashboard.runtime.knobs import TIMEOUTS
from dashboard.runtime.socs import SIMULATOR_NOTE
from dashboard.views import jobs, state
from dashboard.views.results import SessionResults
from dashboard.views.safe import download_name, frame, md, short
from dashboard.views.settings import SettingsForm, current_settings

if TYPE_CHECKING:
    from dashboard.accuracy.data import Dataset
    from dashboard.accuracy.model import AccuracyReport
    from dashboard.accuracy.preprocess import Preprocess
    from dashboard.accuracy.quantize import QuantizeResult
    from dashboard.runtime.knobs import Settings

_RUNS = "accuracy_runs"  # [entry], oldest first (``_entry``)
_SHOWN = "accuracy_shown"  # model digest -> label of the result shown
_JOB = "accuracy_job"
_UPLOADED = "accuracy_upload_read"  # (upload id, preprocessing, inputs) -> Dataset or the error line
_BUNDLED = "accuracy_bundled_read"
_KEEP = 6  # results kept per session (a result keeps its QDQ model's bytes)
RESULTS = SessionResults(_RUNS, _SHOWN, _JOB, _KEEP, lambda e: e["what"])
MODES = ("Accuracy", "Quantize")
DATA_CHOICES = {"bundled": "the sample's data set", "upload": "upload (.npz or .zip of images)",
                "random": "random inputs"}
NO_QDQ, QUANTIZE_FIRST = "none", "quantize"
DEFAULT_LIMIT = 16
MAX_LIMIT = 256
MAX_SAMPLES_DOWNLOAD = 64 << 20  # the samples' .npz is offered up to this size
AGAIN = "Press Run to start it again."
RANDOM_WORDS = "random inputs"


# -- what other pages read ------------------------------------------------------------------------------
def session_results(digest: str) -> list[dict]:
    """This session's results for the model ``digest`` (oldest first), the finished job's included."""
    collect()
    return RESULTS.of(digest)


def shown_report(digest: str) -> "AccuracyReport | None":
    """The result shown on this page for the model ``digest`` (else its latest), when it measured
    layers: the Partitions viewer's "error vs float" overlay and node panel read it."""
    collect()
    entry = RESULTS.shown_entry(digest)
    if entry is None:
        return None
    report = entry["report"]
    return report if report.layers is not None and report.layers.ok else None


def viewer_key(report: "AccuracyReport | None") -> str:
    """What a graph drawn with ``report``'s layers depends on (a part of the viewer's key)."""
    if report is None:
        return ""
    blob = json.dumps([r.to_json() for r in report.layers.rows], sort_keys=True, default=str)
    return "_a" + hashlib.blake2b(blob.encode(), digest_size=6).hexdigest()


def node_error(digest: str, graph, name: str) -> None:
    """The node panel's accuracy lines for model node ``name`` (Partitions page)."""
    from dashboard.render.model_explorer import accuracy_attrs

    report = shown_report(digest)
    if report is None:
        return
    lines = accuracy_attrs(graph, report).get(name)
    if lines:
        st.dataframe(frame([{"accuracy": kv.key, "value": kv.value} for kv in lines]), hide_index=True,
                     width="stretch", column_config={"value": st.column_config.TextColumn(width="large")})


def collect() -> None:
    """The finished job's result into the session's results, once (``views.results``)."""
    RESULTS.collect()


# -- the page -------------------------------------------------------------------------------------------
def render() -> None:
    selected = state.require_model()
    graph = state.loaded_graph()
    st.title("Quantize & accuracy", anchor=False)
    st.caption(f"{md(selected.name, 120)} · does the HTP give the right answer on your data, in which form of the "
               "model, which layer breaks it, and what a quantized model costs")
    collect()
    mode = st.radio("Mode", MODES, key="acc_mode", horizontal=True,
                    help="Accuracy: the float model on the HTP (fp16) against the CPU EP's fp32, and its "
                         "QDQ form when one is given. Quantize: ORT's QNN recipe calibrated on the data, the "
                         "mixed-precision search with a target, each step's accuracy and HTP cost.")
    source, preprocess_error = _data_section(selected, graph)
    qdq = _qdq_choice(selected) if mode == "Accuracy" else None
    try:
        run = _knobs(selected, graph, mode, qdq)
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        run = None
    if run is not None and run["submitted"]:
        if preprocess_error:
            st.error(md(preprocess_error), icon=":material/error:")
        else:
            _start(selected, graph, mode, source, qdq, run)
    _progress(selected)
    _results(selected)


# -- the data ----------------------------------------------------------------------------------------------
def _sample_file(selected) -> str | None:
    """The bundled sample's file name when the selected model is that sample (its data set is then
    the bundled one)."""
    from dashboard.intake.samples import SAMPLES, sample_path

    name = Path(selected.path).name
    if name not in {s.file_name for s in SAMPLES}:
        return None
    try:
        return name if Path(selected.path).resolve() == sample_path(name).resolve() else None
    except (OSError, UserError):
        return None


def bundled_data(selected) -> Path | None:
    """The bundled data set of the selected sample, or None (a model of the user's has none)."""
    from dashboard.accuracy import data

    name = _sample_file(selected)
    return data.bundled(name) if name else None


def _data_section(selected, graph: ModelGraph) -> tuple[dict, str | None]:
    """The data choice, the uploader and the preprocessing fields. Returns what the run will read
    (``{"kind", ...}``) and a preprocessing error (one line), if any."""
    digest = selected.digest
    bundled = bundled_data(selected)
    choices = [k for k in DATA_CHOICES if k != "bundled" or bundled is not None]
    with st.container(border=True):
        st.markdown("**Data** · the samples every figure is computed on")
        # The sample's data set when there is one, else random inputs (labelled as such everywhere).
        kind = st.radio("Data", choices, index=0 if bundled is not None else choices.index("random"),
                        format_func=DATA_CHOICES.get, horizontal=True, key=f"acc_data_{digest}",
                        label_visibility="collapsed")
        source: dict = {"kind": kind}
        preprocess, error = None, None
        if kind in ("bundled", "upload"):
            try:
                preprocess = _preprocess_fields(graph, digest)
            except UserError as exc:
                error = f"preprocessing: {exc}"
                st.error(md(error), icon=":material/error:")
        source["preprocess"] = preprocess
        if kind == "bundled":
            source["path"] = bundled
            _bundled_preview(selected, graph, bundled, preprocess, error)
        elif kind == "upload":
            source["upload"] = _uploader(selected, graph, preprocess, error)
        else:
            st.warning(f"**{RANDOM_WORDS.capitalize()}**: no data given. Generated inputs say how the backends "
                       "differ on noise, not on your data; every figure says *random inputs* beside it.",
                       icon=":material/casino:")
        if bundled is None and kind != "bundled":
            st.caption("This model has no bundled data set (the bundled samples have theirs): upload an .npz (one "
                       "array per input name, one sample per leading index) or a .zip of PNG/JPEG images.")
    return source, error


def _preprocess_fields(graph: ModelGraph, digest: str) -> "Preprocess":
    """The preprocessing of images: a preset, then each field prefilled from ``preprocess_for``
    (the model's metadata, name and input shape, and the preset); a field changed here is said in
    the record's ``source``."""
    from dashboard.accuracy.preprocess import CHANNELS, LAYOUTS, PRESETS, preprocess_for

    model_default = preprocess_for(graph)
    with st.expander("Preprocessing (images: the .zip upload, the bundled images)", expanded=False,
                     icon=":material/tune:"):
        presets = [None, *PRESETS]
        preset = st.selectbox("Preset", presets, key=f"acc_preset_{digest}",
                              format_func=lambda p: p if p else f"the model's default ({model_default.preset})",
                              help="ImageNet's mean/std, YOLO's 0-1, PP-OCR's text line, or raw pixels; every field "
                                   "below starts from it and from what the model says (its metadata, name, shape)")
        base = preprocess_for(graph, preset=preset)
        scope = f"{digest}_{preset or 'model'}"  # a preset picked starts its fields over
        cols = st.columns(3)
        resize = cols[0].text_input("Resize (HxW; empty: the input's own size)", key=f"acc_pre_resize_{scope}",
                                    value=f"{base.resize[0]}x{base.resize[1]}" if base.resize else "")
        layout = cols[1].selectbox("Layout", LAYOUTS, index=LAYOUTS.index(base.layout), key=f"acc_pre_layout_{scope}")
        channels = cols[2].selectbox("Channels", CHANNELS, index=CHANNELS.index(base.channels),
                                     key=f"acc_pre_channels_{scope}")
        cols = st.columns(3)
        scale = cols[0].number_input("Scale (raw 0-255 pixels times this)", value=float(base.scale), format="%.6g",
                                     key=f"acc_pre_scale_{scope}")
        mean = cols[1].text_input("Mean (per channel, after the scale)", value=_numbers(base.mean),
                                  key=f"acc_pre_mean_{scope}")
        std = cols[2].text_input("Std (per channel, after the scale)", value=_numbers(base.std),
                                 key=f"acc_pre_std_{scope}")
        values = {"resize": _size(resize), "layout": layout, "channels": channels, "scale": float(scale),
                  "mean": _floats(mean, "mean"), "std": _floats(std, "std")}
        changed = [k for k, v in values.items() if v != getattr(base, k)]
        chosen = dataclasses.replace(base, **values, source=base.source + (
            f"; {', '.join(changed)} set on the page" if changed else ""))
        st.caption(f"Applied: {md(chosen.words)} · {md(chosen.source)}. An .npz is read as it is (arrays, not "
                   "images).")
    return chosen


def _numbers(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _size(text: str) -> tuple[int, int] | None:
    text = (text or "").strip().lower().replace(" ", "")
    if not text:
        return None
    parts = text.replace("x", ",").split(",")
    try:
        height, width = (int(p) for p in parts)
    except ValueError:
        raise UserError(f"resize is HEIGHTxWIDTH (e.g. 224x224), got {text!r}") from None
    return height, width


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in (text or "").replace(" ", "").split(",") if v)
    except ValueError:
        raise UserError(f"{what} is one to four numbers separated by commas, got {text!r}") from None
    if not 1 <= len(values) <= 4:
        raise UserError(f"{what} is one to four numbers separated by commas, got {text!r}")
    return values


def _specs(selected, settings: "Settings"):
    from dashboard.accuracy.run import model_inputs

    return model_inputs(selected.path, settings)[2]


def _specs_key(specs) -> str:
    return json.dumps([[s.name, list(s.shape), s.dtype] for s in specs])


def _pre_key(preprocess) -> str:
    return json.dumps(preprocess.to_json(), sort_keys=True, default=str) if preprocess is not None else ""


def _read_bundled(selected, folder: Path, preprocess, settings: "Settings", limit: int) -> "Dataset":
    """The bundled data set read for the model's inputs (kept in the session for the same
    preprocessing, inputs and limit)."""
    from dashboard.accuracy.data import load_data

    specs = _specs(selected, settings)
    key = (str(folder), _pre_key(preprocess), _specs_key(specs), limit)
    cached = st.session_state.get(_BUNDLED)
    if cached is not None and cached[0] == key:
        return cached[1]
    dataset = load_data(folder, specs, preprocess, limit=limit)
    st.session_state[_BUNDLED] = (key, dataset)
    return dataset


def _bundled_preview(selected, graph: ModelGraph, folder: Path, preprocess, error: str | None) -> None:
    if error:
        return
    try:
        dataset = _read_bundled(selected, folder, preprocess, current_settings(selected, graph), _limit(selected))
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    st.markdown(f":material/dataset: {md(dataset.describe(), 300)}")
    _licence(dataset.licence)


def _licence(text: str | None) -> None:
    if text:
        with st.expander("The data set's licence", icon=":material/license:"):
            st.text(text)
    else:
        st.caption("The data set states no licence.")


def _uploader(selected, graph: ModelGraph, preprocess, error: str | None):
    """The upload, read in memory against the model's inputs at once (so a bad file says so before
    anything runs); returns the uploaded file (the run reads it again only if the inputs changed)."""
    from dashboard.accuracy.data import MAX_UPLOAD_BYTES
    from dashboard.intake.overview import human_bytes

    uploaded = st.file_uploader("Samples: an .npz (one array per input, one sample per leading index) or a .zip of "
                                "PNG/JPEG images", type=["npz", "zip"], key=f"acc_upload_{selected.digest}",
                                help=f"Up to {human_bytes(MAX_UPLOAD_BYTES)}; read in memory, never stored as a "
                                     "file.")
    if uploaded is None:
        st.caption("No file yet: upload one, or pick another kind of data.")
        return None
    if error:
        return uploaded
    try:
        dataset = read_upload(selected, uploaded, preprocess, current_settings(selected, graph), _limit(selected))
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return uploaded
    st.markdown(f":material/upload_file: {md(dataset.describe(), 300)}")
    return uploaded


def read_upload(selected, uploaded, preprocess, settings: "Settings", limit: int) -> "Dataset":
    """The uploaded file as a data set of the model's inputs: its size checked before its bytes are
    taken, then ``load_upload`` in memory. The last one read is kept in the session (one upload, one
    read per preprocessing, inputs and limit); a failure is a ``UserError`` naming the file."""
    from dashboard.accuracy.data import MAX_UPLOAD_BYTES, load_upload

    from dashboard.intake.overview import human_bytes

    name = Path(str(uploaded.name)).name or "upload"
    if uploaded.size > MAX_UPLOAD_BYTES:
        raise UserError(f"{name}: {human_bytes(uploaded.size)}; an upload of samples is at most "
                        f"{human_bytes(MAX_UPLOAD_BYTES)}")
    specs = _specs(selected, settings)
    key = (uploaded.file_id, _pre_key(preprocess), _specs_key(specs), limit)
    cached = st.session_state.get(_UPLOADED)
    if cached is not None and cached[0] == key:
        if isinstance(cached[1], str):
            raise UserError(cached[1])
        return cached[1]
    try:
        dataset = load_upload(name, uploaded.getvalue(), specs, preprocess, limit=limit)
    except UserError as exc:
        st.session_state[_UPLOADED] = (key, str(exc))
        raise
    except Exception as exc:  # noqa: BLE001 - a reader's surprise on a hostile file is still that file's error
        message = f"{name}: not readable as samples ({type(exc).__name__})"
        st.session_state[_UPLOADED] = (key, message)
        raise UserError(message) from None
    st.session_state[_UPLOADED] = (key, dataset)
    return dataset


def _limit(selected) -> int:
    return int(st.session_state.get(f"acc_limit_{selected.digest}", DEFAULT_LIMIT))


def _qdq_choice(selected) -> str:
    """Which QDQ form the accuracy run compares: none, quantized first by this run, or one this
    page quantized earlier in the session (its bytes are in the session)."""
    earlier = [e for e in session_results(selected.digest) if e.get("qdq")]
    options = [NO_QDQ, QUANTIZE_FIRST, *[e["label"] for e in earlier]]
    words = {NO_QDQ: "none: the float model only", QUANTIZE_FIRST: "quantize it first (the options below)"}
    return st.selectbox("QDQ model to compare", options, key=f"acc_qdq_{selected.digest}",
                        format_func=lambda o: words.get(o, f"quantized earlier: {o}"),
                        help="A QDQ form runs on the HTP without fp16, on the CPU EP, and against float: ORT's own "
                             "rule (the HTP as accurate as the CPU EP on the same QDQ model) says which deviates.")


def _knobs(selected, graph: ModelGraph, mode: str, qdq: str | None) -> dict:
    """The run's form: the quantization options (Quantize, or Accuracy quantizing first), the layers,
    the samples' count, and the model's shared settings. Nothing runs until **Run** is pressed."""
    from dashboard.accuracy.protocol import ACTIVATIONS, CALIBRATION, WEIGHTS
    from dashboard.intake.shapes import is_float_model

    digest = selected.digest
    analysis = "quantize" if mode == "Quantize" else "accuracy"
    # Scoped by mode: each starts from the model's shared settings with its own timeout.
    form = SettingsForm("acc", f"{digest}_{analysis}", graph, analysis=analysis,
                        defaults={"fp16": is_float_model(graph)}, model=digest)  # shared (views.settings)
    quantizing = mode == "Quantize" or qdq == QUANTIZE_FIRST
    run: dict = {}
    with st.form(f"acc_options_{digest}", border=True):
        st.markdown(f"**{'Quantization' if mode == 'Quantize' else 'Accuracy'} settings** · the model's settings are "
                    "shared with the other pages")
        left, mid, right = st.columns([2, 2, 3], gap="medium")
        with left:
            if quantizing:
                run["activations"] = st.selectbox("Activations", ACTIVATIONS, key=f"acc_act_{digest}")
                run["weights"] = st.selectbox("Weights", WEIGHTS, key=f"acc_weights_{digest}")
                run["per_channel"] = st.toggle("Per-channel weights", key=f"acc_perch_{digest}")
                run["calibration"] = st.selectbox("Calibration", CALIBRATION, key=f"acc_calib_{digest}")
            if mode == "Quantize":
                run["target"] = st.text_input(
                    "Target (optional)", key=f"acc_target_{digest}", placeholder="30 (SQNR dB) or cosine=0.999",
                    help="Search the fewest tensors to lift to 16 bits until every output reaches it on the HTP: "
                         "each step's accuracy and simulated HTP cycles are shown")
                run["cost"] = st.toggle("Each step's HTP cycles (HTP simulator profile)", value=True,
                                        key=f"acc_cost_{digest}")
                run["coverage"] = st.toggle("HTP coverage of the QDQ model", value=True, key=f"acc_cov_{digest}")
            run["layers"] = st.checkbox("Layer by layer (cumulative + layerwise)", key=f"acc_layers_{digest}",
                                        help="Every tensor's error against float: with the whole model run (errors "
                                             "add up) and with each node fed float's inputs (its own error)")
        with mid:
            run["limit"] = int(st.number_input("Samples (at most)", min_value=1, max_value=MAX_LIMIT,
                                               value=DEFAULT_LIMIT, step=1, key=f"acc_limit_{digest}",
                                               help="The first this many samples of the data (random inputs: "
                                                    "this many generated)"))
            form.draw("soc", "optimization_level", "timeout", "provider_options")
        with right:
            form.draw("dims", "shapes")
        run["submitted"] = st.form_submit_button("Run", type="primary", icon=":material/play_arrow:", key="acc_run")
    run["settings"] = form.settings()
    if run.get("target"):
        from dashboard.accuracy.quantize import parse_target

        run["target"] = parse_target(run["target"])
    else:
        run["target"] = None
    return run


# -- the run in the background ------------------------------------------------------------------------
def _dataset(selected, source: dict, settings: "Settings", limit: int) -> "Dataset":
    """What the run computes on, read here (a bad file is one error line before anything starts)."""
    from dashboard.accuracy.run import dataset_for

    kind = source["kind"]
    if kind == "bundled":
        return _read_bundled(selected, source["path"], source["preprocess"], settings, limit)
    if kind == "upload":
        if source.get("upload") is None:
            raise UserError("no file uploaded: upload an .npz or a .zip of images, or pick another kind of data")
        return read_upload(selected, source["upload"], source["preprocess"], settings, limit)
    return dataset_for(selected.path, settings, None, limit=limit)[2]


def run_key(digest: str, mode: str, settings: "Settings", run: dict, source: dict, qdq: str | None) -> str:
    options = {k: (v.to_json() if hasattr(v, "to_json") else v) for k, v in run.items()
               if k not in ("settings", "submitted")}
    data = {"kind": source["kind"], "preprocess": _pre_key(source.get("preprocess"))}
    return (f"{digest}|{mode}|{json.dumps(settings.result_json(), sort_keys=True, default=str)}|"
            f"{json.dumps(options, sort_keys=True, default=str)}|{json.dumps(data, sort_keys=True)}|{qdq}")


def _start(selected, graph: ModelGraph, mode: str, source: dict, qdq: str | None, run: dict) -> None:
    settings: "Settings" = run["settings"]
    try:
        dataset = _dataset(selected, source, settings, run["limit"])
    except UserError as exc:
        st.error(md(exc), icon=":material/error:")
        return
    earlier = None
    if qdq not in (None, NO_QDQ, QUANTIZE_FIRST):
        earlier = next((e for e in session_results(selected.digest) if e["label"] == qdq and e.get("qdq")), None)
        if earlier is None:
            st.error("That QDQ model is no longer in this session: quantize again.", icon=":material/error:")
            return
    key = run_key(selected.digest, mode, settings, run, source, qdq)
    options = {k: run[k] for k in ("activations", "weights", "per_channel", "calibration") if k in run}
    what = _what(mode, run, dataset, qdq, earlier)

    def work(on_event, cancel) -> dict:
        started = time.monotonic()
        entry = measure(selected.path, dataset, settings, mode=mode, run=run, qdq=qdq,
                        earlier=earlier, on_event=on_event, cancel=cancel)
        entry.update({"digest": selected.digest, "name": selected.name, "path": selected.path, "key": key,
                      "finished": datetime.now(timezone.utc), "what": what, "options": options or entry.get("options"),
                      "seconds": time.monotonic() - started, "samples": _samples_npz(dataset)})
        return entry

    title = f"{'Quantizing' if mode == 'Quantize' else 'Measuring the accuracy of'} {short(selected.name, 40)}"
    timeout = settings.timeout or (TIMEOUTS["quantize"] if mode == "Quantize" or qdq == QUANTIZE_FIRST
                                   else TIMEOUTS["accuracy"])
    jobs.start(_JOB, key, title, work, timeout=timeout)


def _what(mode: str, run: dict, dataset: "Dataset", qdq: str | None, earlier: dict | None) -> str:
    data = RANDOM_WORDS if dataset.random else f"{len(dataset)} sample(s) of {short(dataset.source, 30)}"
    if mode == "Quantize":
        parts = [f"quantize {run['activations']}/{run['weights']}"]
        if run.get("target") is not None:
            parts.append(f"target {run['target'].text}")
    else:
        parts = ["accuracy"]
        if qdq == QUANTIZE_FIRST:
            parts.append(f"+ QDQ {run['activations']}/{run['weights']}")
        elif earlier is not None:
            parts.append(f"+ QDQ of {earlier['label'].split(' ', 1)[0]}")
    if run.get("layers"):
        parts.append("layers")
    return ", ".join([*parts, data])


class _Phase:
    """A phase of a run that composes several analyses: its events' progress mapped into
    [low, high] of the whole, their step named after the phase."""

    def __init__(self, on_event, low: float, high: float, words: str) -> None:
        self.on_event, self.low, self.high, self.words = on_event, low, high, words

    def __call__(self, event) -> None:
        from dashboard.partition.protocol import Stage

        stage, progress = getattr(event, "stage", None), getattr(event, "progress", None)
        if stage is None or progress is None:
            self.on_event(event)
            return
        self.on_event(Stage(f"{self.words}: {stage}", self.low + (self.high - self.low) * min(max(progress, 0), 1)))

    def start(self) -> None:
        from dashboard.partition.protocol import Stage

        self.on_event(Stage(self.words, self.low))


def measure(path: str, dataset: "Dataset", settings: "Settings", *, mode: str, run: dict, qdq: str | None,
            earlier: dict | None, on_event, cancel) -> dict:
    """The run (on the job's thread): the accuracy report, and for a quantization its record and the
    QDQ model's bytes. The QDQ model is written into a scratch folder that this run owns and removes
    (``runtime.scratch``); nothing is written where a browser could name it."""
    from dashboard.accuracy.model import LAYER_MODES
    from dashboard.accuracy.quantize import quantize_model
    from dashboard.accuracy.run import accuracy_model
    from dashboard.runtime import scratch

    layers = LAYER_MODES if run.get("layers") else ()
    folder = scratch.make("qbl-page-quantize-")
    try:
        out = folder / f"{Path(path).stem[:60] or 'model'}.qdq.onnx"
        result = None
        if mode == "Quantize" or qdq == QUANTIZE_FIRST:
            quantizing = mode == "Quantize"
            phase = _Phase(on_event, 0.0, 0.8 if layers or not quantizing else 1.0, "quantizing")
            phase.start()
            result = quantize_model(path, dataset, out, settings, activations=run["activations"],
                                    weights=run["weights"], per_channel=run["per_channel"],
                                    calibration=run["calibration"], target=run.get("target") if quantizing else None,
                                    cost=bool(run.get("cost")) and quantizing,
                                    coverage=bool(run.get("coverage")) and quantizing, on_event=phase, cancel=cancel)
            qdq_bytes = out.read_bytes()
            overrides = Path(result.overrides).read_text(encoding="utf-8") if result.overrides else None
        elif earlier is not None:
            out.write_bytes(earlier["qdq"])
            qdq_bytes, overrides = earlier["qdq"], earlier.get("overrides")
        else:
            qdq_bytes, overrides = None, None
        report = result.accuracy if result is not None else None
        if mode == "Accuracy" or layers or report is None:
            phase = _Phase(on_event, 0.8 if result is not None else 0.0, 1.0, "measuring accuracy")
            phase.start()
            report = accuracy_model(path, dataset, settings, quantized=out if qdq_bytes is not None else None,
                                    layers=layers, on_event=phase, cancel=cancel)
    finally:
        scratch.remove(folder)
    return {"kind": mode, "report": report, "quantize": result, "qdq": qdq_bytes, "overrides": overrides,
            "lifted": list(result.lifted) if result is not None else list((earlier or {}).get("lifted") or []),
            "options": (earlier or {}).get("options")}


def _samples_npz(dataset: "Dataset") -> bytes | None:
    """The samples the run used, one array per input stacked on a leading axis (what the reproduce
    script reads), when not too large to offer."""
    import numpy as np

    if not len(dataset):
        return None
    keys = list(dataset.samples[0])
    size = sum(int(s[k].nbytes) for s in dataset.samples for k in keys)
    if size > MAX_SAMPLES_DOWNLOAD:
        return None
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.stack([s[k] for s in dataset.samples]) for k in keys})
    return buffer.getvalue()


def _progress(selected) -> None:
    RESULTS.progress(selected.digest, "Finished", AGAIN)


# -- results ---------------------------------------------------------------------------------------------
def _results(selected) -> None:
    entries = session_results(selected.digest)
    if not entries:
        st.info("No result yet: pick the data and the mode, and press **Run**.", icon=":material/troubleshoot:")
        return
    show(RESULTS.picker(selected.digest, "Result shown", f"acc_shown_{selected.digest}", entries))


def show(entry: dict) -> None:
    """One result: the data it was computed on, the verdicts, the outputs, the layers, the
    quantization, the downloads."""
    report: "AccuracyReport" = entry["report"]
    _data_line(report)
    if report.verdicts:
        st.markdown("\n".join(f"- {md(v)}" for v in report.verdicts))
    for note in report.notes:
        st.caption(f"Note: {md(note)}")
    hardware = {c.hardware for c in report.comparisons if c.ok}
    if any("simulator" in h.lower() for h in hardware):
        st.caption(f"Measured on the **HTP simulator**: {SIMULATOR_NOTE}. Its arithmetic is the HTP's own op "
                   "implementations, which is what these figures check; its speed is only a model.")
    _outputs(report)
    if report.layers is not None:
        _layers(report)
    if entry.get("quantize") is not None:
        _quantization(entry["quantize"], report)
    _downloads(entry)


def _data_line(report: "AccuracyReport") -> None:
    data = report.data
    if data.random:
        st.warning(f"**{RANDOM_WORDS.capitalize()}**: {md(data.description or data.label)}. The figures say how the "
                   "backends differ on noise, not on your data.", icon=":material/casino:")
    else:
        st.markdown(f":material/dataset: **Data**: {md(data.description or data.label, 400)}")
        _licence(data.licence)
    if data.preprocess:
        with st.expander("Preprocessing recorded with this result", icon=":material/tune:"):
            st.json(data.preprocess)


def _outputs(report: "AccuracyReport") -> None:
    st.subheader("Per output", anchor=False)
    label = report.data.label
    for c in report.comparisons:
        if not c.ok:
            st.error(f"{md(c.target)} vs {md(c.reference)}: {md(c.reason or 'failed')}", icon=":material/error:")
    table = report.frame()
    if table.empty:
        st.caption("No comparison ran.")
        return
    view = table.assign(output=[short(o, 60) for o in table["output"]])
    st.dataframe(view, hide_index=True, width="stretch",
                 column_config={"sqnr_db": st.column_config.NumberColumn("SQNR (dB)", format="%.1f"),
                                "max_abs": st.column_config.NumberColumn("max |diff|", format="%.4g"),
                                "rel_error": st.column_config.NumberColumn("relative error", format="%.4g"),
                                "cosine": st.column_config.NumberColumn("cosine", format="%.6f"),
                                "top1": st.column_config.NumberColumn("top-1 agreement", format="percent"),
                                "topk": st.column_config.NumberColumn("top-k overlap", format="percent")})
    st.caption(f"Over every sample ({md(label)}); the hardware column says what each target ran on.")
    st.plotly_chart(figures.output_chart(report), key="acc_outputs_chart")
    worst = _worst_rows(report)
    if worst:
        with st.expander(f"Worst samples ({md(label)})", icon=":material/sort:"):
            st.dataframe(pd.DataFrame(worst), hide_index=True, width="stretch",
                         column_config={"sqnr_db": st.column_config.NumberColumn("SQNR (dB)", format="%.1f")})


def _worst_rows(report: "AccuracyReport", per_output: int = 5) -> list[dict]:
    names = report.data.names
    rows = []
    for c in report.comparisons:
        if not c.ok:
            continue
        for o in c.outputs:
            if len(o.samples) < 2:
                continue
            for rank, i in enumerate(o.worst[:per_output], start=1):
                m = o.samples[i]
                rows.append({"comparison": c.key, "output": short(o.name, 60), "rank": rank,
                             "sample": short(names[i] if i < len(names) else f"#{i}", 60), "sqnr_db": m.sqnr_db,
                             "cosine": m.cosine, "max_abs": m.max_abs, "hardware": c.hardware})
    return rows


def _layers(report: "AccuracyReport") -> None:
    layers = report.layers
    st.subheader("Layer by layer", anchor=False)
    if not layers.ok:
        st.error(f"The layers could not be measured: {md(layers.reason or 'failed')}", icon=":material/error:")
        return
    st.caption(f"{md(layers.target)} · {md(', '.join(layers.modes))} · SQNR against float on the CPU EP · "
               f"{md(figures.layer_hardware(report))} · {md(report.data.label)}")
    if layers.first_jump:
        row = layers.row(layers.first_jump)
        if row is not None:
            st.markdown(f":material/trending_down: The error first jumps at **{md(short(row.node, 80))}** "
                        f"\\[{md(row.op_type)}\\] (tensor {md(short(row.tensor, 80))})"
                        + (f": {md(row.why)}" if row.why else ""))
    for note in layers.partition:
        st.caption(f"Partition: {md(note)}")
    st.plotly_chart(figures.layer_chart(report), key="acc_layer_chart")
    table = report.layer_frame()
    st.dataframe(table.assign(tensor=[short(t, 60) for t in table["tensor"]],
                              node=[short(n, 60) for n in table["node"]]),
                 hide_index=True, width="stretch",
                 column_config={"cumulative": st.column_config.NumberColumn("cumulative (dB)", format="%.1f"),
                                "layerwise": st.column_config.NumberColumn("layerwise (dB)", format="%.1f"),
                                "cpu_cumulative": st.column_config.NumberColumn("CPU EP cumulative (dB)",
                                                                                format="%.1f"),
                                "clipped": st.column_config.NumberColumn("clipped", format="percent")})


def _quantization(result: "QuantizeResult", report: "AccuracyReport") -> None:
    st.subheader("Quantization", anchor=False)
    o = result.options
    st.markdown(f"**{md(o['activations'])}** activations, **{md(o['weights'])}** weights"
                + (", per channel" if o.get("per_channel") else "") + f", {md(o['calibration'])} calibration on "
                + md(result.data.label))
    for note in result.notes:
        st.caption(f"Note: {md(note)}")
    if result.left_float:
        st.warning(f"ORT left **{len(result.left_float)} node(s)** in float: "
                   + ", ".join(f"{md(short(n, 50))} \\[{md(op)}\\]" for n, op in result.left_float[:8])
                   + (" …" if len(result.left_float) > 8 else ""), icon=":material/warning:")
    else:
        st.success("ORT left nothing in float: every compute node sits between Quantize/Dequantize pairs.",
                   icon=":material/check_circle:")
    if result.target is not None:
        if result.reached:
            st.success(f"Target {md(result.target.text)} reached with **{len(result.lifted)}** tensor(s) lifted to "
                       "u16.", icon=":material/flag:")
        else:
            st.error(f"Target {md(result.target.text)} not reached.", icon=":material/flag:")
    if result.steps:
        steps = result.steps_frame()
        steps["lifted"] = [", ".join(short(t, 40) for t in lifted[:6]) + (" …" if len(lifted) > 6 else "")
                           for lifted in steps["lifted"]]
        st.markdown("**Steps** · each model built: its worst output against float on the HTP, and its cost")
        st.dataframe(steps, hide_index=True, width="stretch",
                     column_config={"sqnr_db": st.column_config.NumberColumn("SQNR (dB)", format="%.1f"),
                                    "cosine": st.column_config.NumberColumn("cosine", format="%.6f"),
                                    "cycles": st.column_config.NumberColumn("cycles (one run)", format="localized")})
        if any(s.cycles is not None for s in result.steps):
            st.caption("Cycles: simulated HTP cycles of one run on the HTP simulator, same unit and SoC for every "
                       "step (never turned into time).")
    if result.float_cycles is not None:
        ratio = (f"; the QDQ model costs **{result.cycles_ratio:.2f}×** its cycles" if result.cycles_ratio else "")
        st.markdown(f"Float model in fp16 on the same SoC: {result.float_cycles:,.0f} simulated HTP cycles{ratio}.")
    _coverage(result.coverage, report)


def _coverage(coverage, report: "AccuracyReport") -> None:
    if coverage is None:
        return
    hardware = figures.layer_hardware(report)
    if coverage.error:
        st.error(f"HTP coverage of the QDQ model (integer path): {md(coverage.error)}", icon=":material/error:")
        return
    cols = st.columns(3)
    cols[0].metric(f"nodes the HTP claims · {hardware}", f"{coverage.claimed:,}")
    cols[1].metric("refused", f"{coverage.refused:,}")
    cols[2].metric("QNN subgraphs", f"{coverage.subgraphs:,}")
    if coverage.blockers:
        st.markdown("**Blockers** of the integer path, with their fix")
        rows = [{"op_type": b.get("op_type"), "count": b.get("count"), "reason": short(b.get("reason"), 200),
                 "fix": short(b.get("fix"), 200)} for b in coverage.blockers]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    else:
        st.success("The HTP runs the whole QDQ model: no blocker on the integer path.", icon=":material/check_circle:")


# -- downloads ---------------------------------------------------------------------------------------------
def _downloads(entry: dict) -> None:
    """Each file made when clicked (a callable), named after the model and when the run finished."""
    path, when = entry["path"], entry["finished"]
    report: "AccuracyReport" = entry["report"]
    st.subheader("Downloads", anchor=False)
    cols = st.columns(5)
    cols[0].download_button("Report (JSON)", lambda: json.dumps(_record(entry), indent=1),
                            file_name=download_name(path, "accuracy", "json", when), mime="application/json",
                            icon=":material/download:", key="acc_dl_report", on_click="ignore")
    if entry.get("qdq"):
        cols[1].download_button("QDQ model (.onnx)", lambda: entry["qdq"],
                                file_name=download_name(path, "qdq", "onnx", when),
                                mime="application/octet-stream", icon=":material/download:", key="acc_dl_qdq",
                                on_click="ignore")
    if entry.get("overrides"):
        cols[2].download_button("Overrides (JSON)", lambda: entry["overrides"],
                                file_name=download_name(path, "overrides", "json", when), mime="application/json",
                                icon=":material/download:", key="acc_dl_overrides", on_click="ignore",
                                help="ORT's TensorQuantOverrides: what get_qnn_qdq_config(init_overrides=...) takes")
    if entry.get("samples"):
        cols[3].download_button("Samples (.npz)", lambda: entry["samples"],
                                file_name=download_name(path, "samples", "npz", when),
                                mime="application/octet-stream", icon=":material/download:", key="acc_dl_samples",
                                on_click="ignore", help="The inputs the run used (after preprocessing), one array "
                                                        "per input: what the reproduce script reads")
    if entry.get("qdq") and entry.get("options"):
        script = reproduce_snippet(entry)
        cols[4].download_button("Reproduce (Python)", lambda: script,
                                file_name=download_name(path, "reproduce", "py", when), mime="text/x-python",
                                icon=":material/download:", key="acc_dl_script", on_click="ignore")
        with st.expander("Reproduce outside the dashboard (Python)", icon=":material/code:"):
            st.code(script, language="python")
    if report.data.random:
        st.caption(f"Every figure above is on **{RANDOM_WORDS}**.")


def _record(entry: dict) -> dict:
    result = entry.get("quantize")
    return {"accuracy": entry["report"].to_json(), "quantize": result.to_json() if result is not None else None}


_TYPES = {"u8": "QUInt8", "s8": "QInt8", "u16": "QUInt16", "s16": "QInt16", "int4": "QInt4"}
_CALIBRATIONS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


def reproduce_snippet(entry: dict) -> str:
    """A script that rebuilds the QDQ model with ONNX Runtime's QNN recipe (``qnn_preprocess_model``
    with the metadata work-around, ``get_qnn_qdq_config`` with the lifted tensors' overrides,
    ``quantize``) on the run's samples, and compares the QDQ model's outputs with the float model's
    on the CPU EP. Every value enters as a Python literal (``repr``)."""
    o = entry["options"]
    stem = Path(state.known_as(entry["path"])).stem or "model"
    lifted = list(entry.get("lifted") or [])
    lines = [
        "# Rebuilds the QDQ model of the QNN Backend Lab's Quantize & accuracy page with ONNX Runtime's QNN recipe,",
        "# calibrated on the page's samples, and compares its outputs with the float model's on the CPU EP",
        "# (the page's 'QDQ on the CPU EP vs float' figures). Runs outside the dashboard:",
        "# pip install onnxruntime numpy   (onnxruntime.quantization brings onnx, used for the metadata below)",
        "import numpy as np",
        "import onnx",
        "import onnxruntime as ort",
        "from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantType, quantize",
        "from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config, qnn_preprocess_model",
        "",
        f"MODEL = {stem + '.onnx'!r}  # the float model",
        f"DATA = {download_name(entry['path'], 'samples', 'npz', entry['finished'])!r}  # the page's 'Samples (.npz)'",
        f"OUT = {stem + '.qdq.onnx'!r}",
        f"ACTIVATIONS = QuantType.{_TYPES[o['activations']]}",
        f"WEIGHTS = QuantType.{_TYPES[o['weights']]}",
        f"PER_CHANNEL = {bool(o.get('per_channel'))!r}",
        f"CALIBRATION = CalibrationMethod.{_CALIBRATIONS[o['calibration']]}",
        f"LIFTED = {lifted!r}  # tensors the search lifted to 16 bits (the overrides JSON)",
        "",
        "data = np.load(DATA)",
        "samples = [{name: data[name][i] for name in data.files} for i in range(len(data[data.files[0]]))]",
        "",
        "",
        "class Samples(CalibrationDataReader):",
        "    def __init__(self):",
        "        self.rest = iter(samples)",
        "",
        "    def get_next(self):",
        "        return next(self.rest, None)",
        "",
        "",
        "# qnn_preprocess_model raises TypeError on a model with metadata_props (onnxruntime 1.32):",
        "# the metadata is dropped for the call (it changes no figure)",
        "model = onnx.load(MODEL)",
        "del model.metadata_props[:]",
        "bare, pre = OUT + '.bare.onnx', OUT + '.pre.onnx'",
        "onnx.save(model, bare)",
        "source = pre if qnn_preprocess_model(bare, pre) else bare",
        "config = get_qnn_qdq_config(source, Samples(), calibrate_method=CALIBRATION, activation_type=ACTIVATIONS,",
        "                            weight_type=WEIGHTS, per_channel=PER_CHANNEL,",
        "                            init_overrides={t: [{'quant_type': QuantType.QUInt16}] for t in LIFTED} or None)",
        "quantize(source, OUT, config)",
        "",
        "",
        "def sqnr(got, want):",
        "    got = np.concatenate([g.ravel() for g in got]).astype(np.float64)",
        "    want = np.concatenate([w.ravel() for w in want]).astype(np.float64)",
        "    eps = np.finfo(float).eps",
        "    return 20 * np.log10(max(np.linalg.norm(want), eps) / max(np.linalg.norm(got - want), eps))",
        "",
        "",
        "reference = ort.InferenceSession(MODEL, providers=['CPUExecutionProvider'])",
        "qdq = ort.InferenceSession(OUT, providers=['CPUExecutionProvider'])",
        "names = [o.name for o in reference.get_outputs()]",
        "want = [reference.run(names, s) for s in samples]",
        "got = [qdq.run(names, s) for s in samples]",
        "for i, name in enumerate(names):",
        "    figure = sqnr([g[i] for g in got], [w[i] for w in want])",
        "    print(f'{name}: SQNR {figure:.1f} dB (QDQ on the CPU EP vs float, {len(samples)} samples)')",
    ]
    return "\n".join(lines) + "\n"

