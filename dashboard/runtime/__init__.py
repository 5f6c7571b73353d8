"""The runtime: onnxruntime-qnn, and the worker processes that hold it.

- ``knobs``: ``Settings``, the settings every analysis takes, and their table (flags, labels,
  help, choices) the CLI and the pages are generated from; hints name settings by key;
- ``config``: ``SessionConfig``, how a session is built, as data (no onnxruntime import), built per
  backend from ``Settings``;
- ``qnn``: the only module that imports ``onnxruntime_qnn`` (``create_session``,
  probes, shared-memory binding). Imported by worker processes, and by ``dashboard.timeline.api``
  in the caller's own process; never by the dashboard;
- ``worker``: ``python -m dashboard.runtime.worker``, the process QNN work runs in;
- ``client``: ``WorkerClient``, the dashboard's side of the worker protocol;
- ``protocol``: the protocol's envelope, line reader and registries of commands and events, and
  the device's own messages (imports neither numpy nor onnx; each capability registers its own);
- ``devices``: ``Device``, where a worker runs (this machine, another interpreter, SSH);
- ``socs``: named Snapdragon parts and their ``soc_model``/``htp_arch``, with sources;
- ``qnn_options``: the QNN EP's provider options and the values it accepts (checked by ``config``);
- ``scratch``: the worker's scratch folders, removed even when a request is abandoned;
- ``doctor``: the device doctor, run in a worker: why each backend does or does not initialize;
- ``install``: ``device install``, the worker's wheel into a virtualenv on a device over SSH.
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "Settings": "knobs", "SessionConfig": "config", "create_session": "qnn", "WorkerClient": "client", "WorkerError": "client",
    "Device": "devices", "SOCS": "socs", "resolve_soc": "socs",
})
__all__ = __dir__()
