"""Classify the graph the EP would really receive.

ONNX Runtime runs its level-1 optimizations before partitioning, so with default session options
the proposed ``backend_type=auto`` classifier sees a graph where, for example, BatchNormalization
has been folded into Conv and constant subgraphs are gone. This module asks a runtime worker for
that graph and classifies it with the EP rules, so a user can see whether optimizations change the
verdict.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .classify_ep import classify_ep
from .model_io import load_model
from .verdicts import Classification
from .worker_client import WorkerClient


def classify_after_ort_optimizations(model_path: str, timeout: float = 300.0) -> tuple[Classification, int]:
    """EP-rule classification of the level-1 optimized graph, and its node count."""
    with WorkerClient() as worker:
        result = worker.call("ort_view", {"path": str(Path(model_path).resolve())}, timeout=timeout)
    optimized = Path(result["path"])
    try:
        graph = load_model(optimized)
        return classify_ep(graph), len(graph.nodes)
    finally:
        shutil.rmtree(optimized.parent, ignore_errors=True)
