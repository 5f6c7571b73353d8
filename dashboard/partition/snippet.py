"""A copy-paste Python snippet that builds the session an analysis measured, outside the dashboard.

Why: a model engineer who saw "HTP refuses these 12 nodes" wants to reproduce it in their own
script, file an issue with the EP, or try an option the dashboard does not offer (``op_affinity``).
The snippet carries the exact session of the analysis: the QNN plugin EP registered from
``onnxruntime_qnn``, its devices, the provider options ``SessionConfig.qnn_options`` gives the worker
(backend, SoC, fp16, the user's extra options), the optimisation level, a free-dimension override
for every resolved dimension, whole input shapes declared in a copy of the model (as the worker's
``measure.prepare`` does) and ``session.record_ep_graph_assignment_info=1``, so it prints which
nodes QNN took. What the worker adds only to read the EP's reasons (its op trace into a scratch
folder) is left out: it writes files and changes no verdict.

Every value from the user or the model (the path, input names, options) enters the snippet as a
Python literal (``repr``), never as code.
"""

from __future__ import annotations

from dashboard.runtime.config import SessionConfig
from dashboard.runtime.knobs import Settings

RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
QNN_EP = "QNNExecutionProvider"
LEVELS = {"all": "ORT_ENABLE_ALL", "extended": "ORT_ENABLE_EXTENDED", "basic": "ORT_ENABLE_BASIC",
          "disabled": "ORT_DISABLE_ALL"}


def session_config(settings: Settings, backend: str, dims: dict[str, int]) -> SessionConfig:
    """The session the worker builds for ``backend`` (``analysis.analyze``: ``SessionConfig.of`` with
    the resolved ``dims``), before its op-trace options."""
    return SessionConfig.of(settings, backend, dims=dims)


def snippet(model: str, settings: Settings, dims: dict[str, int], backend: str = "htp") -> str:
    """The Python source that builds ``backend``'s session of ``model`` under ``settings`` (``dims``:
    every symbolic dimension's value, as the analysis resolved them). Raises ``UserError`` for
    settings no session can be built from (fp16 without a SoC model)."""
    config = session_config(settings, backend, dims)
    provider = config.qnn_options()
    lines = ["# Reproduces the QNN Backend Lab analysis: the same session and provider options.",
             "# pip install onnxruntime-qnn" + (" onnx" if settings.shapes else ""),
             "import onnxruntime as ort",
             "import onnxruntime_qnn",
             *(["import os", "import onnx"] if settings.shapes else []),
             "",
             f"MODEL = {model!r}",
             f"PROVIDER_OPTIONS = {provider!r}",
             f"FREE_DIMENSIONS = {dict(config.dims)!r}",
             *([f"INPUT_SHAPES = {({k: list(v) for k, v in settings.shapes.items()})!r}"] if settings.shapes else []),
             "",
             f"ort.register_execution_provider_library({QNN_EP!r}, onnxruntime_qnn.get_library_path())",
             f"devices = [d for d in ort.get_ep_devices() if d.ep_name == {QNN_EP!r}]",
             "options = ort.SessionOptions()",
             f"options.graph_optimization_level = ort.GraphOptimizationLevel.{LEVELS[config.optimization_level]}",
             "for name, value in FREE_DIMENSIONS.items():",
             "    options.add_free_dimension_override_by_name(name, value)",
             f"options.add_session_config_entry({RECORD_ASSIGNMENT!r}, '1')  # which nodes each EP took",
             "options.add_provider_for_devices(devices, PROVIDER_OPTIONS)",
             *_shaped_input(settings),
             "session = ort.InferenceSession(source, sess_options=options)",
             "for subgraph in session.get_provider_graph_assignment_info():",
             "    nodes = subgraph.get_nodes()",
             "    print(subgraph.ep_name, len(nodes), 'node(s), e.g.', [n.name for n in nodes[:3]])"]
    return "\n".join(lines) + "\n"


def _shaped_input(settings: Settings) -> list[str]:
    """The model the session reads: the file, or (with whole input shapes) a copy declaring them,
    its external weights read from the file's folder."""
    if not settings.shapes:
        return ["source = MODEL"]
    return [*declared_shapes_copy(),
            f"options.add_session_config_entry({EXTERNAL_DATA_FOLDER!r}, "
            "os.path.dirname(os.path.abspath(MODEL)))",
            "source = model.SerializeToString()"]


def declared_shapes_copy() -> list[str]:
    """Script lines that load ``MODEL`` without its weights into ``model`` and declare each
    ``INPUT_SHAPES`` entry as that input's whole shape: what a run with whole input shapes does to
    a copy (the file is unchanged). Shared by the partition and timeline snippets."""
    return ["model = onnx.load(MODEL, load_external_data=False)  # declare the input shapes in a copy",
            "for graph_input in model.graph.input:",
            "    if graph_input.name in INPUT_SHAPES:",
            "        dims = graph_input.type.tensor_type.shape.dim",
            "        del dims[:]",
            "        for size in INPUT_SHAPES[graph_input.name]:",
            "            dims.add().dim_value = size"]


def report_snippet(report, backend: str = "htp") -> str:
    """``snippet`` of a ``PartitionReport``: its model, settings and resolved dimensions."""
    return snippet(report.model, report.options, dict(report.dims), backend)


def model_snippet(model_path: str, settings: Settings, backend: str = "htp") -> str:
    """``snippet`` of a model file without running an analysis: its dimensions resolved as the
    analysis resolves them (``intake.shapes.resolve_dims``), its path made absolute. Bad files and
    input shapes fail as in ``analyze`` (one ``UserError``)."""
    from pathlib import Path

    from dashboard.intake.reader import load_model
    from dashboard.intake.shapes import check_input_shapes, resolve_dims

    given = Path(model_path).expanduser()
    graph = load_model(given)
    dims = resolve_dims(graph, settings.dims)
    check_input_shapes(graph, settings.shapes, dims)
    return snippet(str(given.resolve()), settings, dims, backend)
