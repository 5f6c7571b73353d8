"""The EP rules on the graph ONNX Runtime really hands to the EP (after level-1 optimizations)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.optimized import classify_after_ort_optimizations
from dashboard.intake.reader import load_model
from dashboard.runtime.client import PROJECT_ROOT, optimized_copy


def conv_bn_model(path, blocks: int = 3):
    """Conv -> BatchNormalization -> Relu blocks and a pool: 3 Conv and 3 BN of 10 nodes.

    In the file, Conv density is exactly 0.30 (not > 0.30) and BN density 0.30 (> 0.10): only the
    BN signal fires (NonGenAI 5 < 10, Unknown). ORT folds each BN into its Conv before the EP sees
    the graph: 3 Conv of 7 nodes (0.43 > 0.30) fires the Conv signal instead (NonGenAI 10).
    """
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(blocks):
        inits.append(numpy_helper.from_array(rng.random((4, 3 if i == 0 else 4, 3, 3), dtype=np.float32), f"w{i}"))
        for stat in "sbmv":
            inits.append(numpy_helper.from_array(rng.random(4, dtype=np.float32) + 0.5, f"{stat}{i}"))
        nodes += [
            helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
            helper.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [f"bn{i}"], name=f"bn{i}"),
            helper.make_node("Relu", [f"bn{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        prev = f"r{i}"
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["y"], name="gap"))
    graph = helper.make_graph(nodes, "convbn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def signal(result, name):
    return next(s for s in result.signals if s.name == name)


def test_batchnorm_folding_changes_the_ep_verdict(tmp_path):
    path = conv_bn_model(tmp_path / "convbn.onnx")
    in_file = classify_ep(load_model(path))
    assert in_file.verdict == "Unknown"
    assert signal(in_file, "batchnorm_density").fired and not signal(in_file, "conv_density").fired

    optimized, nodes = classify_after_ort_optimizations(str(path), optimized_copy)
    assert nodes == 7  # the three BatchNormalization nodes were folded into their Conv
    assert optimized.verdict == "NonGenAI"
    assert signal(optimized, "conv_density").fired and not signal(optimized, "batchnorm_density").fired


def test_cli_reports_the_optimized_view_only_when_asked(tmp_path):
    path = conv_bn_model(tmp_path / "convbn.onnx")
    cmd = [sys.executable, "-m", "dashboard", "classify", str(path), "--json"]
    plain = json.loads(subprocess.run(cmd, capture_output=True, text=True, cwd=PROJECT_ROOT, check=True,
                                      timeout=300).stdout)
    assert "ep_optimized" not in plain
    both = json.loads(subprocess.run(cmd + ["--optimized"], capture_output=True, text=True, cwd=PROJECT_ROOT,
                                     check=True, timeout=300).stdout)
    assert both["ep_optimized"]["verdict"] == "NonGenAI" and both["ep_optimized"]["nodes"] == 7
    assert both["ep"]["verdict"] == "Unknown"
