"""Partition measurement on the real HTP simulator, through a real worker process."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys

import partition_models as pm
import pytest

from dashboard.intake.samples import sample_path
from dashboard.partition.analysis import PartitionOptions, analyze
from dashboard.partition.protocol import PartitionArgs
from dashboard.runtime.client import WorkerClient
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.socs import DEFAULT_SOC, resolve_soc

TOKEN = re.compile(r"_token_\d+$")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QNN_LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def worker():
    with WorkerClient() as client:
        yield client


def run_worker(worker, path, dims=None, fp16=False, backends=("htp", "gpu"), level="all") -> dict:
    """The worker's ``partition`` result as its JSON (the contract the dashboard reads)."""
    config = SessionConfig(dims=dims or {}, fp16=fp16, soc=DEFAULT_SOC if fp16 else None, optimization_level=level)
    return worker.call("partition", PartitionArgs(str(path), config, list(backends)), timeout=600).to_json()


def test_rejected_nodes_carry_the_eps_reasons_and_model_names(worker, tmp_path):
    result = run_worker(worker, pm.save(pm.rejects_model(), tmp_path, "rejects"))
    htp = result["backends"]["htp"]
    assert htp["status"] == "measured"
    nodes = htp["nodes"]
    assert set(nodes) == {"conv0", "Relu#1", "erf0", "mod0", "mul0", "sig0"}  # the unnamed Relu's stable name
    assert not nodes["erf0"]["supported"]
    assert "Operators of type `Erf` are not supported" in nodes["erf0"]["reason"]
    assert not nodes["mod0"]["supported"]
    assert "QNN Mod Op only support fmod == 0" in nodes["mod0"]["reason"]
    for name in ("conv0", "Relu#1", "mul0", "sig0"):
        assert nodes[name]["supported"] and nodes[name]["status"] == "claimed" and nodes[name]["reason"] is None
    assert nodes["conv0"]["qnn_op"] == "Conv2d"  # claimed as conv0_token_N after the layout transformation
    assert htp["qnn_subgraphs"] == 2  # Erf and Mod split the graph
    added = {a["op_type"]: a for a in htp["added_nodes"]}
    assert "Transpose" in added and added["Transpose"]["count"] >= 2  # NHWC layout transposes, not model nodes
    assert result["renamed_nodes"] == 1
    gpu = result["backends"]["gpu"]
    assert gpu["status"] == "predicted" and "does not initialize" in gpu["source"]
    assert "not in the QNN GPU rule table" in gpu["nodes"]["erf0"]["reason"]  # its own reason, not the HTP's
    assert "fmod == 0" in gpu["nodes"]["mod0"]["reason"]
    assert gpu["nodes"]["conv0"]["supported"]
    assert htp["runtime"]["hardware"] == ("simulator" if platform.machine() == "x86_64" else htp["runtime"]["hardware"])
    assert gpu["runtime"]["hardware"] is None  # a prediction was measured on nothing


