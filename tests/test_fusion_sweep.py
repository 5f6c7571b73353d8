"""Every pattern ONNX Runtime's optimizers rewrite, through both paths the partition report reads:
the QNN session itself (what the EP claimed) and the CPU-only reference graph (what ORT made of
the model). A node the EP claimed is reported claimed, whatever the CPU path rewrote (issue 16:
HardSwish, which a CPU session decomposes into HardSigmoid + Mul, was reported as running on no
backend while the HTP had taken it whole).

The EP's own word comes from bare sessions with the same options in a separate process (no analysis
code involved), all patterns in one process; the reports come from one worker.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import partition_models as pm
import pytest

from dashboard.partition.protocol import PartitionArgs
from dashboard.runtime.client import WorkerClient
from dashboard.runtime.config import SessionConfig
from dashboard.runtime.socs import resolve_soc

SOC = "sm8750"
QNN = "QNNExecutionProvider"
NO_BACKEND = "runs on no backend"
TOKEN = re.compile(r"(_token_\d+)+$")
PATTERNS = pm.fusion_patterns()

BARE = """
import json, sys, onnxruntime as ort, onnxruntime_qnn
ort.set_default_logger_severity(3)
ort.register_execution_provider_library(sys.argv[1], onnxruntime_qnn.get_library_path())
devices = [d for d in ort.get_ep_devices() if d.ep_name == sys.argv[1]]
options = json.loads(sys.argv[2])
level = getattr(ort.GraphOptimizationLevel, sys.argv[3])
for path in sys.argv[4:]:
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices(devices, options)
    session = ort.InferenceSession(path, so)
    print(json.dumps([[g.ep_name, [n.name for n in g.get_nodes()]] for g in session.get_provider_graph_assignment_info()]))
"""


def provider_options(fp16: bool) -> dict[str, str]:
    soc = resolve_soc(SOC)
    extra = {"soc_model": str(soc.soc_model), "htp_arch": str(soc.htp_arch), "enable_htp_fp16_precision": "1"}
    return {"backend_type": "htp", **(extra if fp16 else {})}


ORT_LEVELS = {"all": "ORT_ENABLE_ALL", "extended": "ORT_ENABLE_EXTENDED", "basic": "ORT_ENABLE_BASIC"}


def bare_claims(paths: list, fp16: bool, level: str) -> list[dict[str, set[str]]]:
    """Per model: EP name -> the node names its session assigned there (layout suffixes removed)."""
    done = subprocess.run([sys.executable, "-c", BARE, QNN, json.dumps(provider_options(fp16)), ORT_LEVELS[level],
                           *map(str, paths)], capture_output=True, text=True, timeout=900, check=True)
    out = []
    for line in done.stdout.strip().splitlines()[-len(paths):]:
        claims: dict[str, set[str]] = {}
        for ep, names in json.loads(line):
            claims.setdefault(ep, set()).update(TOKEN.sub("", n) for n in names)
        out.append(claims)
    return out


@pytest.fixture(scope="module")
def worker():
    with WorkerClient() as client:
        yield client


def sweep(worker, directory, names: list[str], fp16: bool, level: str = "all"):
    """(pattern, the worker's HTP report, the bare session's assignment) per pattern."""
    paths = [pm.save(PATTERNS[name], directory, name) for name in names]
    truth = bare_claims(paths, fp16, level)
    config = SessionConfig(fp16=fp16, soc=SOC if fp16 else None, optimization_level=level)
    for name, path, claims in zip(names, paths, truth):
        result = worker.call("partition", PartitionArgs(str(path), config, ["htp"]), timeout=600).to_json()
        yield name, result["backends"]["htp"], claims


def check(name: str, htp: dict, claims: dict[str, set[str]]) -> list[str]:
    """What the report gets wrong about one pattern, as lines (empty: nothing)."""
    assert htp["status"] == "measured", (name, htp["error"])
    nodes = htp["nodes"]
    named = set().union(*claims.values()) if claims else set()
    wrong = []
    for node, verdict in nodes.items():
        if node in claims.get(QNN, ()) and not (verdict["supported"] and verdict["status"] == "claimed"):
            wrong.append(f"{name}: {node} claimed by the EP but reported {verdict['status']}: {verdict['reason']}")
        if verdict["status"] == "claimed" and node not in claims.get(QNN, ()):
            wrong.append(f"{name}: {node} reported claimed, but the EP did not assign it")
        if NO_BACKEND in (verdict["reason"] or "") and node in named:
            wrong.append(f"{name}: {node} reported as running on no backend, but its session assigned it")
    added = {n for a in htp["added_nodes"] for n in a["names"]}
    wrong += [f"{name}: model node {n} listed as inserted by the EP" for n in sorted(added & set(nodes))]
    return wrong


@pytest.mark.parametrize("level", list(ORT_LEVELS))
def test_no_node_the_ep_claimed_is_reported_as_running_nowhere(worker, tmp_path, level):
    """All patterns at fp16 for SM8750 (the configuration of the issue), at each optimization level
    that rewrites (the sessions' level; the reference graph is level 1 for all), one worker, one bare
    process per level."""
    wrong = []
    claimed = 0
    for name, htp, claims in sweep(worker, tmp_path, list(PATTERNS), fp16=True, level=level):
        wrong += check(name, htp, claims)
        claimed += sum(v["status"] == "claimed" for v in htp["nodes"].values())
    assert not wrong, "\n".join(wrong)
    assert claimed > len(PATTERNS)  # the sweep measured something: the HTP takes most of these nodes


@pytest.mark.parametrize("fp16", [True, False])
def test_hardswish_is_claimed_by_the_htp_alone_and_between_convs(worker, tmp_path, fp16):
    """Issue 16's two reproductions, in float32 and fp16: every HardSwish is claimed (as QNN's
    ElementWiseNeuron), never "fused into Mul ... runs on no backend"."""
    names = ["hardswish", "conv_hardswish_conv"]
    for name, htp, claims in sweep(worker, tmp_path, names, fp16):
        assert not check(name, htp, claims)
        hs = htp["nodes"]["hs"]
        assert hs["status"] == "claimed" and hs["supported"] and hs["fused_into"] is None, hs
        assert hs["qnn_op"], hs
        assert all(v["supported"] for v in htp["nodes"].values()), htp["nodes"]
