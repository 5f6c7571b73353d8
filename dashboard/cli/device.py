"""``python -m dashboard device``: get the worker onto a device, and ask why a backend does not run.

- ``device install URL [--venv PATH]`` builds this project's wheel, copies it over SSH and installs
  it with the runtime requirements into a virtualenv on the device, then prints the device URL to
  use (``ssh://...?python=<venv>/bin/python``) on stdout; progress goes to stderr.
- ``device doctor [URL]`` runs the device doctor in the device's worker and prints a pass/fail
  line per check with a one-line fix for each failure. It is a report: exit 0 even when checks
  fail; exit 2 only for a bad address or an unreachable device.
"""

from __future__ import annotations

import argparse
import sys

from dashboard.cli.common import Parser, print_json, seconds
from dashboard.runtime.devices import Device

DEVICE_HELP = "local, local?python=PATH or ssh://user@host[:port][?python=...&identity=...]"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dashboard.runtime.install import DEFAULT_VENV

    actions = parser.add_subparsers(dest="action", required=True, parser_class=Parser)
    doctor = actions.add_parser("doctor", allow_abbrev=False, help="why each backend does (not) initialize, with fixes",
                                description="Run the device doctor in the device's worker.")
    doctor.add_argument("device", nargs="?", default="local", help=DEVICE_HELP + " (default: this machine)")
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.add_argument("--timeout", type=seconds, default=180.0, metavar="SECONDS")
    doctor.set_defaults(run=run_doctor)
    install = actions.add_parser("install", allow_abbrev=False, help="install the worker into a venv on a device",
                                 description="Build this project's wheel, copy it over SSH and install it with "
                                             "requirements-worker.txt into a virtualenv on the device.")
    install.add_argument("device", help="ssh://user@host[:port][?python=BASE_PYTHON&identity=...]")
    install.add_argument("--venv", default=DEFAULT_VENV, metavar="PATH",
                         help=f"virtualenv on the device, relative to its home or absolute (default {DEFAULT_VENV})")
    install.add_argument("--timeout", type=seconds, default=1800.0, metavar="SECONDS",
                         help="give up on a step after this long (pip downloads onnxruntime-qnn the first time)")
    install.set_defaults(run=run_install)


def run_doctor(args: argparse.Namespace) -> int:
    from dashboard.runtime.doctor import ask, report_lines

    device = Device.parse(args.device)
    report = ask(device, timeout=args.timeout)
    if args.json:
        print_json({"device": device.url, "label": device.label, **report.to_json()})
    else:
        print(f"device doctor for {device.label}")
        print("\n".join(report_lines(report)))
    return 0


def run_install(args: argparse.Namespace) -> int:
    from dashboard.runtime.install import install

    device = Device.parse(args.device)
    installed = install(device, args.venv, progress=lambda line: print(line, file=sys.stderr, flush=True),
                        timeout=args.timeout)
    print(installed.url)
    return 0
