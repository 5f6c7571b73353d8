"""The profile capability on the HTP simulator, side by side with a bare ONNX Runtime + QNN script
(``tests/profile_bare.py``): on the samples and real models of the test zoo, the per-node cycles add
up to the accelerator's total, and nodes the bare script finds far apart rank the same way; a node
the HTP refuses gets µs from ONNX Runtime's own profiler; a truncated file, a failing backend and a
model QNN cannot run leave the rest of the profile standing.

Simulated HTP cycles of one op vary several-fold from run to run on this host (measured: a Transpose
between 10 and 40 M cycles over five runs), so rankings are compared on medians, for pairs of nodes
at least ``MARGIN`` times apart in the bare script's medians, never on close ones.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dashboard.profile.run import profile_model
from dashboard.runtime.knobs import Settings

ROOT = Path(__file__).resolve().parent.parent
BARE = Path(__file__).resolve().parent / "profile_bare.py"
AIHUB = Path(__file__).resolve().parent / "data" / "aihub"
SOC_MODEL = "60"  # fp16 needs a SoC; real models do not finalize in fp32 on the simulator (QNN_COMMON_ERROR_MEM_ALLOC)
RUNS = 5
MARGIN = 3.0
REAL = Path(__file__).resolve().parent / "data" / "real"
# Three samples (a CNN, a ViT, an LLM decoder whose attention falls back to the CPU EP; the audio
# encoder takes 40 s a run on the simulator), four architectures of AI Hub's (torchvision's) and a real
# pretrained CRNN of the zoo (tests/real_zoo.py), each weight-stripped and refilled.
MODELS = [*(ROOT / "samples" / f"{m}.onnx" for m in ("cnn_classifier", "vit_classifier", "llm_decoder_kv")),
          *(AIHUB / f"{m}.onnx" for m in ("resnet18", "squeezenet1_1", "mobilenet_v2", "shufflenet_v2")),
          REAL / "captcha_crnn.onnx"]
_LABEL = re.compile(r"^(.*?)[: ]OpId_\d+ \(cycles\)$")
_TOKEN = re.compile(r"(_token_\d+)+$")


def refilled(path: Path, directory: Path) -> Path:
    """The committed copy with its stripped float weights given constant data (as test_aihub_truth does)."""
    model = onnx.load(path)
    for tensor in model.graph.initializer:
        if tensor.data_type == TensorProto.FLOAT and not tensor.raw_data and not tensor.float_data:
            tensor.raw_data = np.full(tuple(tensor.dims), 0.01, np.float32).tobytes() if math.prod(tensor.dims) else b""
    out = directory / path.name
    onnx.save(model, out)
    return out


def model_name(row_name: str, graph_nodes: set[str]) -> str:
    """A runtime row's model node: its name without the layout suffix when that names a node of the
    model; rows the EP inserted keep their own name (``Transpose_token_16``)."""
    stripped = _TOKEN.sub("", row_name)
    return stripped if stripped in graph_nodes else row_name


def bare_profile(model: Path, out: Path, runs: int, dims: dict[str, int] | None = None) -> list[dict]:
    """The bare script's timed runs, read here with the csv module alone: per run, its node rows by
    model node (``model_name``) and its accelerator cycles, summed over the QNN graphs (one block
    per graph and run; a graph is known by its node rows: QNN logs a graph's FINALIZE again when the
    next one finalizes, so those rows do not count graphs)."""
    graph_nodes = {n.name for n in onnx.load(model, load_external_data=False).graph.node}
    fixed = [arg for name, value in (dims or {}).items() for arg in ("--dim", f"{name}={value}")]
    done = subprocess.run([sys.executable, str(BARE), str(model), str(out), str(runs), "--fp16", SOC_MODEL, *fixed],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    blocks, rows, kinds, labels = [], {}, set(), []
    with open(json.loads(done.stdout.strip().splitlines()[-1])["csv"], newline="") as handle:
        for row in csv.DictReader(handle):
            ident = row["Event Identifier"]
            if row["Message"] == "NODE":
                labels.append(ident)
                match = _LABEL.match(ident)
                name = model_name(match.group(1) if match else ident, graph_nodes)  # the QNN op's own name
                rows[name] = rows.get(name, 0.0) + float(row["Time"])
            elif ident == "Accelerator (execute) time (cycles)":
                rows["__total__"] = float(row["Time"])
            elif ident == "QNN (execute) time":
                blocks.append(rows)
                kinds.add(tuple(labels))
                rows, labels = {}, []
    graphs = len(kinds)
    runs = []
    for i in range(0, len(blocks) - graphs + 1, graphs):
        merged: dict[str, float] = {}
        for block in blocks[i:i + graphs]:
            for key, value in block.items():
                merged[key] = merged.get(key, 0.0) + value
        runs.append(merged)
    return runs[1:]  # the warm-up run


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("zoo")
    return [refilled(m, folder) if m.parent in (AIHUB, REAL) else m for m in MODELS]


@pytest.mark.parametrize("index", range(len(MODELS)), ids=[m.stem for m in MODELS])
def test_the_profile_agrees_with_a_bare_profiling_script(models, index, tmp_path):
    model = models[index]
    profile = profile_model(model, Settings(backends=("htp",), fp16=True, soc=SOC_MODEL), runs=RUNS)
    htp = profile.backends["htp"]
    assert htp.ok, htp.reason
    assert htp.hardware == "HTP simulator (x86_64)" and profile.label("htp") == "simulated HTP cycles"
    assert htp.runs == RUNS and not any("do not add up" in n for n in htp.notes)
    nodes = profile.backend_nodes("htp")
    assert len({n.name for n in nodes}) == len(nodes)

    bare = bare_profile(model, tmp_path / "bare", RUNS, profile.dims)  # the same dimensions fixed
    assert len(bare) == RUNS
    for block in bare:  # the runtime's own rule, in the bare script's file
        assert sum(v for k, v in block.items() if k != "__total__") == pytest.approx(block["__total__"], abs=0.5)
    medians = {k: statistics.median(b.get(k, 0.0) for b in bare) for k in bare[0] if k != "__total__"}
    graph_nodes = {n.name for n in onnx.load(model, load_external_data=False).graph.node}
    row_of = {model_name(op, graph_nodes): n.name for n in nodes for op in n.qnn_ops}  # QNN op -> profile row
    unplaced = {k for k in medians if k not in row_of}
    assert not unplaced, unplaced  # every row of the bare file is in the profile, none dropped
    theirs: dict[str, float] = {}  # the bare file's medians summed as the profile groups its rows
    for key, value in medians.items():
        theirs[row_of[key]] = theirs.get(row_of[key], 0.0) + value
    mine = {n.name: n.median for n in nodes if n.name in theirs}
    top = sorted(theirs, key=lambda k: -theirs[k])
    assert profile.top(1, "htp")[0].name in top[:3]
    medians = theirs
    far_apart = [(a, b) for a in medians for b in medians if medians[a] > MARGIN * max(medians[b], 1.0)
                 and medians[b] > 0]
    wrong = [(a, b) for a, b in far_apart if mine[a] <= mine[b]]
    assert len(wrong) <= len(far_apart) // 10, wrong[:5]


EXACT = [m for m in MODELS if m.stem in ("cnn_classifier", "llm_decoder_kv", "resnet18", "shufflenet_v2")]
"""The one-run add-up check's models (a CNN, an LLM decoder with CPU fallback, two zoo CNNs): one
more simulator compile each, so not the whole list on a 2-core machine."""


@pytest.mark.parametrize("index", range(len(EXACT)), ids=[m.stem for m in EXACT])
def test_one_runs_node_cycles_add_up_to_the_accelerator_total(models, index):
    """With one timed run a node's median is its run's value: the rows add up to the total exactly
    (the runtime's own rule), with nothing dropped or counted twice by the mapping."""
    model = models[MODELS.index(EXACT[index])]
    profile = profile_model(model, Settings(backends=("htp",), fp16=True, soc=SOC_MODEL), runs=1)
    htp = profile.backends["htp"]
    assert htp.ok, htp.reason
    nodes = profile.backend_nodes("htp")
    assert sum(n.median for n in nodes) == pytest.approx(htp.total, abs=0.5)
    assert not any("do not add up" in n for n in htp.notes)
    assert sum(n.share for n in nodes) == pytest.approx(1.0, abs=1e-6)


def test_one_run_adds_up_exactly_and_keeps_inserted_rows_and_fused_groups():
    profile = profile_model(ROOT / "samples" / "cnn_classifier.onnx",
                            Settings(backends=("htp",), fp16=True, soc=SOC_MODEL), runs=1)
    htp = profile.backends["htp"]
    nodes = profile.backend_nodes("htp")
    assert sum(n.median for n in nodes) == pytest.approx(htp.total, abs=0.5)
    assert sum(n.share for n in nodes) == pytest.approx(1.0, abs=1e-6)
    conv = profile.node("/features.0/features.0/Conv", "htp")  # the group opens with the Conv: it carries the cost
    assert conv.carrier and conv.members[0] == conv.name and "/features.0/features.0/Relu" in conv.members
    assert profile.by_op_type("htp").set_index("op_type").loc["Conv+BatchNormalization+Relu", "median"] > 0
    transpose = profile.node("Transpose", "htp")
    assert transpose.inserted and transpose.serves == "/features.0/features.0/Conv"
    graph_nodes = {n.name for n in onnx.load(ROOT / "samples" / "cnn_classifier.onnx").graph.node}
    assert graph_nodes <= {n.name for n in nodes}  # every model node is found, fused ones included
    bn = profile.node("/features.0/features.0/BatchNormalization", "htp")
    assert bn.fused and bn.median == 0 and bn.name in profile.node(bn.group, "htp").members
    assert [f.name for f in htp.finalize][:1] == ["QNN finalize"] and htp.execute_us > 0
    assert any("power on" in f.name for f in htp.figures)
    gpu_less = profile.backends.get("gpu")
    assert gpu_less is None


def einsum_model(path: Path) -> Path:
    """Relu -> Einsum('ij,ij->i') -> Relu: the HTP refuses that Einsum (measured: it takes
    'bij,bjk->bik' and 'bid,bjd->bij', and refuses 'ij,ij->i', 'ij->ji' and 'ii->i'), so the CPU EP
    runs it between two HTP graphs."""
    shapes = [(64, 128), (64, 128)]
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, s) for i, s in enumerate(shapes)]
    nodes = [helper.make_node("Relu", ["x0"], ["r"], name="pre"),
             helper.make_node("Einsum", ["r", "x1"], ["e"], name="rowdot", equation="ij,ij->i"),
             helper.make_node("Relu", ["e"], ["y"], name="post")]
    graph = helper.make_graph(nodes, "einsum", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_node_the_htp_refuses_gets_microseconds_from_ort_s_trace(tmp_path):
    profile = profile_model(einsum_model(tmp_path / "einsum.onnx"), Settings(backends=("htp", "gpu")), runs=3)
    assert profile.backends["htp"].ok and profile.backends["cpu"].ok
    einsum = profile.node("rowdot")
    assert einsum.backend == "cpu" and einsum.unit == "us" and einsum.median > 0 and einsum.op_type == "Einsum"
    assert einsum.share == pytest.approx(einsum.median / profile.backends["cpu"].total)
    assert {n.name for n in profile.backend_nodes("htp")} >= {"pre", "post"}  # two HTP graphs, both read
    gpu = profile.backends["gpu"]
    assert gpu.status == "failed" and "GPU" in gpu.reason  # no Adreno here: said, and the rest kept


def test_a_model_qnn_cannot_run_is_profiled_on_the_cpu_and_the_htp_says_why(tmp_path):
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Einsum", ["a"], ["b"], name="diag", equation="ii->i")], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, (8, 8))],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, (8,))]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "diag.onnx")
    profile = profile_model(tmp_path / "diag.onnx", Settings(backends=("htp",)), runs=2)
    assert profile.backends["htp"].status == "failed" and profile.backends["htp"].reason
    assert profile.backends["cpu"].ok and profile.node("diag").backend == "cpu"


def test_a_truncated_file_keeps_its_complete_runs_and_a_missing_one_is_said(models, tmp_path):
    from dashboard.profile.measure import model_graphs, qnn_backend
    from dashboard.partition.measure import prepare
    from dashboard.runtime.config import SessionConfig

    model = ROOT / "samples" / "cnn_classifier.onnx"
    done = subprocess.run([sys.executable, str(BARE), str(model), str(tmp_path / "bare"), "3"],
                          capture_output=True, text=True, timeout=600)
    text = Path(json.loads(done.stdout.strip().splitlines()[-1])["csv"]).read_text()
    graphs = model_graphs(prepare(str(model)), SessionConfig(), str(tmp_path))
    whole, rows = qnn_backend(text, {}, graphs, 1, 3, "HTP simulator (x86_64)", "detailed", [])
    assert whole.ok and whole.runs == 3 and rows
    cut = text[: text.rindex("QNN (execute) time") - 200]  # inside the last run
    partial, rows = qnn_backend(cut, {}, graphs, 1, 3, "HTP simulator (x86_64)", "detailed", [])
    assert partial.ok and partial.runs == 2 and any("ends early" in n for n in partial.notes) and rows
    first = text[: text.index("QNN (execute) time") + 40]  # the warm-up run only
    nothing, rows = qnn_backend(first, {}, graphs, 1, 3, "HTP simulator (x86_64)", "detailed", [])
    assert nothing.status == "failed" and "no complete timed run" in nothing.reason and not rows
    missing, _ = qnn_backend(None, {}, graphs, 1, 3, "HTP simulator (x86_64)", "detailed", [])
    assert missing.status == "failed" and "no profiling file" in missing.reason
    foreign, _ = qnn_backend("a,b\n1,2\n", {}, graphs, 1, 3, "HTP simulator (x86_64)", "detailed", [])
    assert foreign.status == "failed" and "not a QNN profiling CSV" in foreign.reason


def test_the_profiling_files_are_removed_with_the_job(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    profile_model(ROOT / "samples" / "cnn_classifier.onnx", Settings(backends=("htp",)), runs=1)
    assert not list(tmp_path.glob("qbl-profile-*"))


def test_the_notebook_returns_a_frame_and_a_figure_in_the_backends_own_unit():
    import html

    from dashboard import notebook as lab
    from dashboard.render import profile_views

    profiled = lab.sample("cnn_classifier.onnx").profile(runs=1, backends=("htp",), fp16=True, soc=SOC_MODEL)
    frame = profiled.to_frame()
    assert len(frame) == len(profiled.record.nodes) and {"name", "backend", "unit", "median", "share"} <= set(frame)
    figure = profiled.figure()
    assert figure.layout.xaxis.title.text == "simulated HTP cycles"
    top = profiled.record.top(1, "htp")[0]
    assert list(figure.data[0].y)[-1] == html.escape(profile_views._bar_name(top))  # the costliest on top, as the page
    with pytest.raises(Exception, match="no backend 'gpu'"):
        profiled.figure("gpu")


def test_optrace_refused_by_an_older_qnn_is_profiled_at_detailed_and_says_so(tmp_path, monkeypatch):
    """Older QAIRT releases do not know ``profiling_level=optrace``: the session that asks for it
    fails, and the profile runs at ``detailed`` instead (the refusal is stood in for; the detailed
    session and its file are real)."""
    from dashboard.errors import UserError
    from dashboard.partition.measure import prepare
    from dashboard.profile import measure
    from dashboard.runtime import qnn
    from dashboard.runtime.config import SessionConfig

    real = qnn.create_session
    asked = []

    def older_qnn(model, config, **kwargs):
        asked.append(config.provider_options.get("profiling_level"))
        if asked[-1] == "optrace":
            raise UserError("session creation failed on htp: unknown profiling_level optrace")
        return real(model, config, **kwargs)

    monkeypatch.setattr(qnn, "create_session", older_qnn)
    model = ROOT / "samples" / "cnn_classifier.onnx"
    config = SessionConfig(backend="htp", provider_options={"profiling_level": "optrace"})
    session = measure.profiled_session(prepare(str(model)), config, tmp_path / "htp", 1, 1)
    assert asked == ["optrace", "detailed"] and session.level == "detailed"
    assert any("optrace refused" in note for note in session.notes)
    graphs = measure.model_graphs(prepare(str(model)), config, str(tmp_path))
    backend, rows = measure.qnn_backend(session.qnn_csv(), session.op_trace(), graphs, 1, 1,
                                        "HTP simulator (x86_64)", session.level, session.notes)
    assert backend.ok and backend.level == "detailed" and rows and any("optrace" in n for n in backend.notes)
