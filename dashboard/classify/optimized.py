"""Classify the graph the EP would really receive.

ONNX Runtime runs its level-1 optimizations before partitioning, so with default session options
the proposed ``backend_type=auto`` classifier sees a graph where, for example, BatchNormalization
has been folded into Conv and constant subgraphs are gone. The caller supplies that graph (a runtime
worker writes it: ``dashboard.runtime.client.optimized_copy``), since classification never imports
the runtime; this module classifies it with the EP rules, so a user can see whether optimizations
change the verdict.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable

from dashboard.classify.ep_rules import classify_ep
from dashboard.classify.verdicts import Classification
from dashboard.intake.reader import load_model

Optimizer = Callable[[str], AbstractContextManager[Path]]


def classify_after_ort_optimizations(model_path: str, optimized_copy: Optimizer) -> tuple[Classification, int]:
    """EP-rule classification of the level-1 optimized graph, and its node count.
    ``optimized_copy(model_path)`` yields the path of that graph and removes it afterwards."""
    with optimized_copy(model_path) as optimized:
        graph = load_model(optimized)
        return classify_ep(graph), len(graph.nodes)
