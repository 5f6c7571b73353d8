"""How large a model's structure may be before the reader refuses it: the caps, checked while the
file is scanned and before (or while) protobuf parses it, never after.

Why: a small file can describe a huge graph. A 54 MB file of 2 M Relu nodes took 3.8 GB to read
and a single 1 GB string attribute 3.2 GB, and the dashboard serves uploads of up to 2 GB to
whoever reaches it. Each cap stops one way of multiplying memory; weights do not count (their
bytes are never read).

=============================  ==========  ==============================================================
Environment variable           Default     What it limits
=============================  ==========  ==============================================================
``QNN_LAB_MAX_NODES``          500,000     nodes in all graphs: the top level, functions and control-flow
                                           bodies at any depth
``QNN_LAB_MAX_STRING_BYTES``   64 MiB      one string or bytes field outside weights (a name, a doc
                                           string, a STRING attribute)
``QNN_LAB_MAX_GRAPH_BYTES``    512 MiB     all of the structure handed to protobuf: nodes with their
                                           attributes and small tensors, names, strings (weights excluded)
=============================  ==========  ==============================================================

Why these defaults: a 20,000-node decoder is ordinary and real LLM exports have about 100,000
nodes, so 500,000 nodes is five times the largest seen. Reading costs about 1 KB of memory per
node at its peak (protobuf's parse of the graph plus the ``Node`` objects, measured on a Relu chain
by ``tests/test_intake_memory.py``), so a graph at the cap peaks near 0.5 GB: the cap is where
memory is still bounded well under 1 GB. Real attributes and names are bytes to kilobytes; the
largest legitimate string fields (doc strings, an embedded JSON config) are a few MB, so 64 MiB is
generous and an uploaded string can no longer be copied three times over at 1 GB. 512 MiB of
structure admits any real graph (a 100,000-node export has tens of MB of it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dashboard.errors import UserError


@dataclass(frozen=True)
class Cap:
    env: str  # the environment variable that raises (or lowers) it
    default: int
    what: str  # what is counted, for the error line

    def limit(self) -> int:
        """The cap in force: the environment's value, else the default. A value that is not a
        positive whole number is a ``UserError`` naming the variable."""
        raw = os.environ.get(self.env, "").strip().replace("_", "")
        if not raw:
            return self.default
        if not raw.isdigit() or int(raw) <= 0:
            raise UserError(f"{self.env} must be a positive whole number (got {os.environ[self.env]!r})")
        return int(raw)


MAX_NODES = Cap("QNN_LAB_MAX_NODES", 500_000, "nodes")
MAX_STRING_BYTES = Cap("QNN_LAB_MAX_STRING_BYTES", 64 << 20, "bytes in one string field")
MAX_GRAPH_BYTES = Cap("QNN_LAB_MAX_GRAPH_BYTES", 512 << 20, "bytes of graph structure (weights excluded)")
CAPS = (MAX_NODES, MAX_STRING_BYTES, MAX_GRAPH_BYTES)


class CapExceeded(Exception):
    """Raised deep in the reader, where the model's path is not known; ``load_model`` turns it
    into the one-line ``ModelError`` of ``message``."""

    def __init__(self, cap: Cap, found: int, at_least: bool = False) -> None:
        super().__init__(cap.env)
        self.cap, self.found, self.at_least = cap, found, at_least

    def message(self) -> str:
        found = f"{'at least ' if self.at_least else ''}{self.found:,}"
        return (f"has {found} {self.cap.what}, over the limit of {self.cap.limit():,} ({self.cap.env}); "
                f"refusing it to bound memory (set {self.cap.env} higher if the model is genuine)")


def check(cap: Cap, found: int, at_least: bool = False) -> None:
    """Raise ``CapExceeded`` when ``found`` is over ``cap``'s limit."""
    if found > cap.limit():
        raise CapExceeded(cap, found, at_least)
