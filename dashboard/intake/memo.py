"""An in-memory cache bounded by the bytes its entries hold, not by how many there are.

Why: the dashboard keeps parsed models for every session of the server. Bounded by entries (8),
eight large graphs stayed alive at any size: a 2 M-node model took 3.7 GB and kept it after its
session closed. Here each entry carries an estimate of its size and the least recently used ones
go once the total is over the bound. The newest entry always stays, even alone over the bound:
the session that asked for it is drawing it, and dropping it would read the file again on every
rerun; it goes as soon as another model comes in.

Thread-safe: Streamlit runs sessions on threads. Two sessions asking for the same key at once read
it once; different keys are read in parallel.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from dashboard.intake.caps import Cap

V = TypeVar("V")

# Bytes a loaded graph holds per item, measured with tests/test_intake_memory.py on a Relu chain
# (a Node with its tuples and names, plus its share of the producer/consumer index) and rounded up.
NODE_BYTES, TENSOR_BYTES = 1000, 400

# The dashboard's parsed models, all sessions together: 1 GB holds a dozen 100,000-node LLM
# exports (about 100 MB each) or a single graph at the node cap.
MODEL_CACHE_MB = Cap("QNN_LAB_MODEL_CACHE_MB", 1024, "MB")


def graph_bytes(graph) -> int:
    """An estimate of the memory a ``ModelGraph`` holds (its top-level nodes, their attribute
    copies, initializer headers and value infos; bodies are decoded on demand and not counted)."""
    encoded = sum(len(n.encoded) for n in graph.nodes if n.encoded is not None)
    tensors = len(graph.initializers) + len(graph.value_info) + len(graph.listed_inputs) + len(graph.outputs)
    return NODE_BYTES * len(graph.nodes) + encoded + TENSOR_BYTES * tensors


class SizedCache(Generic[V]):
    """Least-recently-used entries whose estimated sizes sum to at most ``max_bytes()`` (a callable,
    so a setting read from the environment applies without a restart)."""

    def __init__(self, max_bytes: Callable[[], int], size_of: Callable[[V], int]) -> None:
        self._max_bytes, self._size_of = max_bytes, size_of
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value for ``key``, made by ``make()`` when absent (its exceptions propagate and
        nothing is stored)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                if key in self._entries:  # another thread made it while this one waited
                    self._entries.move_to_end(key)
                    return self._entries[key][0]
            try:
                value = make()
                self._put(key, value)
            finally:
                with self._lock:
                    self._loading.pop(key, None)
            return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def _put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._entries[key] = (value, self._size_of(value))
            limit = self._max_bytes()
            while len(self._entries) > 1 and self.total_bytes() > limit:
                self._entries.popitem(last=False)

    def total_bytes(self) -> int:
        """The estimated bytes held now."""
        return sum(size for _, size in self._entries.values())

    def keys(self) -> list[Hashable]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
