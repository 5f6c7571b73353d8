"""Example profiles built by hand, for tests and views that must not need the HTP simulator.

``cnn_profile()`` has the shape of a real profile of ``samples/cnn_classifier.onnx`` (its node names,
the EP's inserted input ``Transpose``, Conv+BatchNormalization+Relu fused groups carried by
the Conv (first in model order), a CPU-fallback node
in µs, a GPU that failed), with made-up figures chosen so that every rule of the record holds: the
HTP's node cycles add up to its total, members of a fused group cost 0, shares are of their own
backend's total. ``aihub_profile()`` is an imported one (µs on a named device, one unmatched layer).
"""

from __future__ import annotations

from dashboard.profile.model import (
    SIMULATOR_HARDWARE, BackendProfile, Figure, NodeCost, Profile, UnmatchedLayer, scope_of, spread, with_shares,
)

SAMPLE = "cnn_classifier.onnx"
BLOCKS = ("/features.0/features.0", "/features.1/features.1", "/features.2/features.2", "/features.3/features.3")


def _node(name: str, op_type: str, backend: str, unit: str, values: list[float], **kw) -> NodeCost:
    kw.setdefault("scope", scope_of(name))
    return NodeCost(name=name, op_type=op_type, backend=backend, unit=unit, **spread(values), **kw)


def _runs(base: float, runs: int) -> list[float]:
    """``runs`` per-run values around ``base`` (deterministic, a few percent apart)."""
    return [round(base * (1 + ((i * 7) % 5 - 2) / 100)) for i in range(runs)]


def cnn_profile(runs: int = 10, gpu_failed: bool = True) -> Profile:
    nodes: list[NodeCost] = [
        _node("Transpose", "Transpose", "htp", "cycles", _runs(600_000, runs), inserted=True,
              serves=f"{BLOCKS[0]}/Conv", scope=BLOCKS[0], qnn_ops=["Transpose"]),
    ]
    for i, block in enumerate(BLOCKS):
        conv, bn, relu = f"{block}/Conv", f"{block}/BatchNormalization", f"{block}/Relu"
        nodes.append(_node(conv, "Conv", "htp", "cycles", _runs(40_000 * (i + 1), runs), group=conv,
                           members=[conv, bn, relu], qnn_ops=[f"{conv}_token_{i + 1}", f"{relu}_token_{i + 1}"]))
        nodes.append(_node(bn, "BatchNormalization", "htp", "cycles", [0.0] * runs, group=conv))
        nodes.append(_node(relu, "Relu", "htp", "cycles", [0.0] * runs, group=conv))
    nodes += [
        _node("/classifier/GlobalAveragePool", "GlobalAveragePool", "htp", "cycles", _runs(30_000, runs)),
        _node("/classifier/Flatten", "Flatten", "htp", "cycles", _runs(2_000, runs)),
        _node("/classifier/fc/Gemm", "Gemm", "htp", "cycles", _runs(12_000, runs)),
        _node("/classifier/Softmax", "Softmax", "cpu", "us", [41.0 + (i % 3) for i in range(runs)],
              qnn_ops=["Softmax_kernel_time"]),
    ]
    htp_runs = [sum(n_values) for n_values in zip(*[_runs_of(n, runs) for n in nodes if n.backend == "htp"])]
    backends = {
        "htp": BackendProfile(
            status="ok", hardware=SIMULATOR_HARDWARE, unit="cycles", runs=runs, level="detailed",
            execute_us=12_500.0,
            finalize=[Figure("Graph Optimizations", 5_200.0, "us"), Figure("VTCM Allocation", 80.0, "us")],
            figures=[Figure("HVX power on", 1.0, "us"), Figure("VTCM acquire", 3.0, "us")],
            **_total(htp_runs)),
        "cpu": BackendProfile(status="ok", hardware="x86_64 CPU", unit="us", runs=runs,
                              **_total([41.0 + (i % 3) for i in range(runs)])),
    }
    if gpu_failed:
        backends["gpu"] = BackendProfile(status="failed", hardware="QNN GPU", unit="us",
                                         reason="the QNN GPU backend did not initialize (no Adreno GPU on this host)")
    return Profile(model=SAMPLE, runs=runs, backends=backends, nodes=with_shares(nodes, backends),
                   digest="0" * 32, settings={"backends": ["htp"], "fp16": True},
                   runtime={"onnxruntime": "1.23.0", "onnxruntime_qnn": "2.7.0"}, seconds=1.5)


def _runs_of(node: NodeCost, runs: int) -> list[float]:
    """The per-run values a fixture node was built from (its median repeated; sums stay exact)."""
    return [node.median] * runs


def _total(values: list[float]) -> dict:
    s = spread(values)
    return {"total": s["median"], "total_min": s["min"], "total_max": s["max"]}


def aihub_profile(device: str = "Samsung Galaxy S24 (Family)") -> Profile:
    """An imported AI Hub profile of the same sample: µs per layer on the device's NPU."""
    layers = [("Transpose", "Transpose", 55.0, True),
              *[(f"{b}/Relu", "Relu", 20.0 * (i + 1), False) for i, b in enumerate(BLOCKS)],
              ("/classifier/fc/Gemm", "Gemm", 9.0, False)]
    nodes = [NodeCost(name=n, op_type=t, backend="htp", unit="us", median=v, min=v, max=v, inserted=ins,
                      serves=f"{BLOCKS[0]}/Conv" if ins else None, scope=BLOCKS[0] if ins else scope_of(n),
                      compute_unit="NPU")
             for n, t, v, ins in layers]
    total = sum(n.median for n in nodes)
    backends = {"htp": BackendProfile(status="ok", hardware=f"AI Hub, {device}", unit="us", total=total,
                                      total_min=total, total_max=total, runs=1)}
    return Profile(model=SAMPLE, runs=1, backends=backends, nodes=with_shares(nodes, backends), source="imported",
                   unmatched=[UnmatchedLayer(name="_output_0_quantize", type="Quantize", compute_unit="NPU",
                                             value=3.0, unit="us")])
