"""Model intake: everything known about a model before any runtime is involved.

- ``reader``: ``load_model`` (the weight-free reader, one-line ``ModelError`` for bad input),
  ``model_file_size`` (its check that a path is a regular, non-empty file, for callers that read
  the file first) and ``load_structure`` (a weight-free ``ModelProto``);
- ``proto``: onnx's message classes (``ModelProto`` ...) built from the descriptor the package
  carries, so reading a model never imports onnx (a second of CPU, mostly ml_dtypes); ``arrays``:
  a small tensor's values as numpy, without onnx's ``numpy_helper``;
- ``digest``: ``file_digest``, the content hash that keys every cache (light: no numpy, no onnx);
- ``graph``: the data model every other package works from (``ModelGraph``, ``Node``,
  ``TensorSpec``, ``Initializer``, ``SubGraph``), with its producer/consumer index and bodies;
- ``wire``: the protobuf wire-format scanner the reader is built on; ``utf8``: the check that every
  string field is UTF-8 (a proto3 twin of onnx.proto);
- ``caps``: the reader's caps on nodes, string sizes and structure bytes (environment variables);
  ``preflight``: reading a model from the browser in a memory-limited child first; ``memo``: the
  cache of parsed models bounded in bytes;
- ``uploads``: uploaded models on the server (private folder, one copy per digest, quota, leases);
- ``shapes``: default values for symbolic dimensions and the tensor shapes they imply;
- ``samples``: the bundled sample models (``python -m dashboard.intake.samples DIR``);
- ``overview``: the tables the Overview page and the report show (pandas).
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "load_model": "reader", "model_file_size": "reader", "load_structure": "reader", "file_digest": "digest",
    "ModelGraph": "graph", "Node": "graph", "TensorSpec": "graph", "Initializer": "graph", "SubGraph": "graph",
    "default_dims": "shapes", "resolve_dims": "shapes", "check_dims": "shapes",
    "SAMPLES": "samples", "sample_path": "samples",
})
__all__ = __dir__()
