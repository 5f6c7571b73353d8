"""Partitions: which nodes each QNN backend claims, their classes and the migration plans.

- ``analysis``: ``analyze`` (the one entry point: worker, cache, device reports), which takes the
  settings (``runtime.knobs.Settings``, also named ``PartitionOptions``), and its suggestions;
- ``measure``: the worker side, one real session per backend mapped back to the model's nodes;
- ``report``: ``PartitionReport`` and ``BackendReport``, the JSON contract, and the node classes;
- ``plans``: the intersection and segmented migration plans;
- ``gpu_rules``: the predicted QNN GPU support table, every rule with its source;
- ``cache``: reports on disk by model digest, options, runtime and code version;
- ``protocol``: the ``partition`` command and its ``Stage`` event, registered with the worker protocol.
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "analyze": "analysis", "PartitionOptions": "analysis", "PartitionReport": "report",
    "BackendReport": "report",
})
__all__ = __dir__()