def _bare_assignment(path: str, dims: dict, fp16: bool) -> list:
    """What get_provider_graph_assignment_info() reports for a bare session with the same options,
    in a separate process (no analysis code involved)."""
    soc = resolve_soc(DEFAULT_SOC)
    script = f"""
import json, onnxruntime as ort, onnxruntime_qnn
ort.set_default_logger_severity(3)
ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
devs = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
so = ort.SessionOptions()
so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
for k, v in {dims!r}.items():
    so.add_free_dimension_override_by_name(k, v)
opts = {{"backend_type": "htp"}}
if {fp16!r}:
    opts.update(soc_model="{soc.soc_model}", htp_arch="{soc.htp_arch}", enable_htp_fp16_precision="1")
so.add_provider_for_devices(devs, opts)
s = ort.InferenceSession({path!r}, so)
print(json.dumps([[g.ep_name, [[n.name, n.op_type] for n in g.get_nodes()]] for g in s.get_provider_graph_assignment_info()]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model,dims,fp16", [
    ("named_chain", {}, False),
    ("text_encoder", {"batch_size": 1, "sequence_length": 32}, True),  # fusions and layout-free
    ("cnn_classifier", {}, True),                                      # BatchNorm fused into Conv, NHWC
])
def test_measured_htp_set_equals_the_sessions_assignment_info(worker, tmp_path, model, dims, fp16):
    path = pm.save(pm.named_chain_model(), tmp_path, model) if model == "named_chain" else sample_path(f"{model}.onnx")
    result = run_worker(worker, path, dims=dims, fp16=fp16, backends=("htp",))
    nodes = result["backends"]["htp"]["nodes"]
    bare = _bare_assignment(str(path), dims, fp16)
    raw = {name for ep, group in bare if ep == "QNNExecutionProvider" for name, _ in group}
    qnn_names = raw | {TOKEN.sub("", name) for name in raw}  # before the layout transformation's renaming
    cpu_names = {name for ep, group in bare if ep != "QNNExecutionProvider" for name, _ in group}
    claimed_as_is = {n for n, v in nodes.items() if v["status"] == "claimed"}
    assert claimed_as_is == qnn_names & set(nodes)  # model nodes the session put in QNN subgraphs
    assert {n for n, v in nodes.items() if v["status"] == "rejected"} == cpu_names & set(nodes)
    for name, verdict in nodes.items():  # a fused node is claimed exactly when what it became is
        if verdict["status"] == "fused":
            assert verdict["supported"] == (verdict["fused_into"] in qnn_names)
    assert result["backends"]["htp"]["qnn_subgraphs"] == sum(ep == "QNNExecutionProvider" for ep, _ in bare)


def test_float_model_fails_to_finalize_without_fp16_and_fits_with_it(tmp_path):
    vit = sample_path("vit_classifier.onnx")
    plain = analyze(vit, PartitionOptions(backends=("htp",)), timeout=600)
    htp = plain.backends["htp"]
    assert htp.status == "failed"
    assert "QNN_COMMON_ERROR_MEM_ALLOC" in htp.error
    assert "fp16" in htp.suggestion
    assert plain.classes.note and not plain.plans
    fp16 = analyze(vit, PartitionOptions(backends=("htp",), fp16=True), timeout=600)
    assert fp16.backends["htp"].status == "measured"
    assert fp16.options.soc == DEFAULT_SOC  # fp16 without a SoC gets the default part
    assert sum(v.supported for v in fp16.backends["htp"].nodes.values()) > len(fp16.node_order) // 2


def test_dynamic_shapes_without_overrides_are_refused(worker, tmp_path):
    path = pm.save(pm.dynamic_model(), tmp_path, "dynamic")
    bare = run_worker(worker, path, dims={}, backends=("htp",))["backends"]["htp"]["nodes"]
    assert all(not v["supported"] for v in bare.values())
    assert "Cannot get shape" in bare["relu0"]["reason"]
    fixed = run_worker(worker, path, dims={"batch": 1}, backends=("htp",))["backends"]["htp"]["nodes"]
    assert all(v["supported"] for v in fixed.values())


def test_default_dims_and_overrides_reach_the_plan_bytes(tmp_path):
    path = pm.save(pm.dynamic_model(), tmp_path, "dynamic")
    default = analyze(path, PartitionOptions(backends=("htp", "gpu")), timeout=600)
    assert default.dims == {"batch": 1}
    assert all(v.supported for v in default.backends["htp"].nodes.values())
    seg = default.plans["intersection"].segments
    assert [s.backend for s in seg] == ["migrating"]
    assert {r.name: r.bytes for r in seg[0].inputs} == {"x": 1 * 16 * 4}
    four = analyze(path, PartitionOptions(backends=("htp", "gpu"), dims={"batch": 4}), timeout=600)
    seg = four.plans["intersection"].segments[0]
    assert {r.name: r.bytes for r in seg.inputs} == {"x": 4 * 16 * 4}
    assert {r.name: r.bytes for r in seg.outputs} == {"y": 4 * 8 * 4}


def test_unnamed_dynamic_dimension_gets_a_status_and_a_suggestion(tmp_path):
    path = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    report = analyze(path, PartitionOptions(backends=("htp",)), timeout=600)
    htp = report.backends["htp"]
    assert htp.status == "measured"
    assert not any(v.supported for v in htp.nodes.values())
    assert "unknown shapes" in htp.suggestion and "(⟨shapes⟩: x)" in htp.suggestion  # worded by each front end
    assert any("unnamed dynamic" in note for note in report.notes)


def test_a_whole_input_shape_fixes_an_unnamed_dimension(tmp_path):
    """As onnxruntime's make_dynamic_shape_fixed: the sessions get a copy whose input declares the
    shape; the file is unchanged, and the shape reaches the HTP, the GPU prediction and the plans."""
    path = pm.save(pm.dynamic_model(batch=None), tmp_path, "unnamed")
    before = path.read_bytes()
    report = analyze(path, PartitionOptions(shapes={"x": (3, 16)}), timeout=600)
    assert all(v.supported for v in report.backends["htp"].nodes.values())
    assert all(v.supported for v in report.backends["gpu"].nodes.values())
    assert report.backends["htp"].suggestion is None
    seg = report.plans["intersection"].segments[0]
    assert {r.name: r.bytes for r in seg.inputs} == {"x": 3 * 16 * 4}
    assert report.options.shapes == {"x": (3, 16)}
    assert any("analysed with shape [3, 16]" in note for note in report.notes)
    assert path.read_bytes() == before
