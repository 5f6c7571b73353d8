"""dashboard.runtime.qnn against the installed onnxruntime-qnn (HTP simulator on x86_64)."""

from __future__ import annotations

import platform

import onnx
import partition_models as pm
import pytest

from dashboard.errors import UserError
from dashboard.runtime import qnn as runtime
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.qnn import create_session, optimized_model, probe_backend

RECORD = {"session.record_ep_graph_assignment_info": "1"}


def test_fp16_needs_a_soc_and_the_soc_is_resolved_by_name():
    with pytest.raises(UserError, match="needs a SoC"):
        SessionConfig(fp16=True).qnn_options()
    options = SessionConfig(fp16=True, soc="sm8650").qnn_options()
    assert options == {"backend_type": "htp", "soc_model": "57", "htp_arch": "75", "enable_htp_fp16_precision": "1"}
    assert SessionConfig.from_json(SessionConfig(dims={"b": 2}, soc="60").to_json()).dims == {"b": 2}


def test_runtime_refusal_carries_its_own_message():
    config = SessionConfig(provider_options={"enable_htp_fp16_precision": "1"})  # no soc_model: the EP refuses
    with pytest.raises(UserError, match="session creation failed on htp") as info:
        create_session(runtime.probe_model_bytes(), config)
    assert "soc" in str(info.value).lower()


def test_probe_success_means_qnn_claimed_nodes():
    assert probe_backend("htp").ok
    if platform.machine() == "x86_64":  # no Adreno here: the session "works" but everything falls to CPU
        gpu = probe_backend("gpu")
        assert not gpu.ok and "QNN_BACKEND_ERROR_CANNOT_INITIALIZE" in gpu.error


def test_assignment_lists_each_subgraph(tmp_path):
    path = pm.save(pm.named_chain_model(), tmp_path, "chain")
    handle = create_session(str(path), SessionConfig(session_config=RECORD))
    groups = handle.assignment()
    qnn = [names for ep, names in groups if ep == runtime.QNN_EP]
    assert len(qnn) == 2  # Erf splits the chain
    assert [n for group in qnn for n, _ in group] == ["add0", "mul0", "tanh0", "sub0"]
    assert handle.assigned_nodes()["CPUExecutionProvider"] == [("erf0", "Erf")]


def test_optimized_model_applies_dimension_overrides(tmp_path):
    """With the batch fixed, a Shape -> Gather chain folds into a constant before partitioning."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape0"),
             helper.make_node("Cast", ["s"], ["f"], name="cast0", to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["f"], ["n"], name="sum0", keepdims=0),
             helper.make_node("Mul", ["x", "n"], ["y"], name="mul0")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    path = tmp_path / "shape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    dynamic = onnx.load(optimized_model(str(path), str(tmp_path / "a.onnx")))
    fixed = onnx.load(optimized_model(str(path), str(tmp_path / "b.onnx"), dims={"batch": 3}))
    assert "shape0" in {n.name for n in dynamic.graph.node}
    assert [n.name for n in fixed.graph.node] == ["mul0"]


def test_model_bytes_with_external_weights_folder(tmp_path):
    """A model fed from memory finds its external data through EXTERNAL_DATA_FOLDER."""
    model = pm.rejects_model()
    onnx.save(model, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    data = onnx.load(tmp_path / "ext.onnx", load_external_data=False).SerializeToString()
    config = SessionConfig(session_config={**RECORD, runtime.EXTERNAL_DATA_FOLDER: str(tmp_path)})
    handle = create_session(data, config)
    assert any(ep == runtime.QNN_EP for ep, _ in handle.assignment())


# -- shared memory through the public API ------------------------------------------------------------------
def test_shared_memory_is_described_as_the_qnn_ep_declares_it():
    """No public call describes the HTP shared memory where the EP does not declare it (no rpcmem
    here), so ``runtime.qnn`` builds the description from the EP factory's values. Where an EP
    device declares it, the two must agree; where none does, allocating fails with the runtime's
    own message. An upgrade that changes either fails here."""
    import numpy as np
    import onnxruntime as ort

    declared = [d.memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE) for d in runtime.register()]
    info = runtime.shared_memory_info()
    assert (info.name, info.device_vendor_id, info.device_mem_type) == (
        "QnnHtpShared", 0x5143, ort.OrtDeviceMemoryType.HOST_ACCESSIBLE)
    if any(d is not None for d in declared):
        return
    with pytest.raises(Exception, match=r"No shared allocator found for: OrtMemoryInfo:\[name:QnnHtpShared"):
        ort.OrtValue.ortvalue_from_shape_and_type([2], np.float32, memory_info=info)


def test_bound_runner_source_uses_no_private_onnxruntime_api():
    source = open(runtime.__file__, encoding="utf-8").read()
    assert "._sess" not in source and "onnxruntime_pybind11_state" not in source and "capi" not in source
