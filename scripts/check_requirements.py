"""``pip check`` for this project's environments, run by the Makefile after each install.

The packages of ``requirements-nodeps.txt`` are installed with ``--no-deps`` on purpose: the
dashboard uses one part of each, and their other declared dependencies are not installed (the
file says why, per package). pip reports those as broken requirements on every later install, in
red ``ERROR`` lines, though nothing is wrong; the Makefile therefore installs with
``--no-warn-conflicts`` and runs this instead, which stays silent about exactly those packages'
own requirements and fails, quoting pip, on anything else.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def no_deps_packages() -> set[str]:
    lines = (ROOT / "requirements-nodeps.txt").read_text().splitlines()
    return {canonical(re.split(r"[=<>!~;\[ ]", line.strip(), maxsplit=1)[0])
            for line in lines if line.strip() and not line.lstrip().startswith("#")}


def main() -> int:
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    exempt = no_deps_packages()
    # pip check's lines: "<name> <version> requires <req>, which is not installed." and
    # "<name> <version> has requirement <req>, but you have <name> <version>."
    problems = [line for line in done.stdout.splitlines()
                if line.strip() and line != "No broken requirements found."
                and canonical(line.split()[0]) not in exempt]
    if problems or (done.returncode and not done.stdout.strip()):
        print("pip check: broken requirements in this environment:", *problems, done.stderr.strip(),
              sep="\n", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
