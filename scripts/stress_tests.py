"""Run the concurrency-sensitive tests many times in a row on a loaded machine, to prove that no
test depends on how long something takes.

A test that races a duration (a timer that kills a worker "0.5 s into the call", a sleep standing in
for an event) passes on a quiet machine and fails when the cores are busy. So this keeps every core
busy with CPU burners (one busy process per core, at normal priority) and runs the tests that start
workers, jobs, cancels, signals, session switches, timelines and pages, round after round, each round
a fresh pytest process. One failed round fails the whole run and its output is kept.

    python scripts/stress_tests.py                  # 20 rounds, one burner per core
    python scripts/stress_tests.py --rounds 5 --burners 4 tests/test_worker.py
    python scripts/stress_tests.py --copies 2 --burners 0   # two copies of the set at once, no burner

Exit status: 0 when every round passed, 1 otherwise. Each round's output goes to
``<log-dir>/round-NN.log``; the summary line of each round is printed as it ends.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Workers, jobs, cancel, lifecycle (signals), session switch, timelines and the pages: every test
# file whose tests synchronise with another process or thread.
FILES = [
    "tests/test_worker.py",
    "tests/test_jobs.py",
    "tests/test_cancel_start.py",
    "tests/test_lifecycle.py",
    "tests/test_session_switch.py",
    "tests/test_app_timeline.py",
    "tests/test_migration_timeline.py",
    "tests/test_timeline_cli.py",
    "tests/test_page_state.py",
    "tests/test_partition_worker.py",
    "tests/test_partition_startup.py",
    "tests/test_partition_head_start.py",
    "tests/test_partition_page.py",
    "tests/test_profile_page.py",
    "tests/test_compare_page.py",
    "tests/test_viewer_page.py",
    "tests/test_accuracy_page.py",
    "tests/test_sweep_page.py",
]

BURN = "while True:\n    pass\n"


def start_burners(count: int) -> list[subprocess.Popen]:
    """One busy Python process per requested core, each at the tests' own priority."""
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.kill()
    for process in processes:
        process.wait()


def run_round(number: int, files: list[str], log_dir: Path, copies: int = 1) -> tuple[bool, str, float]:
    """``copies`` pytest processes over ``files`` at once (each the others' load); each one's
    output is written to the round's log (``round-NN.log``, ``round-NN-cK.log`` for copy K > 1)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "600", *files]
    logs = [log_dir / (f"round-{number:02d}.log" if k == 1 else f"round-{number:02d}-c{k}.log")
            for k in range(1, copies + 1)]
    start = time.monotonic()
    outs = [log.open("w") for log in logs]
    try:
        procs = [subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT) for out in outs]
        codes = [proc.wait() for proc in procs]
    finally:
        for out in outs:
            out.close()
    summaries = []
    for log, code in zip(logs, codes):
        lines = [line for line in log.read_text().splitlines() if line.strip()]
        summaries.append(lines[-1] if lines else f"exit {code}")
    return all(code == 0 for code in codes), " | ".join(summaries), time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=FILES, help="test files (default: the concurrency-sensitive set)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="busy processes (default: one per core)")
    parser.add_argument("--copies", type=int, default=1,
                        help="pytest processes per round, run at once: each is the others' load (default 1)")
    parser.add_argument("--log-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.copies < 1 or args.burners < 0:
        print("error: --rounds and --copies must be at least 1, --burners at least 0", file=sys.stderr)
        return 2
    missing = [name for name in args.files if not (ROOT / name).is_file()]
    if missing:
        print(f"error: no such test file: {missing[0]}", file=sys.stderr)
        return 2
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="stress-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"{args.rounds} rounds of {len(args.files)} files, {args.copies} cop{'y' if args.copies == 1 else 'ies'} "
          f"at once, with {args.burners} CPU burners; logs in {log_dir}")
    burners = start_burners(args.burners)
    failed = []
    try:
        for number in range(1, args.rounds + 1):
            ok, summary, seconds = run_round(number, args.files, log_dir, args.copies)
            print(f"round {number:2d}: {'ok  ' if ok else 'FAIL'} {seconds:5.0f} s  {summary}", flush=True)
            if not ok:
                failed.append(number)
    finally:
        stop(burners)
    print(f"{args.rounds - len(failed)}/{args.rounds} rounds passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
