"""A real Ray cluster on loopback for the tests: a head node and nodes joining it, each a
``ray start --block`` of its own, stopped afterwards by the processes it started and only those.

    from ray_cluster import ray_cluster

    def test_something(tmp_path):
        with ray_cluster(nodes=2) as cluster:
            run(["python", "-m", "dashboard", "sweep", spec, "--ray", cluster.address, ...])

Why each piece:

- Loopback only. Ray turns ``127.0.0.1`` (as a node address or the address to join) into the
  machine's "remotely reachable" address unless it runs as a single-machine cluster
  (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's own switch). So the head is started with that
  switch off and listens on 127.0.0.1 only; a joining node refuses to start with it off, so it
  joins ``[::ffff:127.0.0.1]:PORT`` (the same loopback address, IPv4-mapped, which Ray leaves
  alone) and takes that as its own address. Nothing goes to the machine's network address. A
  driver on this machine (``--ray 127.0.0.1:PORT``) is a client of a single-machine cluster too:
  ``dashboard.sweep.ray_exec`` switches it off for a loopback address.
- Each node gets its own temp dir (short: Ray's Unix sockets live there and a socket path has at
  most 107 characters), one CPU and a small object store: the machine has 2 cores and is shared.
- ``ray stop`` would stop every Ray process of the machine, other tests' and people's included.
  Each ``ray start`` here runs in a session of its own (``start_new_session``): its GCS, raylet,
  agents and task workers are in that session. Stopping sends SIGTERM to the ``ray start`` (which
  stops what it started), then SIGKILL to whatever of those sessions, or names the node's temp
  dir on its command line, is still there, and waits until none is.
- No outside request: usage statistics are off (``--disable-usage-stats`` and the variable).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from deadlines import wait_until
from e2e_helpers import free_port

RAY = str(Path(sys.executable).with_name("ray"))
START_DEADLINE = 240.0  # seconds for a node to start on a loaded 2-core machine: stuck, not slow
STOP_DEADLINE = 60.0
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}
# What a process on this machine needs to be a client of the cluster (``ray status``, a driver):
# Ray's single-machine switch, without which it never reaches a head on loopback (see above).
CLIENT_ENV = {**QUIET, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@dataclass
class Node:
    """One ``ray start --block`` process and the temp dir its session lives in."""

    process: subprocess.Popen
    temp_dir: Path
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""


@dataclass
class RayCluster:
    address: str  # host:port of the head's GCS, what ``ray.init(address=...)`` and ``--ray`` take
    nodes: list[Node] = field(default_factory=list)
    client_env: dict[str, str] = field(default_factory=dict)  # what a client needs besides CLIENT_ENV (a token)

    @property
    def sessions(self) -> set[int]:
        return {node.process.pid for node in self.nodes}

    def processes(self) -> list[int]:
        """Every live process this cluster started: in one of its nodes' sessions, or naming one of
        their temp dirs on its command line (a process that left the session would still)."""
        dirs = [str(node.temp_dir) for node in self.nodes]
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                stat = (entry / "stat").read_text()
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # gone meanwhile
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            state, session = fields[0], int(fields[3])
            if state == "Z":
                continue
            if session in self.sessions or any(d in argv for d in dirs):
                found.append(int(entry.name))
        return found

    def alive_nodes(self) -> int:
        """How many nodes the head counts alive (``ray status``, the public command)."""
        done = subprocess.run([RAY, "status", "--address", self.address], capture_output=True, text=True,
                              timeout=120, env={**os.environ, **CLIENT_ENV, **self.client_env})
        if done.returncode != 0:
            return 0
        active = done.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0] if "Active:" in done.stdout else ""
        return len(re.findall(r"^\s*\d+\s+node_", active, flags=re.M))

    def stop(self) -> None:
        """SIGTERM to each ``ray start`` (it stops its own processes), then SIGKILL to anything of
        theirs still alive; fails the test if a process of the cluster outlives the deadline."""
        for node in reversed(self.nodes):
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_DEADLINE / 2
        for node in reversed(self.nodes):
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.kill()
            node.process.wait(STOP_DEADLINE)
        wait_until(lambda: not self.processes(), "every process of the Ray cluster stopped", STOP_DEADLINE, 0.2)


def _start_node(args: list[str], temp_dir: Path, env: dict[str, str], ray_tmpdir: bool = False) -> Node:
    """``ray start`` with its temp dir given as ``--temp-dir``, or (``ray_tmpdir``) as Ray's default
    under ``RAY_TMPDIR=temp_dir``: ``<temp_dir>/ray``, where it also records the address for ``auto``."""
    log = temp_dir.with_suffix(".log")
    where = ["--temp-dir", str(temp_dir)] if not ray_tmpdir else []
    extra = {"RAY_TMPDIR": str(temp_dir)} if ray_tmpdir else {}
    if ray_tmpdir:
        temp_dir.mkdir(mode=0o700)
    with open(log, "wb") as out:
        process = subprocess.Popen([RAY, "start", *args, "--num-cpus", "1", "--object-store-memory",
                                    str(OBJECT_STORE_BYTES), *where, "--disable-usage-stats",
                                    "--block"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env={**os.environ, **QUIET, **env, **extra})
    return Node(process, temp_dir, log)


def _wait_started(node: Node, what: str) -> None:
    def started() -> bool:
        if node.process.poll() is not None:
            pytest.fail(f"{what} exited with {node.process.returncode}: {node.log_text()[-3000:]}")
        return "Ray runtime started" in node.log_text()

    wait_until(started, what, START_DEADLINE, 0.25)


@contextmanager
def ray_cluster(nodes: int = 2, env: dict[str, str] | None = None, ray_tmpdir: bool = False) -> Iterator[RayCluster]:
    """A head on 127.0.0.1 (its dashboard off) and ``nodes - 1`` nodes joined to it, each with one
    CPU, their processes (task workers included) with ``env`` added to this one's; stopped on
    leaving the block, whatever happened in it. ``env``'s ``RAY_AUTH_*`` and ``HOME`` (where
    ``~/.ray/auth_token`` is) are the clients' too. ``ray_tmpdir``: the head's temp dir is
    ``RAY_TMPDIR``'s default (``cluster.nodes[0].temp_dir / "ray"``) instead of a ``--temp-dir``."""
    env = env or {}
    if not Path(RAY).exists():
        pytest.skip(f"Ray is not installed in this environment ({RAY}); `make test` installs it")
    root = Path(tempfile.mkdtemp(prefix="qlray", dir="/tmp"))
    port = free_port()
    cluster = RayCluster(address=f"127.0.0.1:{port}",
                         client_env={k: v for k, v in env.items() if k.startswith("RAY_AUTH") or k == "HOME"})
    try:
        head = _start_node(["--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                            "--include-dashboard=false", "--dashboard-port", str(free_port())],
                           root / "head", {**env, **CLIENT_ENV}, ray_tmpdir)
        cluster.nodes.append(head)
        _wait_started(head, "the Ray head node started")
        for index in range(1, nodes):
            node = _start_node(["--address", f"[::ffff:127.0.0.1]:{port}"], root / f"node{index}", env)
            cluster.nodes.append(node)
            _wait_started(node, f"Ray node {index} joined the head")
        wait_until(lambda: cluster.alive_nodes() == nodes, f"the head counts {nodes} nodes alive",
                   START_DEADLINE, 1.0)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
