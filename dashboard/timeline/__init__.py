"""Hot migration and the serving strategies it competes with.

- ``switch``: ``SessionSwitch``, the atomic swap and drain;
- ``migration``: ``Migration``, the one sequence open → warm → policy → swap → drain → release;
- ``runner``: the worker side of a timeline run (the workload server and the strategies);
- ``api``: ``HotMigrationSession`` and ``auto_session`` for your own Python code;
- ``model``: the data model and metrics (``TimelineOptions``, ``TimelineRun``, events, requests);
- ``remote``: ``run_on_device``, a run on any device, streamed back;
- ``protocol``: the ``timeline`` command and its progress events, registered with the worker protocol.
"""

from dashboard.lazy import exports

__getattr__, __dir__ = exports(__name__, {
    "HotMigrationSession": "api", "auto_session": "api", "SessionSwitch": "switch", "Migration": "migration",
    "TimelineOptions": "model", "TimelineRun": "model", "run_on_device": "remote",
})
__all__ = __dir__()
