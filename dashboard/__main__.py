"""Entry point of ``python -m dashboard``: the worker a command will need is started before the
command line is imported (``cli.early``)."""

import sys

from dashboard.cli.early import start_worker_early

start_worker_early(sys.argv[1:])

from dashboard.cli.main import entry  # noqa: E402 - after the worker has started

entry()
